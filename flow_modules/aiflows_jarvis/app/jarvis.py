"""Jarvis's command line: ``jarvis "<goal>"`` or ``python run_jarvis.py "<goal>"`` (``--help`` for the options)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from typing import List, Optional

from .names import command_name

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# configs/ of the checkout the package runs from (absent from a wheel: then the flow's own defaults)
CONFIG = os.path.join(os.path.dirname(os.path.dirname(PACKAGE)), "configs", "jarvis.yaml")
DEMO_TRANSCRIPT = os.path.join(PACKAGE, "JarvisFlowModule", "demo", "demo_transcript.jsonl")
RUN_FILE = "jarvis_run.json"  # in the memory folder: the goal and settings of the last run, for --resume

DESCRIPTION = """\
Jarvis writes a plan with you, then reaches your goal by writing reusable functions into a code library
(library.py) and running code in a stateful interpreter. Plans, logs and the library live in the memory folder.

The LLM: OPENAI_API_KEY (OpenAI), AZURE_API_KEY + AZURE_API_BASE (+ AZURE_API_VERSION) (Azure), or --api-base
for any OpenAI-compatible server (vLLM, llama.cpp, Ollama). No LLM at hand? Try --demo."""

EPILOG = """\
examples:
  python run_jarvis.py "Download Tesla's stock prices for 2022-01-01..2022-06-01 with yfinance and plot them"
  python run_jarvis.py --model gpt-4o-mini --yes "Compute the first 20 primes and save them to primes.txt"
  python run_jarvis.py --api-base http://localhost:11434/v1 --model llama3 "..."     (Ollama)
  python run_jarvis.py --resume                       (continue the last run from its plan and logs)
  python run_jarvis.py --demo                         (a recorded run, offline)"""


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=command_name("jarvis", "run_jarvis.py"), description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("goal", nargs="?", help="what Jarvis should achieve, in natural language")
    parser.add_argument("--model", help="the model: a name (gpt-4, gpt-4o-mini, ...) or provider/name; "
                                        "default: each chat's model in the configuration (gpt-4)")
    parser.add_argument("--api-base", metavar="URL", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1")
    parser.add_argument("--config", metavar="FILE", help="the configuration (default: configs/jarvis.yaml)")
    parser.add_argument("--memory-dir", metavar="DIR", default="memory",
                        help="where plans, logs and the code library live (default: memory/)")
    parser.add_argument("--workdir", metavar="DIR",
                        help="the folder the code runs in, where it reads your files and writes its own, with the code "
                             "library importable (default: the current folder; --demo: the memory folder)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the last run in the memory folder from its plan and logs")
    parser.add_argument("--yes", action=argparse.BooleanOptionalAction, default=None,
                        help="approve plans and code automatically; questions get 'use your best judgement' "
                             "(--resume keeps the choice of the run it resumes; --no-yes asks again)")
    parser.add_argument("--editor", metavar="CMD", help="the editor plans and code open in (default: $VISUAL/$EDITOR)")
    parser.add_argument("--record", metavar="FILE", help="write every LLM exchange to a transcript (JSON lines)")
    parser.add_argument("--replay", metavar="FILE", help="answer every LLM call from a transcript instead of an LLM")
    parser.add_argument("--demo", action="store_true", help="replay the recorded demo run (offline, auto-approve)")
    parser.add_argument("--trace", metavar="FILE", help="write every message between flows to FILE (JSON lines)")
    parser.add_argument("--report", metavar="FILE", help="write the run report (HTML) to FILE instead of "
                                                         "report.html in the memory folder")
    parser.add_argument("--plain", action="store_true",
                        help="plain text on a terminal too: no colours, highlighting, status line or fitted lines "
                             "(what a pipe or a file always gets)")
    parser.add_argument("--stream", action="store_true",
                        help="have the LLM server stream its replies: the status line counts the tokens, and plans "
                             "and code show as they are written")
    parser.add_argument("--verbose", action="store_true", help="show aiflows' log and full tracebacks")
    limits = parser.add_argument_group(
        "budget (defaults in the configuration's `budget:`; reaching a limit stops the run, --resume goes on)")
    limits.add_argument("--max-calls", type=_positive_int, metavar="N", help="stop after N LLM calls")
    limits.add_argument("--max-tokens", type=_positive_int, metavar="N", help="stop after N tokens (prompt + reply)")
    limits.add_argument("--max-cost", type=_positive_float, metavar="USD",
                        help="stop after this many dollars (models with a known price; others count tokens only)")
    limits.add_argument("--max-time", type=_duration, metavar="TIME", help="stop after this long (e.g. 900, 15m, 2h)")
    model = parser.add_argument_group("the model's limits and replies")
    model.add_argument("--context-window", type=_positive_int, metavar="N",
                       help="the model's context window in tokens (needed for local servers: the server's n_ctx)")
    model.add_argument("--structured-output", choices=("auto", "json_schema", "json_object", "off"),
                       help="the response_format controllers ask for (default auto: what the server accepts)")
    args = parser.parse_args(argv)
    if args.demo and (args.replay or args.record or args.resume):
        parser.error("--demo replays its own recording; it does not go with --replay, --record or --resume")
    if args.demo and args.goal:
        parser.error("--demo replays a recording made for its own goal; drop the goal (or drop --demo)")
    if args.replay and args.record:
        parser.error("--record and --replay do not go together")
    if (args.demo or args.replay) and (args.model or args.api_base):
        parser.error("--demo and --replay answer from a recording: --model and --api-base do not apply")
    if args.goal is not None and not args.goal.strip():
        args.goal = None  # a goal of blanks is no goal
    if not args.goal and not (args.resume or args.demo or args.replay):
        parser.error("give a goal, e.g. run_jarvis.py \"Plot y = x^2 for x in 0..10\" (or --resume, --demo)")
    return args


def _positive(convert, what: str):
    """An argparse type: ``convert(text)``, more than 0."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
        return value
    return parse


