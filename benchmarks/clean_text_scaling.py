"""How the time to clean terminal text grows with the number of unterminated escape sequences in it.

    python benchmarks/clean_text_scaling.py [--repeat 5]

For each shape of sequence, cleans 12,500 and 100,000 of them (the best of ``--repeat`` runs of each size,
interleaved) and prints the ratio of the two times: about 8 when the cleaning is linear, about 64 when a pattern
backtracks into earlier attempts (quadratic). A figure, not a pass or fail: tests/test_terminal_safety.py checks what
the cleaning leaves.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from aiflows_jarvis.CoreFlowModule import clean_text  # noqa: E402

ESC = "\x1b"
SHAPES = [f"{ESC}[1;2", f"{ESC}]0;title", f"{ESC}Ppayload", f"{ESC}[?25 "]


def best_time(text: str, repeat: int) -> float:
    """The shortest of ``repeat`` CPU times (this process's) to clean ``text``."""
    times = []
    for _ in range(repeat):
        started = time.process_time()
        clean_text(text)
        times.append(time.process_time() - started)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each size; the best one counts (default 5)")
    args = parser.parse_args(argv)
    for shape in SHAPES:
        small = best_time(shape * 12_500, args.repeat)
        large = best_time(shape * 100_000, args.repeat)
        print(
            f"{shape!r:>16}: {small * 1000:7.1f} ms for 12,500, {large * 1000:7.1f} ms for 100,000: "
            f"{large / max(small, 1e-6):.1f}x the time for 8x the sequences (linear: about 8)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
