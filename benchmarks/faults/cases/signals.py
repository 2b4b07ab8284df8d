"""SIGINT, SIGTERM and SIGHUP at each stage of a run: start-up, planning, the plan review, the controller's wait,
code running in the kernel, a shell command running."""

from __future__ import annotations

import os
import signal

from aiflows_jarvis.CoreFlowModule import RUN_LOCK_NAME  # noqa: E402

from ..harness import case
from ..support import (
    GOAL,
    PLAN,
    LoopbackLLMServer,
    Run,
    Slow,
    coder_run,
    handled_exit,
    memory_whole,
    no_processes_left,
    previous_run,
    previous_run_kept,
    read,
    short_run,
)

# What each signal must end in: the exit code and what is said. SIGHUP (the terminal closed) is handled like SIGTERM:
# 129 (128 + 1) or 143 as for SIGTERM.
EXPECTED = {signal.SIGINT: ([130], "Stopped."), signal.SIGTERM: ([143], "Terminated."), signal.SIGHUP: ([129, 143], "")}
RUNNING = "import pathlib, time\npathlib.Path('started').touch()\ntime.sleep(90)\npathlib.Path('finished').touch()"


def _stage(name: str):
    """The replies of the stage and how to wait for it: ``(replies, yes, wait(run, server, memory) -> bool)``."""
    if name == "startup":
        return short_run(), True, lambda run, server, memory: run.wait_until(lambda: False, timeout=0.4) or True
    if name == "planning":
        return [Slow(60, PLAN)] + short_run()[1:], True, lambda run, server, memory: run.wait_for_requests(server, 1)
    if name == "review":
        return short_run(), False, lambda run, server, memory: run.wait_for_output("Enter to approve")
    if name == "controller":  # Jarvis's controller thinks after Coder's run_code: the kernel is alive
        replies = coder_run("x = 6 * 7\nprint(x)")
        replies[-1] = Slow(60, replies[-1])
        return replies, True, lambda run, server, memory: run.wait_for_requests(server, len(replies))
    if name in ("run_code", "run_shell"):  # Python in the kernel; a bash child (orphaned by SIGHUP before)
        code = RUNNING if name == "run_code" else "touch started; sleep 90; touch finished"
        return (
            coder_run(code, "python" if name == "run_code" else "bash"),
            True,
            lambda run, server, memory: run.wait_until(
                lambda: os.path.exists(os.path.join(os.path.dirname(memory), "started"))
            ),
        )
    raise ValueError(name)


def _signal_case(number: int, stage: str):
    codes, says = EXPECTED[number]
    name = signal.Signals(number).name

    def check(ctx):
        memory = str(ctx.path("memory"))
        files = previous_run(memory) if stage == "startup" else None
        replies, yes, reached = _stage(stage)
        with LoopbackLLMServer(replies=replies) as server:
            run = Run(ctx, GOAL, server=server, yes=yes, keep_stdin_open=not yes).start()
            if not ctx.expect(reached(run, server, memory), f"the run never reached the {stage} stage"):
                return
            run.send(number)
            if number == signal.SIGINT and not yes and not run.wait_until(lambda: False, timeout=5):
                run.type("\n")  # asked what to do instead: Enter stops
            done = run.finish(timeout=60)
        handled_exit(ctx, done, codes, says=[says] if says else [])
        ctx.expect(not os.path.exists(os.path.join(os.path.dirname(memory), "finished")), "the code ran on to its end")
        no_processes_left(ctx, memory)
        lock = os.path.join(memory, RUN_LOCK_NAME)
        if os.path.exists(lock):
            ctx.expect(read(lock) == "", "the memory folder's lock was not released")
        if files is not None:
            previous_run_kept(ctx, memory, files) if os.path.exists(
                os.path.join(memory, "jarvis_run.json")
            ) else memory_whole(ctx, memory)
        else:
            memory_whole(ctx, memory, goal=GOAL, run_file=True, plan=None if stage in ("planning", "review") else PLAN)

    lost = (
        "the earlier run's files are lost"
        if stage == "startup"
        else "jarvis_run.json, the approved plan or a log entry is lost or corrupted"
    )
    fast = (stage == "run_code" and number != signal.SIGINT) or (stage == "run_shell" and number == signal.SIGHUP)
    case(
        "signals",
        f"{name.lower()}_at_{stage}",
        slow=not fast,
        handled=f"{name} at the {stage} stage: exit {' or '.join(map(str, codes))}"
        f"{' saying ' + repr(says) if says else ''}, no traceback, no process left in the memory folder, "
        "the run lock released",
        lost=lost,
    )(check)


for _number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    for _stage_name in ("startup", "planning", "review", "controller", "run_code", "run_shell"):
        _signal_case(_number, _stage_name)
