"""Locks (CoreFlowModule/memory/locks.py) and versions of what the user approved (issue 11, items 2 and 3).

* Two processes saving functions into one library at once lose none (save_code's read-modify-write is locked).
* A second Jarvis run on a memory folder in use is refused (exit 2, the PID of the first), before anything is moved;
  a lock left by a dead process is taken over.
* A plan replaced beyond its done marks (update_plan, re_plan) is copied to archive/ first, and the controller is
  told which steps an update_plan dropped; a library changed by code that run_code ran is archived and reported.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from fakes import command, finish
from helpers import DEMO, ROOT, SAVER, dead_pid, kernels_in, make_boss, not_blocked, run_code, run_jarvis, run_until
from loopback_llm import HTTPError, LoopbackLLMServer, Slow
from waiting import HANG_GUARD, eventually

from aiflows_jarvis.ChatFlowModule import Transcript
from aiflows_jarvis.CodeLibraryFlowModule import library_entries, package_dir
from aiflows_jarvis.CoreFlowModule import (
    RUN_LOCK_NAME,
    AutoApproveInput,
    MemoryFileError,
    MemoryInUseError,
    RunLock,
    atomic_write,
    file_lock,
    read_text,
)
from aiflows_jarvis.CoreFlowModule.memory.locks import lock_path_of
from aiflows_jarvis.UpdatePlanFlowModule import UpdatePlanAtomicFlow


def python_child(script: str, *args: str) -> subprocess.Popen:
    """A Python process running ``script`` with the project importable; stdout and stdin piped (a script that
    waits for its cue reads a line)."""
    env = {**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.PIPE,
    )


def wait_for_line(process: subprocess.Popen, expected: str) -> None:
    line = process.stdout.readline()
    assert line.strip() == expected, line + process.stderr.read()


# ~~~ save_code under a file lock ~~~
def test_two_processes_saving_into_one_library_lose_no_function(tmp_path):
    library = str(tmp_path / "library.py")
    atomic_write(library, "def mine(x):\n    '''The user's own.'''\n    return x\n")
    savers = [python_child(SAVER, library, prefix) for prefix in ("first", "second")]
    for saver in savers:
        wait_for_line(saver, "ready")
    for saver in savers:
        saver.stdin.write("go\n")
        saver.stdin.flush()
    for saver in savers:
        out, err = saver.communicate(timeout=120)
        assert saver.returncode == 0, out[-2000:] + err[-2000:]
    names = [entry["name"] for entry in library_entries(library)]
    expected = ["mine"] + [f"{p}_{i}" for p in ("first", "second") for i in range(20)]
    assert sorted(names) == sorted(expected), f"lost: {sorted(set(expected) - set(names))}"
    package = package_dir(library)
    assert os.path.exists(lock_path_of(package)) and read_text(lock_path_of(package)) == "", (
        "the lock's sidecar is left, emptied (deleting it would let two processes hold different files)"
    )


HOLDER = """
    import sys
    from aiflows_jarvis.CoreFlowModule.memory.locks import file_lock
    with file_lock(sys.argv[1]):
        print("locked", flush=True)
        sys.stdin.readline()  # held until the test kills it
