"""The run report: one self-contained HTML page that shows what a Jarvis run did, to look at after the run.

The page is built from what the run leaves in its memory folder, so that a replayed or resumed run gets one as well as
a live one: the run file (``jarvis_run.json``: the goal, the model, when the task started), each boss's plan and log,
the copies of replaced plans in ``archive/``, the code library and ``code_runs/``; and from what the launcher still
holds at the end: the outcome (final answer, status), the LLM usage meter, and the run's ``--trace`` file when it has
one (it holds the arguments and results whole, where the logs hold them shortened, and each plan approved).

* The run is a tree of ``<details>`` elements: each boss's log entries in order, a sub-boss's entries inside the
  command of its parent that ran it (task by task: a boss's log marks where each task starts, with the task's goal),
  with the arguments, the result, what the user said, when it started and how long it took (from the times of the
  entries, which the logs keep to the second).
* Everything the LLM, the user or a program wrote is HTML-escaped (control characters removed first): the page shows
  it, never obeys it. A Content-Security-Policy lets the page load nothing (``default-src 'none'``) but ``data:``
  images, and run no script but its own (by hash): even text that escaped escaping could neither run nor fetch.
* Figures (PNG, JPEG, GIF, WebP, SVG) are inlined as ``data:`` URIs, checked by their first bytes; links are not
  followed (a memory folder may come from elsewhere: a link named ``chart.png`` must not put a file of the user's
  into a page). An SVG inside ``<img>`` runs no script.
* Building the page reads files only; ``write_report`` writes it atomically. A caller at the end of a run should catch
  what they raise: a run is not failed by its report.
"""
from __future__ import annotations

import ast
import base64
import bisect
import hashlib
import html
import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .errors import MemoryFileError
from .memory import atomic_write, definition_spans, read_text, shorten, split_log_entries, summarize_arguments
from .terminal import clean_text

REPORT_NAME = "report.html"
RUN_FILE = "jarvis_run.json"
MAX_TEXT = 20_000  # characters of one argument or result shown (head and tail kept)
MAX_FIGURE_BYTES = 8 << 20
MAX_FIGURES = 60
_CUT = re.compile(r"\n?\[\.\.\. \d+ characters cut \.\.\.\]\n?")
_HEADER = re.compile(r"--- \[(\d+)\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (.*?) ---$")
_MARKERS = ("new_task", "resume")
_FIGURE_NOTE = re.compile(r"^\s*\[figure saved: (.+)\]\s*$", re.M)
_FILES_NOTE = re.compile(r"^\s*\[files created or modified: (.+?)(?: \(and \d+ more\))?"
                         r"(?: \(the workspace .*\))?\]\s*$", re.M)
_SAVED = re.compile(r"^(?:Saved|Replaced) (.+?) in the code library \(")
_USER_SAID = re.compile(r"^\s*(?:feedback: (?!\(none\)\s*$)(.+)|.*?The user replied: (.+)|.*?Their feedback: "
                        r"(?!\(none\)\s*$)(.+)|The user interrupted .* and said: (.+))$", re.M)
_STEP = re.compile(r"^\s*\d+[.)]\s")
_DONE = re.compile(r"\[\s*done\s*\]|\(\s*done\s*\)", re.I)
_IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
                ".webp": "image/webp", ".svg": "image/svg+xml"}


# ~~~ What the memory folder holds ~~~
@dataclass
class Entry:
    """One log entry: ``when`` in seconds since the epoch (the log keeps seconds), ``arguments`` and ``result`` as the
    log has them (shortened); ``full_arguments`` / ``output`` whole, when the run's trace had them."""

    boss: str
    number: int
    when: Optional[float]
    command: str
    arguments: str
    result: str
    full_arguments: Optional[Dict[str, Any]] = None
    output: Any = None


@dataclass
class Node:
    """A step of the tree: a log entry (with the steps of the sub-boss it ran inside), or a task of a sub-boss that
    no entry of its parent closes (the run stopped inside it)."""

    entry: Optional[Entry]
    boss: str
    start: Optional[float] = None
    children: List["Node"] = field(default_factory=list)
    unfinished: bool = False
    goal: str = ""  # of an unfinished task, when its boss's task record has it


@dataclass
class Boss:
    path: str
    name: str
    files: Dict[str, str]
    parent: Optional["Boss"] = None
    branch: str = ""  # the command of the parent that runs this boss


def boss_name(path: str) -> str:
    """``Jarvis/CtrlExMem/Executor/Coder/CtrlExMem/Executor/extend_library`` -> ``ExtendLibrary``."""
    last = path.rstrip("/").split("/")[-1]
    return "".join(part[:1].upper() + part[1:] for part in last.split("_")) if "_" in last else last


def bosses_of(layout: Mapping[str, Mapping[str, str]]) -> List[Boss]:
    """The bosses of a memory layout (``{flow path: memory_files}``, as ``set_memory_files`` returns it): the flows
    with a plan and a log, parents first; each knows its parent boss and the parent's command that runs it."""
    found = [(path, dict(files)) for path, files in layout.items()
             if isinstance(files, Mapping) and "plan" in files and "logs" in files]
    bosses: List[Boss] = []
    for path, files in sorted(found, key=lambda item: (item[0].count("/"), item[0])):
        parents = [b for b in bosses if path.startswith(b.path + "/")]
        parent = max(parents, key=lambda b: len(b.path)) if parents else None
        bosses.append(Boss(path, boss_name(path), files, parent, path.rstrip("/").split("/")[-1] if parent else ""))
    return bosses


