"""A run of a command line, the same for every app: signals and exit codes, the start (where the run writes, the
memory folder's lock, --resume, the working folder, where LLM replies come from, the goal, --record, the
configuration and budget, the flow and its memory), the run, and its end (the answer, the usage table, the report).

An app (``spec.App``) declares what differs; its hooks get the ``Session``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from . import ending, launcher, resume, tools
from .names import command_line
from .options import parse_args
from .spec import App

# The exit codes, one table for every command line.
FINISHED, FAILED, BAD_INPUT, BUDGET_REACHED, STOPPED_BY_USER = 0, 1, 2, 3, 4
INTERRUPTED, HANGUP, OUTPUT_CLOSED, TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGHUP, 141, 128 + signal.SIGTERM
EXIT_CODES = {
    FINISHED: "finished",
    FAILED: "failed or gave up",
    BAD_INPUT: "bad input, missing credentials, or a memory folder in use by another run",
    BUDGET_REACHED: "budget reached (--resume goes on)",
    STOPPED_BY_USER: "stopped by the user (q or stop when asked)",
    INTERRUPTED: "Ctrl+C",
    TERMINATED: "SIGTERM",
    HANGUP: "SIGHUP (the terminal closed)",
    OUTPUT_CLOSED: "the output was closed by its reader (`| head -1`: as SIGPIPE would, so `set -o pipefail` sees "
    "a cut run)",
}


class Terminated(SystemExit):
    """SIGTERM, or SIGHUP (the terminal closed): unwinds like an exit, so interpreters are shut down (with what their
    code started) and files closed; not a KeyboardInterrupt, which would ask the user what to do instead. Its code is
    128 + the signal."""


def _on_signal(signum, frame):
    raise Terminated(128 + signum)


@contextlib.contextmanager
def interrupts_deferred():
    """Ctrl+C during start-up (imports, configuration, memory folder) takes effect when start-up is done: an
    interrupt inside hydra or OmegaConf leaves them half-way and surfaces as a wall of nested errors. A second Ctrl+C
    quits at once (nothing has run yet, so nothing is lost)."""
    pressed = []

    def handler(signum, frame):
        if pressed:
            print("\nStopped.", file=sys.stderr, flush=True)
            os._exit(INTERRUPTED)
        pressed.append(signum)
        print("\nStopping when start-up is done (Ctrl+C again to quit now)...", file=sys.stderr, flush=True)

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: signals go to the main thread's handlers anyway
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def note(text: str) -> None:
    """A fixed line on stderr, which may be closed too (``2>&1 | head -1``)."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def exit_codes_help() -> str:
    """The exit codes, for an app's --help: one a line."""
    return "exit codes:\n" + "\n".join(f"  {code:<4}{EXIT_CODES[code].split(' (')[0]}" for code in sorted(EXIT_CODES))


