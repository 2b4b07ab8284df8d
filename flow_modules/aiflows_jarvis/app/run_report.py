"""The run report: one self-contained HTML page that shows what a run did, to look at after the run.

It is built from what the run leaves in its memory folder (run file, plans and logs, replaced plans, library,
``code_runs/``: ``report_memory`` reads them), so a replayed or resumed run gets one as well as a live one, plus
what the command line holds at the end (outcome, usage, the ``--trace`` file). The run is a tree of ``<details>``
elements (``report_html``). Hazard: the page shows text an LLM, a user or a program wrote, so everything is
HTML-escaped, and its Content-Security-Policy loads nothing but ``data:`` images and runs no script but its own.
Building reads files only and follows no link; a caller at the end of a run should catch what it raises: a run is
not failed by its report.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from aiflows_jarvis.CodeLibraryFlowModule import library_location, library_structure, package_dir
from aiflows_jarvis.CoreFlowModule import JarvisError, atomic_write, read_text, without_credentials

from .report_html import (  # noqa: F401
    REPORT_SCRIPT,
    REPORT_STYLE,
    Renderer,
    content_policy,
    duration_text,
    entry_texts,
    esc,
    pre_block,
    short_line,
    user_said,
    when_text,
)
from .report_memory import (  # noqa: F401  (the report's reading, importable from here)
    DONE_MARK,
    IMAGE_TYPES,
    MARKERS,
    MAX_FIGURE_BYTES,
    MAX_FIGURES,
    REPORT_NAME,
    RUN_FILE,
    STEP_LINE,
    Boss,
    Entry,
    Node,
    added_functions,
    boss_name,
    bosses_of,
    build_tree,
    files_noted,
    image_data_uri,
    loop_steps,
    plan_revisions,
    read_log,
    read_run_file,
    trace_steps,
)


def _plan_html(text: str) -> str:
    lines = []
    for line in text.rstrip("\n").split("\n"):
        done = bool(DONE_MARK.search(line))
        shown = esc(DONE_MARK.sub("", line).rstrip()) + (' <span class="mark">\u2713 done</span>' if done else "")
        lines.append(f'<div class="{"done" if done else ""}">{shown or "&nbsp;"}</div>')
    return f'<div class="plan">{"".join(lines)}</div>'


def _without_marks(plan: str) -> str:
    return " ".join(DONE_MARK.sub(" ", plan).split())


def _plan_progress(text: str, finished: bool = False) -> str:
    """``3 of 5 steps done``; for a boss that finished its task, ``finished`` (its last step, the answer, is done by
    finishing, and the plan does not mark it), with the count when more steps are left unmarked."""
    steps = [line for line in text.split("\n") if STEP_LINE.match(line)]
    done = min(len(steps), sum(1 for line in text.split("\n") if DONE_MARK.search(line)))
    if finished:
        return "finished" if done >= len(steps) - 1 else f"finished, {done} of {len(steps)} steps marked done"
    return f"{done} of {len(steps)} steps done" if steps else ""


def _tools_html(usage: Any) -> str:
    """The calls of each MCP server: calls, failed, seconds."""
    servers = list(getattr(usage, "per_tool_server", {}).items())
    if not servers:
        return ""
    header = ("MCP server", "tool calls", "failed", "seconds")
    body = "".join(
        "<tr>"
        + "".join(
            f'<td data-label="{h}">{esc(c)}</td>'
            for c, h in zip((name, str(u.calls), str(u.failed), f"{u.seconds:.1f}"), header)
        )
        + "</tr>"
        for name, u in servers
    )
    return "<table>" + "<tr>" + "".join(f"<th>{h}</th>" for h in header) + f"</tr>{body}</table>"


def _usage_html(usage: Any) -> str:
    if usage is None:
        return "<p>No usage was recorded.</p>"
    return _llm_usage_html(usage) + _tools_html(usage)


def _llm_usage_html(usage: Any) -> str:
    from aiflows_jarvis.CoreFlowModule import legend, short_paths

    header, flows, figures, total = usage.columns()
    summary = f"<p>{esc(usage.summary(brief=True))}</p>"
    if not total.calls and not total.repairs:
        return summary
    names = {"prompt": "prompt tokens", "completion": "completion tokens"}
    heads = [names.get(h, h) for h in header]
    # each cell names its column: at phone width the rows are stacked (see the style) and the header is hidden
    body = "".join(
        "<tr"
        + (' class="total"' if name == "total" else "")
        + ">"
        + "".join(f'<td data-label="{h}">{esc(c)}</td>' for c, h in zip((name,) + row, heads))
        + "</tr>"
        for name, row in zip(short_paths(flows) + ["total"], figures)
    )
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"
    note = legend(total)
    return f"{summary}<table>{head}{body}</table>" + (f'<p class="meta">{esc(note)}.</p>' if note else "")


def _status_badge(status: str) -> str:
    kind = "ok" if status == "finished" else "warn" if status.startswith("stopped") or "budget" in status else "bad"
    return f'<span class="badge {kind}">{esc(status or "unknown")}</span>'


def _shown(path: str, memory_dir: str) -> str:
    """A path as the report names it: relative to the memory folder (the report's own folder), so that it reads
    the same wherever the folder is; a file outside the memory folder keeps its full path."""
    relative = os.path.relpath(path, memory_dir)
    return path if relative.startswith(os.pardir) else relative


def _finished(r: "_Run", boss: Boss) -> bool:
    """Whether ``boss`` finished its (last) task: the run's top boss when the run finished, a sub-boss when its
    last logged task reads ``<command> finished: ...`` (``status: finished`` in logs of earlier versions)."""
    if boss is r.bosses[0]:
        return r.status == "finished"
    last = None
    stack = list(r.tree)
    while stack:  # the last command that ran this boss (a parent's entry with this boss's steps under it)
        node = stack.pop(0)
        if node.entry is not None and any(child.boss == boss.path for child in node.children):
            last = node.entry
        stack[:0] = node.children
    return last is not None and (
        re.match(r"\s*\S+ finished: ", last.result) is not None
        or re.search(r"^status: finished\s*$", last.result, re.M) is not None
    )


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
    model: str = ""
    steps: Optional[str] = None  # the run's step record, when it has one
    stores: List[str] = None  # the vector stores of its memory (AutoGPT)


def build_report(
    memory_dir: str,
    layout: Mapping[str, Mapping[str, str]],
    *,
    outcome: Optional[Mapping[str, Any]] = None,
    status: Optional[str] = None,
    why: str = "",
    mode: str = "",
    usage: Any = None,
    trace: Optional[str] = None,
    figures: Iterable[str] = (),
    folders: Iterable[str] = (),
    ended: Optional[float] = None,
    app: str = "Jarvis",
    run_file: str = RUN_FILE,
    model: str = "",
    made: Iterable[str] = (),
    steps: Optional[str] = None,
) -> str:
    """The report of the run whose memory is in ``memory_dir``, as one HTML page.

    ``layout``: ``{flow path: memory_files}`` (what ``set_memory_files`` / the launcher's ``prepare_memory``
    return); ``outcome``: the top flow's output (``answer``, ``summary``, ``status``), None when the run did not end;
    ``status``: what to say when it did not (e.g. ``stopped``), and ``why`` (the error, as the screen said it);
    ``mode``: how the LLM replies came (``replay of ...``,
    ``resumed``); ``usage``: a ``UsageMeter``; ``trace``: the run's trace file, if any; ``figures``: image files the
    caller found made by the run; ``folders``: where code ran (relative names in code runs' notes are looked up
    there; ``memory_dir`` is always looked in); ``app``: the command's name (the title); ``run_file``: the name of
    its run file in ``memory_dir``; ``model``: the model the replies came from, when the run file does not name it;
    ``made``: the other files the run made (listed under Files); ``steps``: the run's step record
    (``RunContext(step_record=...)``), read for arguments and results whole when there is no ``trace``. A run without
    bosses (no plan and log in ``layout``) has no plans or library sections, and its steps come from the step record or
    the trace (its top flow, named ``app``, is the controller-executor loop).
    """
    r = _gather(
        os.path.abspath(memory_dir),
        layout,
        dict(outcome or {}),
        status,
        mode,
        trace,
        figures,
        folders,
        ended,
        run_file,
        app,
        steps,
    )
    r.model = str(r.run.get("model") or model or "")
    r.other_files = list(
        dict.fromkeys(r.other_files + [os.path.abspath(p) for p in made if os.path.abspath(p) not in dict(r.images)])
    )
    files = _files_html(r)
    sections = [
        ("run", "The run"),
        ("figures", "Figures"),
        ("plans", "Plans"),
        ("library", "Library"),
        ("usage", "LLM usage"),
        ("files", "Files"),
    ]
    if not r.bosses:  # a run without bosses: its steps come from its step record or trace, if it has one
        sections = [
            (key, name) for key, name in sections if key in ("figures", "usage", "files") or (key == "run" and r.tree)
        ]
    sections = [(key, name) for key, name in sections if key != "files" or files]
    goal = str(r.run.get("goal") or "")
    answer = (
        f'<div class="answer text">{esc(r.answer)}</div>'
        if r.answer
        else f"<p>No final answer: the run {esc(r.status)}.</p>"
        + (f'<div class="why text">{esc(why)}</div>' if why else "")
    )
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{content_policy()}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(app)} run report: {esc(short_line(goal, 80))}</title>",
            f"<style>{REPORT_STYLE}</style></head><body>",
            f'<header><h1>{esc(app)} run report</h1><p class="meta">{_meta_html(r)}</p></header>',
            "<nav>" + "".join(f'<a href="#{key}">{name}</a>' for key, name in sections) + "</nav>",
            f'<section id="goal"><h2>Goal</h2><div class="goal text">{esc(goal) or "(no goal recorded)"}</div>'
            "</section>",
            f'<section id="answer"><h2>Final answer</h2>{answer}</section>',
            *([_run_html(r, app)] if r.tree or r.bosses else []),
            _figures_html(r),
            *([_plans_html(r), _library_html(r)] if r.bosses else []),
            f'<section id="usage"><h2>LLM usage</h2>{_usage_html(usage)}</section>',
            files,
            f"<footer>Written by {esc(app)} at {esc(time.strftime('%Y-%m-%d %H:%M:%S'))}. This page loads nothing "
            f"from the network: figures are inside it.</footer><script>{REPORT_SCRIPT}</script></body></html>\n",
        ]
    )


def _gather(
    memory_dir: str,
    layout,
    outcome: Dict[str, Any],
    status: Optional[str],
    mode: str,
    trace: Optional[str],
    figures: Iterable[str],
    folders: Iterable[str],
    ended: Optional[float],
    run_file: str,
    app: str,
    steps_file: Optional[str] = None,
) -> _Run:
    run = read_run_file(memory_dir, run_file)
    started = run.get("task_started") or run.get("started")
    folders = list(dict.fromkeys([os.path.abspath(f) for f in folders if f] + [memory_dir]))
    bosses = bosses_of(layout)
    whole = trace or (steps_file if steps_file and os.path.isfile(steps_file) else None)
    steps, approved = trace_steps(whole, [b.path for b in bosses]) if whole else ({}, {})
    tree = (
        build_tree(bosses, float(started) if isinstance(started, (int, float)) else None, steps, stopped=not outcome)
        if bosses
        else loop_steps(whole, app)
    )
    entries = list(_walk(tree))
    # Figures: those the caller found, and those code runs said they saved
    paths = list(
        dict.fromkeys(
            [os.path.abspath(p) for p in figures] + files_noted([t for e in entries for t in entry_texts(e)], folders)
        )
    )
    images = [p for p in paths if p.lower().endswith(tuple(IMAGE_TYPES))]
    library = next(
        (
            files.get("code_library")
            for _, files in sorted(layout.items())
            if isinstance(files, Mapping) and files.get("code_library")
        ),
        None,
    )
    return _Run(
        memory_dir=memory_dir,
        run=run,
        started=float(started) if isinstance(started, (int, float)) else None,
        ended=ended if ended is not None else time.time(),
        status=str(outcome.get("status") or status or "did not finish"),
        answer=str(outcome.get("answer") or outcome.get("summary") or ""),
        mode=mode,
        bosses=bosses,
        tree=tree,
        entries=entries,
        approved=approved,
        images=[(p, image_data_uri(p) if i < MAX_FIGURES else None) for i, p in enumerate(images)],
        other_files=[p for p in paths if p not in images],
        figure_ids={p: (f"figure-{i + 1}", os.path.basename(p)) for i, p in enumerate(images)},
        library=library,
        folders=folders,
        trace=trace,
        steps=steps_file if steps_file and os.path.isfile(steps_file) else None,
        stores=[
            files["vector_store"]
            for files in layout.values()
            if isinstance(files, Mapping) and files.get("vector_store")
        ],
    )


def _meta_html(r: _Run) -> str:
    meta = [_status_badge(r.status)]
    if r.started is not None:
        meta.append(f"started {esc(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r.started)))}")
        meta.append(f"took {esc(duration_text(r.ended - r.started))}")
    if r.mode:
        meta.append(esc(r.mode))
    api_base = without_credentials(str(r.run["api_base"]))[0] if r.run.get("api_base") else ""
    if r.model:
        meta.append(f"model: {esc(r.model)}{' at ' + esc(api_base) if api_base else ''}")
    elif api_base:
        meta.append(f"server: {esc(api_base)}")
    return "".join(f"<span>{m}</span>" for m in meta)


def _run_html(r: _Run, app: str) -> str:
    steps = sum(1 for e in r.entries if e.command not in MARKERS)
    about = (
        f"{steps} steps of {esc(r.bosses[0].name)} and the bosses under it, each with the time it started and "
        "how long it took."
        if r.bosses
        else f"{steps} commands of {esc(app)}, each with its arguments and result."
    )
    tree = Renderer(r.bosses, r.folders, r.figure_ids).nodes(r.tree) if r.tree else "<p>(no step was logged)</p>"
    return (
        f'<section id="run"><h2>The run, step by step</h2><p class="meta">{about}</p>'
        '<button type="button" data-open="yes">Expand all</button>'
        f'<button type="button" data-open="no">Collapse all</button><div class="tree">{tree}</div></section>'
    )


def _figures_html(r: _Run) -> str:
    if not r.images:
        return '<section id="figures"><h2>Figures</h2><p>The run made no figure.</p></section>'
    shown = []
    for path, uri in r.images:
        fid, name = r.figure_ids[path]
        caption = esc(_shown(path, r.memory_dir))
        shown.append(
            f'<figure id="{fid}"><img src="{uri}" alt="{esc(name)}"><figcaption>{caption}</figcaption></figure>'
            if uri
            else f'<figure id="{fid}"><figcaption>{caption} (not shown: not a readable image, a link, or '
            f"larger than {MAX_FIGURE_BYTES >> 20} MB)</figcaption></figure>"
        )
    return f'<section id="figures"><h2>Figures</h2><div class="figures">{"".join(shown)}</div></section>'


def _plans_html(r: _Run) -> str:
    parts = []
    for boss in r.bosses:
        plan = read_text(boss.files["plan"])
        revisions = plan_revisions(boss.files["plan"], r.started)
        if not plan.strip() and not revisions:  # a boss the run did not use
            continue
        inner = _plan_html(plan) if plan.strip() else "<p>(no plan: it was removed)</p>"
        for i, (when, text) in enumerate(revisions):
            inner += (
                f"<details><summary>Earlier version {i + 1}, replaced at {when_text(when)}</summary>"
                f"{_plan_html(text)}</details>"
            )
        tasks = r.approved.get(boss.path) or []
        if len(tasks) > 1 or (tasks and _without_marks(tasks[-1]) != _without_marks(plan)):
            for i, text in enumerate(tasks):
                inner += f"<details><summary>Plan approved for task {i + 1}</summary>{_plan_html(text)}</details>"
        earlier = f", {len(revisions)} earlier version{'s' if len(revisions) > 1 else ''}" if revisions else ""
        parts.append(
            f'<details open><summary><b>{esc(boss.name)}</b> <span class="meta">'
            f"{esc(_plan_progress(plan, _finished(r, boss)))}{earlier}</span></summary>{inner}</details>"
        )
    return f'<section id="plans"><h2>Plans</h2>{"".join(parts) or "<p>No plan was written.</p>"}</section>'


def _library_html(r: _Run) -> str:
    functions = added_functions(r.entries, r.library)
    shown = "".join(
        f'<h3 class="mono">{esc(name)}</h3>'
        + (pre_block(source) if source is not None else "<p>(no longer in the library)</p>")
        for name, source in functions
    )
    modules = ""
    package = package_dir(r.library) if r.library else None
    if package and os.path.isfile(os.path.join(package, "__init__.py")) and not os.path.lexists(package + ".py"):
        try:  # the package as it is now (read from its index; nothing is migrated by a report)
            items = "".join(
                f'<li><span class="mono">{esc(m["module"])}</span> ({m["count"]}): {esc(m["line"])}</li>'
                for m in library_structure(r.library)
            )
            modules = f"<h3>The library's modules</h3><ul>{items}</ul>" if items else ""
        except (OSError, JarvisError):
            modules = ""
    return (
        f'<section id="library"><h2>Library functions added</h2>'
        f"{shown or '<p>The run added nothing to the code library.</p>'}{modules}</section>"
    )


def _files_html(r: _Run) -> str:
    groups = [(b.name, [b.files["plan"], b.files["logs"]]) for b in r.bosses]
    location = library_location(r.library) if r.library else None
    groups += [("code library", [location])] if location else []
    groups += [("memories", sorted(r.stores))] if r.stores else []
    groups += [("the run's steps, whole", [r.steps])] if r.steps else []
    made = [p for p, _ in r.images] + r.other_files
    groups += [("made by the run", made)] if made else []
    groups += [("trace", [r.trace])] if r.trace else []
    items = "".join(
        f"<li>{esc(name)}: "
        + ", ".join(f'<span class="mono">{esc(_shown(p, r.memory_dir))}</span>' for p in existing)
        + "</li>"
        for name, existing in ((name, [p for p in paths if os.path.lexists(p)]) for name, paths in groups)
        if existing
    )
    if not items:
        return ""
    where = os.path.basename(r.memory_dir.rstrip(os.sep)) or r.memory_dir
    return (
        f'<section id="files"><h2>Files</h2><p>In the memory folder ({esc(where)}), unless a path says '
        f"otherwise:</p><ul>{items}</ul></section>"
    )


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