_positive_int = _positive(int, "a whole number")
_positive_float = _positive(float, "a number")


def _duration(text: str) -> float:
    """Seconds from ``900``, ``90s``, ``15m`` or ``2h``."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], units[text[-1].lower()]) if text and text[-1].lower() in units else (text, 1)
    try:
        value = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 900, 15m, 2h)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


class Terminated(SystemExit):
    """SIGTERM, or SIGHUP (the terminal closed): unwinds like an exit, so interpreters are shut down (with what their
    code started) and files closed; not a KeyboardInterrupt, which would ask the user what to do instead. Its code is
    128 + the signal: 143 for SIGTERM, 129 for SIGHUP."""


def _on_sigterm(signum, frame):
    raise Terminated(128 + signum)


@contextlib.contextmanager
def _interrupts_deferred():
    """Ctrl+C during start-up (imports, configuration, memory folder) takes effect when start-up is done: an
    interrupt inside hydra or OmegaConf leaves them half-way and surfaces as a wall of nested errors. A second Ctrl+C
    quits at once (nothing has run yet, so nothing is lost)."""
    pressed = []

    def handler(signum, frame):
        if pressed:
            print("\nStopped.", file=sys.stderr, flush=True)
            os._exit(130)
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


def main(argv: Optional[List[str]] = None) -> int:
    """Runs Jarvis; the exit code: 0 finished, 1 failed or gave up, 2 bad input, missing credentials or a memory
    folder in use by another run, 3 budget reached, 130 Ctrl+C, 143 SIGTERM, 129 SIGHUP (the terminal closed), 141
    the output was closed by its reader (``| head -1``: the run stops at its next print, as a program killed by
    SIGPIPE would, 128 + 13, so that ``set -o pipefail`` sees a cut run)."""
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        previous_hup = signal.signal(signal.SIGHUP, _on_sigterm)
    except ValueError:  # not the main thread (e.g. called from another program's worker): keep its handler
        previous = previous_hup = None
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before Jarvis started (imports, configuration): nothing to keep
        _note("\nStopped.")
        return 130
    except Terminated as stop:
        _note("\nTerminated.")
        return stop.code
    except SystemExit as stop:
        # The Console's OutputClosed, looked up only once imported (importing it here would import aiflows before
        # --help, and outside the deferred Ctrl+C). The Console pointed stdout at the null device: nothing is left
        # to fail at exit.
        interaction = sys.modules.get("aiflows_jarvis.CoreFlowModule.interaction")
        if interaction is None or not isinstance(stop, interaction.OutputClosed):
            raise
        _note("Stopped: the output was closed.")
        return stop.code
    finally:
        if previous is not None:  # a program that calls main() gets its own handler back
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGHUP, previous_hup)


def _note(text: str) -> None:
    """A fixed line on stderr, which may be closed too (``2>&1 | head -1``)."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _main(argv: Optional[List[str]]) -> int:
    args = parse_args(argv)
    with _interrupts_deferred():
        import aiflows_jarvis  # noqa: F401  (first: the tokenizer litellm needs is then found offline)
        from aiflows.utils import logging

        from aiflows_jarvis.ChatFlowModule import (
            Transcript,
            TranscriptRecorder,
            add_backend_wrapper,
            remove_backend_wrapper,
            replay_factory,
            set_backend_factory,
            with_api_infos,
        )
        from aiflows_jarvis.CoreFlowModule import (
            AutoApproveInput,
            Console,
            JarvisError,
            TranscriptError,
            get_console,
            set_closed_input_hint,
            set_console,
            set_input_source,
            set_trace_file,
        )
        from aiflows_jarvis.CoreFlowModule.budget import BudgetExceeded, RunBudget, set_run_budget
        from aiflows_jarvis.CoreFlowModule.errors import BadInputError, MemoryInUseError, describe
        from aiflows_jarvis.CoreFlowModule.locks import RunLock
        from aiflows_jarvis.CoreFlowModule.memory import atomic_write
        from aiflows_jarvis.CoreFlowModule.warm_up import set_warm_up
        from aiflows_jarvis.app import launcher

    if args.verbose:
        logging.set_verbosity_info()
    else:
        logging.set_verbosity_error()
    if args.plain or args.stream:
        set_console(Console(color=False if args.plain else None, plain=args.plain, stream_replies=args.stream))
    console = get_console()
    memory_dir = os.path.abspath(args.memory_dir)
    workdir = None  # where the code runs: known once the options (and a resumed run's) are read
    run_file = os.path.join(memory_dir, RUN_FILE)
    flow = recorder = transcript = output = run_lock = memory = None
    started = time.time()
    try:
        with _interrupts_deferred():  # until Jarvis starts working
            # ~~~ Where the run writes: checked first, before anything in the memory folder is moved ~~~
            # (the trace file of --trace, else of the JARVIS_TRACE variable, which the flows would open on their own)
            trace, trace_option = ((args.trace, "--trace") if args.trace
                                   else (os.environ.get("JARVIS_TRACE"), "The JARVIS_TRACE file"))
            problem = launcher.check_run_paths(memory_dir, trace, trace_option) or (
                args.report and launcher.output_file_problem(args.report, "--report", memory_dir, "report.html"))
            if not problem and trace:
                try:
                    set_trace_file(trace)
                except OSError as error:
                    problem = f"{trace_option} {trace} cannot be written: {error.strerror or error}."
            if problem:
                console.line("error", f"\n{problem}")
                return 2

            # ~~~ One run at a time in a memory folder: locked before anything in it is read, moved or written ~~~
            run_lock = RunLock(memory_dir).acquire()
            if run_lock.taken_over:
                console.line("info", run_lock.taken_over)

            # ~~~ A resumed run continues with the goal, model, server, configuration, editor and --yes of the run it
            # resumes, unless given again (budgets are the run's own: a resumed run gets a fresh one) ~~~
            if args.resume:
                previous = _previous_run(run_file, memory_dir)
                if args.goal and args.goal.strip() != previous["goal"].strip():
                    raise BadInputError(
                        f"--resume continues the run in {memory_dir}, whose goal was: {previous['goal']!r}. To work on "
                        "another goal, run without --resume (the plans and logs are then archived).")
                args.goal = previous["goal"]
                args.model = args.model or previous.get("model")
                args.api_base = args.api_base or previous.get("api_base")
                args.context_window = args.context_window or previous.get("context_window")
                args.structured_output = args.structured_output or previous.get("structured_output")
                args.config = args.config or previous.get("config")
                args.editor = args.editor or previous.get("editor")
                args.workdir = args.workdir or previous.get("workdir")
                if args.yes is None:  # neither --yes nor --no-yes: an unattended run stays unattended
                    args.yes = previous.get("yes") is True

            # ~~~ Where the code runs: the folder Jarvis is started in, unless told (the demo: its memory folder,
            # where its recording says the chart is) ~~~
            workdir = os.path.abspath(args.workdir) if args.workdir else memory_dir if args.demo else os.getcwd()
            if not os.path.isdir(workdir):
                raise BadInputError(f"--workdir {args.workdir}: no such folder. Give a folder that exists (the code "
                                    "runs there and reads your files from there).")

            # ~~~ Where the LLM replies come from ~~~
            if args.demo or args.replay:
                transcript = Transcript.load(DEMO_TRANSCRIPT if args.demo else args.replay)
                set_backend_factory(replay_factory(transcript))
                api_infos = [{"backend_used": "openai", "api_key": "replay"}]
            else:
                api_infos = launcher.api_infos_from_environment(args.api_base)
                overrides = {}
                if args.model:
                    backend_used = api_infos[0].backend_used
                    overrides["model_name"] = {backend_used: launcher.litellm_model_name(args.model, backend_used,
                                                                                          args.api_base)}
                set_backend_factory(with_api_infos(api_infos, only_missing=True, **overrides))

            # ~~~ The goal ~~~
            goal, source = args.goal, "The goal"
            if transcript is not None and not goal:
                goal, source = transcript.header.get("goal") or "", f"The goal in {transcript.path}"
            if args.resume:
                source = f"The goal in {run_file} (the run --resume continues)"
            for what, text in ((source, goal), ("--model", args.model), ("--api-base", args.api_base)):
                problem = launcher.check_text(what, text) if text is not None else None
                if problem:
                    raise BadInputError(problem)
            if args.demo:
                console.show("flow", "Jarvis demo",
                             "This is a REPLAY: the LLM replies are a recording, made for this goal. Everything else "
                             "runs for real: the flows, the memory files, the code library and the Python "
                             f"interpreter, in {memory_dir}. Plans and code are approved automatically.")

            # ~~~ Jarvis ~~~
            if args.record:
                recorder = TranscriptRecorder(args.record, goal=goal, model=args.model or "configured")
                add_backend_wrapper(recorder.wrap)
            config = launcher.load_config(args.config or CONFIG) if (args.config or os.path.exists(CONFIG)) \
                else launcher.DEFAULT_FLOW_CONFIG
            budget = RunBudget.from_config(config.get("budget"), max_calls=args.max_calls,
                                           max_tokens=args.max_tokens, max_cost=args.max_cost,
                                           max_time=args.max_time)
            launcher.reset_server_settings()
            flow = launcher.instantiate(config, api_infos, memory_dir, source=args.config or CONFIG)
            launcher.set_chat_settings(flow, context_window=args.context_window,
                                       structured_output=args.structured_output, stream=args.stream or None)
            # The run file before the previous plans are archived, replaced atomically: when it cannot be written
            # (a full disk), the previous run is left whole, its run file included, for --resume.
            atomic_write(run_file, json.dumps({
                "goal": goal, "model": args.model, "api_base": args.api_base, "started": started,
                "task_started": (previous.get("task_started") or previous.get("started") or started)
                if args.resume else started,
                "context_window": args.context_window, "structured_output": args.structured_output,
                "config": os.path.abspath(args.config) if args.config else None, "editor": args.editor,
                "workdir": workdir,
                "yes": bool(args.yes)}))
            # The demo was recorded with an empty library, so it starts from one; other runs keep what Jarvis learned.
            memory = launcher.prepare_memory(flow, memory_dir, resume=args.resume, archive_library=args.demo,
                                             workdir=workdir)
            if memory.archive:
                what = "plans, logs and code library" if args.demo else "plans and logs"
                console.line("info", f"The previous {what} are kept in {_shown(memory.archive)}.")
            if args.editor:
                launcher.set_editor(flow, args.editor)
            if args.yes or args.demo:
                set_input_source(AutoApproveInput())
            set_closed_input_hint("Jarvis needs your answer but the terminal input is closed. Run in a terminal, or "
                                  "pass --yes to approve plans and code automatically.")

        budget.started = time.monotonic()
        set_run_budget(budget)
        # the Python kernel starts while the user reads the first plan (not when the first run_code needs it)
        set_warm_up(lambda: launcher.prestart_interpreters(flow))
        result = flow.call({"goal": goal})
        if transcript is not None and transcript.unused():
            raise TranscriptError(f"The run finished with {transcript.unused()} recorded replies unused: it left the "
                                  f"recording {transcript.path}, so its answer is not the recorded run's.")
        output = result
    except BudgetExceeded as error:
        console.line("warning", f"\n{error}")
        return 3
    except KeyboardInterrupt:
        console.line("warning", f"\nStopped. {_where_things_are(memory_dir, flow, transcript)}".rstrip())
        return 130
    except Terminated as stop:
        console.line("warning", f"\nTerminated. {_where_things_are(memory_dir, flow, transcript)}".rstrip())
        return stop.code
    except JarvisError as error:
        console.line("error", f"\n{describe(error)}")
        if isinstance(error, (launcher.MissingCredentials, MemoryInUseError, BadInputError)):
            return 2
        if flow is not None:
            console.line("info", _where_things_are(memory_dir, flow, transcript))
        return 1
    except Exception as error:  # noqa: BLE001 - a last line of defence: say what happened, keep the memory
        from aiflows_jarvis.CoreFlowModule.errors import root_cause

        if isinstance(root_cause(error), JarvisError):
            console.line("error", f"\n{describe(error)}")
            return 2 if isinstance(root_cause(error), (launcher.MissingCredentials, BadInputError)) else 1
        if args.verbose:  # the traceback, cleaned as everything shown is (a server's message can hold escapes)
            import traceback

            Console(stream=sys.stderr).show("error", "Unexpected error:", traceback.format_exc())
            return 1
        console.line("error", f"\nUnexpected error: {describe(error)}\n(--verbose shows the traceback.) "
                              f"{_where_things_are(memory_dir, flow, transcript)}")
        return 1
    finally:
        if recorder is not None:
            remove_backend_wrapper(recorder.wrap)
            recorder.close()
        if flow is not None:
            launcher.close_interpreters(flow)
        set_trace_file(None)
        set_run_budget(None)
        set_warm_up(None)
        console.set_depth(0)
        if output is None:  # what a run that did not end cost (an ended one: in the report below)
            _show_usage(console, unless_unused=True)
            if memory is not None:  # the run got as far as its memory folder (its lock is held until after this)
                _write_run_report(console, args, memory, memory_dir, workdir, None, trace, started)
            if run_lock is not None:
                run_lock.release()

    console.set_depth(0)
    try:
        _report(console, output, memory, memory_dir, workdir, started)
        _write_run_report(console, args, memory, memory_dir, workdir, output, trace, started)
    finally:  # the report reads the memory folder: another run may start there only after it
        run_lock.release()
    return 0 if output.get("status") == "finished" else 1


