"""Write the demo transcript that `run_jarvis.py --demo` replays.

The demo's LLM replies are written by hand, below, as a good model would answer, so that building it needs no live
model. Everything else is real: Jarvis runs on the demo goal (flows, memory files, interpreter), each LLM call gets
the next hand-written reply (the flow asking is checked), and `--record`'s recorder writes each prompt Jarvis really
sent with its reply.

    python scripts/make_demo_transcript.py [--seed] [--out PATH]

With --seed, the same goal with `bookkeeping_by_code: false` (every step through the LLM, as the seed's Jarvis):
the recording the tests use for that mode.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import deque

import aiflows_jarvis  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "JarvisFlowModule", "demo", "demo_transcript.jsonl")
SEED_OUT = os.path.join(ROOT, "tests", "data", "seed_demo_transcript.jsonl")

GOAL = (
    "Here are a shop's monthly sales: Jan 120, Feb 135, Mar 128, Apr 150, May 171, Jun 165. Work out the "
    "month-over-month growth in percent with a reusable function, tell me which month grew the most, and draw "
    "the sales as a bar chart in an SVG file."
)


def cmd(name, **args):
    return json.dumps({"command": name, "command_args": args})


GROWTH_RATES = '''```python
def growth_rates(values: list[float]) -> list[float]:
    """Return the percentage change from each value to the next.

    Parameters:
    values (list of float): the values, in order (e.g. monthly sales).

    Returns:
    list of float: len(values) - 1 growth rates in percent; the i-th is the change from values[i] to values[i + 1].

    Raises:
    ValueError: if fewer than two values are given, or if a value the change is measured from is 0.
    """
    if len(values) < 2:
        raise ValueError("growth_rates needs at least two values")
    rates = []
    for previous, current in zip(values, values[1:]):
        if previous == 0:
            raise ValueError("cannot measure growth from a value of 0")
        rates.append((current - previous) / previous * 100)
    return rates
```'''

SVG_BAR_CHART = '''```python
def svg_bar_chart(labels: list[str], values: list[float], path: str, title: str = "") -> str:
    """Write a bar chart of labelled values as a standalone SVG file.

    Parameters:
    labels (list of str): one label per bar, shown under it.
    values (list of float): the bar heights (not negative), scaled to the largest value.
    path (str): the file to write, e.g. "chart.svg".
    title (str): a title shown above the bars (optional).

    Returns:
    str: the path of the file written.
    """
    from xml.sax.saxutils import escape

    if not values or len(labels) != len(values):
        raise ValueError("svg_bar_chart needs one label per value, and at least one value")
    width, height, margin, gap = 60 * len(values) + 80, 320, 40, 10
    top = max(values) or 1
    bar_width = (width - 2 * margin) / len(values) - gap
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="16">{escape(title)}</text>',
    ]
    for i, (label, value) in enumerate(zip(labels, values)):
        bar_height = (height - 2 * margin - 30) * value / top
        x = margin + i * (bar_width + gap)
        y = height - margin - bar_height
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_width:.1f}" height="{bar_height:.1f}" fill="#4a7ebb"/>')
        parts.append(f'<text x="{x + bar_width / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">{value:g}</text>')
        parts.append(f'<text x="{x + bar_width / 2:.1f}" y="{height - margin + 16}" text-anchor="middle">'
                     f'{escape(str(label))}</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\\n".join(parts) + "\\n")
    return path
```'''

JARVIS_PLAN = (
    "1. Ask Coder to write a reusable function that computes month-over-month growth rates in percent, use it on the "
    "sales (Jan 120, Feb 135, Mar 128, Apr 150, May 171, Jun 165) to find the month that grew the most, and draw the "
    "monthly sales as a bar chart saved to sales_chart.svg.\n"
    "2. Give the user the final answer: the growth of each month, the month that grew the most, and where the chart is."
)
GROWTH_SPEC = (
    "growth_rates(values: list[float]) -> list[float]: for each pair of consecutive values, the percentage change "
    "(next - previous) / previous * 100, so it returns len(values) - 1 numbers. Raise ValueError when fewer than two "
    "values are given or when a previous value is 0. Standard library only."
)
CHART_SPEC = (
    'svg_bar_chart(labels: list[str], values: list[float], path: str, title: str = "") -> str: write a standalone '
    "SVG file at path with one bar per value (heights scaled to the largest value), each label under its bar, each "
    "value above it and the title on top; return path. Raise ValueError unless there is one label per value and at "
    "least one value. Standard library only."
)
GROWTH_TESTS = (
    "assert growth_rates([100, 110, 99]) == [10.0, -10.0]\n"
    "assert growth_rates([80, 100]) == [25.0]\n"
    "for bad in ([], [5], [0, 5]):\n"
    "    try:\n"
    "        growth_rates(bad)\n"
    "    except ValueError:\n"
    "        pass\n"
    "    else:\n"
    '        raise AssertionError(f"no ValueError for {bad}")'
)
CHART_TESTS = (
    "import os, tempfile\n"
    'path = os.path.join(tempfile.mkdtemp(), "chart.svg")\n'
    'assert svg_bar_chart(["a", "b"], [1, 3], path, "T") == path\n'
    "svg = open(path).read()\n"
    'assert svg.startswith("<svg") and svg.count("<rect") == 2 and ">T<" in svg\n'
    "try:\n"
    '    svg_bar_chart(["a"], [1, 2], path)\n'
    "except ValueError:\n"
    "    pass\n"
    "else:\n"
    '    raise AssertionError("no ValueError for one label and two values")'
)


ANSWER = (
    "Month-over-month growth of the sales: Feb +12.5%, Mar -5.2%, Apr +17.2%, May +14.0%, Jun -3.5%. April "
    "grew the most (+17.2%, from 128 to 150). The bar chart of the monthly sales is in sales_chart.svg, in the "
    "memory folder. Two reusable functions are now in the code library: growth_rates(values) and "
    "svg_bar_chart(labels, values, path, title)."
)

CODER = "Jarvis/CtrlExMem/Executor/Coder"
WRITE_CODE = f"{CODER}/CtrlExMem/Executor/extend_library/CtrlExMem/Executor/write_code"


def write_code(code: str, tests: str) -> list:
    """The exchanges of one function: its code, then the tests (ExtendLibrary's plan, write_code, save_code and
    finish are made by code, from the state)."""
    return [
        (f"{WRITE_CODE}/Executor/write_code/CodeGenerator", code),
        (f"{WRITE_CODE}/Controller", cmd("test", tests=tests)),
    ]


GROWTH_RUN = (
    "from library import growth_rates\n\n"
    'months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun"]\n'
    "sales = [120, 135, 128, 150, 171, 165]\n"
    "growth = growth_rates(sales)\n"
    "for month, rate in zip(months[1:], growth):\n"
    '    print(f"{month}: {rate:+.1f}%")\n'
    "best = max(range(len(growth)), key=lambda i: growth[i])\n"
    'print(f"Highest growth: {months[best + 1]} ({growth[best]:+.1f}%)")'
)
CHART_RUN = (
    'from library import svg_bar_chart\n\nprint(svg_bar_chart(months, sales, "sales_chart.svg", "Monthly sales"))'
)
CODER_GOAL = (
    "The monthly sales of a shop are: Jan 120, Feb 135, Mar 128, Apr 150, May 171, Jun 165. (1) Add to the code "
    "library a reusable function that returns the month-over-month growth rates in percent of a list of values, "
    "use it on the sales and find the month that grew the most. (2) Add a reusable function that draws labelled "
    "values as a bar chart in an SVG file, and save the bar chart of the sales to sales_chart.svg. Report the "
    "growth rates, the best month and the chart's path."
)
# (the flow that asks, its reply), in the order Jarvis asks
REPLIES = [
    ("Jarvis/Planner/Executor/write_plan/PlanGenerator", JARVIS_PLAN),
    ("Jarvis/CtrlExMem/Controller", cmd("Coder", goal=CODER_GOAL, completes_step=1)),
    (f"{CODER}/CtrlExMem/Controller", cmd("extend_library", goal=GROWTH_SPEC, module="data")),
    *write_code(GROWTH_RATES, GROWTH_TESTS),
    (f"{CODER}/CtrlExMem/Controller", cmd("run_code", language="python", code=GROWTH_RUN)),
    (f"{CODER}/CtrlExMem/Controller", cmd("extend_library", goal=CHART_SPEC, module="charts")),
    *write_code(SVG_BAR_CHART, CHART_TESTS),
    (f"{CODER}/CtrlExMem/Controller", cmd("run_code", language="python", code=CHART_RUN, completes_step=1)),
    ("Jarvis/CtrlExMem/Controller", cmd("final_answer", answer=ANSWER)),
]


# ~~~ The seed's calls: `bookkeeping_by_code: false`, every step through the LLM (tests/data/seed_demo_transcript.jsonl)
CODER_PLAN = (
    "1. Extend the code library with `growth_rates(values: list[float]) -> list[float]`, the percentage change from "
    "each value to the next (one item fewer than values).\n"
    "2. Run code: keep the months in `months` and the sales in `sales`, compute `growth = growth_rates(sales)`, and "
    "print each month's growth rounded to one decimal and the month that grew the most.\n"
    "3. Extend the code library with `svg_bar_chart(labels: list[str], values: list[float], path: str, title: str = "
    '"") -> str`, which writes a bar chart of the values as an SVG file and returns its path.\n'
    '4. Run code: draw the sales with `svg_bar_chart(months, sales, "sales_chart.svg", "Monthly sales")`, with '
    "`months` and `sales` from step 2.\n"
    "5. Give the final answer: the growth rates, the month that grew the most, and the chart's path."
)
EXTLIB_PLAN_GROWTH = (
    "1. Write and test `growth_rates(values: list[float]) -> list[float]`: for each pair of consecutive values, "
    "(next - previous) / previous * 100; raise ValueError when fewer than two values are given or a previous value "
    "is 0.\n"
    "2. Save it to the code library."
)
EXTLIB_PLAN_CHART = (
    '1. Write and test `svg_bar_chart(labels: list[str], values: list[float], path: str, title: str = "") -> str`: '
    "a standalone SVG file with one bar per value (heights scaled to the largest value), the labels under the bars, "
    "the values above them and the title on top; return the path. Standard library only.\n"
    "2. Save it to the code library."
)


def done(plan: str, *steps: int) -> str:
    """The plan with the given steps marked [done] (at the end of each step's text)."""
    lines = plan.split("\n")
    return "\n".join(f"{line} [done]" if any(line.startswith(f"{n}. ") for n in steps) else line for line in lines)


EXTLIB = f"{CODER}/CtrlExMem/Executor/extend_library"


def planned(boss: str, goal: str, plan: str) -> list:
    """A plan writer's exchanges: its controller calls write_plan, the generator writes the plan (the user approves
    it), its controller finishes."""
    return [
        (f"{boss}/Planner/Controller", cmd("write_plan", goal=goal)),
        (f"{boss}/Planner/Executor/write_plan/PlanGenerator", plan),
        (f"{boss}/Planner/Controller", cmd("finish", summary="The user approved the plan.")),
    ]


def seed_extend_library(plan: str, spec: str, code: str, tests: str, name: str, summary: str, module: str) -> list:
    """ExtendLibrary's exchanges for one function: plan, write_code (write_code, generate, test with proposed tests,
    finish), save_code, update_plan, finish."""
    return [
        *planned(EXTLIB, spec, plan),
        (f"{EXTLIB}/CtrlExMem/Controller", cmd("write_code", goal=spec)),
        (f"{WRITE_CODE}/Controller", cmd("write_code", goal=spec)),
        (f"{WRITE_CODE}/Executor/write_code/CodeGenerator", code),
        (f"{WRITE_CODE}/Controller", cmd("test", tests=tests)),
        (f"{WRITE_CODE}/Controller", cmd("finish", summary=summary)),
        (f"{EXTLIB}/CtrlExMem/Controller", cmd("save_code", module=module)),
        (f"{EXTLIB}/CtrlExMem/Controller", cmd("update_plan", updated_plan=done(plan, 1, 2))),
        (f"{EXTLIB}/CtrlExMem/Controller", cmd("finish", summary=f"The code library now has {name}, tested.")),
    ]


SEED_REPLIES = [
    *planned("Jarvis", GOAL, JARVIS_PLAN),
    ("Jarvis/CtrlExMem/Controller", cmd("Coder", goal=CODER_GOAL)),
    *planned(CODER, CODER_GOAL, CODER_PLAN),
    (f"{CODER}/CtrlExMem/Controller", cmd("extend_library", goal=GROWTH_SPEC)),
    *seed_extend_library(
        EXTLIB_PLAN_GROWTH,
        GROWTH_SPEC,
        GROWTH_RATES,
        GROWTH_TESTS,
        "growth_rates(values)",
        (
            "growth_rates(values) returns the month-over-month percentage changes; the proposed tests passed and the "
            "user accepted it."
        ),
        "data",
    ),
    (f"{CODER}/CtrlExMem/Controller", cmd("update_plan", updated_plan=done(CODER_PLAN, 1))),
    (f"{CODER}/CtrlExMem/Controller", cmd("run_code", language="python", code=GROWTH_RUN)),
    (f"{CODER}/CtrlExMem/Controller", cmd("extend_library", goal=CHART_SPEC)),
    *seed_extend_library(
        EXTLIB_PLAN_CHART,
        CHART_SPEC,
        SVG_BAR_CHART,
        CHART_TESTS,
        "svg_bar_chart(labels, values, path, title)",
        (
            "svg_bar_chart(labels, values, path, title) writes a labelled SVG bar chart; the proposed "
            "tests passed and the user accepted it."
        ),
        "charts",
    ),
    (f"{CODER}/CtrlExMem/Controller", cmd("run_code", language="python", code=CHART_RUN)),
    (f"{CODER}/CtrlExMem/Controller", cmd("update_plan", updated_plan=done(CODER_PLAN, 1, 2, 3, 4))),
    (
        f"{CODER}/CtrlExMem/Controller",
        cmd(
            "finish",
            summary=(
                "growth_rates and svg_bar_chart are in the library. Growth (in `growth`): Feb +12.5%, Mar -5.2%, Apr "
                "+17.2%, May +14.0%, Jun -3.5%; April grew the most (+17.2%). The chart of the sales is sales_chart.svg, in "
                "the memory folder."
            ),
        ),
    ),
    ("Jarvis/CtrlExMem/Controller", cmd("update_plan", updated_plan=done(JARVIS_PLAN, 1))),
    ("Jarvis/CtrlExMem/Controller", cmd("final_answer", answer=ANSWER)),
    (
        "Jarvis/CtrlExMem/Controller",
        cmd(
            "finish",
            summary=(
                "Computed the monthly growth rates, found that April grew the most (+17.2%), drew the sales chart "
                "(sales_chart.svg), and added growth_rates and svg_bar_chart to the library."
            ),
        ),
    ),
]


class HandWrittenLLM:
    """Answers each call with the next hand-written reply, checking the flow that asks is the one expected."""

    def __init__(self, replies):
        self.replies = deque(replies)

    def factory(self, backend_config, flow_name):
        return self

    def __call__(self, messages, **kwargs):
        from aiflows_jarvis.CoreFlowModule import current_flow_path

        flow = current_flow_path()
        if not self.replies:
            raise SystemExit(f"no hand-written reply left for {flow}")
        expected, reply = self.replies.popleft()
        if flow != expected:
            raise SystemExit(f"expected a call from {expected}, got one from {flow}")
        return [{"role": "assistant", "content": reply}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help=f"where to write it (default: {OUT}, or with --seed {SEED_OUT})")
    parser.add_argument(
        "--seed",
        action="store_true",
        help="the same goal with `bookkeeping_by_code: false`: every step through the LLM, as the "
        "seed's Jarvis (the tests' recording of that mode)",
    )
    args = parser.parse_args()
    replies, out = (SEED_REPLIES, args.out or SEED_OUT) if args.seed else (REPLIES, args.out or OUT)

    from aiflows.utils import logging

    from aiflows_jarvis.app import launcher
    from aiflows_jarvis.ChatFlowModule import TranscriptRecorder
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput, RunContext

    logging.set_verbosity_error()
    llm = HandWrittenLLM(replies)
    recorder = TranscriptRecorder(out, goal=GOAL, replies_by="hand")
    config = launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml"))
    config["bookkeeping_by_code"] = not args.seed
    with (
        tempfile.TemporaryDirectory() as memory_dir,
        RunContext(backend_factory=llm.factory, backend_wrappers=[recorder.wrap], input_source=AutoApproveInput()),
    ):
        flow = launcher.instantiate(config, [{"backend_used": "openai", "api_key": "hand-written"}], memory_dir)
        launcher.prepare_memory(flow, memory_dir, resume=False)
        try:
            output = flow.call({"goal": GOAL})
        finally:
            launcher.close_interpreters(flow)
            recorder.close()
        chart = os.path.join(memory_dir, "sales_chart.svg")
        with open(os.path.join(memory_dir, "logs_extlib.txt"), encoding="utf-8") as f:
            extlib_logs = f.read()
        problems = [
            what
            for what, wrong in (
                (f"status {output['status']!r}", output["status"] != "finished"),
                (f"{len(llm.replies)} replies left", bool(llm.replies)),
                ("no chart", not os.path.exists(chart)),
                (
                    "the functions are not in the library's data and charts modules",
                    "(library/data.py;" not in extlib_logs or "(library/charts.py;" not in extlib_logs,
                ),
                ("the proposed tests did not pass twice", extlib_logs.count("tests passed") != 2),
            )
            if wrong
        ]
        if problems:
            sys.exit(f"the demo run did not go as written: {'; '.join(problems)}. Output: {output}")
    print(f"wrote {out}: {len(replies)} exchanges; final answer: {output['answer']}")


if __name__ == "__main__":
    main()
