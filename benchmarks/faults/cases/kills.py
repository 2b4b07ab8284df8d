"""kill -9 during writes (an atomic write, a log append) and at points of a whole run, followed by the next run."""

from __future__ import annotations

import os
import random
import time

from aiflows_jarvis.CoreFlowModule import (
    CUT_ENTRY_MARKER,
    append_log_entry,
    atomic_write,
    split_log_entries,
    sweep_temporary_files,
)

from ..harness import ROOT, case
from ..support import (
    LoopbackLLMServer,
    Run,
    Slow,
    command,
    demo,
    handled_exit,
    library_source,
    memory_whole,
    no_processes_left,
    plan_kept,
    python_child,
    read,
)

KILLED_WRITE = """
import os, sys
sys.path.insert(0, sys.argv[3])
from aiflows_jarvis.CoreFlowModule import atomic_write
os.fsync = lambda fd: os.kill(os.getpid(), 9)
atomic_write(sys.argv[1], sys.argv[2])
"""


@case(
    "kill9",
    "during_an_atomic_write",
    handled="a process killed between writing the temporary file and the "
    "rename dies with -9; the next run's sweep removes its temporary file once it is old",
    lost="the plan the file held is changed or cut",
)
def during_an_atomic_write(ctx):
    plan = ctx.path("plan_jarvis.txt")
    atomic_write(str(plan), "1. The approved plan.\n")
    killed = python_child(ctx, KILLED_WRITE, str(plan), "half a new pl", ROOT)
    killed.communicate(timeout=60)
    ctx.expect(killed.returncode == -9, f"the writer ended with {killed.returncode}")
    ctx.keep(read(plan) == "1. The approved plan.\n", f"the plan is now {read(plan)!r}")
    leftovers = [p for p in ctx.folder.iterdir() if p.name.endswith(".tmp")]
    for path in leftovers:
        os.utime(str(path), (time.time() - 3600, time.time() - 3600))
    swept = sweep_temporary_files(str(ctx.folder))
    ctx.expect(len(leftovers) == 1 and swept == [str(leftovers[0])], f"left {leftovers}, swept {swept}")


KILLED_APPEND = """
import os, sys
sys.path.insert(0, sys.argv[2])
from aiflows_jarvis.CoreFlowModule import append_log_entry
real_write = os.write
def half_then_kill(fd, data):
    real_write(fd, data[: len(data) // 2])
    os.kill(os.getpid(), 9)
os.write = half_then_kill
append_log_entry(sys.argv[1], "save_code", {"code": "def f(): pass"}, "Saved f in the code library")
"""


@case(
    "kill9",
    "during_a_log_append",
    handled="an append killed half-way leaves a cut entry; the next append closes "
    "it with the marker line and numbers its entry after it",
    lost="an earlier entry is changed, or an entry is glued to the cut one or numbered twice",
)
def during_a_log_append(ctx):
    log = ctx.path("logs_coder.txt")
    for i in range(3):
        append_log_entry(str(log), "run_code", {"code": f"x = {i}"}, f"result {i}")
    before = read(log)
    killed = python_child(ctx, KILLED_APPEND, str(log), ROOT)
    killed.communicate(timeout=60)
    ctx.expect(killed.returncode == -9, f"the appender ended with {killed.returncode}")
    number = append_log_entry(str(log), "update_plan", {}, "The plan was updated")
    text = read(log)
    ctx.keep(text.startswith(before), "the entries before the kill changed")
    ctx.expect(
        number == 5 and CUT_ENTRY_MARKER in text, f"the new entry is [{number}], marker: {CUT_ENTRY_MARKER in text}"
    )
    ctx.keep([n for n, _ in split_log_entries(text)] == [1, 2, 3, 4, 5], "entries are missing or numbered twice")


def _killed_run(point: int):
    def check(ctx):
        replies = demo().replies()
        replies[point] = Slow(20, replies[point])  # the kill comes before the next reply
        memory = ctx.path("memory")
        rng = random.Random(point)
        with LoopbackLLMServer(replies=replies) as server:
            run = Run(ctx, demo().header["goal"], server=server).start()
            reached = run.wait_for_requests(server, point, timeout=120)
            time.sleep(rng.uniform(0.0, 0.25))  # somewhere in the writes that follow the reply
            run.send(9)
            killed = run.finish(timeout=30)
        if not ctx.expect(reached and killed.code == -9, f"the run ended ({killed.code}) before its kill"):
            return
        saved = [n for n in ("growth_rates", "svg_bar_chart") if n in library_source(memory)]
        plan = read(memory / "plan_jarvis.txt") if (memory / "plan_jarvis.txt").exists() else None
        memory_whole(ctx, memory, goal=demo().header["goal"], run_file=True)
        # The next run: --resume, ending at once (final answer, finish), after the lock of the killed run is taken over
        with LoopbackLLMServer(
            replies=[command("final_answer", answer="Resumed."), command("finish", summary="Done.")] * 3
        ) as server:  # whoever is asked
            done = Run(ctx, "--resume", server=server).start().finish()
        if plan:
            handled_exit(ctx, done, [0], says=["taken over"])
            ctx.keep(plan_kept(str(memory), plan), "the approved plan is lost")
        else:  # killed during planning: nothing to resume, said clearly
            handled_exit(ctx, done, [0, 1, 2])
        memory_whole(ctx, memory, goal=demo().header["goal"], run_file=True, saved=saved)
        no_processes_left(ctx, memory, "the killed run's kernel", grace=5)

    case(
        "kill9",
        f"run_killed_after_reply_{point}",
        slow=True,
        timeout=240,
        handled="kill -9 of a demo run just after LLM reply "
        f"{point}; the next run (--resume) takes the lock over and ends (exit 0); no process of the killed run left",
        lost="jarvis_run.json, the approved plan, a saved function or a log entry is lost or corrupted",
    )(check)


# The demo's 11 replies: the plan, Jarvis's Coder, Coder's first extend_library, its code, its tests, Coder's run_code,
# the second extend_library, its code, its tests, the second run_code, the final answer. Killed after the plan, in
# Coder's plan review, in write_code (the tests asked for), after the save and ExtendLibrary's update_plan (Coder's
# next command asked for), after the first run_code, in the second write_code, after the second save, after the
# second run_code (the final answer asked for).
for _point in (1, 2, 4, 5, 6, 8, 9, 10):
    _killed_run(_point)