def _shown(path: str) -> str:
    """A path as the user reads it best: relative inside the current folder, absolute outside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith(os.pardir) else relative


def _where_things_are(memory_dir: str, flow, transcript) -> str:
    """Where the run's files are, and how to go on (a replay is not resumed: it would start its recording over)."""
    if flow is None:
        return ""
    hint = "" if transcript is not None else "; run again with --resume to continue from the plan"
    return f"Plans, logs and the library are in {memory_dir}{hint}."


def _previous_run(run_file: str, memory_dir: str) -> dict:
    """The goal and settings of the run to resume, from the memory folder."""
    from aiflows_jarvis.CoreFlowModule.errors import BadInputError, MemoryFileError
    from aiflows_jarvis.CoreFlowModule.memory import read_text

    if not os.path.lexists(run_file):
        raise BadInputError(f"Nothing to resume in {memory_dir}: no run was started there. Give a goal "
                                 "without --resume (or --memory-dir for another folder).")
    try:  # never through a link: a memory folder from elsewhere could make its goal any file of the user's
        previous = json.loads(read_text(run_file) or "null")
        if not isinstance(previous, dict) or not isinstance(previous.get("goal"), str) or not previous["goal"].strip():
            raise ValueError("no goal in it")
    except (ValueError, OSError, MemoryFileError) as error:
        raise BadInputError(f"{run_file} is unreadable ({error}); it records the run to resume. Start a new "
                                 "run with a goal (without --resume).") from None
    return previous


