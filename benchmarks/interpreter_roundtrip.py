"""What the interpreter costs: the kernel's start (the first Python run), a warm Python round trip, a shell round trip.

Prints the time of the first run (kernel start + `x = 1`); the median and p90 of a warm `x = 1` in an empty workspace
and in one of 5,000 files (50 folders of 100; the two interpreters take turns, so that the load of a shared machine
falls on both alike: the files a run changed are found without a scan per run, so the two should be the same); the
same for the flow (`InterpreterAtomicFlow.run`); the median and p90 of a shell `true`; the time of `close()`; and
how long a first run waits for a kernel started in the background (`prestart()`) a second before.

    python benchmarks/interpreter_roundtrip.py [--runs 50] [--files 5000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from aiflows_jarvis.InterpreterFlowModule import InterpreterAtomicFlow  # noqa: E402
from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter  # noqa: E402


def timed_run(interpreter: CodeInterpreter, code: str, language: str = "python") -> float:
    start = time.perf_counter()
    result = interpreter.run(code, language)
    elapsed = time.perf_counter() - start
    assert not result.failed, result.output
    return elapsed


def summary(times) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return f"median {statistics.median(ordered) * 1000:7.2f} ms   p90 {p90 * 1000:7.2f} ms   (n={len(ordered)})"


def fill(workspace: str, files: int) -> None:
    for folder in range((files + 99) // 100):
        os.makedirs(os.path.join(workspace, f"d{folder}"))
        for i in range(min(100, files - folder * 100)):
            open(os.path.join(workspace, f"d{folder}", f"f{i}.txt"), "w").close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--files", type=int, default=5000, help="files in the second workspace")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="interp-bench-") as empty,
        tempfile.TemporaryDirectory(prefix="interp-bench-") as full,
    ):
        fill(full, args.files)
        interpreter, crowded = CodeInterpreter(empty), CodeInterpreter(full)
        try:
            startup = timed_run(interpreter, "x = 1")
            timed_run(crowded, "x = 1")
            python_times, full_times, shell_times = [], [], []
            for _ in range(args.runs):
                python_times.append(timed_run(interpreter, "x = 1"))
                full_times.append(timed_run(crowded, "x = 1"))
                shell_times.append(timed_run(interpreter, "true", "shell"))
        finally:
            crowded.close()
            start = time.perf_counter()
            interpreter.close()
            closing = time.perf_counter() - start

        flow = InterpreterAtomicFlow.instantiate_from_default_config(workspace=empty)
        try:
            flow.run({"code": "x = 1", "language": "python"})
            flow_times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                flow.run({"code": "x = 1", "language": "python"})
                flow_times.append(time.perf_counter() - start)
        finally:
            flow.close()

        interpreter = CodeInterpreter(empty)
        try:
            interpreter.prestart()
            time.sleep(1.0)  # the user reads the plan
            prestarted = timed_run(interpreter, "x = 1")
        finally:
            interpreter.close()

    print(f"python: kernel start + first run  {startup * 1000:8.1f} ms")
    print(f"python: warm `x = 1`, 0 files     {summary(python_times)}")
    print(f"python: warm `x = 1`, {args.files:,} files {summary(full_times)}")
    print(f"flow:   warm `x = 1` (flow.run)   {summary(flow_times)}")
    print(f"shell:  `true`                    {summary(shell_times)}")
    print(f"close():                          {closing * 1000:8.1f} ms")
    print(f"first run 1 s after prestart():   {prestarted * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
