"""A full disk: at the start of a run, when save_code writes the library, in the middle of a log append or a plan
write, and when generated code fills it.

The disk is a small tmpfs mounted in the case's folder when this process may mount (root); else a full disk is
simulated: once a flag file exists, ``os.write`` and ``os.fsync`` fail with ENOSPC in run_jarvis.py (through a
``sitecustomize`` that also holds the network guard) and in this process. The report says which (a note per case).
"""

from __future__ import annotations

import errno
import os
import subprocess

from aiflows_jarvis.CoreFlowModule import (
    CUT_ENTRY_MARKER,
    MemoryFileError,  # noqa: E402
    append_log_entry,
    atomic_write,
    split_log_entries,
)

from ..harness import case
from ..support import (
    GOAL,
    PLAN,
    LoopbackLLMServer,
    Run,
    coder_run,
    command,
    demo,
    file_kept,
    handled_exit,
    memory_whole,
    previous_run,
    previous_run_kept,
    read,
    short_run,
)

SIMULATION = """
import errno as _errno, os as _os
_flag = _os.environ.get("FAULTS_DISK_FULL_FLAG")
if _flag:
    _real_write, _real_fsync = _os.write, _os.fsync
    def _full():
        return _os.path.exists(_flag)
    def write(fd, data):
        if fd > 2 and _full():
            raise OSError(_errno.ENOSPC, "No space left on device (simulated)")
        return _real_write(fd, data)
    def fsync(fd):
        if _full():
            raise OSError(_errno.ENOSPC, "No space left on device (simulated)")
        return _real_fsync(fd)
    _os.write, _os.fsync = write, fsync
"""


class SmallDisk:
    """A small disk in the case's folder: ``fill()`` makes it full, ``free()`` empties what filled it."""

    def __init__(self, ctx, megabytes: int):
        self.ctx = ctx
        self.path = ctx.path("disk")
        self.path.mkdir()
        self.flag = ctx.path("disk-full.flag")
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(self.path)], capture_output=True
        )
        self.real = mounted.returncode == 0
        if self.real:
            ctx.on_exit(lambda: subprocess.run(["umount", "-l", str(self.path)], capture_output=True))
            ctx.note(f"a real full disk: a {megabytes} MB tmpfs")
        else:
            ctx.note("a SIMULATED full disk (os.write/os.fsync raise ENOSPC): tmpfs cannot be mounted here")
            exec(SIMULATION.replace('_os.environ.get("FAULTS_DISK_FULL_FLAG")', repr(str(self.flag))), {})
        self.filler = self.path / "filler.bin"

    def env(self):
        """What run_jarvis.py needs for the simulation (nothing on a real disk)."""
        return {} if self.real else {"FAULTS_DISK_FULL_FLAG": str(self.flag)}

    def run(self, *args, **options) -> Run:
        run = Run(self.ctx, *args, env={**self.env(), **options.pop("env", {})}, **options)
        if not self.real:
            site = os.path.join(run.env["PYTHONPATH"].split(os.pathsep)[0], "sitecustomize.py")
            with open(site, "a") as f:
                f.write(SIMULATION)
        return run

    def fill(self, leave: int = 0) -> None:
        """Fill the disk; ``leave`` bytes (rounded to pages by tmpfs) are freed again afterwards."""
        if not self.real:
            self.flag.write_text("full")
            return
        reserve = self.path / "reserve.bin"
        if leave:
            reserve.write_bytes(b"r" * leave)
        fd = os.open(str(self.filler), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 1 << 12, 1):  # unbuffered: what did not fit is not written later
                try:
                    while os.write(fd, b"f" * size):
                        pass
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)
        if leave:
            reserve.unlink()

    def free(self) -> None:
        for path in (self.filler, self.flag):
            if path.exists():
                path.unlink()


def _says_the_disk_is_full(ctx, failed) -> None:
    if ctx.expect(failed is not None, "a write on a full disk did not fail"):
        ctx.expect("No space left" in str(failed), f"the error does not say the disk is full: {failed}")


@case(
    "disk_full",
    "full_at_the_start",
    slow=True,
    handled="exit 1 or 2 saying 'No space left', no traceback; once "
    "space is freed, the --resume it suggests continues the earlier run (exit 0)",
    lost="the earlier run's plan, log, library or jarvis_run.json is lost, cut or replaced",
)
def full_at_the_start(ctx):
    disk = SmallDisk(ctx, 4)
    memory = disk.path / "memory"
    files = previous_run(memory, goal=GOAL, plan=PLAN + "\n")
    disk.fill()
    with LoopbackLLMServer(replies=short_run()) as server:
        done = disk.run("--memory-dir", str(memory), "a new goal", server=server).start().finish()
    handled_exit(ctx, done, [1, 2], says=["No space left"])
    previous_run_kept(ctx, memory, files)
    ctx.keep(memory_whole(ctx, memory, goal=GOAL), "jarvis_run.json no longer names the earlier run's goal")
    disk.free()
    with LoopbackLLMServer(replies=short_run()[1:]) as server:
        resumed = disk.run("--memory-dir", str(memory), "--resume", server=server).start().finish()
    handled_exit(ctx, resumed, [0])


