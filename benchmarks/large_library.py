"""What a large code library costs a run: the demo goal through the loopback server, with a memory folder whose
library already holds SIZE megabytes of functions (each with a docstring).

    python benchmarks/large_library.py [--size-mb 5] [--layout package|file] [--root PATH_TO_A_CHECKOUT]

Prints the run's wall time, its peak memory (the child's maximum RSS) and how it ended. ``--size-mb 0`` gives the
figure of an empty library to compare with. ``--layout package`` (the default) gives the run a library already in
the package layout (the single `library.py` is migrated before the run, and that migration's time is printed);
``--layout file`` leaves `library.py` for the run to migrate on first use (a checkout without the package layout
uses it as it is). ``--root`` runs another checkout's run_jarvis.py. The run writes bytecode caches as Python does
by default (PYTHONDONTWRITEBYTECODE is left out of its environment).
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)
from loopback_llm import LoopbackLLMServer  # noqa: E402

from aiflows_jarvis.ChatFlowModule import Transcript  # noqa: E402

DEMO = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "JarvisFlowModule", "demo", "demo_transcript.jsonl")


def library_of(size: int) -> str:
    """About ``size`` characters of library: small documented functions."""
    parts, total, number = [], 0, 0
    while total < size:
        number += 1
        part = (f"def helper_{number}(values: list, scale: float = 1.0) -> list:\n"
                f'    """Scales the values by `scale` (helper number {number}).\n\n'
                f"    Returns a new list; the input is left as it is.\n"
                f'    """\n'
                f"    return [v * scale + {number} for v in values]\n\n\n")
        parts.append(part)
        total += len(part)
    return "".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=5.0, help="the library's size in megabytes (default 5)")
    parser.add_argument("--root", default=ROOT, help="the checkout whose run_jarvis.py runs (default: this one)")
    parser.add_argument("--layout", choices=("package", "file"), default="package",
                        help="package: migrate library.py into the package before the run (default); file: not")
    args = parser.parse_args()
    transcript = Transcript.load(DEMO)
    with tempfile.TemporaryDirectory() as work, LoopbackLLMServer(replies=transcript.replies()) as server:
        memory = os.path.join(work, "memory")
        os.makedirs(memory)
        library = library_of(int(args.size_mb * 1_000_000)) if args.size_mb > 0 else ""
        with open(os.path.join(memory, "library.py"), "w", encoding="utf-8") as f:
            f.write(library)
        migration = None
        if args.layout == "package":
            from aiflows_jarvis.CoreFlowModule.library_save import migrate_library
            started = time.monotonic()
            migrate_library(os.path.join(memory, "library"))
            migration = time.monotonic() - started
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "AZURE_API_KEY", "PYTHONDONTWRITEBYTECODE")}
        env["NO_COLOR"] = "1"
        started = time.monotonic()
        # (LARGE_LIBRARY_PYTHON_ARGS="-m cProfile -o run.prof" profiles the run)
        python = [sys.executable, *os.environ.get("LARGE_LIBRARY_PYTHON_ARGS", "").split()]
        done = subprocess.run([*python, os.path.join(os.path.abspath(args.root), "run_jarvis.py"),
                               "--api-base", server.url, "--model", "local-model", "--yes", transcript.header["goal"]],
                              cwd=work, env=env, capture_output=True, text=True, timeout=1800,
                              stdin=subprocess.DEVNULL)
        took = time.monotonic() - started
        calls = len(server.requests)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    print(f"checkout: {os.path.abspath(args.root)}")
    print(f"library: {len(library) / 1e6:.1f} MB ({args.layout} layout); LLM calls: {calls}; exit code "
          f"{done.returncode}")
    if migration is not None:
        print(f"migration of library.py into the package, before the run: {migration:.1f} s")
    print(f"wall time: {took:.1f} s; peak RSS of the largest child: {peak:.0f} MiB")
    if done.returncode != 0:
        print("\n".join(done.stdout.strip().splitlines()[-12:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
