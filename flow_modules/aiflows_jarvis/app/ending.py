"""The end of a run, on screen and in the run report: the answer, the memory files, the files the run made, the
usage table. The run is over by then: a failure here is said in one line and leaves the run's exit code as it is."""

from __future__ import annotations

import os
from typing import Any, List, Optional

from aiflows_jarvis.CodeLibraryFlowModule import library_location, package_dir
from aiflows_jarvis.CoreFlowModule import shown_path

from . import launcher

shown = shown_path  # a path as the user reads it best: relative inside the current folder, absolute outside it


def show_answer(session: Any, output: dict) -> None:
    """The final answer (unless the run showed it already), the memory folder's lines, the files the run made or
    changed in the working folder, what the run cost."""
    from aiflows_jarvis.CoreFlowModule import describe

    console, app = session.console, session.app
    try:
        answer = str(output.get("answer") or output.get("summary") or "(no answer)")
        status = str(output.get("status", ""))
        reason = status.partition(": ")[2]
        if (
            status != "finished"
            and not output.get("answer")
            and (console.was_shown(answer) or (reason and console.was_shown(reason)))
        ):
            # a stop the flow said when it happened: said once, without an empty answer
            console.line(
                "warning", f"\n{app.name} {status.partition(':')[0]} (see above): no {app.words.answer.lower()}."
            )
        elif console.was_shown(answer):
            console.line("answer", f"{app.name} {status}: the {app.words.answer.lower()} is above.")
        else:
            console.show("answer", f"\n{app.name} {status}. {app.words.answer}:", answer)
        lines = app.hooks.memory_lines(session) if app.hooks.memory_lines else memory_lines(session.memory)
        console.show("info", "Memory files:", "\n".join(lines) or "(none)")
        made = made_files(session)
        if made:
            where = shown(session.workdir) if session.workdir != os.getcwd() else "this folder"
            console.show("info", f"Files made or changed in {where}:", "\n".join(shown(p) for p in made))
    except Exception as error:  # noqa: BLE001 - the report must not fail a finished run
        console.line("warning", f"(The end-of-run report is incomplete: {describe(error)})")
    show_usage(console, session.run.usage if session.run is not None else None)


def memory_lines(memory: Any) -> List[str]:
    """``Jarvis: memory/plan_jarvis.txt, memory/logs_jarvis.txt`` per boss, named as the steps on screen name it
    (``ExtendLibrary``), with only the files that exist (a boss that never ran, or whose files were archived, has
    none), then the code library."""
    from aiflows_jarvis.CoreFlowModule import breadcrumb_parts

    lines, library = [], set()
    for boss, files in (memory or {}).items():
        library.update(p for k, p in files.items() if k == "code_library")
        existing = [p for k, p in files.items() if k != "code_library" and os.path.isfile(p)]
        if "plan" in files and existing:  # the bosses' files; the code writers only point at the library
            lines.append(f"{breadcrumb_parts(boss, boss=True)[-1]}: " + ", ".join(shown(p) for p in existing))
    locations = sorted({where for where in map(library_location, library) if where})
    lines += [f"code library: {shown(p)}" for p in locations]
    return lines


def made_files(session: Any) -> List[str]:
    """The files the run made or changed in the working folder (figures, CSVs, pages, ...), without the memory
    files, the run file and the run report; the memory folder's other files too when the code runs there."""
    memory, memory_dir, workdir = session.memory, session.memory_dir, session.workdir
    if not workdir:
        return []
    own = {p for files in memory.values() for p in files.values()} if memory else set()
    own |= {package_dir(files["code_library"]) for files in (memory or {}).values() if files.get("code_library")}
    own |= {
        os.path.join(memory_dir, name)
        for name in (session.app.report_name, session.app.run_file, session.app.steps_file)
    }
    skip = tuple(own) + (() if os.path.abspath(workdir) == memory_dir else (memory_dir,))
    return launcher.new_files(workdir, session.started, suffixes=None, skip=skip)