def parse_time(stamp: str) -> Optional[float]:
    try:
        return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def read_log(path: str, boss: str = "") -> List[Entry]:
    """The entries of a log file, in order (a missing log has none)."""
    entries = []
    for number, text in split_log_entries(read_text(path)):
        header, _, body = text.partition("\n")
        match = _HEADER.match(header.strip())
        when = parse_time(match.group(2)) if match else None
        command = match.group(3) if match else header.strip("- ")
        arguments, result = body, ""
        if body.startswith("arguments: "):
            arguments, _, result = body[len("arguments: "):].partition("\nresult: ")
        elif body.startswith("result: "):
            arguments, result = "", body[len("result: "):]
        result = "\n".join(line[4:] if line.startswith("    ") else line for line in result.split("\n"))
        entries.append(Entry(boss, number, when, command, arguments.strip(), result.strip()))
    return entries


def read_run_file(memory_dir: str) -> Dict[str, Any]:
    try:
        run = json.loads(read_text(os.path.join(memory_dir, RUN_FILE)) or "{}")
    except ValueError:
        return {}
    return run if isinstance(run, dict) else {}


def _tasks(entries: List[Entry]) -> List[Tuple[Optional[str], List[Entry]]]:
    """A boss's entries split into its tasks: ``[(the goal's arguments text, or None for a task not marked, entries)]``.
    A ``new_task`` entry starts a task; a ``resume`` entry continues the task the run was stopped in."""
    tasks: List[Tuple[Optional[str], List[Entry]]] = []
    for entry in entries:
        if entry.command == "new_task" or not tasks:
            goal = entry.arguments if entry.command in _MARKERS else None
            tasks.append((goal, []))
        tasks[-1][1].append(entry)
    return tasks


def _same_goal(first: Optional[str], second: str) -> bool:
    """Whether a task's goal (as its log's marker holds it) is the goal of a parent's command: the same text, both
    shortened the same way (the first 80 characters, spacing aside, decide: a goal shortened from a text with other
    spacing is cut at another place)."""
    def norm(text: str) -> str:
        return " ".join(_CUT.sub(" ", text).replace("\\n", " ").split())[:80]
    return first is None or norm(first) == norm(second)


def build_tree(bosses: List[Boss], started: Optional[float] = None,
               trace_steps: Optional[Dict[str, List[dict]]] = None, stopped: bool = False) -> List[Node]:
    """The run as a tree: the top boss's entries, each sub-boss's tasks inside the parent's commands that ran them
    (in order; a task whose goal is not the command's is a task the run was stopped in, shown before it), and the
    tasks no command closes at the end of their parent's steps (when the run ``stopped``, also the tasks its bosses
    were in before their first entry)."""
    if not bosses:
        return []
    logs = {b.path: read_log(b.files["logs"], b.path) for b in bosses}
    for boss in bosses:
        _enrich(logs[boss.path], (trace_steps or {}).get(boss.path, []))
    queues = {b.path: _tasks(logs[b.path]) for b in bosses if b.parent is not None}
    children_of: Dict[str, List[Boss]] = {}
    for boss in bosses:
        if boss.parent is not None:
            children_of.setdefault(boss.parent.path, []).append(boss)

    def nodes_of(boss: Boss, entries: List[Entry], start: Optional[float]) -> List[Node]:
        nodes: List[Node] = []
        branches = {child.branch: child for child in children_of.get(boss.path, [])}
        previous = start
        for entry in entries:
            node = Node(entry, boss.path, previous)
            child = branches.get(entry.command)
            if child is not None:
                queue = queues[child.path]
                matching = next((i for i, (goal, task) in enumerate(queue)
                                 if _same_goal(goal, entry.arguments) and _ends_by(task, entry.when)), None)
                if matching is not None:
                    for _ in range(matching):  # tasks stopped before this command: shown before it
                        nodes.append(_unfinished(child, queue.pop(0), previous, nodes_of))
                    node.children = nodes_of(child, queue.pop(0)[1], previous)
            nodes.append(node)
            previous = entry.when if entry.when is not None else previous
        return nodes

    top = bosses[0]
    tree = nodes_of(top, logs[top.path], started)
    # Tasks no entry closes: the run stopped inside them (a boss keeps a task record while a task is under way, so
    # a task stopped before its first entry is one too). Each goes after the last steps of its parent.
    for boss in bosses[1:]:
        record = _task_record(boss.files["logs"]) if stopped else {}
        tasks = queues[boss.path] or ([(None, [])] if record else [])
        for task in tasks:
            node = _unfinished(boss, task, None, nodes_of)
            node.goal = str(record.get("goal") or "") if task is tasks[-1] else ""
            _steps_of(tree, boss.parent.path).append(node)
    return tree