def main(app: App, argv: Optional[List[str]] = None) -> int:
    """Runs ``app``; returns its exit code (``EXIT_CODES``). SIGTERM and SIGHUP end the run as an exit does, Ctrl+C
    is a KeyboardInterrupt (unless ignored: a job the shell started with `&`); a program that calls main() gets its
    own handlers back (run_jarvis.py's, which end the process while it still imports, among them)."""
    try:
        previous = {signum: signal.signal(signum, _on_signal) for signum in (signal.SIGTERM, signal.SIGHUP)}
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread (e.g. called from another program's worker): keep its handlers
        previous = {}
    try:
        return _run(app, argv)
    except KeyboardInterrupt:  # before the app started (imports, configuration): nothing to keep
        note("\nStopped.")
        return INTERRUPTED
    except Terminated as stop:
        note("\nTerminated.")
        return stop.code
    except SystemExit as stop:
        # The Console's OutputClosed, looked up only once imported (importing it here would import aiflows before
        # --help, and outside the deferred Ctrl+C). The Console pointed stdout at the null device: nothing is left
        # to fail at exit.
        core = sys.modules.get("aiflows_jarvis.CoreFlowModule")
        if core is None or not isinstance(stop, core.OutputClosed):
            raise
        note("Stopped: the output was closed.")
        return stop.code
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@dataclass
class Session:
    """One run of an app: what its steps and the app's hooks share."""

    app: App
    args: Any
    console: Any
    memory_dir: str
    started: float
    workdir: Optional[str] = None
    trace: Optional[str] = None
    transcript: Any = None
    recorder: Any = None
    api_infos: Any = None
    config: Optional[Dict[str, Any]] = None
    flow: Any = None
    memory: Any = None
    goal: str = ""
    budget: Any = None
    run_lock: Any = None
    tools: Any = None  # the run's MCP servers (app/tools.py), stopped when the run ends
    ended: str = "stopped before the end"  # how a run that gave no answer ended, for its report
    why: str = ""  # what stopped it, as the screen said it (for its report)
    # What the run's context is built with (RunContext's keywords), gathered by the steps before the flow is built
    # (backends, tools, recorder, budget, ...) and by the app's hooks; then ``run``, built once, entered once.
    run_settings: Dict[str, Any] = field(default_factory=dict)
    run: Any = None
    enter: Any = None  # enters the run's context for the rest of the run (an ExitStack's enter_context)

    @property
    def command(self) -> str:
        """The command as the user started it (``jarvis``, ``python run_jarvis.py``), for hints."""
        return command_line(self.app.entry_point, self.app.script)

    def where_things_are(self) -> str:
        """Where the run's files are, and how to go on: --resume, which continues from what the run made, or (when
        it made nothing to go on from: no plan) starts it again with its goal and settings (a replay is not resumed:
        it would start its recording over)."""
        if self.flow is None:
            return ""
        does = self.app.words.resume_does if self.resumable() else "start it again with the same goal and settings"
        hint = f"; run again with --resume to {does}" if self.transcript is None else ""
        return f"{self.app.words.kept} are in {self.memory_dir}{hint}."

    def resumable(self) -> bool:
        """Whether --resume would go on from something this run made: a plan (an app with plans: Jarvis), else an
        LLM call that got its reply (AutoGPT remembers what it did)."""
        plans = [files["plan"] for files in (self.memory or {}).values() if "plan" in files]
        if plans:
            return any(os.path.isfile(plan) and os.path.getsize(plan) > 0 for plan in plans)
        return self.memory is not None and self.run is not None and self.run.usage.total().calls > 0


def _run(app: App, argv: Optional[List[str]]) -> int:
    args = parse_args(app, argv)
    with interrupts_deferred():
        import aiflows_jarvis  # noqa: F401  (first: the tokenizer litellm needs is then found offline)

        # isort: split
        from aiflows.utils import logging

        from aiflows_jarvis.CoreFlowModule import Console, current_run

    if args.verbose:
        logging.set_verbosity_info()
    else:
        logging.set_verbosity_error()
    caller = current_run()  # a program calling main() in a RunContext of its own says where answers come from and
    console = (
        Console(color=False if args.plain else None, plain=args.plain, stream_replies=args.stream)
        if args.plain or args.stream
        else caller.console
    )  # where to print
    session = Session(app, args, console, os.path.abspath(args.memory_dir), time.time())
    session.run_settings.update(
        input_source=caller.input_source, console=console, closed_input_hint=app.words.closed_input
    )
    # The run's context is entered once it is built (``_prepare``, before the flow is), and left here however the run
    # ends: everything it holds (input source, backends, budget, trace, warm-up, tools) goes with it.
    with contextlib.ExitStack() as stack:
        session.enter = stack.enter_context
        try:
            return _run_in(app, args, session)
        finally:  # a signal in the run's last steps (its report, closing the kernel) must not leave its lock record
            if session.run_lock is not None:
                session.run_lock.release()


def _run_in(app: App, args: Any, session: Session) -> int:
    from aiflows_jarvis.CoreFlowModule import (
        BadInputError,
        BudgetExceeded,
        Console,
        JarvisError,
        MemoryInUseError,
        TranscriptError,
        describe,
        root_cause,
    )

    console = session.console
    output = None
    bad_input = (launcher.MissingCredentials, MemoryInUseError, BadInputError)
    try:
        with interrupts_deferred():  # until the app starts working
            code = _start(session)
            if code is not None:
                return code
        session.budget.started = time.monotonic()
        result = session.flow.call({"goal": session.goal})
        transcript = session.transcript
        if transcript is not None and transcript.unused():
            raise TranscriptError(
                f"The run finished with {transcript.unused()} recorded replies unused: it left the "
                f"recording {transcript.path}, so its answer is not the recorded run's."
            )
        output = result
    except BudgetExceeded as error:
        session.ended, session.why = "stopped before the end (budget reached)", str(error)
        console.set_depth(0)  # the end of the run is said at the margin, not at the depth of the stop
        console.line("warning", f"\n{error}")
        return BUDGET_REACHED
    except KeyboardInterrupt:
        session.ended = "stopped before the end (Ctrl+C)"
        console.set_depth(0)
        console.line("warning", f"\nStopped. {session.where_things_are()}".rstrip())
        return INTERRUPTED
    except Terminated as stop:
        session.ended = "terminated"
        console.set_depth(0)
        console.line("warning", f"\nTerminated. {session.where_things_are()}".rstrip())
        return stop.code
    except JarvisError as error:
        session.ended, session.why = "failed", describe(error)
        console.set_depth(0)
        console.line("error", f"\n{describe(error)}")
        if isinstance(error, bad_input):
            return BAD_INPUT
        if session.flow is not None:
            console.line("info", session.where_things_are())
        return FAILED
    except Exception as error:  # noqa: BLE001 - a last line of defence: say what happened, keep the memory
        session.ended, session.why = "failed", describe(error)
        console.set_depth(0)
        if isinstance(root_cause(error), JarvisError):
            console.line("error", f"\n{describe(error)}")
            return BAD_INPUT if isinstance(root_cause(error), (launcher.MissingCredentials, BadInputError)) else FAILED
        if args.verbose:  # the traceback, cleaned as everything shown is (a server's message can hold escapes)
            import traceback

            Console(stream=sys.stderr).show("error", "Unexpected error:", traceback.format_exc())
            return FAILED
        console.line(
            "error",
            f"\nUnexpected error: {describe(error)}\n(--verbose shows the traceback.) {session.where_things_are()}",
        )
        return FAILED
    finally:
        tools.stop_tools(session)  # first: what a server started ends with the run, whatever else fails after
        if session.recorder is not None:
            session.recorder.close()
        if session.flow is not None:
            from aiflows_jarvis.InterpreterFlowModule.interpreter import survivors_note

            left = survivors_note(launcher.close_interpreters(session.flow))
            if left:
                console.line("warning", left)
        if session.run is not None:
            session.run.close_records()  # the trace and the step record, flushed before the report reads them
        console.set_depth(0)
        if output is None:  # what a run that did not end cost (an ended one: in the report below)
            ending.show_usage(console, session.run.usage if session.run is not None else None, unless_unused=True)
            if session.memory is not None:  # the run got as far as its memory folder (its lock is held till after)
                resume.record_end(os.path.join(session.memory_dir, session.app.run_file), session.ended)
                ending.write_run_report(session, None)
            if session.run_lock is not None:
                session.run_lock.release()

    console.set_depth(0)
    try:
        resume.record_end(os.path.join(session.memory_dir, session.app.run_file), output.get("status") or "ended")
        ending.show_answer(session, output)
        ending.write_run_report(session, output)
    finally:  # the report reads the memory folder: another run may start there only after it
        session.run_lock.release()
    return exit_code(str(output.get("status") or ""))


def exit_code(status: str) -> int:
    """The exit code of a run that ended with ``status`` (its top flow's)."""
    from aiflows_jarvis.CoreFlowModule import STOPPED_BY_USER as USER_STOP

    return FINISHED if status == "finished" else STOPPED_BY_USER if status.startswith(USER_STOP) else FAILED


def _start(session: Session) -> Optional[int]:
    """Everything before the flow is called; an exit code when a file the run would write is refused (before
    anything in the memory folder is touched). The memory folder's lock is ``session.run_lock`` (taken in
    ``_prepare``): the caller releases it after the end of the run (the report reads the folder)."""
    app, args, console, memory_dir = session.app, session.args, session.console, session.memory_dir
    run_file = os.path.join(memory_dir, app.run_file)
    if app.hooks.requires:  # what is missing from this Python is said before anything is shown or touched
        app.hooks.requires(session)

    # ~~~ Where the run writes: checked first, before anything in the memory folder is moved ~~~
    # (the trace file of --trace, else of the JARVIS_TRACE variable, which the flows would open on their own)
    trace, trace_option = (
        (args.trace, "--trace") if args.trace else (os.environ.get("JARVIS_TRACE"), "The JARVIS_TRACE file")
    )
    problem = launcher.check_run_paths(memory_dir, trace, trace_option) or (
        args.report and launcher.output_file_problem(args.report, "--report", memory_dir, app.report_name)
    )
    if problem:
        console.line("error", f"\n{problem}")
        return BAD_INPUT
    _prepare(session, run_file, trace, trace_option)
    return None


def _lock(session: Session, trace: Optional[str], trace_option: str) -> None:
    """One run at a time in a memory folder: locked (``session.run_lock``) once the checks that need nothing of the
    folder have passed, before anything in it is written or moved, so that a refused start leaves no folder and no
    lock file behind; the trace file is opened then too."""
    from aiflows_jarvis.CoreFlowModule import BadInputError, RunLock

    if trace:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(trace)), exist_ok=True)
            with open(trace, "a", encoding="utf-8"):  # the run appends to it from its first message
                pass
            session.trace = session.run_settings["trace_file"] = trace
        except OSError as error:
            raise BadInputError(f"{trace_option} {trace} cannot be written: {error.strerror or error}.") from None
    session.run_lock = RunLock(session.memory_dir).acquire()
    if session.run_lock.taken_over:
        session.console.line("info", session.run_lock.taken_over)


