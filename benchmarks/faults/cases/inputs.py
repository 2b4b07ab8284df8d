"""Bad input at the start of a run: a clear message and exit code 2, before anything of an earlier run is moved,
and before any LLM call."""

from __future__ import annotations

import json
import os

from ..harness import case
from ..support import (
    GOAL,
    PYTHON,
    RUN_JARVIS,
    LoopbackLLMServer,
    Run,
    handled_exit,
    jarvis,
    previous_run,
    previous_run_untouched,
    short_run,
)

KEPT = "the earlier run's plan, log, library or jarvis_run.json is moved or changed"


def _refused(ctx, *args, says=(), argv=None, env=None, codes=(2,)):
    """A run that must stop at its start with exit 2, saying ``says``, leaving an earlier run as it was and calling
    no LLM."""
    memory = ctx.path("memory")
    files = previous_run(memory)
    with LoopbackLLMServer(replies=short_run()) as server:
        if argv is not None:
            argv = [PYTHON, RUN_JARVIS, "--api-base", server.url, "--yes", *argv]
            done = Run(ctx, argv=argv, env=env).start().finish()
        else:
            done = jarvis(ctx, *args, server=server, env=env)
        calls = len(server.requests)
    handled_exit(ctx, done, codes, says=says, not_says=["run again with --resume"])
    ctx.expect(calls == 0, f"{calls} LLM call(s) were made before the input was refused")
    previous_run_untouched(ctx, memory, files)
    return done


def _config(ctx, text: str) -> str:
    path = ctx.path("bad.yaml")
    path.write_text(text)
    return str(path)


@case(
    "bad_input",
    "config_target_is_not_a_flow",
    handled="exit 2 at start naming the configuration's _target_ (it returns a dict, not a flow); no traceback",
    lost=KEPT,
)
def config_target_is_not_a_flow(ctx):
    _refused(
        ctx, "--config", _config(ctx, "flow:\n  _target_: builtins.dict\n  name: Jarvis\n"), GOAL, says=["_target_"]
    )


@case(
    "bad_input",
    "config_target_does_not_exist",
    slow=True,
    handled="exit 2 at start naming the _target_ that cannot be imported; no traceback",
    lost=KEPT,
)
def config_target_does_not_exist(ctx):
    _refused(
        ctx,
        "--config",
        _config(ctx, "flow:\n  _target_: no_such_module.Flow.instantiate\n"),
        GOAL,
        says=["no_such_module"],
    )


@case("bad_input", "config_file_missing", handled="exit 2 at start: 'No configuration file at ...'", lost=KEPT)
def config_file_missing(ctx):
    _refused(ctx, "--config", str(ctx.path("nowhere.yaml")), GOAL, says=["No configuration file"])


@case(
    "bad_input",
    "config_not_yaml",
    slow=True,
    handled="exit 2 at start: the file is not a valid configuration",
    lost=KEPT,
)
def config_not_yaml(ctx):
    _refused(ctx, "--config", _config(ctx, "flow: [unclosed\n  : : :\n"), GOAL, says=["not a valid configuration"])


@case(
    "bad_input",
    "goal_not_utf8",
    handled="exit 2 at start: the goal is not UTF-8 text (not at the first LLM call); no LLM call made",
    lost=KEPT,
)
def goal_not_utf8(ctx):
    _refused(ctx, argv=[os.fsdecode(b"Plot the sales \xff\xfe of 2023")], says=["UTF-8"])


@case(
    "bad_input",
    "replay_file_is_binary",
    handled="exit 2 at start: the --replay file is not a transcript (not 'Unexpected error: UnicodeDecodeError')",
    lost=KEPT,
)
def replay_file_is_binary(ctx):
    memory = ctx.path("memory")
    files = previous_run(memory)
    binary = ctx.path("transcript.jsonl")
    binary.write_bytes(bytes(range(256)) * 64)
    done = jarvis(ctx, "--replay", str(binary), "--yes")
    handled_exit(ctx, done, [2], says=[str(binary)], not_says=["run again with --resume"])
    previous_run_untouched(ctx, memory, files)


@case(
    "bad_input",
    "replay_file_missing",
    slow=True,
    handled="exit 2 at start naming the --replay file that does not exist",
    lost=KEPT,
)
def replay_file_missing(ctx):
    memory = ctx.path("memory")
    files = previous_run(memory)
    done = jarvis(ctx, "--replay", str(ctx.path("nowhere.jsonl")), "--yes")
    handled_exit(ctx, done, [2], says=["nowhere.jsonl"], not_says=["run again with --resume"])
    previous_run_untouched(ctx, memory, files)


