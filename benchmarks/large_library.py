"""What a large code library costs a run: the demo goal through the loopback server, with a memory folder whose
library already holds SIZE megabytes of functions (each with a docstring).

    python benchmarks/large_library.py [--size-mb 5] [--layout package|file] [--runs N] [--compare] [--no-kept-index]
                                       [--root CHECKOUT]

Prints the run's wall time, its peak memory (the run's maximum RSS) and how it ended. ``--size-mb 0`` gives the
figure of an empty library to compare with; ``--compare`` runs both, alternately, ``--runs`` times each, and prints
the ratio of the median times.

``--layout package`` (the default) gives the run a library already in the package layout: the single `library.py`
is migrated before the run (that migration's time is printed), which keeps the library's search index as a user's
earlier runs would have; ``--no-kept-index`` removes it, for the figure of a first run. ``--layout file`` leaves
`library.py` for the run to migrate on first use (a checkout without the package layout uses it as it is).
``--root`` runs another checkout's run_jarvis.py. The run writes bytecode caches as Python does by default
(PYTHONDONTWRITEBYTECODE is left out of its environment).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from loopback_llm import LoopbackLLMServer  # noqa: E402

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)
from aiflows_jarvis.ChatFlowModule import Transcript  # noqa: E402

DEMO = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "JarvisFlowModule", "demo", "demo_transcript.jsonl")


def library_of(size: int) -> str:
    """About ``size`` characters of library: small documented functions."""
    parts, total, number = [], 0, 0
    while total < size:
        number += 1
        part = (
            f"def helper_{number}(values: list, scale: float = 1.0) -> list:\n"
            f'    """Scales the values by `scale` (helper number {number}).\n\n'
            f"    Returns a new list; the input is left as it is.\n"
            f'    """\n'
            f"    return [v * scale + {number} for v in values]\n\n\n"
        )
        parts.append(part)
        total += len(part)
    return "".join(parts)


def run_once(size_mb: float, layout: str, root: str, kept_index: bool = True) -> dict:
    """One run of the demo goal with a library of ``size_mb`` megabytes: its wall time, the run's own peak RSS, how
    it ended, and the time of the migration made before it (package layout; it keeps the library's search index
    unless ``kept_index`` is False)."""
    transcript = Transcript.load(DEMO)
    with tempfile.TemporaryDirectory() as work, LoopbackLLMServer(replies=transcript.replies()) as server:
        memory = os.path.join(work, "memory")
        os.makedirs(memory)
        library = library_of(int(size_mb * 1_000_000)) if size_mb > 0 else ""
        with open(os.path.join(memory, "library.py"), "w", encoding="utf-8") as f:
            f.write(library)
        migration = None
        if layout == "package":  # in a process of its own: this one stays small (its size would be the run's peak)
            started = time.monotonic()
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; from aiflows_jarvis.CodeLibraryFlowModule.save import "
                    "migrate_library; migrate_library(sys.argv[1])",
                    os.path.join(memory, "library"),
                ],
                check=True,
            )
            migration = time.monotonic() - started
            kept = os.path.join(memory, "library", "_index", "search.bin")
            if not kept_index and os.path.exists(kept):
                os.remove(kept)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "AZURE_API_KEY", "PYTHONDONTWRITEBYTECODE")
        }
        env["NO_COLOR"] = "1"
        # (LARGE_LIBRARY_PYTHON_ARGS="-m cProfile -o run.prof" profiles the run)
        python = [sys.executable, *os.environ.get("LARGE_LIBRARY_PYTHON_ARGS", "").split()]
        with tempfile.TemporaryFile("w+") as out:
            started = time.monotonic()
            child = subprocess.Popen(
                [
                    *python,
                    os.path.join(os.path.abspath(root), "run_jarvis.py"),
                    "--api-base",
                    server.url,
                    "--model",
                    "local-model",
                    "--yes",
                    transcript.header["goal"],
                ],
                cwd=work,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            deadline = threading.Timer(1800, child.kill)  # a run that hangs is killed (and its exit code shown)
            deadline.start()
            try:
                _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest of all runs
            finally:
                deadline.cancel()
            took = time.monotonic() - started
            child.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            output = out.read()
        return {
            "took": took,
            "peak": usage.ru_maxrss / 1024,
            "code": child.returncode,
            "calls": len(server.requests),
            "migration": migration,
            "size": len(library),
            "output": output,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=5.0, help="the library's size in megabytes (default 5)")
    parser.add_argument("--root", default=ROOT, help="the checkout whose run_jarvis.py runs (default: this one)")
    parser.add_argument(
        "--layout",
        choices=("package", "file"),
        default="package",
        help="package: migrate library.py into the package before the run (default); file: not",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs of each size; the medians are printed (default 1)")
    parser.add_argument(
        "--no-kept-index",
        action="store_true",
        help="remove the search index the migration keeps: the run builds it (a first run)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also run with an empty library, alternately, and print the ratio of the medians",
    )
    args = parser.parse_args()
    sizes = [0.0, args.size_mb] if args.compare else [args.size_mb]
    results: dict = {size: [] for size in sizes}
    for _ in range(max(args.runs, 1)):
        for size in sizes:
            results[size].append(run_once(size, args.layout, args.root, not args.no_kept_index))
    print(f"checkout: {os.path.abspath(args.root)}")
    medians = {}
    for size, runs in results.items():
        last = runs[-1]
        medians[size] = statistics.median(r["took"] for r in runs)
        print(
            f"library: {last['size'] / 1e6:.1f} MB ({args.layout} layout); LLM calls: {last['calls']}; exit codes "
            f"{sorted({r['code'] for r in runs})}"
        )
        if last["migration"] is not None:
            print(
                f"  migration of library.py into the package, before the run: "
                f"{statistics.median(r['migration'] for r in runs):.2f} s"
            )
        times = ", ".join(f"{r['took']:.2f}" for r in runs)
        print(
            f"  wall time: {medians[size]:.2f} s (median of {len(runs)}: {times}); "
            f"peak RSS: {max(r['peak'] for r in runs):.0f} MiB"
        )
        for r in runs:
            if r["code"] != 0:
                print("\n".join(r["output"].strip().splitlines()[-12:]))
                break
    if args.compare and medians[0.0] > 0:
        print(f"ratio of the medians, {args.size_mb:g} MB over empty: {medians[args.size_mb] / medians[0.0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
