"""How fast the repetition guard reads replies, in MB per second, at 100 KB and at 10 MB.

    python benchmarks/repetition_guard.py [--sizes 0.1,10] [--piece 12]

Each text is read twice: as a stream (pieces of ``--piece`` characters, about three tokens, through
``RepetitionGuard.feed``) and whole (``find_repetition``, as a reply that did not stream). The shapes are what long
replies hold: prose in sentences, a script of short lines, one line without a break (a long data literal), and
words without spaces; none of them repeats itself, so the guard reads each to its end. Linear reading gives about
the same MB per second at both sizes. A figure, not a pass or fail: tests/test_repetition.py checks what the guard
finds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from aiflows_jarvis.ChatFlowModule.repetition import RepetitionGuard, find_repetition  # noqa: E402


def _prose(chars: int) -> str:
    out, total, i = [], 0, 0
    while total < chars:
        sentence = f"Row {i} of the table holds {i * 7919 % 100003} units sold in region {i % 97}. "
        out.append(sentence)
        total += len(sentence)
        i += 1
    return "".join(out)[:chars]


def _script(chars: int) -> str:
    out, total, i = [], 0, 0
    while total < chars:
        line = f"    totals[{i % 101}] += values[{i}] * {i * 31 % 1009}\n"
        out.append(line)
        total += len(line)
        i += 1
    return "".join(out)[:chars]


def _one_line(chars: int) -> str:
    return ("data = [" + ", ".join(str(i * 7919 % 100003) for i in range(chars // 6)))[:chars]


SHAPES = {"prose": _prose, "script": _script, "one line": _one_line, "no spaces": lambda n: "x" * n}


def _seconds(read, text: str) -> float:
    started = time.process_time()
    found = read(text)
    assert found is None, f"the benchmark's text was taken for a loop: {found}"
    return time.process_time() - started


def streamed(piece: int):
    def read(text: str):
        guard = RepetitionGuard()
        for start in range(0, len(text), piece):
            guard.feed(text[start : start + piece])
        return guard.feed("", final=True)

    return read


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.1,10", help="text sizes in MB, comma-separated (default 0.1,10)")
    parser.add_argument("--piece", type=int, default=12, help="characters per streamed piece (default 12)")
    args = parser.parse_args(argv)
    sizes = [float(size) for size in args.sizes.split(",")]
    print(f"{'shape':<10} {'MB':>6} {'streamed MB/s':>14} {'whole MB/s':>11}")
    for name, make in SHAPES.items():
        for size in sizes:
            text = make(int(size * 1_000_000))
            stream_s = _seconds(streamed(args.piece), text)
            whole_s = _seconds(find_repetition, text)
            print(f"{name:<10} {size:>6g} {size / max(stream_s, 1e-9):>14.1f} {size / max(whole_s, 1e-9):>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