def _task_record(logs: str) -> Dict[str, Any]:
    """The record a boss keeps beside its log while a task is under way (``.<log name>.task.json``), or {}."""
    folder, name = os.path.split(logs)
    try:
        record = json.loads(_optional_text(os.path.join(folder, f".{os.path.splitext(name)[0]}.task.json")) or "{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _ends_by(task: List[Entry], when: Optional[float]) -> bool:
    """Whether a task's entries were all written by ``when`` (a parent's entry comes after its sub-boss's)."""
    return when is None or all(e.when is None or e.when <= when for e in task)


def _unfinished(boss: Boss, task, start, nodes_of) -> Node:
    node = Node(None, boss.path, start, unfinished=True)
    node.children = nodes_of(boss, task[1], start)
    return node


def _steps_of(tree: List[Node], boss_path: str) -> List[Node]:
    """The last list of steps of ``boss_path`` in the tree (the top list when it has none)."""
    found = None

    def visit(nodes: List[Node]) -> None:
        nonlocal found
        if any(n.boss == boss_path and not n.unfinished for n in nodes):
            found = nodes
        for n in nodes:
            if n.unfinished and n.boss == boss_path:
                found = n.children
            visit(n.children)

    visit(tree)
    return found if found is not None else tree


# ~~~ The trace: arguments and results whole ~~~
def trace_steps(trace: str, boss_paths: Iterable[str]) -> Tuple[Dict[str, List[dict]], Dict[str, List[str]]]:
    """From a run's trace (JSON lines, see ``set_trace_file``): per boss, its commands in order (``command``,
    ``args`` and the branch's ``output``, whole) and the plans approved for its tasks. A trace that cannot be read
    gives nothing; a line that does not parse is skipped."""
    paths = list(boss_paths)
    loops = {f"{p}/CtrlExMem": p for p in paths}
    steps: Dict[str, List[dict]] = {p: [] for p in paths}
    plans: Dict[str, List[str]] = {p: [] for p in paths}
    try:
        fd = os.open(trace, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return steps, plans
    with os.fdopen(fd, encoding="utf-8", errors="replace") as f:
        for line in f:
            if '"OutputMessage"' not in line[:200]:
                continue
            try:
                record = json.loads(line)
                data = record["data"]["output_data"]
            except (ValueError, KeyError, TypeError):
                continue
            flow, source = record.get("flow"), record.get("src_flow")
            if not isinstance(data, dict):
                continue
            if flow in loops:
                boss = steps[loops[flow]]
                if source == "Controller" and data.get("command") not in (None, "finish"):
                    boss.append({"command": data.get("command"), "args": data.get("command_args") or {},
                                 "output": None})
                elif source == "Executor" and boss and boss[-1]["output"] is None:
                    boss[-1]["output"] = data.get("branch_output_data")
            elif flow in plans and source == "Planner" and str(data.get("plan") or "").strip():
                plans[flow].append(str(data["plan"]))
    return steps, plans


def _enrich(entries: List[Entry], steps: List[dict]) -> None:
    """Give log entries their whole arguments and output from the trace: the trace's commands are matched to the
    entries in order, by command and by the arguments as the log wrote them (the same shortening). A trace of part
    of the run (a resumed one) matches the entries of that part."""
    where: Dict[Tuple[str, str], List[int]] = {}
    for k, step in enumerate(steps):
        if isinstance(step["args"], dict):
            where.setdefault((str(step["command"]), summarize_arguments(step["args"]).strip()), []).append(k)
    at = 0
    for entry in entries:
        candidates = where.get((entry.command, entry.arguments), [])
        i = bisect.bisect_left(candidates, at)
        if entry.command not in _MARKERS and i < len(candidates):
            step = steps[candidates[i]]
            entry.full_arguments, entry.output, at = step["args"], step["output"], candidates[i] + 1


# ~~~ Plans, the library, figures ~~~
def plan_revisions(plan_path: str, since: Optional[float]) -> List[Tuple[float, str]]:
    """The copies of a boss's plan that ``update_plan`` / ``re_plan`` kept in ``archive/`` when they replaced it
    (``archive/<name>-<time>-<n>.txt``), made since ``since``: ``[(when, text)]``, oldest first."""
    folder = os.path.join(os.path.dirname(plan_path), "archive")
    stem, suffix = os.path.splitext(os.path.basename(plan_path))
    pattern = re.compile(re.escape(stem) + r"-(\d{8}-\d{6})-(\d+)" + re.escape(suffix) + "$")
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        match = pattern.match(name)
        if not match:
            continue
        path = os.path.join(folder, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or (since is not None and info.st_mtime < since - 1):
            continue
        key = (match.group(1), int(match.group(2)))
        found.append((key, info.st_mtime, _optional_text(path)))
    return [(when, text) for _, when, text in sorted(found)]


def added_functions(entries: Iterable[Entry], library_path: Optional[str]) -> List[Tuple[str, Optional[str]]]:
    """The functions and classes ``save_code`` saved in the run (its log entries say which), with their source in the
    library as it is now (None when it is no longer there)."""
    names: List[str] = []
    for entry in entries:
        if entry.command != "save_code":
            continue
        text = entry.output.get("result") if isinstance(entry.output, dict) else None
        match = _SAVED.match(str(text or entry.result))
        if match:
            names += [n.strip() for n in match.group(1).split(",") if n.strip() and n.strip() not in names]
    if not names:  # nothing saved: the library (megabytes, maybe) is not read
        return []
    library = _optional_text(library_path) if library_path else ""
    try:  # the view the run's last read of the library left (a library of megabytes takes seconds to parse)
        spans = definition_spans(library) if library else []
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        spans = []
    lines = library.split("\n")
    sources = {name: "\n".join(lines[start - 1:end]) for name, start, end in spans if name in names}
    return [(name, sources.get(name)) for name in names]


def files_noted(results: Iterable[str], folders: Iterable[str]) -> List[str]:
    """The files code runs said they saved or changed (``[figure saved: ...]``, ``[files created or modified:
    ...]``) that exist in one of ``folders`` (where code ran): a program can print such a line too, and must not
    bring another file of the user's into the page."""
    folders = [os.path.realpath(f) for f in folders if f]
    found: List[str] = []
    for text in results:
        names = [m.group(1).strip() for m in _FIGURE_NOTE.finditer(text)]
        for match in _FILES_NOTE.finditer(text):
            names += [n.strip() for n in match.group(1).split(", ")]
        for name in names:
            for folder in folders:
                path = os.path.normpath(os.path.join(folder, name))
                inside = os.path.realpath(path).startswith(folder + os.sep)
                if inside and os.path.lexists(path):
                    if path not in found:
                        found.append(path)
                    break
    return found


def image_data_uri(path: str) -> Optional[str]:
    """``data:`` URI of an image file, or None: not an image by its name and first bytes, a symbolic link, too large
    (``MAX_FIGURE_BYTES``) or unreadable."""
    kind = _IMAGE_TYPES.get(os.path.splitext(path)[1].lower())
    if kind is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_FIGURE_BYTES + 1)
    if len(data) > MAX_FIGURE_BYTES or not _looks_like(kind, data):
        return None
    return f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}"


def _looks_like(kind: str, data: bytes) -> bool:
    if kind == "image/png":
        return data.startswith(b"\x89PNG\r\n\x1a\n")
    if kind == "image/jpeg":
        return data.startswith(b"\xff\xd8\xff")
    if kind == "image/gif":
        return data.startswith((b"GIF87a", b"GIF89a"))
    if kind == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return b"<svg" in data[:4096]


# ~~~ HTML ~~~
def esc(text: Any) -> str:
    """Text as HTML shows it: control characters removed, then ``& < > " '`` escaped."""
    return html.escape(clean_text(str(text)), quote=True)


_SCRIPT = """
document.addEventListener('click', function (event) {
  var button = event.target.closest('button[data-open]');
  if (!button) return;
  var open = button.getAttribute('data-open') === 'yes';
  document.querySelectorAll('#run details').forEach(function (d) { d.open = open; });
});
"""
_STYLE = """
:root { --fg: #1d232a; --muted: #5f6b76; --line: #d8dee4; --bg: #ffffff; --soft: #f5f7f9; --accent: #2f6fb3;
        --ok: #1f7a3a; --warn: #9a5b00; --bad: #b3261e; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1100px; padding: 24px 28px 60px; color: var(--fg); background: var(--bg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 16px 0 6px; }
h4 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
pre, code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
                   font-size: 13px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--soft); border: 1px solid var(--line);
      border-radius: 6px; padding: 8px 10px; margin: 4px 0 8px; max-height: 480px; overflow: auto; }
.meta { color: var(--muted); margin: 0; } .meta span + span::before { content: "\\00a0\\00b7\\00a0"; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.answer { background: #eef6ee; border: 1px solid #c5e0c8; border-radius: 8px; padding: 12px 14px; }
.goal { background: var(--soft); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600;
         background: var(--soft); border: 1px solid var(--line); color: var(--muted); vertical-align: 1px; }
.badge.ok { color: var(--ok); border-color: #b7dcc0; background: #eef8f0; }
.badge.warn { color: var(--warn); border-color: #ecd3a8; background: #fdf6ea; }
.badge.bad { color: var(--bad); border-color: #efc0bb; background: #fdf0ef; }
.badge.user { color: #6b3fa0; border-color: #d9c7ee; background: #f6f0fc; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
.plan { margin: 4px 0 8px; padding: 8px 12px; border: 1px solid var(--line); border-radius: 6px; }
.plan div { white-space: pre-wrap; overflow-wrap: anywhere; } .plan .done { color: var(--muted); }
.plan .mark { color: var(--ok); font-weight: 600; }
#run details { margin: 2px 0 2px 0; } #run details > div { margin: 2px 0 8px 22px; padding-left: 10px;
border-left: 2px solid var(--line); }
#run summary { cursor: pointer; padding: 2px 4px; border-radius: 4px; list-style-position: outside; }
#run summary:hover { background: var(--soft); }
summary .time, summary .took { color: var(--muted); font-size: 12px; font-family: ui-monospace, monospace; }
summary .who { color: var(--muted); } summary .cmd { font-weight: 600; }
summary .preview { color: var(--muted); overflow-wrap: anywhere; }
.boss > summary .cmd { color: var(--accent); }
.marker { color: var(--muted); font-style: italic; margin: 4px 0 4px 18px; }
dl.args { margin: 0; } dl.args dt { font-weight: 600; font-size: 13px; } dl.args dd { margin: 0 0 4px 0; }
.said { border-left: 3px solid #b48ad8; background: #f8f3fd; padding: 4px 10px; margin: 6px 0; }
.figures { display: flex; flex-wrap: wrap; gap: 16px; } figure { margin: 0; border: 1px solid var(--line);
border-radius: 8px; padding: 8px; background: #fff; max-width: 100%; } figure img { max-width: 100%;
max-height: 520px; display: block; } figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
table { border-collapse: collapse; font-size: 13px; } th, td { padding: 3px 10px; border-bottom: 1px solid var(--line);
text-align: right; } th:first-child, td:first-child { text-align: left; } tr.total td { font-weight: 600; }
button { font: inherit; font-size: 13px; padding: 2px 10px; margin: 0 6px 8px 0; border: 1px solid var(--line);
border-radius: 6px; background: var(--soft); cursor: pointer; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"


def _pre(text: Any, limit: int = MAX_TEXT) -> str:
    return f"<pre>{esc(shorten(str(text), limit))}</pre>"


def _when(seconds: Optional[float]) -> str:
    return time.strftime("%H:%M:%S", time.localtime(seconds)) if seconds is not None else ""


def duration_text(seconds: Optional[float]) -> str:
    """``<1 s``, ``12 s``, ``3 min 05 s``, ``1 h 02 min`` (the logs keep whole seconds)."""
    if seconds is None or seconds < 0:
        return ""
    seconds = int(round(seconds))
    if seconds < 1:
        return "<1 s"
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _preview(entry: Entry) -> str:
    """A step's argument that says most (the longest: the code of run_code, not its language), on one line."""
    args = entry.full_arguments
    if isinstance(args, dict):
        values = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str) for v in args.values()]
    else:
        values = [v for _, v in _parsed_arguments(entry.arguments) or []] or \
            [entry.arguments if entry.arguments != "(none)" else ""]
    return _short(max(values, key=len, default=""))


