"""How well a real model keeps the controller protocol: every controller of Jarvis asked for its next command,
through a real OpenAI-compatible server (llama.cpp, llama-cpp-python, vLLM, Ollama), with the settings a user gets.

    python benchmarks/real_server_check.py --api-base http://127.0.0.1:8000/v1 --model gemma-3-270m [--rounds 4]
        [--context-window 8192]

Each of the 10 controllers (Jarvis, Coder, ExtendLibrary, the code writer, the three planners, the three
replanners) is asked ``--rounds`` times for its next command, with a goal, a plan, logs and a last result like a
run's. A controller whose first command needs no LLM (the plan and code writers open with ``write_plan`` /
``write_code``) is asked again in the same round; one that still asks nothing, or fails, is named with the reason.

The requests go through a recording relay (``server_tap``) and are streamed. Prints, per controller and in total:
calls, replies valid the first time, repaired (accepted after lenient reading), corrected, given up, prompt
overflows, seconds per call, seconds to the first streamed token, prefill tokens per call (prompt tokens the server
read, not taken from its prefix cache: llama.cpp's ``timings.prompt_n``, or ``usage`` minus
``prompt_tokens_details.cached_tokens``; "-" where the server does not say) and the reusable prefix (over each
controller's calls after its first: the share of the prompt's tokens equal to the start of its previous prompt);
then the response_format level the server was found to accept and where the context window came from. Not a test
(it needs a server and a model); see docs/architecture.md, "Real models".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from server_tap import ServerTap  # noqa: E402

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)
from aiflows_jarvis.app import launcher  # noqa: E402
from aiflows_jarvis.ChatFlowModule import with_api_infos  # noqa: E402
from aiflows_jarvis.ChatFlowModule.servers import server_settings  # noqa: E402
from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow  # noqa: E402
from aiflows_jarvis.CoreFlowModule import (  # noqa: E402
    USAGE,
    LLMCallError,
    RunContext,  # noqa: E402
    count_tokens,  # noqa: E402
)

GOAL = "Compute the first 20 prime numbers and save them to primes.txt, one per line."
PLAN = (
    "1. Write a function first_primes(n) that returns the first n prime numbers.\n"
    "2. Run it with n = 20 and write the primes to primes.txt, one per line.\n"
    "3. Tell the user where the file is."
)
RESULTS = [
    "",
    "The user replied: use your best judgement.",
    "first_primes was saved to library.py; the proposed tests passed.",
    "Traceback (most recent call last):\n  File \"<cell>\", line 3, in <module>\nNameError: name 'first_primes' is "
    "not defined",
    "[2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71]\nprimes.txt written (20 lines).",
]


def controller_inputs(round_number: int, memory_files: dict) -> dict:
    logs = "\n".join(
        f"--- [{i}] 2026-01-01 10:0{i}:00 run_code ---\narguments: code = 'step {i}'\nresult: {RESULTS[i % 5]}"
        for i in range(1, round_number + 1)
    )
    return {
        "goal": GOAL,
        "plan": PLAN,
        "logs": logs,
        "memory_files": memory_files,
        "result": RESULTS[round_number % len(RESULTS)] or "(nothing yet)",
        "code_library": "",
        "code": "def first_primes(n):\n    ...",
        "feedback": "",
    }


def prompt_text(messages: list) -> str:
    """A prompt as a chat template lays it out: each message's role, then its content, in order."""
    return "".join(f"<|{m.get('role')}|>\n{m.get('content') or ''}\n" for m in messages if isinstance(m, dict))


def reused_prefix(calls: list) -> tuple:
    """(tokens equal to the start of the chat's previous prompt, prompt tokens), summed over the calls after the
    first of one chat."""
    reused = total = 0
    for previous, call in zip(calls, calls[1:]):
        before, now = prompt_text(previous.messages), prompt_text(call.messages)
        common = os.path.commonprefix([before, now])
        reused += count_tokens(common) if common else 0
        total += count_tokens(now)
    return reused, total


def ask(controller, data: dict):
    """The controller's next command for ``data`` (the inputs it takes), and whether it asked the LLM."""
    wanted = set(controller.get_interface_description()["input"]) | {"goal", "memory_files"}
    before = USAGE.total().calls
    output = controller.run({k: v for k, v in data.items() if k in wanted})
    return output, USAGE.total().calls - before


def check_controller(controller, rounds: int, memory_files: dict) -> tuple:
    """Counts of one controller over ``rounds`` rounds, and why it was never asked (empty when it was)."""
    counts, why = Counter(), ""
    for round_number in range(rounds):
        data = controller_inputs(round_number, memory_files)
        before = USAGE.total()
        try:
            output, calls = ask(controller, data)
            if not calls:  # an opening command (the plan and code writers' first write_plan / write_code)
                output, calls = ask(controller, dict(data, result=f"{output.get('command')} done."))
        except LLMCallError as error:
            counts["errors"] += 1
            counts["overflows"] += "context window" in str(error)
            why = why or f"{type(error).__name__}: {error}"
            print(f"  {error}", file=sys.stderr)
            continue
        except Exception as error:  # noqa: BLE001 - a benchmark names what stopped one controller and goes on
            counts["errors"] += 1
            why = why or f"{type(error).__name__}: {error}"
            print(f"  {controller.flow_config['name']}: {why}", file=sys.stderr)
            continue
        if not calls:
            why = why or f"asked no LLM (answered {output.get('command') or output} by itself twice)"
            continue
        after = USAGE.total()
        counts["calls"] += calls
        counts["decisions"] += 1
        repaired, corrected = after.repairs - before.repairs, after.corrections - before.corrections
        counts["repaired"] += bool(repaired) and not corrected
        counts["corrected"] += bool(corrected)
        counts["gave up"] += "controller_error" in output
        counts["valid first time"] += not repaired and not corrected
    return counts, "" if counts["calls"] else (why or "never asked")


