"""What the peers' benchmark scripts share (standard library only: it runs in the peers' own virtual environments).

A ``RoundClock`` stands in for the model of a loop: it serves scripted replies and notes when each call came in and
what some calls were asked, so that every loop is measured the same way (the time between two consecutive model
calls is one round; the prompts of two calls show how a chat grows). ``report`` prints what a child process
measured as one JSON line, the last line of its output, which ``benchmarks/run.py`` reads.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any, Callable, Dict, Iterable, List


def prompt_calls(rounds: int) -> tuple:
    """The calls whose prompts are kept: the prompt ratio is "tokens at call 200 / tokens at call 20" (call
    ``rounds`` in a shorter loop)."""
    return (20, rounds)


def text_of(content: Any) -> str:
    """A message's content as text (a string, or the text parts of a list of parts as smolagents sends them)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else str(content)


def plain_messages(messages: Iterable[Any]) -> List[Dict[str, str]]:
    """``[{"role", "content"}]`` with text contents, from dicts or message objects."""
    plain = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", "")
        content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
        plain.append({"role": str(getattr(role, "value", role)), "content": text_of(content)})
    return plain


class RoundClock:
    """A scripted model for a loop of ``rounds`` rounds: ``command(i)`` for calls 1..rounds, then ``last``."""

    def __init__(self, rounds: int, command: Callable[[int], str], last: str):
        self.rounds = rounds
        self.command = command
        self.last = last
        self.prompt_calls = set(prompt_calls(rounds))
        self.stamps: List[float] = []
        self.prompts: Dict[int, List[Dict[str, str]]] = {}

    def reply(self, messages: Iterable[Any]) -> str:
        self.stamps.append(time.perf_counter())
        call = len(self.stamps)
        if call in self.prompt_calls:
            self.prompts[call] = plain_messages(messages)
        if call > self.rounds + 1:
            raise RuntimeError(f"the scripted model was called {call} times; it has {self.rounds + 1} replies")
        return self.command(call) if call <= self.rounds else self.last

    def result(self, **extra: Any) -> Dict[str, Any]:
        """Round durations (ms, between consecutive calls), the kept prompts, the process's peak RSS (MB)."""
        durations = [(b - a) * 1000 for a, b in zip(self.stamps, self.stamps[1:])]
        return {
            "calls": len(self.stamps),
            "round_ms": durations,
            "prompts": {str(k): v for k, v in sorted(self.prompts.items())},
            "peak_rss_mb": peak_rss_mb(),
            **extra,
        }


def word_count_task(call: int) -> str:
    """The text the scripted controller asks to count in round ``call`` (the same in every loop)."""
    return f"round {call} of a long task"


def peak_rss_mb() -> float:
    """The peak resident set size of this process, in MB.

    Linux's ``VmHWM`` (the peak of this program's own address space), not ``ru_maxrss``: Linux carries
    ``ru_maxrss`` over from the parent across fork and exec, so a small child of a big parent would report the
    parent's size."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux, the fallback elsewhere


def report(result: Dict[str, Any], stream=None) -> None:
    """Print ``result`` as the last line of the output (what benchmarks/run.py reads)."""
    stream = stream or sys.stdout
    stream.write("\n" + json.dumps(result) + "\n")
    stream.flush()


def peer_main(
    doc: str, rounds: Callable[[int], Dict[str, Any]], first_request: Callable[[str], Dict[str, Any]]
) -> None:
    """The command line of a peer's script: ``rounds [--rounds N]`` or ``first-request URL``; reports the result."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("rounds", "first-request"))
    parser.add_argument("url", nargs="?", help="the OpenAI-compatible server (ends in /v1), for first-request")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    if args.mode == "first-request" and not args.url:
        parser.error("first-request needs the server's URL, e.g. http://127.0.0.1:8000/v1")
    report(rounds(args.rounds) if args.mode == "rounds" else first_request(args.url))