def _short(text: str, width: int = 90) -> str:
    """One line of at most ``width`` characters."""
    text = " ".join(_CUT.sub(" ... ", str(text)).split())
    return text if len(text) <= width else text[:width - 1] + "\u2026"


def _arguments_html(entry: Entry, scripts: _Scripts) -> str:
    args = entry.full_arguments
    if isinstance(args, dict):
        if not args:
            return ""
        items = [(k, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, indent=2, default=str))
                 for k, v in args.items()]
    else:
        items = _parsed_arguments(entry.arguments)
        if items is None:
            return "" if entry.arguments in ("", "(none)") else f"<h4>Arguments</h4>{_pre(entry.arguments)}"
        items = [(k, scripts.whole(v) if k == "code" else v) for k, v in items]
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{_pre(v)}</dd>" for k, v in items)
    return f"<h4>Arguments</h4><dl class=\"args\">{rows}</dl>" if rows else ""


def _parsed_arguments(text: str) -> Optional[List[Tuple[str, str]]]:
    """``name = 'value'; other = 3`` (the log's form of the arguments) as ``[(name, value)]``; None if it is not
    in that form."""
    if not text or text == "(none)":
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    items = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            return None
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            items.append((node.targets[0].id, node.value.value))
        else:
            items.append((node.targets[0].id, ast.get_source_segment(text, node.value) or ""))
    return items


