"""What a big output costs: SIZE megabytes of output against one line, in two places.

    python benchmarks/big_output.py [--size-mb 10] [--root PATH_TO_A_CHECKOUT]

- a run: run_jarvis.py through the loopback server (Jarvis plans, Coder's run_code prints the output, both finish);
  the interpreter bounds what it passes on;
- a chat: one ChatAtomicFlow given the output as its first turn's `result`, then asked 9 more questions, its
  window keeping the first exchange (``first_k: 1``): the prompt is fitted to the model's context window at every
  call; with a window of 8,192 tokens (a local model's default) the output is cut to fit, with one of 1M tokens
  it is sent as it is, and counted.

Prints for each the wall time, the peak memory (the maximum RSS of the child that ran it) and the big figure as a
multiple of the small one. ``--root`` runs another checkout.
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

from fakes import command  # noqa: E402
from loopback_llm import LoopbackLLMServer  # noqa: E402

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)

GOAL = "Run the code and say what it printed."


def replies(code: str) -> list:
    """Jarvis's plan, Coder with a goal, Coder's plan, run_code, Coder's finish, the final answer, finish; the run's
    chats are asked again after the output (the Coder's finish, Jarvis's final answer)."""
    return [
        "1. Run the code with Coder and report.",
        command("Coder", goal="Run the code."),
        "1. Run the code with run_code.",
        command("run_code", language="python", code=code),
        command("finish", summary="The code ran."),
        command("final_answer", answer="It printed a lot."),
        command("finish", summary="Done."),
    ]


def run(root: str, code: str) -> tuple:
    """(seconds, peak RSS MiB of this child, exit code, LLM calls, last lines) of one run printing with ``code``."""
    with tempfile.TemporaryDirectory() as work, LoopbackLLMServer(replies=replies(code)) as server:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AZURE_API_KEY")}
        env["NO_COLOR"] = "1"
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                os.path.join(os.path.abspath(root), "run_jarvis.py"),
                "--api-base",
                server.url,
                "--model",
                "local-model",
                "--yes",
                GOAL,
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            stdin=subprocess.DEVNULL,
        )
        took = time.monotonic() - started
        calls = len(server.requests)
    # the largest child so far (KiB): the small run comes first, so the big run's figure is its own if larger
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    tail = "\n".join(done.stdout.strip().splitlines()[-12:]) if done.returncode else ""
    return took, peak, done.returncode, calls, tail


CHAT = r"""
import resource, sys, time
sys.path.insert(0, {tests!r})
import aiflows_jarvis
from loopback_llm import LoopbackLLMServer
from aiflows.backends.api_info import ApiInfo
from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, with_api_infos
from aiflows_jarvis.CoreFlowModule import Console, RunContext
import io

output = "".join(str(i).rjust(99, "x") + "\n" for i in range({size} // 100))
template = {{"_target_": "aiflows.prompt_template.JinjaPrompt", "template": "Output:\n{{{{result}}}}\nQ: {{{{query}}}}",
            "input_variables": ["query", "result"]}}
with LoopbackLLMServer(replies=["ok"] * ({calls} + 1)) as server, RunContext(
        console=Console(stream=io.StringIO(), color=False),
        backend_factory=with_api_infos([ApiInfo(backend_used="openai", api_key="sk-test", api_base=server.url)])):
    chat = ChatAtomicFlow.instantiate_from_default_config(
        name="Reader", context_window={window}, backend={{"max_tokens": 1000}}, previous_messages={{"first_k": 1}},
        init_human_message_prompt_template=template, human_message_prompt_template=template,
        input_interface_non_initialized=["query", "result"], input_interface_initialized=["query", "result"])
    started = time.monotonic()
    chat.call({{"query": "What did it print?", "result": output}})
    first = time.monotonic() - started
    for i in range({calls}):
        chat.call({{"query": f"And question {{i}}?", "result": "small"}})
    took = time.monotonic() - started
print(took, first, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def chat(size: int, window: int, calls: int = 9) -> tuple:
    """(seconds, seconds of the first call, peak RSS MiB) of a chat whose first turn carries ``size`` characters of
    output, then ``calls`` more."""
    code = CHAT.format(tests=os.path.join(ROOT, "tests"), size=size, calls=calls, window=window)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"the chat failed:\n{done.stderr[-2000:]}")
    took, first, peak = done.stdout.split()[-3:]
    return float(took), float(first), float(peak)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=10.0, help="the output's size in megabytes (default 10)")
    parser.add_argument("--root", default=ROOT, help="the checkout whose run_jarvis.py runs (default: this one)")
    args = parser.parse_args()
    size = int(args.size_mb * 1_000_000)
    small = run(args.root, "print('a small output')")
    big = run(args.root, f"for i in range({size // 100}):\n    print(str(i).rjust(99, 'x'))")
    print(f"checkout: {os.path.abspath(args.root)}")
    for name, (took, peak, code, calls, tail) in (("small output", small), (f"{args.size_mb:g} MB output", big)):
        print(f"{name}: wall time {took:.1f} s; peak RSS {peak:.0f} MiB; LLM calls {calls}; exit code {code}")
        if tail:
            print(tail)
    print(f"big / small wall time: {big[0] / small[0]:.1f}x")
    for window in (8192, 1_000_000):
        for name, size_ in (("small output", 100), (f"{args.size_mb:g} MB output", size)):
            took, first, peak = chat(size_, window)
            print(
                f"chat, window {window}, {name}: 10 calls in {took:.2f} s (the first {first:.2f} s, the 9 later "
                f"{(took - first) / 9 * 1000:.0f} ms each); peak RSS {peak:.0f} MiB"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
