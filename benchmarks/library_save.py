"""What one save_code costs with a library of 10 and of 2,000 functions (the package layout: topic modules of at
most 200 definitions, and its names index).

    python benchmarks/library_save.py [--sizes 10 2000] [--saves 5]

For each size, a fresh process builds the library (not timed), then saves ``--saves`` more functions through
SaveCodeAtomicFlow: the first save is a cold one (the process reads the names index), the others warm. Prints the
cold save, the median warm save, and the process's peak memory (maximum RSS), and the ratio to the smallest size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = r'''
import json, os, resource, statistics, sys, time
import aiflows_jarvis  # noqa: F401
from aiflows_jarvis.CodeLibraryFlowModule.save import TOPICS
from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow
from aiflows_jarvis.CoreFlowModule import AutoApproveInput, Console, RunContext
import io

folder, size, saves, phase = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
files = {"code_library": os.path.join(folder, "library.py")}
topics = [t for t, _, words in TOPICS]
with RunContext(input_source=AutoApproveInput(), console=Console(stream=io.StringIO(), color=False)):
    flow = SaveCodeAtomicFlow.instantiate_from_default_config()
    if phase == "build":
        per = 50
        for start in range(0, size, per):
            body = "".join(
                f"def {topics[n % len(topics)]}_helper_{n}(values: list, scale: float = 1.0) -> list:\n"
                f'    """Scales the values (helper {n} of the {topics[n % len(topics)]} topic).\n\n'
                f'    Returns a new list; the input is left as it is.\n    """\n'
                f"    return [v * scale + {n} for v in values]\n\n\n" for n in range(start, min(start + per, size)))
            out = flow.run({"code": body, "memory_files": files,
                            "module": f"{topics[(start // per) % len(topics)]}_{start // (per * len(topics)) + 1}"})
            assert "Saved" in out["result"], out["result"]
        print(json.dumps({}))
        sys.exit(0)
    took = []
    for n in range(saves):
        code = f'def added_{n}(text: str) -> str:\n    "Adds text number {n}."\n    return text + "{n}"\n'
        started = time.perf_counter()
        out = flow.run({"code": code, "memory_files": files})
        took.append(time.perf_counter() - started)
        assert "Saved" in out["result"], out["result"]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"cold": took[0], "warm": statistics.median(took[1:]) if len(took) > 1 else took[0],
                  "peak_mib": peak}))
'''


def measure(size: int, saves: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        for phase in ("build", "save"):
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, folder, str(size), str(saves), phase],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if done.returncode != 0:
                raise SystemExit(f"size {size}, {phase}: {done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 2000], help="library sizes (functions)")
    parser.add_argument("--saves", type=int, default=5, help="saves timed per size (the first is cold)")
    args = parser.parse_args()
    results = {size: measure(size, max(args.saves, 2)) for size in args.sizes}
    base = results[args.sizes[0]]
    print(f"{'functions':>10} {'cold save':>10} {'warm save':>10} {'x warm':>7} {'peak RSS':>9}")
    for size, r in results.items():
        print(
            f"{size:>10} {r['cold'] * 1000:>8.1f}ms {r['warm'] * 1000:>8.1f}ms {r['warm'] / base['warm']:>6.2f}x "
            f"{r['peak_mib']:>6.0f}MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