class _Scripts:
    """The scripts ``run_code`` ran (``code_runs/`` of each folder), read once, when code the log shortened is to be
    made whole again: the script that starts and ends as it does is what ran."""

    def __init__(self, folders: List[str]):
        self.folders = folders
        self._texts: Optional[List[str]] = None

    def whole(self, code: str) -> str:
        parts = _CUT.split(code)
        if len(parts) != 2:
            return code
        head, tail = parts[0], parts[1].rstrip("\n")
        return next((text for text in self.texts() if text.startswith(head) and text.rstrip("\n").endswith(tail)),
                    code)

    def texts(self) -> List[str]:
        if self._texts is None:
            self._texts = []
            for folder in self.folders:
                runs = os.path.join(folder, "code_runs")
                try:
                    names = sorted(os.listdir(runs))
                except OSError:
                    continue
                self._texts += [_optional_text(os.path.join(runs, name)) for name in names]
        return self._texts


def _optional_text(path: str) -> str:
    """A file's text, or '' when it cannot be read as text (a link, not UTF-8, gone): the report shows less."""
    try:
        return read_text(path)
    except MemoryFileError:
        return ""


def _result_html(entry: Entry) -> str:
    output = entry.output
    if isinstance(output, dict) and output:
        rows = "".join(f"<dt>{esc(k)}</dt><dd>{_pre(v if isinstance(v, str) else json.dumps(v, default=str))}</dd>"
                       for k, v in output.items())
        return f"<h4>Result</h4><dl class=\"args\">{rows}</dl>"
    return f"<h4>Result</h4>{_pre(entry.result)}" if entry.result else ""


def _texts(entry: Entry) -> List[str]:
    """The texts of a step's result: the log's, and each value of the whole output when the trace had it."""
    output = entry.output
    return [entry.result] + ([str(v) for v in output.values()] if isinstance(output, dict) else [])


def user_said(entry: Entry) -> List[str]:
    """What the user said in a step (feedback, replies, what they said after Ctrl+C), from its result."""
    said: List[str] = []
    if isinstance(entry.output, dict):
        said += [str(entry.output[k]).strip() for k in ("feedback", "human_input")
                 if str(entry.output.get(k) or "").strip()]
    for match in _USER_SAID.finditer(entry.result):
        value = next(g for g in match.groups() if g).strip()
        if value and value not in said:
            said.append(value)
    return said