def show_usage(console: Any, usage: Any, unless_unused: bool = False) -> None:
    """The run's LLM usage and cost (``usage``, its ``UsageMeter``), per chat (``unless_unused``: nothing when no LLM
    was called); a failure is one line, never the run's outcome."""
    from aiflows_jarvis.CoreFlowModule import describe

    if usage is None:  # the run stopped before it was built: no LLM was called
        return
    try:
        if not unless_unused or usage.total().calls:
            width = console.width  # the body is indented by 4: the table fits what is left, or is stacked
            console.show("info", usage.summary(brief=True), usage.report(width - 4 if width else None))
    except Exception as error:  # noqa: BLE001
        console.line("warning", f"(The usage report failed: {describe(error)})")


def write_run_report(session: Any, output: Optional[dict]) -> None:
    """The run report (HTML): the app's report (``report.html``) in the memory folder, or ``--report FILE``; where it
    is, in one line."""
    from aiflows_jarvis.CoreFlowModule import describe

    console, args = session.console, session.args
    try:
        from . import run_report

        memory_dir, workdir = session.memory_dir, session.workdir
        folders = [memory_dir] + ([workdir] if workdir and workdir != memory_dir else [])
        replayed = replay_source(session.transcript) if session.transcript is not None else ""
        mode = (
            f"a replay of the recorded demo ({replayed})"
            if args.demo
            else f"a replay of {args.replay} ({replayed})"
            if args.replay
            else "resumed"
            if args.resume
            else ""
        )
        made = made_files(session)
        target = args.report or os.path.join(memory_dir, session.app.report_name)
        if args.resume and not args.report:  # the report of the run resumed is kept, whatever this part does
            keep_previous_report(target)
        path = run_report.write_report(
            target,
            memory_dir,
            session.memory or {},
            outcome=output,
            status=session.ended,
            why=session.why,
            mode=mode,
            usage=session.run.usage if session.run is not None else None,
            trace=session.trace,
            steps=os.path.join(memory_dir, session.app.steps_file),
            folders=folders,
            figures=[p for p in made if p.lower().endswith(launcher.FIGURE_SUFFIXES)],
            made=made,
            app=session.app.name,
            run_file=session.app.run_file,
            model=model_used(session),
        )
        console.line("info", f"Run report: {shown(path)}")
    except Exception as error:  # noqa: BLE001 - the report must not fail the run
        console.line("warning", f"(The run report could not be written: {describe(error)})")
    except KeyboardInterrupt:  # Ctrl+C while it is written: the run ends as it was going to, without it
        console.line("warning", "(The run report was not written: Ctrl+C.)")


def keep_previous_report(path: str) -> Optional[str]:
    """Copy the report at ``path`` (an earlier part of the run being resumed) to the memory folder's ``archive/``
    before it is replaced; returns the copy's path, None when there is none (or it is a link, which is not
    followed)."""
    from aiflows_jarvis.CoreFlowModule import archive_copy, read_text

    if not os.path.isfile(path) or os.path.islink(path):
        return None
    return archive_copy(path, read_text(path))


def replay_source(transcript: Any) -> str:
    """Where a recording's LLM replies come from, as its header says: ``LLM replies written by hand`` (a demo's
    ``replies_by: hand``), else ``LLM replies of gpt-4o-mini`` (the model the run was recorded with)."""
    header = transcript.header
    if header.get("replies_by") == "hand":
        return "LLM replies written by hand"
    model = str(header.get("model") or "")
    return f"LLM replies of {model}" if model and model != "configured" else "recorded LLM replies"


def model_used(session: Any) -> str:
    """The model the run's replies came from, as far as the run knows it: --model, the recording's (a replay), else
    the models the LLM servers named; "" when none is known."""
    if getattr(session.args, "model", None):
        return str(session.args.model)
    if getattr(session, "transcript", None) is not None:
        return ""  # the mode says where a replay's replies come from
    servers = session.run.servers.values() if session.run is not None else ()
    models = sorted({str(getattr(s, "model", "")) for s in servers} - {"", "unknown"})
    return ", ".join(models)