def _report(console, output, memory, memory_dir: str, workdir: str, started: float) -> None:
    """The final answer (unless the run showed it already), the memory files that exist, the files the run made or
    changed in the working folder, what the run cost. The run is over by then: a failure here (a dangling link in
    the memory folder, ...) is said in one line and leaves the run's exit code as it is."""
    from aiflows_jarvis.CoreFlowModule.errors import describe

    try:
        answer = str(output.get("answer") or output.get("summary") or "(no answer)")
        status = output.get("status", "")
        if console.was_shown(answer):
            console.line("answer", f"\nJarvis {status}: the final answer is above.")
        else:
            console.show("answer", f"\nJarvis {status}. Final answer:", answer)
        console.show("info", "Memory files:", "\n".join(_memory_lines(memory)) or "(none)")
        made = _made_files(memory, memory_dir, workdir, started)
        if made:
            console.show("info", f"Files made or changed in {_shown(workdir) if workdir != os.getcwd() else 'this folder'}:",
                         "\n".join(_shown(p) for p in made))
    except Exception as error:  # noqa: BLE001 - the report must not fail a finished run
        console.line("warning", f"(The end-of-run report is incomplete: {describe(error)})")
    _show_usage(console)


def _memory_lines(memory) -> List[str]:
    """``Jarvis: memory/plan_jarvis.txt, memory/logs_jarvis.txt`` per boss, named as the steps on screen name it
    (``ExtendLibrary``), with only the files that exist (a boss that never ran, or whose files were archived, has
    none), then the code library."""
    from aiflows_jarvis.CoreFlowModule.interaction import breadcrumb_parts

    lines, library = [], set()
    for boss, files in memory.items():
        library.update(p for k, p in files.items() if k == "code_library")
        existing = [p for k, p in files.items() if k != "code_library" and os.path.isfile(p)]
        if "plan" in files and existing:  # the bosses' files; the code writers only point at the library
            lines.append(f"{breadcrumb_parts(boss, boss=True)[-1]}: " + ", ".join(_shown(p) for p in existing))
    lines += [f"code library: {_shown(p)}" for p in sorted(library) if os.path.isfile(p)]
    return lines


