"""Memory at scale: today's cutting beside retrieval of the relevant entries, for libraries of growing size.

    python benchmarks/memory_scale.py [--sizes 10,500,2000,10000] [--log-entries 3000] [--tasks 50]

For each library size (a synthetic library of varied topics, made deterministically: benchmarks/synthetic_library.py)
and a log of ``--log-entries`` entries, each mode runs in its own child process and prints:

* ``save ms``: save_code of one more function (the library read at the round before, as in a run);
* ``prompt ms``: building Coder's controller prompt at a round (memory read, template rendered), warm; ``first ms``
  the first round (the index built, when it is missing);
* ``tokens``: that prompt's tokens (cl100k);
* ``peak MiB``: the child's maximum RSS; ``py MiB``: the peak of Python allocations during the save and the prompt;
* ``recall``: over ``--tasks`` tasks made from the library's docstrings, paraphrased, whether the function the task
  needs reached the prompt (its signature, or at least its name for today's cutting).

``cut`` is today's cutting (the last 20 log entries, the library's summary cut to ``max_library_chars``); ``retrieval``
is the entries chosen by relevance beyond the budgets.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

MODES = ("cut", "retrieval")


def _controller_template():
    import yaml

    with open(os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "CoderFlowModule", "CoderFlow.yaml")) as f:
        config = yaml.safe_load(f)
    loop = config["subflows_config"]["CtrlExMem"]
    controller = loop["subflows_config"]["Controller"]
    # the head (system message), then the memory (the first user message of a block)
    template = (
        controller["system_message_prompt_template"]["template"]
        + "\n\n"
        + controller["memory_message_prompt_template"]["template"]
    )
    commands = "\n".join(
        f"- {name}: {spec['description']} Arguments: {spec.get('input_args')}"
        for name, spec in loop["commands"].items()
    )
    return template, commands


def _log_text(count: int, names) -> str:
    from aiflows_jarvis.CoreFlowModule import format_log_entry

    parts = []
    for number in range(1, count + 1):
        name = names[(number * 7919) % len(names)]
        parts.append(
            format_log_entry(
                number,
                "run_code",
                {"code": f"from library import {name}\nprint({name}(rows))", "language": "python"},
                f"{{'topic': 'x', 'count': {number % 97}}}",
            )
            + "\n"
        )
    return "".join(parts)


def one(size: int, mode: str, log_entries: int, task_count: int) -> dict:
    """The figures of one library size in one mode (run in a child process of its own)."""
    import jinja2
    from synthetic_library import library_source, make_library, make_tasks

    import aiflows_jarvis  # noqa: F401 (offline tokenizer first)
    from aiflows_jarvis.CoreFlowModule import append_log_entry, count_tokens
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow
    from aiflows_jarvis.MemoryReadingFlowModule import MemoryReadingAtomicFlow

    functions = make_library(size + 1)
    extra, functions = functions[-1], functions[:-1]
    tasks = make_tasks(functions, task_count)
    work = tempfile.mkdtemp(prefix="memory_scale_")
    files = {
        "plan": os.path.join(work, "plan_coder.txt"),
        "logs": os.path.join(work, "logs_coder.txt"),
        "code_library": os.path.join(work, "library.py"),
    }
    with open(files["code_library"], "w", encoding="utf-8") as f:
        f.write(library_source(functions))
    with open(files["plan"], "w", encoding="utf-8") as f:
        f.write("1. Find the function the goal needs in the library.\n2. Run it on the data.\n")
    with open(files["logs"], "w", encoding="utf-8") as f:
        f.write(_log_text(log_entries, [fn.name for fn in functions]))
    reader = MemoryReadingAtomicFlow.instantiate_from_default_config(
        output_interface=["plan", "logs", "code_library"], retrieval={"enabled": mode == "retrieval"}
    )
    saver = SaveCodeAtomicFlow.instantiate_from_default_config()
    template, commands = _controller_template()
    render = jinja2.Template(template, undefined=jinja2.StrictUndefined).render

    def prompt(goal: str, result: str = "") -> str:
        memory = reader.run({"memory_files": files, "goal": goal, "result": result})
        return render(goal=goal, commands=commands, plan_file_location=files["plan"], **memory)

    goal = tasks[0][0]
    started = time.perf_counter()
    prompt(goal)
    first_ms = 1000 * (time.perf_counter() - started)

    def round_(code: str) -> tuple:
        began = time.perf_counter()
        saved = saver.run({"code": code, "memory_files": files})["result"]
        save_ms = 1000 * (time.perf_counter() - began)
        append_log_entry(files["logs"], "save_code", {}, saved)
        began = time.perf_counter()
        text = prompt(goal, saved)
        return save_ms, 1000 * (time.perf_counter() - began), text

    save_ms, prompt_ms, text = round_(extra.code)
    tracemalloc.start()
    round_(extra.code.replace(f"def {extra.name}(", f"def {extra.name}_again(", 1))
    py_peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    hits = 0
    for task, name in tasks:
        reader.flow_state["picked"] = {}  # each task is a new one: nothing picked before
        shown = reader.run({"memory_files": files, "goal": task, "result": ""})["code_library"]
        hits += (f"def {name}(" in shown) if mode == "retrieval" else (name in shown)
    return {
        "size": size,
        "mode": mode,
        "save_ms": save_ms,
        "prompt_ms": prompt_ms,
        "first_ms": first_ms,
        "tokens": count_tokens(text),
        "py_mib": py_peak,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "recall": hits / len(tasks),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,500,2000,10000", help="library sizes, in functions")
    parser.add_argument("--log-entries", type=int, default=3000)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--one", nargs=2, metavar=("SIZE", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1], args.log_entries, args.tasks)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AZURE_API_KEY")}
    print(f"log entries: {args.log_entries}; tasks: {args.tasks}")
    print(
        f"{'functions':>9} {'mode':>9} {'save ms':>8} {'prompt ms':>9} {'first ms':>8} {'tokens':>6} "
        f"{'peak MiB':>8} {'py MiB':>6} {'recall':>6}"
    )
    for size in sizes:
        for mode in MODES:
            done = subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--one",
                    str(size),
                    mode,
                    "--log-entries",
                    str(args.log_entries),
                    "--tasks",
                    str(args.tasks),
                ],
                capture_output=True,
                text=True,
                env=env,
                cwd=tempfile.gettempdir(),
            )
            if done.returncode != 0:
                print(f"{size:>9} {mode:>9} failed:\n{done.stderr[-2000:]}")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{size:>9} {mode:>9} {r['save_ms']:>8.1f} {r['prompt_ms']:>9.1f} {r['first_ms']:>8.0f} "
                f"{r['tokens']:>6} {r['peak_mib']:>8.0f} {r['py_mib']:>6.1f} {r['recall']:>6.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
