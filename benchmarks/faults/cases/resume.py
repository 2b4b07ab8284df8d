"""--resume: after a stop inside Coder and inside ExtendLibrary, after kill -9, with --yes remembered, with bad run
files."""

from __future__ import annotations

import json
import re
import signal

from aiflows_jarvis.CoreFlowModule import split_log_entries  # noqa: E402

from ..harness import case
from ..support import (
    GOAL,
    PLAN,
    LoopbackLLMServer,
    Run,
    Slow,
    command,
    demo,
    file_kept,
    handled_exit,
    jarvis,
    memory_whole,
    plan_kept,
    read,
    short_run,
    stopped_run,
)


def _stopped_demo(ctx, served: int, number=signal.SIGTERM):
    """The demo run (with --yes), stopped by ``number`` while it waits for LLM reply ``served + 1``; returns how it
    ended and the demo's replies."""
    replies = demo().replies()
    with LoopbackLLMServer(replies=replies[:served] + [Slow(60, replies[served])]) as server:
        run = Run(ctx, demo().header["goal"], server=server).start()
        ctx.expect(run.wait_for_requests(server, served + 1), "the run did not get that far")
        run.send(number)
        done = run.finish(timeout=60)
    return done, replies


def _commands_after(log_text: str, marker: int) -> list:
    """The commands of the log entries numbered above ``marker``."""
    return [entry.split(" ---")[0].split()[-1] for n, entry in split_log_entries(log_text) if n > marker]


@case(
    "resume",
    "yes_is_remembered",
    handled="a run started with --yes and stopped (SIGTERM), then resumed without "
    "--yes and with stdin closed, runs unattended to its end (exit 0) instead of asking",
    lost="the approved plan or jarvis_run.json is lost",
)
def yes_is_remembered(ctx):
    with LoopbackLLMServer(replies=[PLAN, Slow(60, short_run()[1])]) as server:
        run = Run(ctx, GOAL, server=server).start()
        ctx.expect(run.wait_for_requests(server, 2), "the run did not reach its controller")
        run.send(signal.SIGTERM)
        first = run.finish(timeout=60)
    handled_exit(ctx, first, [143])
    with LoopbackLLMServer(replies=short_run()[1:]) as server:
        resumed = jarvis(ctx, "--resume", server=server, yes=False)
    handled_exit(ctx, resumed, [0], not_says=["input is closed"])
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True, plan=PLAN)


@case(
    "resume",
    "after_kill_9",
    handled="a run killed by kill -9 at its controller, then --resume: the dead run's "
    "lock is taken over (said) and the run ends (exit 0)",
    lost="the approved plan, jarvis_run.json or a log entry is lost",
)
def after_kill_9(ctx):
    with LoopbackLLMServer(replies=[PLAN, Slow(60, short_run()[1])]) as server:
        run = Run(ctx, GOAL, server=server).start()
        ctx.expect(run.wait_for_requests(server, 2), "the run did not reach its controller")
        run.send(signal.SIGKILL)
        run.finish(timeout=60)
    with LoopbackLLMServer(replies=short_run()[1:]) as server:
        resumed = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, resumed, [0], says=["taken over"])
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True, plan=PLAN, logs_end_whole=True)