def _made_files(memory, memory_dir: str, workdir: Optional[str], started: float) -> List[str]:
    """The files the run made or changed in the working folder (figures, CSVs, pages, ...), without the memory
    files and the run report; the memory folder's other files too when the code runs there."""
    from aiflows_jarvis.CoreFlowModule.run_report import REPORT_NAME
    from aiflows_jarvis.app.launcher import new_files

    if not workdir:
        return []
    own = {p for files in memory.values() for p in files.values()} if memory else set()
    own |= {os.path.join(memory_dir, name) for name in (REPORT_NAME, RUN_FILE)}
    skip = tuple(own) + (() if os.path.abspath(workdir) == memory_dir else (memory_dir,))
    return new_files(workdir, started, suffixes=None, skip=skip)


def _show_usage(console, unless_unused: bool = False) -> None:
    """The run's LLM usage and cost, per chat (``unless_unused``: nothing when no LLM was called); a failure is one
    line, never the run's outcome."""
    from aiflows_jarvis.CoreFlowModule import USAGE
    from aiflows_jarvis.CoreFlowModule.errors import describe

    try:
        if not unless_unused or USAGE.total().calls:
            console.show("info", USAGE.summary(), USAGE.report())
    except Exception as error:  # noqa: BLE001
        console.line("warning", f"(The usage report failed: {describe(error)})")


