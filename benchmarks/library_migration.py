"""What moving a single-file `library.py` into the library package costs (what a run does on first use of a memory
folder from an earlier version): the time, megabytes per second and peak memory of one migration.

    python benchmarks/library_migration.py [--size-mb 5] [--shapes short,long,constants] [--root CHECKOUT]

For each shape a fresh process migrates a `library.py` of SIZE megabytes, the search index it keeps included:
``short``, small documented functions (benchmarks/large_library.py's); ``long``, functions of 24 lines (the fault
suite's scale/library_of_5_mb); ``constants``, each function with a constant of its own beside it (a statement that
is not a definition goes into the modules using it, and is indexed as a constant). ``--root`` migrates with another
checkout's code (an earlier commit from `git archive`, for the figure before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from large_library import library_of  # noqa: E402

_CHILD = r"""
import io, json, os, resource, sys, time
root, folder = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(root, "flow_modules"))  # (before the installed checkout)
import aiflows_jarvis  # noqa: F401
from aiflows_jarvis.CoreFlowModule import Console, RunContext
from aiflows_jarvis.CodeLibraryFlowModule.save import migrate_library
with RunContext(console=Console(stream=io.StringIO(), color=False)):
    started = time.perf_counter()
    migrate_library(os.path.join(folder, "library"))
    took = time.perf_counter() - started
print(json.dumps({"seconds": took, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "code": aiflows_jarvis.__file__}))
"""

_BODY = "    " + "total = total + value * 2  # a line of a long function\n    " * 20


def _long(number: int) -> str:
    return (
        f"def helper_{number}(value):\n    '''Helper number {number}: doubles value many times.'''\n"
        f"    total = 0\n{_BODY}return total\n\n\n"
    )


def _constant(number: int) -> str:
    return (
        f"RATE_{number} = {number} * 0.01\n\n\ndef tool_{number}(values, scale=1.0):\n"
        f"    '''Scales the values (tool {number}).\n\n    Returns a new list.\n    '''\n"
        f"    return [v * scale * RATE_{number} for v in values]\n\n\n"
    )


def library(shape: str, size: int) -> str:
    """About ``size`` characters of library of ``shape``."""
    if shape == "short":
        return library_of(size)
    make = {"long": _long, "constants": _constant}[shape]
    parts, total, number = [], 0, 0
    while total < size:
        parts.append(make(number))
        total += len(parts[-1])
        number += 1
    return "".join(parts)


def measure(shape: str, size_mb: float, root: str) -> dict:
    source = library(shape, int(size_mb * 1_000_000))
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "library.py"), "w", encoding="utf-8") as f:
            f.write(source)
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, root, folder], capture_output=True, text=True, timeout=3600
        )
        if done.returncode != 0:
            raise SystemExit(f"{shape}: {done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if not result["code"].startswith(os.path.abspath(root)):
            raise SystemExit(f"the child imported {result['code']}, not the code of {root}")
    result.update(mb=len(source.encode("utf-8")) / 1e6, definitions=source.count("\ndef ") + source.startswith("def "))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=5.0, help="the size of library.py (5)")
    parser.add_argument("--shapes", default="short,long,constants", help="which libraries (short,long,constants)")
    parser.add_argument("--root", default=ROOT, help="the checkout whose code migrates (this one)")
    args = parser.parse_args()
    print(f"{'shape':>10} {'MB':>5} {'functions':>10} {'seconds':>8} {'MB/s':>6} {'peak RSS':>9}")
    for shape in args.shapes.split(","):
        r = measure(shape, args.size_mb, args.root)
        print(
            f"{shape:>10} {r['mb']:>5.1f} {r['definitions']:>10,} {r['seconds']:>8.1f} "
            f"{r['mb'] / r['seconds']:>6.2f} {r['peak_mib']:>6.0f}MiB",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