@case(
    "resume",
    "inside_coder",
    timeout=240,
    handled="the demo stopped (SIGTERM) inside Coder after its "
    "first run_code, resumed to the end (exit 0): Coder's log gets a `resume` entry saying the Python session is "
    "new, and no `new_task` entry calling its own entries earlier tasks",
    lost="a saved function, the approved plans, jarvis_run.json or a log entry is lost",
)
def inside_coder(ctx):
    run_code = next(i for i, reply in enumerate(demo().replies()) if '"run_code"' in reply)
    stopped, replies = _stopped_demo(ctx, run_code + 1)  # Coder's controller waits after its first run_code
    handled_exit(ctx, stopped, [143])
    memory = ctx.path("memory")
    last = max((n for n, _ in split_log_entries(read(memory / "logs_coder.txt"))), default=0)
    coder_plan = read(memory / "plan_coder.txt")
    resumed_replies = [
        replies[1],  # Jarvis: Coder, with the same goal
        command("finish", summary="growth_rates is in the library and the growth was computed."),
        command("final_answer", answer="April grew the most."),
    ]  # accepted: the run ends
    with LoopbackLLMServer(replies=resumed_replies) as server:
        resumed = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, resumed, [0])
    entries = [entry for n, entry in split_log_entries(read(memory / "logs_coder.txt")) if n > last]
    after = [entry.split(" ---")[0].split()[-1] for entry in entries]
    ctx.expect("new_task" not in after, f"Coder's log calls the interrupted task an earlier one: {after}")
    resumes = [entry for entry, command_name in zip(entries, after) if command_name == "resume"]
    ctx.expect(resumes, f"Coder's log has no resume entry: {after}")
    ctx.expect(
        any(re.search(r"Python session is new|variables are gone", e) for e in resumes),
        "Coder's log does not say the Python session is new",
    )
    ctx.keep(plan_kept(str(memory), coder_plan, "plan_coder"), "Coder's approved plan is lost")
    memory_whole(ctx, memory, goal=demo().header["goal"], run_file=True, saved=["growth_rates"])


@case(
    "resume",
    "inside_extend_library",
    timeout=240,
    handled="the demo stopped (SIGTERM) inside "
    "ExtendLibrary as its code writer waits for the tests (the code written, not saved), resumed to the end "
    "(exit 0): ExtendLibrary resumes its task (its log gets `resume`, not `new_task`), writes the function again, "
    "saves it and marks its step done",
    lost="growth_rates (saved) is missing, or the approved plans, jarvis_run.json or a log entry is lost",
)
def inside_extend_library(ctx):
    extend = next(i for i, reply in enumerate(demo().replies()) if '"extend_library"' in reply)
    stopped, replies = _stopped_demo(ctx, extend + 2)  # the code was served: the code writer waits for its tests
    handled_exit(ctx, stopped, [143])
    memory = ctx.path("memory")
    log = memory / "logs_extlib.txt"  # none yet: nothing of the task was done before the stop
    last = max((n for n, _ in split_log_entries(read(log))), default=0) if log.exists() else 0
    resumed_replies = [
        replies[1],
        replies[extend],  # Jarvis: Coder; Coder: extend_library, with the same goals
        replies[extend + 1],
        replies[extend + 2],  # the code again (unsaved code is gone), its tests
        command("finish", summary="growth_rates is in the library."),
        command("final_answer", answer="growth_rates is in the library."),
    ]
    with LoopbackLLMServer(replies=resumed_replies) as server:
        resumed = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, resumed, [0])
    after = _commands_after(read(memory / "logs_extlib.txt"), last)
    ctx.expect("new_task" not in after and "resume" in after, f"ExtendLibrary's log after the resume: {after}")
    first_step = read(memory / "plan_extlib.txt").strip().splitlines()[:1]
    ctx.expect(first_step and "[done]" in first_step[0], f"the saved function's step is not done: {first_step}")
    memory_whole(ctx, memory, goal=demo().header["goal"], run_file=True, saved=["growth_rates"])


@case(
    "resume",
    "run_file_cut",
    slow=True,
    handled="exit 2 at start: a jarvis_run.json cut by a kill is unreadable, said clearly",
    lost="the cut jarvis_run.json or the plan is changed",
)
def run_file_cut(ctx):
    cut = b'{"goal": "Plot the sales", "mod'
    memory = stopped_run(ctx, run_file=cut)
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, done, [2], says=["jarvis_run.json"])
    file_kept(ctx, memory / "jarvis_run.json", cut, "jarvis_run.json")
    file_kept(ctx, memory / "plan_jarvis.txt", (PLAN + "\n").encode(), "the plan")


