"""Two runs on one memory folder, two processes saving into one library.py, locks left by dead processes."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time

from helpers import SAVER, dead_pid  # noqa: E402  (the two savers of the locking test)

from aiflows_jarvis.CoreFlowModule import RUN_LOCK_NAME  # noqa: E402

from ..harness import case
from ..support import (
    GOAL,
    PLAN,
    LoopbackLLMServer,
    Run,
    Slow,
    handled_exit,
    jarvis,
    library_names,
    memory_whole,
    python_child,
    read,
    short_run,
)


@case(
    "concurrency",
    "second_run_on_a_busy_folder",
    handled="the second run is refused at once with exit 2, naming the first's PID; the first then finishes (exit 0)",
    lost="the first run's plan, log entries or jarvis_run.json (its goal) are moved, mixed or replaced",
)
def second_run_on_a_busy_folder(ctx):
    release = threading.Event()
    ctx.on_exit(release.set)
    plan_when_released = lambda body: PLAN if release.wait(60) else PLAN  # noqa: E731
    with (
        LoopbackLLMServer(replies=[plan_when_released] + short_run()[1:]) as first_server,
        LoopbackLLMServer(replies=short_run()) as second_server,
    ):
        first = Run(ctx, GOAL, server=first_server).start()
        ctx.expect(first.wait_for_requests(first_server, 1), "the first run never called its LLM")
        second = jarvis(ctx, "a second goal", server=second_server)
        handled_exit(ctx, second, [2], says=[f"process {first.pid}"])
        ctx.expect(not second_server.requests, "the second run called its LLM")
        release.set()  # the first run's plan comes now
        done = first.finish()
    handled_exit(ctx, done, [0])
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True, plan=PLAN)
    ctx.keep("a second goal" not in read(ctx.path("memory", "logs_jarvis.txt")), "the logs mix both runs")


@case(
    "concurrency",
    "two_runs_started_together",
    slow=True,
    handled="of two runs started at the same instant on "
    "one folder, exactly one runs (exit 0) and the other is refused (exit 2)",
    lost="jarvis_run.json holds another goal than the run's that worked, or its log holds the other's entries",
)
def two_runs_started_together(ctx):
    servers = [LoopbackLLMServer(replies=[Slow(2, PLAN)] + short_run()[1:]) for _ in range(2)]
    try:
        runs = [Run(ctx, f"goal number {i}", server=server) for i, server in enumerate(servers)]
        for run in runs:
            run.start()
        done = [run.finish() for run in runs]
    finally:
        for server in servers:
            server.close()
    codes = sorted(d.code for d in done)
    ctx.expect(codes == [0, 2], f"exit codes {codes}, expected one 0 and one 2")
    winner = next((i for i, d in enumerate(done) if d.code == 0), None)
    for d in done:
        handled_exit(ctx, d, [0, 2])
    if winner is not None:
        memory_whole(ctx, ctx.path("memory"), goal=f"goal number {winner}", run_file=True, plan=PLAN)
        ctx.keep(
            f"goal number {1 - winner}" not in read(ctx.path("memory", "logs_jarvis.txt")),
            "the log holds the refused run's entries",
        )


@case(
    "concurrency",
    "two_processes_save_into_one_library",
    handled="both processes report every save 'Saved' (exit 0)",
    lost="a function reported saved is missing from library.py (40 of 40 rounds lost one "
    "before the lock), or the user's own function is gone",
)
def two_processes_save_into_one_library(ctx):
    library = ctx.path("library.py")
    library.write_text("def mine(x):\n    '''The user's own.'''\n    return x\n")
    start = str(time.time() + 3.0)  # both have imported aiflows by then
    savers = [python_child(ctx, textwrap.dedent(SAVER), str(library), prefix, start) for prefix in ("first", "second")]
    for saver in savers:
        out, err = saver.communicate(timeout=150)
        ctx.expect(saver.returncode == 0, f"a saver failed: {err.strip().splitlines()[-1:]}")
    names = set(library_names(os.path.dirname(str(library))) or [])
    expected = {"mine"} | {f"{p}_{i}" for p in ("first", "second") for i in range(20)}
    ctx.keep(not expected - names, f"lost: {sorted(expected - names)[:5]}")


@case(
    "concurrency",
    "run_lock_of_a_dead_process",
    slow=True,
    handled="exit 0: a .jarvis.lock naming a dead process is taken over, with a line saying so",
    lost="jarvis_run.json or the plan is lost",
)
def run_lock_of_a_dead_process(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    pid = dead_pid()
    (memory / RUN_LOCK_NAME).write_text(json.dumps({"pid": pid, "host": os.uname().nodename, "started": 1.0}))
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0], says=[f"process {pid}", "taken over"])
    memory_whole(ctx, memory, goal=GOAL, run_file=True, plan=PLAN)


@case(
    "concurrency",
    "run_lock_file_of_garbage",
    slow=True,
    handled="no traceback: a .jarvis.lock holding binary garbage (no process holds it) is taken over (exit 0)",
    lost="jarvis_run.json or the plan is lost",
)
def run_lock_file_of_garbage(ctx):
    memory = ctx.path("memory")
    memory.mkdir()
    (memory / RUN_LOCK_NAME).write_bytes(b"\x00\xff{garbage\x1b]0;t\x07")
    with LoopbackLLMServer(replies=short_run()) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    memory_whole(ctx, memory, goal=GOAL, run_file=True, plan=PLAN)


KILLED_HOLDER = """
import os, sys
from aiflows_jarvis.CoreFlowModule import file_lock
with file_lock(sys.argv[1]):
    os.kill(os.getpid(), 9)
"""


@case(
    "concurrency",
    "library_lock_holder_killed",
    handled="after a process holding library.py's lock is killed "
    "(kill -9), the next save_code is not blocked ('Saved g')",
    lost="the library's function is gone",
)
def library_lock_holder_killed(ctx):
    from .memory import save_with_flow

    library = ctx.path("library.py")
    library.write_text("def f(x):\n    '''Doubles x.'''\n    return 2 * x\n")
    holder = python_child(ctx, KILLED_HOLDER, str(library)[:-3])  # the lock of the library package
    holder.communicate(timeout=60)
    ctx.expect(holder.returncode == -9, f"the holder ended with {holder.returncode}, not by kill -9")
    result = save_with_flow(str(library), "def g(x):\n    '''Triples x.'''\n    return 3 * x\n")
    ctx.expect(result.startswith("Saved g"), f"not saved: {result}")
    ctx.keep({"f", "g"} <= set(library_names(os.path.dirname(str(library))) or []), "a function is missing")