def _write_run_report(console, args, memory, memory_dir: str, workdir: Optional[str], output, trace: Optional[str],
                      started: float) -> None:
    """The run report (HTML): report.html in the memory folder, or ``--report FILE``; where it is, in one line. Like
    the end-of-run report, a failure is one line and leaves the run's exit code as it is."""
    from aiflows_jarvis.CoreFlowModule.errors import describe

    try:
        from aiflows_jarvis.CoreFlowModule import USAGE
        from aiflows_jarvis.CoreFlowModule.run_report import REPORT_NAME, write_report
        from aiflows_jarvis.app.launcher import FIGURE_SUFFIXES

        folders = [memory_dir] + ([workdir] if workdir and workdir != memory_dir else [])
        mode = ("a replay of the recorded demo" if args.demo else f"a replay of {args.replay}" if args.replay
                else "resumed" if args.resume else "")
        path = write_report(args.report or os.path.join(memory_dir, REPORT_NAME), memory_dir, memory, outcome=output,
                            status="stopped before the end", mode=mode, usage=USAGE, trace=trace, folders=folders,
                            figures=[p for p in _made_files(memory, memory_dir, workdir, started)
                                     if p.lower().endswith(FIGURE_SUFFIXES)])
        console.line("info", f"Run report: {_shown(path)}")
    except Exception as error:  # noqa: BLE001 - the report must not fail the run
        console.line("warning", f"(The run report could not be written: {describe(error)})")
    except KeyboardInterrupt:  # Ctrl+C while it is written: the run ends as it was going to, without it
        console.line("warning", "(The run report was not written: Ctrl+C.)")