@case(
    "disk_full",
    "full_when_save_code_writes",
    slow=True,
    timeout=240,
    handled="the disk fills just before "
    "save_code: the run says 'No space left' (exit 0 or 1), no traceback; once space is freed, --resume ends "
    "(exit 0)",
    lost="library.py is cut or corrupted, a log claims a save the library lacks, jarvis_run.json is "
    "cut, or a log entry is glued",
)
def full_when_save_code_writes(ctx):
    disk = SmallDisk(ctx, 24)
    memory = disk.path / "memory"
    replies = demo().replies()

    def fill_then(reply):
        def serve(_body):
            disk.fill()
            return reply

        return serve

    replies[9] = fill_then(replies[9])  # the reply that calls save_code
    with LoopbackLLMServer(replies=replies[:12]) as server:
        done = disk.run("--memory-dir", str(memory), demo().header["goal"], server=server).start().finish()
    handled_exit(ctx, done, [0, 1], says=["No space left"])
    memory_whole(ctx, memory, goal=demo().header["goal"], run_file=True)
    disk.free()
    with LoopbackLLMServer(
        replies=[command("final_answer", answer="Resumed."), command("finish", summary="Done.")] * 3
    ) as server:
        resumed = disk.run("--memory-dir", str(memory), "--resume", server=server).start().finish()
    handled_exit(ctx, resumed, [0])
    memory_whole(ctx, memory, goal=demo().header["goal"], run_file=True)


@case(
    "disk_full",
    "full_in_a_log_append",
    slow=True,
    handled="an append that the disk cuts raises MemoryFileError "
    "saying 'No space left'; after space is freed, the next append closes the cut entry and numbers its own after",
    lost="an earlier entry changed; an entry glued to the cut one or numbered twice",
)
def full_in_a_log_append(ctx):
    disk = SmallDisk(ctx, 1)
    log = disk.path / "logs_coder.txt"
    for i in range(3):
        append_log_entry(str(log), "run_code", {"code": f"x = {i}"}, f"result {i}")
    disk.fill(leave=4096)
    failed = None
    for i in range(3, 30):  # entries of 1.6 KB until the disk is full (the last one written in part)
        before = read(log)
        try:
            append_log_entry(str(log), "run_code", {"code": f"x = {i}"}, "r" * 1500)
        except MemoryFileError as error:
            failed = error
            break
    _says_the_disk_is_full(ctx, failed)
    disk.free()
    append_log_entry(str(log), "update_plan", {}, "The plan was updated")
    text = read(log)
    ctx.keep(text.startswith(before), "the entries before the full disk changed")
    numbers = [n for n, _ in split_log_entries(text)]
    ctx.keep(
        numbers == sorted(set(numbers)) and numbers[-1] > len(split_log_entries(before)),
        f"entries out of order or numbered twice: {numbers}",
    )
    tail = text[len(before) :]
    ctx.expect(tail.startswith("--- [") or CUT_ENTRY_MARKER in tail, "the cut entry was not closed with its marker")


@case(
    "disk_full",
    "full_in_a_plan_write",
    slow=True,
    handled="atomic_write on a full disk raises MemoryFileError saying 'No space left' and leaves no temporary file",
    lost="the plan is changed or cut",
)
def full_in_a_plan_write(ctx):
    disk = SmallDisk(ctx, 1)
    plan = disk.path / "plan_coder.txt"
    atomic_write(str(plan), "1. The approved plan.\n")
    disk.fill()
    try:
        atomic_write(str(plan), "1. A new plan.\n" * 1000)
        failed = None
    except MemoryFileError as error:
        failed = error
    _says_the_disk_is_full(ctx, failed)
    file_kept(ctx, plan, b"1. The approved plan.\n", "the plan")
    ctx.expect(not [p for p in disk.path.iterdir() if p.name.endswith(".tmp")], "a temporary file was left")


@case(
    "disk_full",
    "code_fills_the_disk",
    slow=True,
    handled="generated code fills the disk: no traceback, the run "
    "ends (exit 0, or 1 saying 'No space left' when its log cannot be written)",
    lost="jarvis_run.json or the approved plan is cut or lost, or a log entry is glued",
)
def code_fills_the_disk(ctx):
    disk = SmallDisk(ctx, 24)
    if not disk.real:
        ctx.skip("needs a real small disk (tmpfs): the simulation does not reach the kernel's own writes")
    memory = disk.path / "memory"
    code = (
        "import os\nwith open('big.bin', 'wb') as f:\n    for _ in range(200):\n"
        "        f.write(os.urandom(1 << 20))\n        f.flush()\n"
    )
    with LoopbackLLMServer(replies=coder_run(code)) as server:
        done = disk.run("--memory-dir", str(memory), GOAL, server=server).start().finish()
    handled_exit(ctx, done, [0, 1])
    if done.code == 1:
        ctx.expect("No space left" in done.text, "the failure does not say the disk is full")
    memory_whole(ctx, memory, goal=GOAL, run_file=True, plan=PLAN)