class _Renderer:
    def __init__(self, bosses: List[Boss], folders: List[str], figure_ids: Dict[str, Tuple[str, str]]):
        self.names = {b.path: b.name for b in bosses}
        self.folders = folders
        self.scripts = _Scripts(folders)
        self.figure_ids = figure_ids

    def nodes(self, nodes: List[Node]) -> str:
        return "".join(self.node(n) for n in nodes)

    def node(self, node: Node) -> str:
        who = esc(self.names.get(node.boss, boss_name(node.boss)))
        if node.unfinished:
            end = max((n.entry.when for n in node.children if n.entry and n.entry.when), default=None)
            goal = f"<h4>Goal</h4>{_pre(node.goal)}" if node.goal else ""
            steps = self.nodes(node.children) or "<p>(no step was logged)</p>"
            last = f"last step at {_when(end)}" if end is not None else ""
            return (f"<details class=\"boss\" open><summary><span class=\"who\">{who}</span> <b class=\"cmd\">"
                    f"task under way when the run stopped</b> <span class=\"preview\">{esc(_short(node.goal))}</span>"
                    f" <span class=\"badge warn\">unfinished</span> <span class=\"took\">{last}</span>"
                    f"</summary><div>{goal}{steps}</div></details>")
        entry = node.entry
        if entry.command in _MARKERS:
            what = "a new task starts" if entry.command == "new_task" else "the run was resumed here"
            return (f"<div class=\"marker\">{_when(entry.when)} {who}: {what}. {esc(shorten(entry.result, 400))}"
                    f"</div>")
        # (the start may hold a fraction of a second, the log's times do not)
        took = duration_text(max(0.0, entry.when - node.start)) if None not in (entry.when, node.start) else ""
        # A sub-boss's result ends with its last step's: what the user said there is shown at that step.
        said = [] if node.children else user_said(entry)
        badges = "".join([
            " <span class=\"badge user\">the user said something</span>" if said else "",
            _outcome_badge(entry, bool(node.children)),
        ])
        figures = [self.figure_ids[p] for p in files_noted(_texts(entry), self.folders) if p in self.figure_ids]
        body = [_arguments_html(entry, self.scripts)]
        if node.children:
            body.append(f"<h4>Steps of {esc(self.names.get(node.children[0].boss, ''))}</h4>"
                        f"{self.nodes(node.children)}")
        body.append(_result_html(entry))
        body += [f"<div class=\"said\"><b>The user said:</b> <span class=\"text\">{esc(s)}</span></div>" for s in said]
        if figures:
            body.append("<p>Figures: " + ", ".join(f"<a href=\"#{fid}\">{esc(name)}</a>" for fid, name in figures)
                        + "</p>")
        # A sub-boss's steps are open, so that the tree of bosses shows whole; each step opens on a click.
        opening = "<details class=\"boss\" open>" if node.children else "<details class=\"step\">"
        began = node.start if node.start is not None else entry.when
        return (f"{opening}<summary><span class=\"time\">{_when(began)}</span> "
                f"<span class=\"who\">{who}</span> <b class=\"cmd\">{esc(entry.command)}</b> "
                f"<span class=\"preview\">{esc(_preview(entry))}</span> <span class=\"took\">{esc(took)}</span>"
                f"{badges}</summary><div>{''.join(body)}</div></details>")


def _outcome_badge(entry: Entry, boss: bool) -> str:
    """``stopped`` for a sub-boss that did not finish its task, ``failed`` for code that failed."""
    if boss:
        stopped = re.search(r"^status: (stopped.*)$", entry.result, re.M)
        return f" <span class=\"badge warn\">{esc(shorten(stopped.group(1), 60))}</span>" if stopped else ""
    output = entry.output if isinstance(entry.output, dict) else {}
    failed = bool(output.get("failed")) or "Traceback (most recent call last)" in entry.result
    return " <span class=\"badge bad\">failed</span>" if failed else ""


def _plan_html(text: str) -> str:
    lines = []
    for line in text.rstrip("\n").split("\n"):
        done = bool(_DONE.search(line))
        shown = esc(_DONE.sub("", line).rstrip()) + (" <span class=\"mark\">\u2713 done</span>" if done else "")
        lines.append(f"<div class=\"{'done' if done else ''}\">{shown or '&nbsp;'}</div>")
    return f"<div class=\"plan\">{''.join(lines)}</div>"


def _without_marks(plan: str) -> str:
    return " ".join(_DONE.sub(" ", plan).split())


def _plan_progress(text: str) -> str:
    steps = [line for line in text.split("\n") if _STEP.match(line)]
    done = sum(1 for line in text.split("\n") if _DONE.search(line))
    return f"{min(done, len(steps))} of {len(steps)} steps done" if steps else ""


def _usage_html(usage: Any) -> str:
    if usage is None:
        return "<p>No usage was recorded.</p>"
    from .usage import _row, _short_paths

    total = usage.total()
    summary = f"<p>{esc(usage.summary())}</p>"
    if not total.calls and not total.repairs:
        return summary
    rows = list(usage.per_flow.items())
    names = _short_paths([flow for flow, _ in rows])
    header = ("chat", "calls", "prompt tokens", "completion tokens", "cost", "repaired", "corrected")
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _row(name, used)) + "</tr>"
                   for (_, used), name in zip(rows, names))
    body += "<tr class=\"total\">" + "".join(f"<td>{esc(c)}</td>" for c in _row("total", total)) + "</tr>"
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"
    note = ("<p class=\"meta\">~: estimated with the cl100k tokenizer (the server reported no usage); -: no known "
            "price.</p>")
    return f"{summary}<table>{head}{body}</table>{note}"


