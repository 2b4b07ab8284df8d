"""The fault suite of issue 11 (benchmarks/faults) in CI: its fast part loses no data and handles every case but the
ones PENDING lists (fixes assigned and not in yet); and the suite's runner survives a case that crashes or hangs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.faults.harness import Case, run_cases  # noqa: E402


def test_the_fast_part_loses_nothing_and_handles_every_case_not_pending():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.faults", "--fast", "--json", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads(done.stdout)
    cases = results["cases"]
    print(f"fault suite, fast part: {len(cases)} cases in {results['seconds']} s")  # a figure, not an assertion
    assert len(cases) >= 30 and {c["klass"] for c in cases} >= {"terminal", "memory_folder", "bad_input", "kernel"}
    lost = [f"{c['id']}: {c['losses']}" for c in cases if c["data_lost"]]
    assert not lost, "data lost:\n" + "\n".join(lost)
    failed = [
        f"{c['id']}: {c['failures'][:2]}" for c in cases if not c["handled"] and not c["skipped"] and not c["pending"]
    ]
    assert not failed, "not handled:\n" + "\n".join(failed)
    assert done.returncode == 0
    fixed = [c["id"] for c in cases if c["handled"] and c["pending"]]
    if fixed:
        warnings.warn("handled now, remove from PENDING in benchmarks/faults/__init__.py: " + ", ".join(fixed))


def _crashes(ctx):
    raise RuntimeError("a bug in the case")


def _dies(ctx):
    os._exit(3)


def _hangs(ctx):
    import subprocess as sp

    sp.Popen(["sleep", "300"], cwd=str(ctx.folder), start_new_session=True)  # left behind: the runner kills it
    time.sleep(300)


def _loses(ctx):
    ctx.expect(True, "fine")
    ctx.keep(False, "the plan is gone")


def test_a_case_that_crashes_dies_or_hangs_is_not_handled_and_the_suite_goes_on(tmp_path):
    cases = [
        Case("terminal", "crashes", _crashes, "", ""),
        Case("terminal", "dies", _dies, "", ""),
        Case("terminal", "hangs", _hangs, "", "", timeout=3),
        Case("terminal", "loses", _loses, "", ""),
    ]
    results = {r["name"]: r for r in run_cases(cases, jobs=2)}
    assert set(results) == {"crashes", "dies", "hangs", "loses"}
    assert not any(results[name]["handled"] for name in ("crashes", "dies", "hangs"))
    assert "RuntimeError: a bug in the case" in results["crashes"]["failures"][0]
    assert "died without a result" in results["dies"]["failures"][0]
    assert "longer than its limit of 3 s" in results["hangs"]["failures"][0]
    assert any("left behind were killed" in note for note in results["hangs"]["notes"]), results["hangs"]["notes"]
    assert results["loses"]["handled"] and results["loses"]["data_lost"]
    assert results["loses"]["losses"] == ["the plan is gone"]
    leftover = subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True, text=True).stdout.split()
    assert not [pid for pid in leftover if os.path.exists(f"/proc/{pid}") and _in_a_faults_folder(pid)]


def _in_a_faults_folder(pid: str) -> bool:
    try:
        return "jarvis-faults-" in os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