def figures(calls: list) -> dict:
    """First-token seconds, prefill tokens per call and the reusable prefix of one controller's calls."""
    first = [c.first_token for c in calls if c.first_token is not None]
    prefill = [c.prefill_tokens for c in calls if c.prefill_tokens is not None]
    reused, total = reused_prefix(calls)
    return {
        "first_token": sum(first) / len(first) if first else None,
        "prefill": sum(prefill) / len(prefill) if prefill else None,
        "prefilled": sum(prefill),
        "reused": reused,
        "reusable_of": total,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--context-window", type=int)
    args = parser.parse_args(argv)

    with ServerTap(args.api_base) as tap, tempfile.TemporaryDirectory() as memory_dir, contextlib.ExitStack() as run:
        api_infos = launcher.api_infos_from_environment(tap.url)
        model = {"openai": launcher.litellm_model_name(args.model, "openai", tap.url)}
        run.enter_context(RunContext(backend_factory=with_api_infos(api_infos, only_missing=True, model_name=model)))
        flow = launcher.instantiate(
            launcher.load_config(os.path.join(os.path.dirname(HERE), "configs", "jarvis.yaml")), api_infos, memory_dir
        )
        launcher.set_memory_files(flow, memory_dir)
        launcher.set_chat_settings(flow, context_window=args.context_window, stream=True)
        controllers = [(path, node) for path, node in launcher.walk(flow) if isinstance(node, ControllerAtomicFlow)]
        memory_files = {
            "plan": os.path.join(memory_dir, "plan.txt"),
            "logs": os.path.join(memory_dir, "logs.txt"),
            "code_library": os.path.join(memory_dir, "library.py"),
        }
        rows, totals, level, window = [], Counter(), "", ""
        for path, controller in controllers:
            tap.chat = path
            started = time.monotonic()
            counts, why = check_controller(controller, args.rounds, memory_files)
            seconds = (time.monotonic() - started) / max(1, counts["calls"])
            server = server_settings(controller.backend)
            level = server.structured_output
            window = window or (
                f"{server.known_context_window} tokens from {server.window_source}"
                if server.known_context_window
                else ""
            )
            calls = [c for c in tap.calls if c.chat == path and c.status == 200]  # a refused request read nothing
            rows.append((path.replace("/Executor", "").replace("/CtrlExMem", ""), counts, seconds, figures(calls), why))
            totals.update(counts)
        every = figures([])
        for path, _ in controllers:
            one = figures([c for c in tap.calls if c.chat == path and c.status == 200])
            every["reused"] += one["reused"]
            every["reusable_of"] += one["reusable_of"]
        prefill = [c.prefill_tokens for c in tap.calls if c.prefill_tokens is not None and c.status == 200]
        first = [c.first_token for c in tap.calls if c.first_token is not None]
        every["prefill"] = sum(prefill) / len(prefill) if prefill else None
        every["first_token"] = sum(first) / len(first) if first else None
        window = (
            f"{args.context_window} tokens from --context-window"
            if args.context_window
            else window or "not known (8192 tokens assumed)"
        )
        report(rows, totals, every, level, window)
    return 0


def _figure(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(rows: list, totals: Counter, every: dict, level: str, window: str) -> None:
    columns = ("decisions", "calls", "valid first time", "repaired", "corrected", "gave up", "errors", "overflows")
    print(
        f"{'controller':52} "
        + " ".join(
            f"{c:>8}" for c in ("decided", "calls", "valid", "repaired", "corrected", "gave up", "errors", "overflow")
        )
        + f" {'s/call':>7} {'1st tok':>7} {'prefill':>7} {'reuse':>6}"
    )
    for path, counts, seconds, f, why in rows:
        reuse = f"{100 * f['reused'] / f['reusable_of']:.0f}%" if f["reusable_of"] else "-"
        print(
            f"{path[-52:]:52} "
            + " ".join(f"{counts[c]:>8}" for c in columns)
            + f" {seconds:7.1f} {_figure(f['first_token']):>7} {_figure(f['prefill'], 0):>7} {reuse:>6}"
        )
        if why:
            print(f"{'':52}   not called: {why}")
    reuse = f"{100 * every['reused'] / every['reusable_of']:.0f}%" if every["reusable_of"] else "-"
    print(
        f"{'total':52} "
        + " ".join(f"{totals[c]:>8}" for c in columns)
        + f" {'':7} {_figure(every['first_token']):>7} {_figure(every['prefill'], 0):>7} {reuse:>6}"
    )
    decided = max(1, totals["decisions"])
    called = sum(1 for row in rows if row[1]["calls"])
    print(
        f"\ncontrollers called: {called} of {len(rows)}; valid the first time: {totals['valid first time']} of "
        f"{totals['decisions']} controller decisions ({100 * totals['valid first time'] / decided:.0f}%); "
        f"response_format level kept: {level}; context window: {window}"
    )
    print(
        f"reusable prefix: {every['reused']} of {every['reusable_of']} prompt tokens after each controller's first "
        f"call ({reuse}); prefill tokens per call: {_figure(every['prefill'], 0)} (- : the server does not say); "
        f"first token: {_figure(every['first_token'])} s per call"
    )
    print(USAGE.summary())


if __name__ == "__main__":
    sys.exit(main())
