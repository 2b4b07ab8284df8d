"""The HTML of the run report's steps: each log entry as a ``<details>`` element, with its arguments, result,
what the user said and its figures; and the page's style and script.

Everything a step shows is HTML-escaped (control characters removed first): the page shows it, never obeys it.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import html
import json
import os
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import clean_text, redact, shorten

from .report_memory import (
    CUT_PATTERN,
    MARKERS,
    MAX_TEXT,
    USER_SAID,
    Boss,
    Entry,
    Node,
    boss_name,
    files_noted,
    optional_text,
)


# ~~~ HTML ~~~
def esc(text: Any) -> str:
    """Text as HTML shows it: known secrets redacted, control characters removed, then ``& < > " '`` escaped."""
    return html.escape(clean_text(redact(str(text))), quote=True)


REPORT_SCRIPT = """
document.addEventListener('click', function (event) {
  var button = event.target.closest('button[data-open]');
  if (!button) return;
  var open = button.getAttribute('data-open') === 'yes';
  document.querySelectorAll('#run details').forEach(function (d) { d.open = open; });
});
"""
REPORT_STYLE = """
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
.why { background: #fdf0ef; border: 1px solid #efc0bb; border-radius: 8px; padding: 12px 14px; }
.goal { background: var(--soft); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600;
         background: var(--soft); border: 1px solid var(--line); color: var(--muted); vertical-align: 1px; }
.badge.ok { color: var(--ok); border-color: #b7dcc0; background: #eef8f0; }
.badge.warn { color: var(--warn); border-color: #ecd3a8; background: #fdf6ea; }
.badge.bad { color: var(--bad); border-color: #efc0bb; background: #fdf0ef; }
.badge.user { color: #6b3fa0; border-color: #d9c7ee; background: #f6f0fc; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; white-space: nowrap; }
.plan { margin: 4px 0 8px; padding: 8px 12px; border: 1px solid var(--line); border-radius: 6px; }
.plan div { white-space: pre-wrap; overflow-wrap: anywhere; } .plan .done { color: var(--muted); }
.plan .mark { color: var(--ok); font-weight: 600; }
#run .tree { padding-left: 16px; }  /* the triangles of the top steps stay on the page at phone width */
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
@media (max-width: 640px) { body { padding: 12px; } #usage th { display: none; }
  #usage table, #usage tbody, #usage tr, #usage td { display: block; text-align: left; }
  #usage tr { border-bottom: 1px solid var(--line); padding: 4px 0; } #usage td { border: 0; padding: 1px 4px; }
  #usage td:not(:first-child)::before { content: attr(data-label) ": "; color: var(--muted); }
  #usage td:first-child { font-weight: 600; overflow-wrap: anywhere; } }
"""


