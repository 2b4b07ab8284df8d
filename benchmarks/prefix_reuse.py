"""How much of each controller prompt a server's prefix cache can reuse: the share of its tokens that equal the start
of the same chat's previous prompt.

A server that keeps a prefix cache (llama.cpp, vLLM, OpenAI's prompt caching) reads again only what follows the
longest common start of two consecutive prompts; on a CPU that reading is most of a call's time. Measured on an
unseen goal ("top words": Jarvis plans, has Coder write a reusable function, tests it, runs it, answers), with a
scripted model that answers each flow from its own queue and keeps every request. A chat's first call has nothing
before it and is left out; a chat starts again when a boss is called again (its controller is reset). Tokens are
cl100k, of the messages laid out as a chat template lays them out (role, content, end marker).

    python benchmarks/prefix_reuse.py [--json]

``prefix_share(calls)`` is what benchmarks/run.py also applies to the 200-round loop.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict, deque
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _path in (ROOT, HERE, os.path.join(ROOT, "tests")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# What the layout before (memory injected into a system prompt re-rendered on every call) reached with this script,
# and on the 200-round loop: shown beside today's figures.
BEFORE = {"top_words": 0.42, "loop": 0.15}

GOAL = (
    "Find the ten most frequent words in words.txt (ignore case and punctuation) and save them, one per line "
    "with its count, to top_words.txt."
)


def cmd(name: str, **args: Any) -> str:
    return json.dumps({"command": name, "command_args": args})


TOP_WORDS = '''```python
def top_words(text: str, n: int = 10) -> list[tuple[str, int]]:
    """Return the n most frequent words of a text, most frequent first.

    Parameters:
    text (str): the text; words are compared without case, punctuation is ignored.
    n (int): how many words to return.

    Returns:
    list of (str, int): (word, count) pairs, by decreasing count, ties in alphabetical order.
    """
    import re
    from collections import Counter

    counts = Counter(re.findall(r"[a-z']+", text.lower()))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
```'''
TESTS = (
    "assert top_words('b a b, c. B a', 2) == [('b', 3), ('a', 2)]\n"
    "assert top_words('', 3) == []\n"
    "assert top_words('x y z', 5) == [('x', 1), ('y', 1), ('z', 1)]"
)
JARVIS_PLAN = (
    "1. Ask Coder to write a reusable function that counts the most frequent words of a text, use it on "
    "words.txt and save the ten most frequent words with their counts to top_words.txt.\n"
    "2. Give the user the final answer: the ten words and where the file is."
)
SPEC = (
    "top_words(text: str, n: int = 10) -> list[tuple[str, int]]: the n most frequent words of text, compared "
    "without case, punctuation ignored, by decreasing count (ties alphabetical). Standard library only."
)
SAMPLE = (
    "import os\nif not os.path.exists('words.txt'):\n    with open('words.txt', 'w') as f:\n"
    "        f.write('The cat sat on the mat. The dog sat on the log. A cat and a dog met.\\n' * 3)\n"
    "print(open('words.txt').read()[:200])"
)
RUN = (
    "from library import top_words\n\nwith open('words.txt') as f:\n    words = top_words(f.read(), 10)\n"
    "with open('top_words.txt', 'w') as f:\n    for word, count in words:\n        f.write(f'{word} {count}\\n')\n"
    "print(words)"
)
ANSWER = (
    "The ten most frequent words of words.txt, with their counts, are in top_words.txt (the memory folder); "
    "the function top_words(text, n) is now in the code library."
)


CODER = "Jarvis/CtrlExMem/Executor/Coder"
EXTLIB = f"{CODER}/CtrlExMem/Executor/extend_library"
WRITE_CODE = f"{EXTLIB}/CtrlExMem/Executor/write_code"
# per flow, its replies in order (the bookkeeping is done by code: Coder's and ExtendLibrary's plans are their goals,
# steps are marked done by the commands that complete them, approved code is saved, an accepted answer ends the run)
REPLIES: Dict[str, List[str]] = {
    "Jarvis/Planner/Executor/write_plan/PlanGenerator": [JARVIS_PLAN],
    "Jarvis/CtrlExMem/Controller": [
        cmd(
            "Coder",
            goal=(
                "Write a reusable function that returns the n most frequent words of a text (no case, no "
                "punctuation), use it on words.txt (write a sample one if it is missing) and save the "
                "ten most frequent words with their counts, one per line, to top_words.txt."
            ),
            completes_step=1,
        ),
        cmd("final_answer", answer=ANSWER),
    ],
    f"{CODER}/CtrlExMem/Controller": [
        cmd("extend_library", goal=SPEC),
        cmd("run_code", language="python", code=SAMPLE),
        cmd("run_code", language="python", code=RUN, completes_step=1),
    ],
    f"{WRITE_CODE}/Executor/write_code/CodeGenerator": [TOP_WORDS],
    f"{WRITE_CODE}/Controller": [cmd("test", tests=TESTS)],
}


class FlowQueues:
    """A scripted model: each flow gets the next of its own replies; every request is kept (flow, messages)."""

    def __init__(self, replies: Dict[str, List[str]]):
        self.queues = {flow: deque(items) for flow, items in replies.items()}
        self.calls: List[Tuple[str, List[dict]]] = []

    def factory(self, backend_config, flow_name):
        return self

    def __call__(self, messages, **kwargs):
        from aiflows_jarvis.CoreFlowModule import current_flow_path

        flow = current_flow_path()
        self.calls.append((flow, [dict(m) for m in messages]))
        queue = self.queues.get(flow)
        if not queue:
            raise SystemExit(f"the script has no reply for {flow}")
        return [{"role": "assistant", "content": queue.popleft()}]


# ~~~ The measure ~~~
def layout(messages: List[dict]) -> str:
    """The prompt as a chat template lays it out (ChatML's markers: the figure does not depend on them)."""
    return "".join(f"<|im_start|>{m.get('role')}\n{m.get('content') or ''}<|im_end|>\n" for m in messages)


def common_prefix(a: List[int], b: List[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prefix_share(calls: List[Tuple[str, List[dict]]], controllers_only: bool = True) -> Dict[str, Any]:
    """Over every call of a chat but its first: the tokens equal to the start of that chat's previous prompt,
    divided by the prompt's tokens (summed over calls). A call whose messages hold no assistant message starts a
    new chat. Also per flow, and the number of calls measured."""
    from aiflows_jarvis.CoreFlowModule import cl100k_tokenizer

    encode = cl100k_tokenizer().encode
    previous: Dict[str, List[int]] = {}
    reused, total, counted = 0, 0, 0
    per_flow: Dict[str, List[int]] = defaultdict(lambda: [0, 0, 0])
    for flow, messages in calls:
        if controllers_only and not flow.endswith("Controller"):
            continue
        tokens = encode(layout(messages), disallowed_special=())
        if not any(m.get("role") == "assistant" for m in messages):
            previous[flow] = tokens  # a chat's first call
            continue
        before = previous.get(flow)
        previous[flow] = tokens
        if before is None:
            continue
        shared = common_prefix(before, tokens)
        reused, total, counted = reused + shared, total + len(tokens), counted + 1
        figures = per_flow[flow]
        figures[0] += shared
        figures[1] += len(tokens)
        figures[2] += 1
    return {
        "share": reused / total if total else None,
        "calls": counted,
        "tokens": total,
        "per_flow": {flow: {"share": r / t if t else None, "calls": c} for flow, (r, t, c) in per_flow.items()},
    }


def run_top_words() -> List[Tuple[str, List[dict]]]:
    """Jarvis on the top-words goal (configs/jarvis.yaml, everything real but the model); the requests it sent."""
    from aiflows.utils import logging

    from aiflows_jarvis.app import launcher
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput, Console, RunContext

    logging.set_verbosity_error()
    model = FlowQueues(REPLIES)
    context = RunContext(
        console=Console(stream=open(os.devnull, "w")), input_source=AutoApproveInput(), backend_factory=model.factory
    )
    with context, tempfile.TemporaryDirectory(prefix="jarvis-prefix-") as memory_dir:
        flow = launcher.instantiate(
            launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml")),
            [{"backend_used": "openai", "api_key": "scripted"}],
            memory_dir,
        )
        launcher.prepare_memory(flow, memory_dir, resume=False)
        try:
            output = flow.call({"goal": GOAL})
        finally:
            launcher.close_interpreters(flow)
        left = sum(len(q) for q in model.queues.values())
        if output.get("status") != "finished" or left:
            raise SystemExit(
                f"the top-words run did not go as scripted: status {output.get('status')!r}, {left} replies left"
            )
    return model.calls


def top_words_figures() -> Dict[str, Any]:
    return prefix_share(run_top_words())


def loop_calls(rounds: int) -> Tuple[List[Tuple[str, List[dict]]], Dict[str, Any]]:
    """The requests of benchmarks/loop_rounds.py's loop (``rounds`` rounds, a scripted controller), and its result."""
    import loop_rounds
    from fakes import ScriptedLLM

    calls: List[Tuple[str, List[dict]]] = []
    original = ScriptedLLM.__call__

    def keeping(script, flow_path, messages):
        calls.append((flow_path, [dict(m) for m in messages]))
        return original(script, flow_path, messages)

    ScriptedLLM.__call__ = keeping
    try:
        result = loop_rounds.run(rounds, stock=False)
    finally:
        ScriptedLLM.__call__ = original
    return calls, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=int, default=200, help="rounds of the benchmark loop (default 200)")
    args = parser.parse_args()
    figures = {"top_words": top_words_figures(), "loop": prefix_share(loop_calls(args.rounds)[0])}
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    for key, what in (("top_words", "the top-words goal"), ("loop", f"{args.rounds} rounds of the benchmark loop")):
        f, before = figures[key], BEFORE[key]
        print(
            f"reusable prefix, {what}: {f['share']:.1%} of {f['tokens']} controller prompt tokens ({f['calls']} "
            f"calls after each chat's first)" + (f"; before: {before:.0%}" if before is not None else "")
        )
        for flow, per in sorted(f["per_flow"].items()):
            print(f"  {flow}: {per['share']:.1%} ({per['calls']} calls)")


if __name__ == "__main__":
    main()