def _status_badge(status: str) -> str:
    kind = "ok" if status == "finished" else "warn" if status.startswith("stopped") or "budget" in status else "bad"
    return f"<span class=\"badge {kind}\">{esc(status or 'unknown')}</span>"


def _shown(path: str, memory_dir: str) -> str:
    relative = os.path.relpath(path, memory_dir)
    return path if relative.startswith(os.pardir) else relative


@dataclass
class _Run:
    """What the page shows, gathered before it is written."""

    memory_dir: str
    run: Dict[str, Any]
    started: Optional[float]
    ended: float
    status: str
    answer: str
    mode: str
    bosses: List[Boss]
    tree: List[Node]
    entries: List[Entry]
    approved: Dict[str, List[str]]
    images: List[Tuple[str, Optional[str]]]
    other_files: List[str]
    figure_ids: Dict[str, Tuple[str, str]]
    library: Optional[str]
    folders: List[str]
    trace: Optional[str]


def build_report(memory_dir: str, layout: Mapping[str, Mapping[str, str]], *,
                 outcome: Optional[Mapping[str, Any]] = None, status: Optional[str] = None, mode: str = "",
                 usage: Any = None, trace: Optional[str] = None, figures: Iterable[str] = (),
                 folders: Iterable[str] = (), ended: Optional[float] = None) -> str:
    """The report of the run whose memory is in ``memory_dir``, as one HTML page.

    ``layout``: ``{flow path: memory_files}`` (what ``set_memory_files`` / the launcher's ``prepare_memory``
    return); ``outcome``: the top flow's output (``answer``, ``summary``, ``status``), None when the run did not end;
    ``status``: what to say when it did not (e.g. ``stopped``); ``mode``: how the LLM replies came (``replay of ...``,
    ``resumed``); ``usage``: a ``UsageMeter``; ``trace``: the run's trace file, if any; ``figures``: image files the
    caller found made by the run; ``folders``: where code ran (relative names in code runs' notes are looked up
    there; ``memory_dir`` is always looked in).
    """
    r = _gather(os.path.abspath(memory_dir), layout, dict(outcome or {}), status, mode, trace, figures, folders,
                ended)
    goal = str(r.run.get("goal") or "")
    answer = (f"<div class=\"answer text\">{esc(r.answer)}</div>" if r.answer else
              f"<p>No final answer: the run {esc(r.status)}.</p>")
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_csp()}\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>Jarvis run report: {esc(_short(goal, 80))}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>Jarvis run report</h1><p class=\"meta\">{_meta_html(r)}</p></header>",
        "<nav><a href=\"#run\">The run</a><a href=\"#figures\">Figures</a><a href=\"#plans\">Plans</a>"
        "<a href=\"#library\">Library</a><a href=\"#usage\">LLM usage</a><a href=\"#files\">Files</a></nav>",
        f"<section id=\"goal\"><h2>Goal</h2><div class=\"goal text\">{esc(goal) or '(no goal recorded)'}</div>"
        "</section>",
        f"<section id=\"answer\"><h2>Final answer</h2>{answer}</section>",
        _run_html(r), _figures_html(r), _plans_html(r), _library_html(r),
        f"<section id=\"usage\"><h2>LLM usage</h2>{_usage_html(usage)}</section>",
        _files_html(r),
        f"<footer>Written by Jarvis at {esc(time.strftime('%Y-%m-%d %H:%M:%S'))}. This page loads nothing "
        f"from the network: figures are inside it.</footer><script>{_SCRIPT}</script></body></html>\n",
    ])


def _gather(memory_dir: str, layout, outcome: Dict[str, Any], status: Optional[str], mode: str,
            trace: Optional[str], figures: Iterable[str], folders: Iterable[str], ended: Optional[float]) -> _Run:
    run = read_run_file(memory_dir)
    started = run.get("task_started") or run.get("started")
    folders = list(dict.fromkeys([os.path.abspath(f) for f in folders if f] + [memory_dir]))
    bosses = bosses_of(layout)
    steps, approved = trace_steps(trace, [b.path for b in bosses]) if trace else ({}, {})
    tree = build_tree(bosses, float(started) if isinstance(started, (int, float)) else None, steps,
                      stopped=not outcome)
    entries = list(_walk(tree))
    # Figures: those the caller found, and those code runs said they saved
    paths = list(dict.fromkeys([os.path.abspath(p) for p in figures] +
                               files_noted([t for e in entries for t in _texts(e)], folders)))
    images = [p for p in paths if p.lower().endswith(tuple(_IMAGE_TYPES))]
    library = next((files.get("code_library") for _, files in sorted(layout.items())
                    if isinstance(files, Mapping) and files.get("code_library")), None)
    return _Run(
        memory_dir=memory_dir, run=run, started=float(started) if isinstance(started, (int, float)) else None,
        ended=ended if ended is not None else time.time(),
        status=str(outcome.get("status") or status or "did not finish"),
        answer=str(outcome.get("answer") or outcome.get("summary") or ""), mode=mode, bosses=bosses, tree=tree,
        entries=entries, approved=approved,
        images=[(p, image_data_uri(p) if i < MAX_FIGURES else None) for i, p in enumerate(images)],
        other_files=[p for p in paths if p not in images],
        figure_ids={p: (f"figure-{i + 1}", os.path.basename(p)) for i, p in enumerate(images)},
        library=library, folders=folders, trace=trace)