"""


def test_a_file_lock_not_released_in_time_names_its_holder(tmp_path):
    library = str(tmp_path / "library.py")
    holder = python_child(HOLDER, library)
    try:
        wait_for_line(holder, "locked")
        with pytest.raises(MemoryFileError) as refused:
            with file_lock(library, timeout=0.5):
                pass
        assert f"process {holder.pid}" in str(refused.value) and library in str(refused.value)
    finally:
        holder.kill()
        holder.wait()
    with file_lock(library, timeout=HANG_GUARD):  # a killed holder's lock is released by the kernel
        pass


# ~~~ One run at a time in a memory folder ~~~
def test_a_second_run_on_a_memory_folder_in_use_is_refused_before_anything_is_moved(tmp_path):
    demo = Transcript.load(DEMO)
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "plan_jarvis.txt").write_text("1. An older run's plan.\n")
    with LoopbackLLMServer(replies=[Slow(None, demo.replies()[0])]) as server:
        first, _ = run_until(server, 1, tmp_path, "the first goal")  # it waits for its first LLM reply
        try:
            (archived,) = (memory / "archive").iterdir()
            assert (archived / "plan_jarvis.txt").exists(), "the first run archived the older plan"
            before = sorted(str(p.relative_to(memory)) for p in memory.rglob("*"))
            second = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "a second goal")
            assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
            assert f"process {first.pid}" in second.stdout and f"kill {first.pid}" in second.stdout
            assert "--memory-dir" in second.stdout and "Traceback" not in second.stdout + second.stderr
            assert sorted(str(p.relative_to(memory)) for p in memory.rglob("*")) == before, (
                "the second run moved, wrote or archived nothing"
            )
            assert json.loads(read_text(memory / "jarvis_run.json"))["goal"] == "the first goal"
            assert len(server.requests) == 1, "the second run called no LLM"
            held = json.loads(read_text(memory / RUN_LOCK_NAME))
            assert held["pid"] == first.pid
        finally:
            first.send_signal(signal.SIGTERM)
            out, err = first.communicate(timeout=60)
    assert first.returncode == 143, out[-2000:] + err[-2000:]
    assert read_text(memory / RUN_LOCK_NAME) == "", "the lock is released when the run ends (here by SIGTERM)"
    eventually(lambda: not kernels_in(memory), poll=0.1)


LOCKER = """
    import sys
    from aiflows_jarvis.CoreFlowModule.memory.locks import RunLock
    RunLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    sys.stdin.readline()  # held until the test kills it
