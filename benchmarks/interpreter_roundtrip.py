"""What the interpreter costs: the kernel's start (the first Python run), a warm Python round trip, a shell round trip.

Prints the time of the first run (kernel start + `x = 1`), the median and p90 of `x = 1` over the warm runs, the
same for the flow (`InterpreterAtomicFlow.run`), the median and p90 of a shell `true`, and the time of `close()`.

    python benchmarks/interpreter_roundtrip.py [--runs 50]
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

from flow_modules.aiflows.InterpreterFlowModule import InterpreterAtomicFlow  # noqa: E402
from flow_modules.aiflows.InterpreterFlowModule.kernel import CodeInterpreter  # noqa: E402


def timed(call, runs: int):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def summary(times) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return f"median {statistics.median(ordered) * 1000:7.2f} ms   p90 {p90 * 1000:7.2f} ms   (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="interp-bench-") as workspace:
        interpreter = CodeInterpreter(workspace)
        try:
            start = time.perf_counter()
            first = interpreter.run("x = 1")
            startup = time.perf_counter() - start
            assert not first.failed, first.output

            def python_run():
                result = interpreter.run("x = 1")
                assert not result.failed, result.output

            def shell_run():
                result = interpreter.run("true", "shell")
                assert not result.failed, result.output

            python_times = timed(python_run, args.runs)
            shell_times = timed(shell_run, args.runs)
        finally:
            start = time.perf_counter()
            interpreter.close()
            closing = time.perf_counter() - start

        flow = InterpreterAtomicFlow.instantiate_from_default_config(workspace=workspace)
        try:
            flow.run({"code": "x = 1", "language": "python"})
            flow_times = timed(lambda: flow.run({"code": "x = 1", "language": "python"}), args.runs)
        finally:
            flow.close()

    print(f"python: kernel start + first run  {startup * 1000:8.1f} ms")
    print(f"python: warm `x = 1`              {summary(python_times)}")
    print(f"flow:   warm `x = 1` (flow.run)   {summary(flow_times)}")
    print(f"shell:  `true`                    {summary(shell_times)}")
    print(f"close():                          {closing * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
