"""How well a real model keeps the controller protocol: every controller of Jarvis asked for its next command,
through a real OpenAI-compatible server (llama.cpp, llama-cpp-python, vLLM, Ollama), with the settings a user gets.

    python benchmarks/real_server_check.py --api-base http://127.0.0.1:8000/v1 --model gemma-3-270m [--rounds 4]
        [--context-window 8192]

Each of the 10 controllers (Jarvis, Coder, ExtendLibrary, the code writer, the three planners, the three
replanners) is called ``--rounds`` times with a goal, a plan, logs and a last result like a run's. Prints, per
controller and in total: calls, replies valid the first time, repaired (accepted after lenient reading), corrected,
given up, prompt overflows, the response_format level the server was found to accept, and seconds per call. Not a
test (it needs a server and a model); see docs/architecture.md, "Real models".
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)

from aiflows_jarvis.ChatFlowModule import set_backend_factory, with_api_infos  # noqa: E402
from aiflows_jarvis.ChatFlowModule.servers import server_settings  # noqa: E402
from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow  # noqa: E402
from aiflows_jarvis.CoreFlowModule import USAGE, LLMCallError  # noqa: E402
from aiflows_jarvis.app import launcher  # noqa: E402

GOAL = "Compute the first 20 prime numbers and save them to primes.txt, one per line."
PLAN = ("1. Write a function first_primes(n) that returns the first n prime numbers.\n"
        "2. Run it with n = 20 and write the primes to primes.txt, one per line.\n"
        "3. Tell the user where the file is.")
RESULTS = [
    "",
    "The user replied: use your best judgement.",
    "first_primes was saved to library.py; the proposed tests passed.",
    "Traceback (most recent call last):\n  File \"<cell>\", line 3, in <module>\nNameError: name 'first_primes' is "
    "not defined",
    "[2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71]\nprimes.txt written (20 lines).",
]


def controller_inputs(round_number: int, memory_files: dict) -> dict:
    logs = "\n".join(f"--- [{i}] 2026-01-01 10:0{i}:00 run_code ---\narguments: code = 'step {i}'\nresult: {RESULTS[i % 5]}"
                     for i in range(1, round_number + 1))
    return {"goal": GOAL, "plan": PLAN, "logs": logs, "memory_files": memory_files,
            "result": RESULTS[round_number % len(RESULTS)] or "(nothing yet)", "code_library": "",
            "code": "def first_primes(n):\n    ...", "feedback": ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--context-window", type=int)
    args = parser.parse_args()

    api_infos = launcher.api_infos_from_environment(args.api_base)
    set_backend_factory(with_api_infos(api_infos, only_missing=True,
                                       model_name={"openai": launcher.litellm_model_name(args.model, "openai",
                                                                                         args.api_base)}))
    with tempfile.TemporaryDirectory() as memory_dir:
        flow = launcher.instantiate(launcher.load_config(os.path.join(os.path.dirname(HERE), "configs", "jarvis.yaml")),
                                    api_infos, memory_dir)
        launcher.set_memory_files(flow, memory_dir)
        launcher.set_chat_settings(flow, context_window=args.context_window)
        controllers = [(path, node) for path, node in launcher.walk(flow) if isinstance(node, ControllerAtomicFlow)]
        memory_files = {"plan": os.path.join(memory_dir, "plan.txt"), "logs": os.path.join(memory_dir, "logs.txt"),
                        "code_library": os.path.join(memory_dir, "library.py")}
        rows, totals, level = [], Counter(), ""
        for path, controller in controllers:
            counts = Counter()
            started = time.monotonic()
            for round_number in range(args.rounds):
                before = USAGE.total()
                data = controller_inputs(round_number, memory_files)
                wanted = set(controller.get_interface_description()["input"]) | {"goal", "memory_files"}
                try:
                    output = controller.run({k: v for k, v in data.items() if k in wanted})
                except LLMCallError as error:
                    counts["errors"] += 1
                    counts["overflows"] += "context window" in str(error)
                    print(f"  {path}: {error}", file=sys.stderr)
                    continue
                after = USAGE.total()
                if after.calls == before.calls:
                    continue  # an opening command (the plan writers' first write_plan) asks no LLM
                counts["calls"] += after.calls - before.calls
                counts["decisions"] += 1
                repaired, corrected = after.repairs - before.repairs, after.corrections - before.corrections
                counts["repaired"] += bool(repaired) and not corrected
                counts["corrected"] += bool(corrected)
                counts["gave up"] += "controller_error" in output
                counts["valid first time"] += not repaired and not corrected
            seconds = (time.monotonic() - started) / max(1, counts["calls"])
            level = server_settings(controller.backend).structured_output
            rows.append((path.replace("/Executor", "").replace("/CtrlExMem", ""), counts, seconds))
            totals.update(counts)
    columns = ("decisions", "calls", "valid first time", "repaired", "corrected", "gave up", "errors", "overflows")
    print(f"{'controller':58} " + " ".join(f"{c:>9}" for c in ("decided", "calls", "valid", "repaired", "corrected",
                                                                 "gave up", "errors", "overflow")) + "   s/call")
    for path, counts, seconds in rows:
        print(f"{path[-58:]:58} " + " ".join(f"{counts[c]:>9}" for c in columns) + f"   {seconds:6.1f}")
    print(f"{'total':58} " + " ".join(f"{totals[c]:>9}" for c in columns))
    decided = max(1, totals["decisions"])
    print(f"\nvalid the first time: {totals['valid first time']} of {totals['decisions']} controller decisions "
          f"({100 * totals['valid first time'] / decided:.0f}%); response_format level kept: {level}; "
          f"{USAGE.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
