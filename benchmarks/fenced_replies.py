"""What a model that fences its JSON costs: the demo goal through the loopback server, every controller reply
first wrapped the way GPT-4 and most local models write it (a sentence, then a ```json fence), and written plainly
only when a correction asks for it.

    python benchmarks/fenced_replies.py [--root PATH_TO_A_CHECKOUT] [--style fence|prose|python]

Prints the LLM calls the server answered, the corrections it saw, the tokens of the requests (cl100k) and how the
run ended. ``--root`` runs another checkout's run_jarvis.py (e.g. an older commit in a git worktree) against the
same scripted model, to compare before and after.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from loopback_llm import LoopbackLLMServer  # noqa: E402

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)
from aiflows_jarvis.ChatFlowModule import Transcript  # noqa: E402
from aiflows_jarvis.CoreFlowModule import count_message_tokens  # noqa: E402

DEMO = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "JarvisFlowModule", "demo", "demo_transcript.jsonl")
CORRECTION = "Your reply could not be used"


def dress(reply: str, style: str) -> str:
    """A JSON command as a chatty model writes it."""
    try:
        parsed = json.loads(reply, strict=False)
    except ValueError:
        return reply  # plans and code: free text, served as recorded
    if not isinstance(parsed, dict) or "command" not in parsed:
        return reply
    if style == "prose":
        return f"I will call `{parsed['command']}` next.\n{reply}\nLet me know if you need anything else."
    if style == "python":
        return repr(
            ast.literal_eval(
                json.dumps(parsed).replace("true", "True").replace("false", "False").replace("null", "None")
            )
        )
    return f"Here is the next command:\n```json\n{json.dumps(parsed, indent=2)}\n```"


class FencingModel:
    """Serves the demo's replies in order; a reply asked for again after a correction comes plainly."""

    def __init__(self, replies, style):
        self.replies, self.style = list(replies), style
        self.position = 0
        self.corrections = 0
        self.prompt_tokens = 0

    def __call__(self, body):
        messages = body.get("messages") or []
        self.prompt_tokens += count_message_tokens(messages)
        last = str(messages[-1].get("content") or "") if messages else ""
        if last.startswith(CORRECTION):
            self.corrections += 1
            return self.replies[self.position - 1]  # the same command, as asked: plainly
        if self.position >= len(self.replies):
            return "(the scripted model has no reply left)"
        reply = self.replies[self.position]
        self.position += 1
        return dress(reply, self.style)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=ROOT, help="the checkout whose run_jarvis.py runs (default: this one)")
    parser.add_argument("--style", choices=("fence", "prose", "python"), default="fence")
    args = parser.parse_args()
    transcript = Transcript.load(DEMO)
    model = FencingModel(transcript.replies(), args.style)
    with tempfile.TemporaryDirectory() as work, LoopbackLLMServer() as server:
        server.add(*([model] * (4 * len(transcript.replies()))))
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AZURE_API_KEY")}
        env["NO_COLOR"] = "1"
        done = subprocess.run(
            [
                sys.executable,
                os.path.join(os.path.abspath(args.root), "run_jarvis.py"),
                "--api-base",
                server.url,
                "--model",
                "local-model",
                "--yes",
                transcript.header["goal"],
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        calls = len(server.requests)
    lines = [line for line in done.stdout.strip().splitlines() if line.strip()]
    tail = lines[-12:]
    status = next((line.strip() for line in lines if line.strip().startswith("Jarvis ") and "Final answer" in line), "")
    print(f"checkout: {os.path.abspath(args.root)}")
    print(f"style: {args.style}; the recorded run takes {len(transcript.replies())} LLM calls")
    print(f"LLM calls: {calls}; corrections asked: {model.corrections}; request tokens (cl100k): {model.prompt_tokens}")
    print(f"exit code: {done.returncode}; {status or 'no final answer'}")
    if done.returncode != 0:
        print("\n".join(tail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