def content_policy() -> str:
    digest = base64.b64encode(hashlib.sha256(REPORT_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"


def pre_block(text: Any, limit: int = MAX_TEXT) -> str:
    """Text as a block; a text the log (or ``limit``) shortened shows its start and end cut at words, with what was
    left out said after it, not inside it."""
    text = shorten(str(text), limit)
    parts = CUT_PATTERN.split(text)
    if len(parts) != 2:
        return f"<pre>{esc(text)}</pre>"
    head, tail = parts
    left = int(re.search(r"\d+", CUT_PATTERN.search(text).group(0)).group(0))  # the count the marker says
    cut_head = re.sub(r"\S+$", "", head) if head and not head[-1].isspace() else head
    cut_tail = re.sub(r"^\S+", "", tail) if tail and not tail[0].isspace() else tail
    left += len(head) - len(cut_head) + len(tail) - len(cut_tail)
    return (
        f'<pre>{esc(cut_head.rstrip())} \u2026 {esc(cut_tail.lstrip())}</pre><p class="meta">{left} characters '
        "left out at \u2026 (the run's steps file in the memory folder, *_steps.jsonl, keeps it whole)</p>"
    )


def when_text(seconds: Optional[float]) -> str:
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
        values = [v for _, v in _parsed_arguments(entry.arguments) or []] or [
            entry.arguments if entry.arguments != "(none)" else ""
        ]
    return short_line(max(values, key=len, default=""))


def short_line(text: str, width: int = 90) -> str:
    """One line of at most ``width`` characters."""
    text = " ".join(CUT_PATTERN.sub(" ... ", str(text)).split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _arguments_html(entry: Entry, scripts: _Scripts) -> str:
    args = entry.full_arguments
    if isinstance(args, dict):
        if not args:
            return ""
        items = [(k, v if isinstance(v, str) else _json_text(v)) for k, v in args.items()]
    else:
        items = _parsed_arguments(entry.arguments)
        if items is None:
            return "" if entry.arguments in ("", "(none)") else f"<h4>Arguments</h4>{pre_block(entry.arguments)}"
        items = [(k, scripts.whole(v) if k == "code" else v) for k, v in items]
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{pre_block(v)}</dd>" for k, v in items)
    return f'<h4>Arguments</h4><dl class="args">{rows}</dl>' if rows else ""


def _json_text(value: Any) -> str:
    """A value that is not text, as JSON: on one line when short (``[1, 2]``), else indented."""
    flat = json.dumps(value, ensure_ascii=False, default=str)
    return flat if len(flat) <= 80 else json.dumps(value, ensure_ascii=False, indent=2, default=str)


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


# What a boss's marker entries say that the report's marker line says already (a tree shows where tasks start).
_MARKER_SAYS = re.compile(
    r"A new task starts here; the entries above belong to earlier tasks\.|The run was stopped "
    r"during this task and is resumed here\.|Entries \[\d+\] to \[\d+\] above are this task's\."
)


class _Scripts:
    """The scripts ``run_code`` ran (``code_runs/`` of each folder), read once, when code the log shortened is to be
    made whole again: the script that starts and ends as it does is what ran."""

    def __init__(self, folders: List[str]):
        self.folders = folders
        self._texts: Optional[List[str]] = None

    def whole(self, code: str) -> str:
        parts = CUT_PATTERN.split(code)
        if len(parts) != 2:
            return code
        head, tail = parts[0], parts[1].rstrip("\n")
        return next((text for text in self.texts() if text.startswith(head) and text.rstrip("\n").endswith(tail)), code)

    def texts(self) -> List[str]:
        if self._texts is None:
            self._texts = []
            for folder in self.folders:
                runs = os.path.join(folder, "code_runs")
                try:
                    names = sorted(os.listdir(runs))
                except OSError:
                    continue
                self._texts += [optional_text(os.path.join(runs, name)) for name in names]
        return self._texts


_NESTED_RESULT = re.compile(r"^result: result: ", re.M)


# Output keys shown elsewhere in a step: what the user said (its own block), whether it failed (a badge).
_SAID_KEYS = ("feedback", "human_input", "human_feedback")


def _result_html(entry: Entry) -> str:
    """A step's result, each thing once: of the whole output (the step record's), what it adds to the arguments
    (run_code's output, not its code again), without flags (``failed``, ``saved``: the badges say them) or what the
    user said (its own block); a boss's summary as text, then what its last step returned if that says more. From
    the log alone, its text (a boss's result carries its last step's, whose first key is ``result`` too: once)."""
    output = entry.output
    if not (isinstance(output, dict) and output):
        return f"<h4>Result</h4>{pre_block(_NESTED_RESULT.sub('result: ', entry.result))}" if entry.result else ""
    given = (
        {" ".join(str(v).split()) for v in (entry.full_arguments or {}).values()}
        if isinstance(entry.full_arguments, dict)
        else set()
    )
    boss = "status" in output and "summary" in output
    summary = str(output.get("summary") or "").strip() if boss else ""
    shown = {}
    for key, value in output.items():
        text = _unnested(key, value).strip() if not isinstance(value, bool) else ""
        folded = " ".join(text.split())
        if (
            not text
            or key in _SAID_KEYS
            or folded in given
            or (boss and key in ("summary", "status"))
            or (boss and key == "result" and folded in " ".join(summary.split()))
        ):
            continue
        shown[key] = text
    parts = [f'<p class="text">{esc(summary)}</p>'] if summary else []
    if set(shown) == {"result"}:
        parts.append(("<h4>What it returned</h4>" if summary else "") + pre_block(shown["result"]))
    elif shown:
        rows = "".join(f"<dt>{esc(k)}</dt><dd>{pre_block(v)}</dd>" for k, v in shown.items())
        parts.append(f'<dl class="args">{rows}</dl>')
    return f"<h4>Result</h4>{''.join(parts)}" if parts else ""


def _unnested(key: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[len("result: ") :] if key == "result" and text.startswith("result: ") else text


def entry_texts(entry: Entry) -> List[str]:
    """The texts of a step's result: the log's, and each value of the whole output when the trace had it."""
    output = entry.output
    return [entry.result] + ([str(v) for v in output.values()] if isinstance(output, dict) else [])


def user_said(entry: Entry) -> List[str]:
    """What the user said in a step (feedback, replies, what they said after Ctrl+C), from its result."""
    said: List[str] = []
    if isinstance(entry.output, dict):
        said += [
            str(entry.output[k]).strip() for k in ("feedback", "human_input") if str(entry.output.get(k) or "").strip()
        ]
    for match in USER_SAID.finditer(entry.result):
        value = next(g for g in match.groups() if g).strip()
        if value and value not in said:
            said.append(value)
    return said


class Renderer:
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
            goal = f"<h4>Goal</h4>{pre_block(node.goal)}" if node.goal else ""
            steps = self.nodes(node.children) or "<p>(no step was logged)</p>"
            last = f"last step at {when_text(end)}" if end is not None else ""
            return (
                f'<details class="boss" open><summary><span class="who">{who}</span> <b class="cmd">'
                f'task under way when the run stopped</b> <span class="preview">{esc(short_line(node.goal))}</span>'
                f' <span class="badge warn">unfinished</span> <span class="took">{last}</span>'
                f"</summary><div>{goal}{steps}</div></details>"
            )
        entry = node.entry
        if entry.command in MARKERS:
            what = "a new task starts" if entry.command == "new_task" else "the run was resumed here"
            more = _MARKER_SAYS.sub("", entry.result).strip()  # what the log adds to the marker's own words
            return (
                f'<div class="marker">{when_text(entry.when)} {who}: {what}.{" " if more else ""}'
                f"{esc(shorten(more, 400))}</div>"
            )
        # (the start may hold a fraction of a second, the log's times do not)
        took = duration_text(max(0.0, entry.when - node.start)) if None not in (entry.when, node.start) else ""
        # A sub-boss's result ends with its last step's: what the user said there is shown at that step.
        said = [] if node.children else user_said(entry)
        badges = "".join(
            [
                ' <span class="badge" title="made by the loop, without an LLM call">by code</span>'
                if entry.by_code
                else "",
                ' <span class="badge user">the user said something</span>' if said else "",
                _outcome_badge(entry, bool(node.children)),
            ]
        )
        figures = [self.figure_ids[p] for p in files_noted(entry_texts(entry), self.folders) if p in self.figure_ids]
        body = [_arguments_html(entry, self.scripts)]
        if node.children:
            body.append(
                f"<h4>Steps of {esc(self.names.get(node.children[0].boss, ''))}</h4>{self.nodes(node.children)}"
            )
        body.append(_result_html(entry))
        body += [f'<div class="said"><b>The user said:</b> <span class="text">{esc(s)}</span></div>' for s in said]
        if figures:
            body.append(
                "<p>Figures: " + ", ".join(f'<a href="#{fid}">{esc(name)}</a>' for fid, name in figures) + "</p>"
            )
        # A sub-boss's steps are open, so that the tree of bosses shows whole; each step opens on a click.
        opening = '<details class="boss" open>' if node.children else '<details class="step">'
        began = node.start if node.start is not None else entry.when
        return (
            f'{opening}<summary><span class="time">{when_text(began)}</span> '
            f'<span class="who">{who}</span> <b class="cmd">{esc(entry.command)}</b> '
            f'<span class="preview">{esc(_preview(entry))}</span> <span class="took">{esc(took)}</span>'
            f"{badges}</summary><div>{''.join(body)}</div></details>"
        )


def _outcome_badge(entry: Entry, boss: bool) -> str:
    """``stopped`` for a sub-boss that did not finish its task, ``failed`` for code that failed."""
    output = entry.output if isinstance(entry.output, dict) else {}
    if boss:
        status = str(output.get("status") or "")
        stopped = re.search(r"^status: (stopped.*)$", entry.result, re.M)
        said = status if status.startswith("stopped") else stopped.group(1) if stopped else ""
        return f' <span class="badge warn">{esc(shorten(said, 60))}</span>' if said else ""
    failed = bool(output.get("failed")) or "Traceback (most recent call last)" in entry.result
    return ' <span class="badge bad">failed</span>' if failed else ""
