"""What the run report reads: the run file, each boss's plan and log (as a tree of tasks and steps), the run's
trace (arguments and results whole), the plans replaced, the functions saved, the figures code runs made.

Everything here only reads, and never follows a symbolic link where a memory folder from elsewhere could point one
at a file of the user's; what cannot be read is left out (the report shows less).
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from aiflows_jarvis.AbstractBossFlowModule.AbstractBossFlow import read_task_record
from aiflows_jarvis.CodeLibraryFlowModule import definition_sources
from aiflows_jarvis.CoreFlowModule import (
    JarvisError,
    MemoryFileError,
    read_text,
    split_log_entries,
    summarize_arguments,
)

REPORT_NAME = "report.html"
RUN_FILE = "jarvis_run.json"
MAX_TEXT = 20_000  # characters of one argument or result shown (head and tail kept)
MAX_FIGURE_BYTES = 8 << 20
MAX_FIGURES = 60
CUT_PATTERN = re.compile(r"\n?\[\.\.\. \d+ characters cut \.\.\.\]\n?")
_HEADER = re.compile(r"--- \[(\d+)\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (.*?) ---$")
MARKERS = ("new_task", "resume")
_FIGURE_NOTE = re.compile(r"^\s*\[figure saved: (.+)\]\s*$", re.M)
_FILES_NOTE = re.compile(
    r"^\s*\[files created or modified: (.+?)(?: \(and \d+ more\))?"
    r"(?: \(the workspace .*\))?\]\s*$",
    re.M,
)
_SAVED = re.compile(r"^(?:Saved|Replaced) (.+?) in the code library(?:,| \()")
USER_SAID = re.compile(
    r"^\s*(?:feedback: (?!\(none\)\s*$)(.+)|.*?The user replied: (.+)|.*?Their feedback: "
    r"(?!\(none\)\s*$)(.+)|The user interrupted .* and said: (.+))$",
    re.M,
)
STEP_LINE = re.compile(r"^\s*\d+[.)]\s")
DONE_MARK = re.compile(r"\[\s*done\s*\]|\(\s*done\s*\)", re.I)
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
}


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
    by_code: bool = False  # the loop made the command, not its controller (bookkeeping by code)


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
    found = [
        (path, dict(files))
        for path, files in layout.items()
        if isinstance(files, Mapping) and "plan" in files and "logs" in files
    ]
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
            arguments, _, result = body[len("arguments: ") :].partition("\nresult: ")
        elif body.startswith("result: "):
            arguments, result = "", body[len("result: ") :]
        result = "\n".join(line[4:] if line.startswith("    ") else line for line in result.split("\n"))
        entries.append(Entry(boss, number, when, command, arguments.strip(), result.strip()))
    return entries


def read_run_file(memory_dir: str, name: str = RUN_FILE) -> Dict[str, Any]:
    """The run file ``name`` in ``memory_dir`` (the goal and settings the command line wrote), or {}."""
    try:
        run = json.loads(read_text(os.path.join(memory_dir, name)) or "{}")
    except ValueError:
        return {}
    return run if isinstance(run, dict) else {}


def _tasks(entries: List[Entry]) -> List[Tuple[Optional[str], List[Entry]]]:
    """A boss's entries split into its tasks: ``[(the goal's arguments text, or None for a task not marked, entries)]``.
    A ``new_task`` entry starts a task; a ``resume`` entry continues the task the run was stopped in."""
    tasks: List[Tuple[Optional[str], List[Entry]]] = []
    for entry in entries:
        if entry.command == "new_task" or not tasks:
            goal = entry.arguments if entry.command in MARKERS else None
            tasks.append((goal, []))
        tasks[-1][1].append(entry)
    return tasks


def _same_goal(first: Optional[str], second: str) -> bool:
    """Whether a task's goal (as its log's marker holds it) is the goal of a parent's command: the same text, both
    shortened the same way (the first 80 characters, spacing aside, decide: a goal shortened from a text with other
    spacing is cut at another place)."""

    def norm(text: str) -> str:
        return " ".join(CUT_PATTERN.sub(" ", text).replace("\\n", " ").split())[:80]

    return first is None or norm(first) == norm(second)


def build_tree(
    bosses: List[Boss],
    started: Optional[float] = None,
    trace_steps: Optional[Dict[str, List[dict]]] = None,
    stopped: bool = False,
) -> List[Node]:
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
                matching = next(
                    (
                        i
                        for i, (goal, task) in enumerate(queue)
                        if _same_goal(goal, entry.arguments) and _ends_by(task, entry.when)
                    ),
                    None,
                )
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
        record = read_task_record(boss.files["logs"]) if stopped else {}
        tasks = queues[boss.path] or ([(None, [])] if record else [])
        for task in tasks:
            node = _unfinished(boss, task, None, nodes_of)
            node.goal = str(record.get("goal") or "") if task is tasks[-1] else ""
            _steps_of(tree, boss.parent.path).append(node)
    return tree


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
def trace_steps(
    trace: str, boss_paths: Iterable[str], loops: Optional[Dict[str, str]] = None
) -> Tuple[Dict[str, List[dict]], Dict[str, List[str]]]:
    """From a run's trace (JSON lines, see ``set_trace_file``): per boss, its commands in order (``command``,
    ``args`` and the branch's ``output``, whole, with the user's ``feedback`` when a HumanFeedback flow asked for
    it) and the plans approved for its tasks. ``loops``: ``{the controller-executor loop's path: boss path}``
    (default: each boss's ``<path>/CtrlExMem``; AutoGPT's loop is its top flow). A trace that cannot be read gives
    nothing; a line that does not parse is skipped."""
    paths = list(boss_paths)
    loops = loops if loops is not None else {f"{p}/CtrlExMem": p for p in paths}
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
                    boss.append(
                        {
                            "command": data.get("command"),
                            "args": data.get("command_args") or {},
                            "output": None,
                            "by_code": data.get("made_by") == "code",
                            "when": parse_time(str(record.get("time") or "").replace("T", " ")),
                        }
                    )
                elif source == "Executor" and boss and boss[-1]["output"] is None:
                    boss[-1]["output"] = data.get("branch_output_data")
                elif source == "HumanFeedback" and boss and isinstance(boss[-1]["output"], dict):
                    boss[-1]["output"] = {**boss[-1]["output"], "feedback": data.get("human_feedback")}
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
        if entry.command not in MARKERS and i < len(candidates):
            step = steps[candidates[i]]
            entry.full_arguments, entry.output, at = step["args"], step["output"], candidates[i] + 1
            entry.by_code = bool(step.get("by_code"))


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
        found.append((key, info.st_mtime, optional_text(path)))
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
    if not names:  # nothing saved: the library (maybe large) is not read
        return []
    try:  # only the modules holding them are read
        sources = definition_sources(library_path, names) if library_path else {}
    except (OSError, JarvisError):
        sources = {}
    return [
        (
            f"{name} (library/{sources[name][0]}.py)" if sources.get(name, ("",))[0] else name,
            sources[name][1] if name in sources else None,
        )
        for name in names
    ]


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
    kind = IMAGE_TYPES.get(os.path.splitext(path)[1].lower())
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


def optional_text(path: str) -> str:
    """A file's text, or '' when it cannot be read as text (a link, not UTF-8, gone): the report shows less."""
    try:
        return read_text(path)
    except MemoryFileError:
        return ""


def loop_steps(trace: Optional[str], top: str) -> List[Node]:
    """The steps of a run whose top flow is itself the controller-executor loop (AutoGPT: no boss, no log), from
    its trace: one node per command, with its arguments and result whole; none without a trace."""
    if not trace:
        return []
    steps, _ = trace_steps(trace, [top], loops={top: top})
    nodes = []
    for number, step in enumerate(steps[top], 1):
        args = step["args"] if isinstance(step["args"], dict) else {}
        output = step["output"]
        entry = Entry(
            top,
            number,
            step.get("when"),
            str(step["command"]),
            summarize_arguments(args).strip(),
            json.dumps(output, ensure_ascii=False, default=str) if output is not None else "",
            full_arguments=args,
            output=output,
            by_code=bool(step.get("by_code")),
        )
        nodes.append(Node(entry, top, entry.when))
    return nodes