def _prepare(session: Session, run_file: str, trace: Optional[str] = None, trace_option: str = "--trace") -> None:
    """From --resume to the flow, built, with its memory prepared: each step fills ``session`` for the next and for
    the app's hooks. What reads the memory folder only (the run to resume) and what needs nothing of it (the LLM,
    the goal) comes before its lock (``_lock``); what writes in it, after."""
    from aiflows_jarvis.ChatFlowModule import Transcript, TranscriptRecorder, replay_factory, with_api_infos
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput, BadInputError, RunBudget, RunContext, atomic_write

    app, args, console, memory_dir = session.app, session.args, session.console, session.memory_dir
    settings = session.run_settings
    # ~~~ A resumed run continues with the goal and settings of the run it resumes, unless given again ~~~
    previous = None
    if args.resume:
        previous = resume.previous_run(run_file, memory_dir, app.report_name)
        resume.apply_previous(app, args, previous, memory_dir)

    # ~~~ Its password is in no file: from the command line, else from the environment ~~~
    if args.api_base:
        had_password = bool(previous and previous.get("api_base_password") and args.api_base == previous["api_base"])
        args.api_base = launcher.api_base_with_password(args.api_base, had_password, run_file)
    launcher.remember_run_secrets(args.api_base)

    # ~~~ Where code runs: the folder the app is started in, unless told (a demo: its memory folder, where its
    # recording says its files are) ~~~
    session.workdir = os.path.abspath(args.workdir) if args.workdir else memory_dir if args.demo else os.getcwd()
    if args.workdir and not os.path.isdir(session.workdir):  # (a demo's memory folder is made with its lock)
        raise BadInputError(
            f"--workdir {args.workdir}: no such folder. Give a folder that exists (the code runs "
            "there and reads your files from there)."
        )

    # ~~~ Where the LLM replies come from ~~~
    if args.demo or args.replay:
        session.transcript = Transcript.load(app.demo if args.demo else args.replay)
        settings["backend_factory"] = replay_factory(session.transcript)
        settings["tool_replay"] = session.transcript.next_tool  # tool results too: a replay starts no tool, no server
        session.api_infos = [{"backend_used": "openai", "api_key": "replay"}]
    else:
        help_text = launcher.no_credentials_help(app.name, session.command, app.words.server_note)
        session.api_infos = launcher.api_infos_from_environment(args.api_base, help_text=help_text)
        overrides = {}
        if args.model:
            backend_used = session.api_infos[0].backend_used
            overrides["model_name"] = {
                backend_used: launcher.litellm_model_name(args.model, backend_used, args.api_base)
            }
        settings["backend_factory"] = with_api_infos(session.api_infos, only_missing=True, **overrides)
    if app.hooks.sources:
        app.hooks.sources(session)

    # ~~~ The goal ~~~
    goal, source = args.goal, "The goal"
    if session.transcript is not None and not goal:
        goal, source = session.transcript.header.get("goal") or "", f"The goal in {session.transcript.path}"
    if args.resume:
        source = f"The goal in {run_file} (the run --resume continues)"
    for what, text in ((source, goal), ("--model", args.model), ("--api-base", args.api_base)):
        problem = launcher.check_text(what, text) if text is not None else None
        if problem:
            raise BadInputError(problem)
    # ~~~ Passwords in its URLs: the LLM gets them, no file and no screen does ~~~
    if previous is not None:
        goal = launcher.goal_with_passwords(goal, previous.get("goal_passwords"), run_file)
    hidden = launcher.remember_goal_passwords(goal)
    if hidden:
        console.line(
            "warning",
            f"The goal holds a password ({', '.join(hidden)}): the LLM is sent it, but the run's "
            f"files and screen show [redacted: {launcher.GOAL_SECRET}], and --resume takes it "
            f"from {launcher.GOAL_PASSWORD}.",
        )
    session.goal = goal
    _lock(session, trace, trace_option)
    if args.demo:
        console.line("flow", f"{app.name} demo. {app.words.demo_intro.format(memory_dir=ending.shown(memory_dir))}")

    # ~~~ The configuration, the budget, the flow ~~~
    config_path = args.config or app.config
    config = launcher.load_config(config_path) if (args.config or os.path.exists(app.config)) else app.default_config
    if app.hooks.configure:
        config = app.hooks.configure(session, config)
    session.config = config
    session.tools = settings["tool_provider"] = tools.start_tools(session)
    if args.record:
        header = app.hooks.recorder_header(session) if app.hooks.recorder_header else {}
        if session.tools is not None:  # what a replay offers: the servers' names and settings, never their commands
            header["mcp_servers"] = session.tools.settings()
        session.recorder = TranscriptRecorder(args.record, goal=goal, model=args.model or "configured", **header)
        settings.update(backend_wrappers=[session.recorder.wrap], tool_recorder=session.recorder.record_tool)
    session.budget = RunBudget.from_config(
        config.get("budget"),
        max_calls=args.max_calls,
        max_tokens=args.max_tokens,
        max_cost=args.max_cost,
        max_time=args.max_time,
    )
    if args.yes or args.demo:
        settings["input_source"] = AutoApproveInput()
    # ~~~ The run's context: built once, with everything the run holds, and entered for the rest of the run ~~~
    session.run = RunContext(
        **settings,
        budget=session.budget,
        memory_dir=memory_dir,
        step_record=os.path.join(memory_dir, app.steps_file),  # opened at the first step: a resumed run goes on with it
        # the Python kernel starts while the user reads the first plan (not when the first run_code needs it)
        warm_up=lambda: launcher.prestart_interpreters(session.flow),
    )
    session.enter(session.run)
    session.flow = flow = launcher.instantiate(config, session.api_infos, memory_dir, source=config_path)
    launcher.set_chat_settings(
        flow, context_window=args.context_window, structured_output=args.structured_output, stream=args.stream or None
    )
    if app.hooks.check:
        app.hooks.check(session)
    # The run file before the previous plans are archived, replaced atomically: when it cannot be written (a full
    # disk), the previous run is left whole, its run file included, for --resume.
    atomic_write(run_file, resume.run_record(app, args, goal, session.started, session.workdir, previous))
    # A demo starts from an empty library, as it was recorded; other runs keep what was learned.
    # The previous run's report goes with its plans and logs (``--report FILE`` is the user's to keep).
    session.memory = launcher.prepare_memory(
        flow,
        memory_dir,
        resume=args.resume,
        archive_library=args.demo,
        workdir=session.workdir,
        with_files=(app.report_name, app.steps_file),
    )
    if session.memory.archive:
        console.line(
            "info", f"The previous {session.memory.archived()} kept in {ending.shown(session.memory.archive)}."
        )
    # What generated code may use of the machine, with --verbose (the interpreters of a flow share their
    # configuration; the README says what the default is)
    if args.verbose:
        for line in sorted(
            {node.limits_note() for _, node in launcher.interpreters(flow) if hasattr(node, "limits_note")}
        ):
            console.line("info", line)
    if app.hooks.prepare:
        app.hooks.prepare(session)
