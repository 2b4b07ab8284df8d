"""How the cost of a Jarvis round (Controller -> Executor -> MemoryWriting -> MemoryReading) evolves over 200 rounds.

The controller is scripted (instant replies) so only the framework's own overhead is measured. Prints the median
round time at rounds 1-20 and 181-200, the size of what a round carries (histories and state, pickled) at round
20 and 200, the peak memory of the process, and whether the cl100k tokenizer was loaded.

    python benchmarks/loop_rounds.py [--rounds 200] [--stock] [--no-usage]

The scripted replies come with ``usage``, as OpenAI's API and most servers send it; --no-usage answers without it,
as a server that reports none (the tokens are then counted with the cl100k tokenizer, which takes about 40 MB).
--stock runs the same loop with aiflows' own message keeping (the lean overrides switched off), for comparison.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)

# isort: split
from aiflows.base_flows import Flow  # noqa: E402
from aiflows.utils import logging  # noqa: E402

from aiflows_jarvis.CoreFlowModule import (  # noqa: E402
    Console,
    LeanFlowMixin,  # noqa: E402
    RunContext,
    ScriptedInput,
)


def reporting_factory(backend_config, flow_name):
    """A scripted backend whose replies come with the API's ``usage`` (a rough count: the figures do not matter)."""
    from fakes import ScriptedBackend

    from aiflows_jarvis.ChatFlowModule.responses import Replies, ResponseInfo

    class ReportingBackend(ScriptedBackend):
        def __call__(self, messages, **kwargs):
            replies = super().__call__(messages, **kwargs)
            prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4
            return Replies(replies, ResponseInfo(prompt, len(replies[0]["content"]) // 4, "stop", "gpt-4"))

    return ReportingBackend(**{k: v for k, v in backend_config.items() if k != "_target_"})


def build(memory_dir: str, rounds: int):
    """The loop's flow (its chats get their backend from the current run) and its memory files."""
    from fakes import SCRIPT, command, finish
    from helpers import word_count_loop

    SCRIPT.replies.clear()
    SCRIPT.calls.clear()
    for i in range(rounds):
        SCRIPT.add(command("count_words", text=f"round {i} of a long task"))
    SCRIPT.add(finish("all rounds done"))
    flow = word_count_loop(rounds + 1)
    memory_files = {"plan": os.path.join(memory_dir, "plan.txt"), "logs": os.path.join(memory_dir, "logs.txt")}
    with open(memory_files["plan"], "w") as f:
        f.write("1. count words many times\n2. finish\n")
    return flow, memory_files


def run(rounds: int, stock: bool, usage: bool = True) -> dict:
    if stock:  # aiflows' own message keeping, for comparison
        for name in ("_package_output_message", "_post_call_hook", "set_up_flow_state"):
            setattr(LeanFlowMixin, name, getattr(Flow, name))
        # aiflows' copies every message it keeps (the lean flows' ``private`` hint does not apply)
        LeanFlowMixin._log_message = lambda self, message, private=False: Flow._log_message(self, message)
    logging.set_verbosity_warning()
    from fakes import SCRIPT, carried_size, scripted_factory

    run_context = RunContext(
        console=Console(stream=open(os.devnull, "w")),
        input_source=ScriptedInput(),
        backend_factory=reporting_factory if usage else scripted_factory,
    )
    with run_context, tempfile.TemporaryDirectory() as memory_dir:
        flow, memory_files = build(memory_dir, rounds)
        stamps, sizes = [], {}
        original = SCRIPT.__class__.__call__

        def timed(script, flow_path, messages):
            stamps.append(time.perf_counter())
            n = len(stamps)
            if n in (21, 41, 101, rounds + 1):  # the state carried after 20, 40, 100 and `rounds` rounds
                sizes[n - 1] = carried_size(flow)
            return original(script, flow_path, messages)

        SCRIPT.__class__.__call__ = timed
        try:
            started = time.perf_counter()
            # called as an application calls a flow (its __call__: traced, named in errors), not its inner run()
            out = flow.call(
                {
                    "goal": "count words, many times",
                    "memory_files": memory_files,
                    "plan": open(memory_files["plan"]).read(),
                    "logs": "",
                }
            )
            total = time.perf_counter() - started
        finally:
            SCRIPT.__class__.__call__ = original
    durations = [b - a for a, b in zip(stamps, stamps[1:])]
    from aiflows_jarvis.CoreFlowModule import tokenizer_loaded

    tiktoken_registry = sys.modules.get("tiktoken.registry")
    loaded = tokenizer_loaded() or bool(tiktoken_registry and getattr(tiktoken_registry, "ENCODINGS", None))
    return {
        "status": out["status"],
        "total": total,
        "durations": durations,
        "sizes": sizes,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tokenizer_loaded": loaded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--stock", action="store_true", help="aiflows' own message keeping (slow), for comparison")
    parser.add_argument("--no-usage", action="store_true", help="replies without the API's usage (tokens counted)")
    args = parser.parse_args()
    r = run(args.rounds, args.stock, usage=not args.no_usage)
    d = r["durations"]
    early, late = d[:20], d[-20:]
    print(f"{'stock aiflows' if args.stock else 'lean flows'}: {args.rounds} rounds, status: {r['status']}")
    print(f"  median round time, rounds 1-20:   {statistics.median(early) * 1000:8.2f} ms")
    # the prompt's log tail fills at round 20 and the bounded histories at about round 35: from then on, flat
    for start in (41, 101):
        if len(d) >= start + 19 + 20:
            window = d[start - 1 : start + 19]
            print(f"  median round time, rounds {start}-{start + 19}: {statistics.median(window) * 1000:8.2f} ms")
    print(f"  median round time, rounds {len(d) - 19}-{len(d)}: {statistics.median(late) * 1000:8.2f} ms")
    print(f"  total: {r['total']:.2f} s")
    for n, size in sorted(r["sizes"].items()):
        print(f"  carried state after round {n}: {size / 1024:8.1f} KiB")
    print(f"  peak RSS of the process: {r['peak_rss_mb']:.0f} MiB")
    print(
        f"  cl100k tokenizer loaded: {'yes' if r['tokenizer_loaded'] else 'no'}"
        f"{'' if args.no_usage else ' (the replies report usage)'}"
    )


if __name__ == "__main__":
    main()