@case(
    "bad_input",
    "trace_path_in_a_missing_folder",
    handled="exit 2 before anything is archived: --trace in a folder that is a file",
    lost=KEPT,
)
def trace_path_bad(ctx):
    ctx.path("a_file").write_text("not a folder")
    _refused(ctx, "--trace", str(ctx.path("a_file", "trace.jsonl")), GOAL, says=["--trace"])


@case(
    "bad_input",
    "jarvis_trace_is_a_folder",
    handled="exit 2 before anything is archived when JARVIS_TRACE names a folder (as for --trace)",
    lost=KEPT,
)
def jarvis_trace_is_a_folder(ctx):
    ctx.path("traces").mkdir()
    _refused(ctx, GOAL, env={"JARVIS_TRACE": str(ctx.path("traces"))}, says=["JARVIS_TRACE"])


@case("bad_input", "blank_goal", handled="exit 2 at start: a goal of spaces is no goal", lost=KEPT)
def blank_goal(ctx):
    _refused(ctx, "   ", says=["goal"])


@case(
    "bad_input",
    "bad_max_time",
    slow=True,
    handled="exit 2 from the option parser: '--max-time soon' is not a duration",
    lost=KEPT,
)
def bad_max_time(ctx):
    _refused(ctx, "--max-time", "soon", GOAL, says=["duration"])


@case(
    "bad_input",
    "resume_with_nothing_to_resume",
    slow=True,
    handled="exit 2 at start: 'Nothing to resume'",
    lost="the folder gets files",
)
def resume_with_nothing(ctx):
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, done, [2], says=["Nothing to resume"])


@case(
    "bad_input",
    "resume_with_another_goal",
    slow=True,
    handled="exit 2 at start: --resume with a goal that is not the run's",
    lost=KEPT,
)
def resume_with_another_goal(ctx):
    _refused(ctx, "--resume", "a different goal", says=["--resume continues the run"])


@case(
    "bad_input",
    "model_of_another_provider",
    slow=True,
    handled="exit 2 at start: --model anthropic/... with an OpenAI key is refused (the key is not sent elsewhere)",
    lost=KEPT,
)
def model_of_another_provider(ctx):
    memory = ctx.path("memory")
    files = previous_run(memory)
    done = jarvis(ctx, "--model", "anthropic/claude-3-opus", "--yes", GOAL, env={"OPENAI_API_KEY": "sk-faults-1"})
    handled_exit(ctx, done, [2], says=["--api-base"], not_says=["run again with --resume"])
    previous_run_untouched(ctx, memory, files)


@case(
    "bad_input",
    "goal_of_100_kb",
    slow=True,
    handled="no traceback: a 100 KB goal (25K tokens, more than the "
    "8K window assumed) is refused at start (exit 2) or stops with a clear message (exit 1), no prompt of 1 MB sent",
    lost="jarvis_run.json corrupted",
)
def goal_of_100_kb(ctx):
    goal = "Summarise this: " + "lorem ipsum " * 8_000  # one argument may hold 128 KB (MAX_ARG_STRLEN)
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, goal, server=server)
        sizes = [len(json.dumps(r["json"] or {})) for r in server.requests]
    handled_exit(ctx, done, [1, 2])
    ctx.expect(all(size < 1_000_000 for size in sizes), f"requests of {max(sizes, default=0)} bytes were sent")


@case(
    "bad_input",
    "goal_of_100_kb_on_the_console",
    slow=True,
    handled="exit 1: a 100 KB goal is shown folded (no "
    "console line of more than 2,000 characters) and the run stops saying the goal itself does not fit the context "
    "window and to put the long text in a file; a 40 KB search_library query is not echoed whole",
    lost="jarvis_run.json corrupted",
)
def goal_of_100_kb_on_the_console(ctx):
    from ..support import coder_run, command

    goal = "Summarise this: " + "lorem ipsum " * 8_000  # one argument may hold 128 KB (MAX_ARG_STRLEN)
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, goal, server=server)
    handled_exit(ctx, done, [1], says=["the goal itself", "put the long text in a file"])
    longest = max(map(len, done.text.splitlines()), default=0)
    ctx.expect(longest <= 2000, f"a console line of {longest:,} characters")
    query = " ".join(f"term{number}" for number in range(4_500))  # 40 KB, no word twice
    replies = coder_run("print(6 * 7)")
    replies[2:2] = [command("search_library", query=query)]  # Coder searches its library before it runs code
    with LoopbackLLMServer(replies=replies) as server:
        searched = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, searched, [0], says=["Coder > search_library", "final answer"])
    longest = max(map(len, searched.text.splitlines()), default=0)
    ctx.expect(longest <= 2000, f"a console line of {longest:,} characters after a 40 KB query")
    ctx.expect(len(searched.text) < 20_000, f"{len(searched.text):,} characters on the console for a 40 KB query")