@case(
    "resume",
    "goal_not_utf8",
    handled="exit 2 at start: the run to resume has a goal that is not UTF-8 text "
    "(a lone surrogate), said before any LLM call; jarvis_run.json is left as it is",
    lost="jarvis_run.json loses its goal, or the plan is lost",
)
def goal_not_utf8(ctx):
    run_file = json.dumps({"goal": "Plot the sales \udcff\udcfe of 2023"}).encode()
    memory = stopped_run(ctx, run_file=run_file)
    with LoopbackLLMServer(replies=short_run()[1:]) as server:
        done = jarvis(ctx, "--resume", server=server)
        calls = len(server.requests)
    handled_exit(ctx, done, [2], says=["UTF-8"])
    ctx.expect(calls == 0, f"{calls} LLM call(s) were made")
    ctx.expect((memory / "jarvis_run.json").read_bytes() == run_file, "jarvis_run.json was written again")
    memory_whole(ctx, memory, goal="Plot the sales \udcff\udcfe of 2023", plan=PLAN)


@case(
    "resume",
    "plan_missing",
    slow=True,
    handled="no traceback: --resume when plan_jarvis.txt is gone plans again (exit 0) or says what is missing (exit 2)",
    lost="jarvis_run.json or a log is lost",
)
def plan_missing(ctx):
    memory = stopped_run(ctx, plan=None)
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, done, [0, 2])
    memory_whole(ctx, memory, goal=GOAL, run_file=True)


@case(
    "resume",
    "run_file_is_a_link",
    slow=True,
    handled="--resume with jarvis_run.json a link to a file outside: "
    "refused with exit 1 or 2 saying 'symbolic link', or resumed without writing through it",
    lost="the link's target is changed",
)
def run_file_is_a_link(ctx):
    memory = stopped_run(ctx)
    target = ctx.path("elsewhere.json")
    target.write_text(json.dumps({"goal": GOAL}))
    (memory / "jarvis_run.json").unlink()
    (memory / "jarvis_run.json").symlink_to(target)
    with LoopbackLLMServer(replies=short_run()[1:]) as server:
        done = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, done, [0, 1, 2])
    if done.code:
        ctx.expect("symbolic link" in done.text, "the refusal does not say it is a symbolic link")
    file_kept(ctx, target, json.dumps({"goal": GOAL}).encode(), "the link's target")


def _finished_run(ctx):
    """The shortest whole run, finished (exit 0); returns its memory folder."""
    with LoopbackLLMServer(replies=short_run()) as server:
        handled_exit(ctx, jarvis(ctx, GOAL, server=server), [0])
    return ctx.path("memory")


@case(
    "resume",
    "after_a_finished_run",
    handled="a run that finished, then --resume: refused (exit 2), saying the "
    "run had finished and to give the goal without --resume; nothing in the memory folder is touched",
    lost="the finished run's report, plan or run file is changed",
)
def after_a_finished_run(ctx):
    memory = _finished_run(ctx)
    kept = {name: (memory / name).read_bytes() for name in ("report.html", "plan_jarvis.txt", "jarvis_run.json")}
    with LoopbackLLMServer(replies=[]) as server:
        resumed = jarvis(ctx, "--resume", server=server)
    handled_exit(ctx, resumed, [2], says=["had finished", "without --resume"])
    for name, content in kept.items():
        file_kept(ctx, memory / name, content, f"the finished run's {name}")


@case(
    "resume",
    "report_kept_after_a_later_stop",
    handled="a run that finished, then a new run stopped by SIGTERM "
    "at its plan: the finished run's report is archived with its plans and logs (said), the new one is beside it",
    lost="the finished run's report is replaced",
)
def report_kept_after_a_later_stop(ctx):
    memory = _finished_run(ctx)
    good = (memory / "report.html").read_bytes()
    with LoopbackLLMServer(replies=[Slow(60, PLAN)]) as server:
        run = Run(ctx, GOAL, server=server).start()
        ctx.expect(run.wait_for_requests(server, 1), "the second run did not reach its plan")
        run.send(signal.SIGTERM)
        stopped = run.finish(timeout=60)
    handled_exit(ctx, stopped, [143], says=["report are kept in"])
    archived = sorted((memory / "archive").glob("*/report.html"))
    if ctx.keep(len(archived) == 1, f"the finished run's report is not in the archive: {archived}"):
        file_kept(ctx, archived[0], good, "the finished run's report")
    ctx.expect((memory / "report.html").exists(), "the stopped run has no report")