"""


def test_a_run_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    locker = python_child(LOCKER, str(tmp_path))
    wait_for_line(locker, "locked")
    with pytest.raises(MemoryInUseError) as refused:
        RunLock(str(tmp_path)).acquire()
    assert refused.value.holder_pid == locker.pid
    locker.kill()  # kill -9: no clean-up ran, the lock file still names it
    locker.wait()
    assert json.loads(read_text(tmp_path / RUN_LOCK_NAME))["pid"] == locker.pid
    with RunLock(str(tmp_path)) as lock:
        assert f"process {locker.pid}" in lock.taken_over and "no longer running" in lock.taken_over
        assert json.loads(read_text(tmp_path / RUN_LOCK_NAME))["pid"] == os.getpid()
    assert read_text(tmp_path / RUN_LOCK_NAME) == ""
    with RunLock(str(tmp_path)) as lock:
        assert lock.taken_over is None, "a lock released cleanly is not reported as taken over"


def test_run_jarvis_takes_over_a_stale_lock_file_and_says_so(tmp_path):
    memory = tmp_path / "memory"
    memory.mkdir()
    pid = dead_pid()
    (memory / RUN_LOCK_NAME).write_text(json.dumps({"pid": pid, "host": os.uname().nodename, "started": 1.0}))
    with LoopbackLLMServer(replies=[HTTPError(401, "key revoked")]) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "a goal")
    assert done.returncode == 1 and "key revoked" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"left by process {pid}" in done.stdout and "taken over" in done.stdout
    assert read_text(memory / RUN_LOCK_NAME) == "", "released at the end"


# ~~~ Versions of the plan the user approved ~~~
APPROVED = "1. Load the sales.\n2. Compute the growth.\n3. Plot it.\n"


def update_plan(tmp_path, updated_plan: str) -> str:
    files = {"plan": str(tmp_path / "plan.txt")}
    return UpdatePlanAtomicFlow.instantiate_from_default_config().run(
        {"updated_plan": updated_plan, "memory_files": files}
    )["result"]


def archived(tmp_path):
    folder = tmp_path / "archive"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_an_update_plan_that_drops_the_plan_keeps_a_copy_and_tells_the_controller(tmp_path):
    atomic_write(str(tmp_path / "plan.txt"), APPROVED)
    result = update_plan(tmp_path, "ok")
    (copy,) = archived(tmp_path)
    assert copy.read_text() == APPROVED, "the plan the user approved is kept"
    assert copy.name.startswith("plan-") and copy.suffix == ".txt"
    assert "all 3 steps of the previous plan are no longer in it" in result, result
    assert "1. Load the sales.; 2. Compute the growth.; 3. Plot it." in result and str(copy) in result
    assert "call update_plan again with the whole plan" in result


def test_an_update_plan_that_drops_one_step_names_it(tmp_path):
    atomic_write(str(tmp_path / "plan.txt"), APPROVED)
    result = update_plan(tmp_path, "1. Load the sales. [done]\n2. Plot it.")
    (copy,) = archived(tmp_path)
    assert "1 step of the previous plan is no longer in it: 2. Compute the growth." in result
    assert "Plot it" not in result.split("no longer in it:")[1].split(". The previous")[0], (
        "a step only renumbered is not dropped"
    )
    assert copy.read_text() == APPROVED


def test_done_marks_only_make_no_copy(tmp_path):
    atomic_write(str(tmp_path / "plan.txt"), APPROVED)
    result = update_plan(tmp_path, "1. Load the sales. [done]\n2. Compute the growth.  (done)\n3.   Plot it.")
    assert result.startswith("The plan was updated: steps 1, 2 now marked done") and "kept in" not in result
    assert archived(tmp_path) == [], "marking steps done (or spacing) is not a new version"


def test_re_plan_keeps_the_plan_it_replaces(tmp_path, scripted_llm, user):
    boss, files = make_boss(tmp_path)
    user.add("", "")  # approve the first plan, approve the new plan
    scripted_llm.add(
        "1. Ask for a sentence.\n2. Count its words.",
        command("re_plan", goal="The user wants the characters counted, not the words."),
        "1. Ask for a sentence.\n2. Count its characters.",
        finish("re-planned"),
    )
    assert boss.call({"goal": "Count the words of a sentence."})["status"] == "finished"
    (copy,) = archived(tmp_path)
    assert copy.read_text() == "1. Ask for a sentence.\n2. Count its words.\n"
    told = scripted_llm.calls[3]["messages"][-1]["content"]
    assert f"the previous plan is kept in {copy}" in told, "the controller is told where the old plan is"


# ~~~ A library changed by code that run_code ran ~~~
LIBRARY = "def growth(a, b):\n    '''Growth from a to b.'''\n    return b / a - 1\n"


@pytest.fixture
def approving(run_context):
    """The user approves the code run_code shows."""
    run_context.input_source = AutoApproveInput()


def test_a_library_overwritten_by_run_code_is_archived_and_reported(tmp_path, approving):
    atomic_write(str(tmp_path / "library.py"), LIBRARY)
    out = run_code(tmp_path, "open('library.py', 'w').write('x = 1\\n')")
    (copy,) = archived(tmp_path)
    assert copy.read_text() == LIBRARY and copy.name.startswith("library-") and copy.suffix == ".py"
    assert "library.py, the code library, was changed while this code ran" in out["result"]
    assert str(copy) in out["result"] and "save_code" in out["result"]


def test_a_library_deleted_by_shell_code_is_archived_and_reported(tmp_path, approving):
    atomic_write(str(tmp_path / "library.py"), LIBRARY)
    out = run_code(tmp_path, "rm library.py", "bash")
    (copy,) = archived(tmp_path)
    assert copy.read_text() == LIBRARY and "was deleted while this code ran" in out["result"]


def test_a_module_of_the_library_package_overwritten_by_run_code_is_archived_and_reported(tmp_path, approving):
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow

    SaveCodeAtomicFlow.instantiate_from_default_config().run(
        {"code": LIBRARY, "memory_files": {"code_library": str(tmp_path / "library.py")}, "module": "data"}
    )
    before = (tmp_path / "library" / "data.py").read_text()
    out = run_code(tmp_path, "open('library/data.py', 'w').write('x = 1\\n')")
    (copy,) = archived(tmp_path)
    assert copy.read_text() == before and copy.name.startswith("library.data-")
    assert "library/data.py, the code library, was changed while this code ran" in out["result"]


def test_a_run_that_leaves_the_library_alone_says_nothing_about_it(tmp_path, approving):
    atomic_write(str(tmp_path / "library.py"), LIBRARY)
    out = run_code(tmp_path, "from library import growth\nprint(round(growth(100, 117.2), 3))")
    assert "0.172" in out["result"] and "code library" not in out["result"]
    assert archived(tmp_path) == []


def test_a_fifo_among_the_library_modules_does_not_block_run_code(tmp_path, approving):
    from aiflows_jarvis.CodeLibraryFlowModule import ensure_library

    atomic_write(str(tmp_path / "library.py"), LIBRARY)
    ensure_library(str(tmp_path / "library.py"))  # (library.py moved into the package)
    fifo = tmp_path / "library" / "pipe.py"
    os.mkfifo(fifo)
    out = not_blocked(lambda: run_code(tmp_path, "from library import growth\nprint(growth(1, 2))"), fifo)
    assert "1.0" in out["result"] and "code library" not in out["result"]
    assert fifo.is_fifo(), "left as it is"