def _meta_html(r: _Run) -> str:
    meta = [_status_badge(r.status)]
    if r.started is not None:
        meta.append(f"started {esc(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r.started)))}")
        meta.append(f"took {esc(duration_text(r.ended - r.started))}")
    if r.mode:
        meta.append(esc(r.mode))
    model = esc(r.run.get("model") or "the configured model")
    meta.append(f"model: {model}{' at ' + esc(r.run['api_base']) if r.run.get('api_base') else ''}")
    return "".join(f"<span>{m}</span>" for m in meta)


def _run_html(r: _Run) -> str:
    steps = sum(1 for e in r.entries if e.command not in _MARKERS)
    top = r.bosses[0].name if r.bosses else "Jarvis"
    tree = _Renderer(r.bosses, r.folders, r.figure_ids).nodes(r.tree) if r.tree else "<p>(no step was logged)</p>"
    return (f"<section id=\"run\"><h2>The run, step by step</h2><p class=\"meta\">{steps} steps of {esc(top)} and "
            "the bosses under it, each with the time it started and how long it took.</p>"
            "<button type=\"button\" data-open=\"yes\">Expand all</button>"
            f"<button type=\"button\" data-open=\"no\">Collapse all</button>{tree}</section>")


def _figures_html(r: _Run) -> str:
    if not r.images:
        return "<section id=\"figures\"><h2>Figures</h2><p>The run made no figure.</p></section>"
    shown = []
    for path, uri in r.images:
        fid, name = r.figure_ids[path]
        caption = esc(_shown(path, r.memory_dir))
        shown.append(f"<figure id=\"{fid}\"><img src=\"{uri}\" alt=\"{esc(name)}\"><figcaption>{caption}"
                     "</figcaption></figure>" if uri else
                     f"<figure id=\"{fid}\"><figcaption>{caption} (not shown: not a readable image, a link, or "
                     f"larger than {MAX_FIGURE_BYTES >> 20} MB)</figcaption></figure>")
    return f"<section id=\"figures\"><h2>Figures</h2><div class=\"figures\">{''.join(shown)}</div></section>"


def _plans_html(r: _Run) -> str:
    parts = []
    for boss in r.bosses:
        plan = read_text(boss.files["plan"])
        revisions = plan_revisions(boss.files["plan"], r.started)
        inner = _plan_html(plan) if plan.strip() else "<p>(no plan)</p>"
        for i, (when, text) in enumerate(revisions):
            inner += (f"<details><summary>Earlier version {i + 1}, replaced at {_when(when)}</summary>"
                      f"{_plan_html(text)}</details>")
        tasks = r.approved.get(boss.path) or []
        if len(tasks) > 1 or (tasks and _without_marks(tasks[-1]) != _without_marks(plan)):
            for i, text in enumerate(tasks):
                inner += f"<details><summary>Plan approved for task {i + 1}</summary>{_plan_html(text)}</details>"
        earlier = f", {len(revisions)} earlier version{'s' if len(revisions) > 1 else ''}" if revisions else ""
        parts.append(f"<details open><summary><b>{esc(boss.name)}</b> <span class=\"meta\">"
                     f"{esc(_plan_progress(plan))}{earlier}</span></summary>{inner}</details>")
    return f"<section id=\"plans\"><h2>Plans</h2>{''.join(parts)}</section>"


def _library_html(r: _Run) -> str:
    functions = added_functions(r.entries, r.library)
    shown = "".join(f"<h3 class=\"mono\">{esc(name)}</h3>" +
                    (_pre(source) if source is not None else "<p>(no longer in the library)</p>")
                    for name, source in functions)
    return (f"<section id=\"library\"><h2>Library functions added</h2>"
            f"{shown or '<p>The run added nothing to the code library.</p>'}</section>")


def _files_html(r: _Run) -> str:
    groups = [(b.name, [b.files["plan"], b.files["logs"]]) for b in r.bosses]
    groups += [("code library", [r.library])] if r.library else []
    groups += [("made by the run", r.other_files)] if r.other_files else []
    groups += [("trace", [r.trace])] if r.trace else []
    items = "".join(f"<li>{esc(name)}: " + ", ".join(f"<span class=\"mono\">{esc(_shown(p, r.memory_dir))}</span>"
                                                    for p in paths if os.path.lexists(p)) + "</li>"
                    for name, paths in groups)
    return f"<section id=\"files\"><h2>Files</h2><p>In {esc(r.memory_dir)}:</p><ul>{items}</ul></section>"


def _walk(nodes: List[Node]):
    for node in nodes:
        if node.entry is not None:
            yield node.entry
        yield from _walk(node.children)


def write_report(path: str, memory_dir: str, layout: Mapping[str, Mapping[str, str]], **options: Any) -> str:
    """Build the report (see ``build_report``) and write it to ``path`` atomically; returns ``path``."""
    page = build_report(memory_dir, layout, **options)
    atomic_write(path, page)
    return path
