"""LLM calls per goal: Jarvis through its real command line on eight goals of the kinds users give, with a scripted
model that answers as a good model would, from what each prompt shows.

    python benchmarks/calls_per_goal.py [--goals NAME,...] [--json] [--root CHECKOUT] [--keep DIR]

The goals: data from a CSV file with a reusable function and a chart; a later goal that reuses that function; a
package to install; a question only the user can answer; a function whose first version fails its tests; a goal of
two Coder steps; a plot from a text file; a question answered from the library. Each runs `run_jarvis.py --yes`
against a loopback OpenAI-compatible server; goals that build on each other share a memory folder.

The model is a policy, not a recording: it recognises which chat asks (Jarvis's planner and controller, Coder's,
ExtendLibrary's, the code writer's, the code generator) from the prompt's instructions, and answers from what the
prompt shows: the commands it offers, the plan and its done marks, the results of its earlier commands, the
library it lists. It calls `update_plan` when the prompt asks it to mark steps done itself, and says which step a
command completes when the prompt offers that; it answers a question from the library when the prompt shows the
library. So the same policy drives a Jarvis that makes every bookkeeping call through the model and one that makes
them in code, and the difference is what the code saves.

Per goal it prints the calls, the prompt and completion tokens (cl100k, of the messages as a chat template lays them
out), and the share of each controller's prompt equal to the start of that chat's previous prompt (what a prefix
cache reuses; the lowest controller, and all controllers together). A goal whose outcome is not what it should be
(a file missing, a function not saved, an answer not reached) is marked FAILED: the figures of a failed goal do not
count. ``--root`` runs another checkout's run_jarvis.py (to measure a version before a change).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _path in (ROOT, HERE, os.path.join(ROOT, "tests")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from loopback_llm import LoopbackLLMServer  # noqa: E402
from prefix_reuse import common_prefix, layout  # noqa: E402

import aiflows_jarvis  # noqa: E402,F401  (offline tokenizer first)


def cmd(name: str, **args: Any) -> str:
    return json.dumps({"command": name, "command_args": args})


# ~~~ The goals ~~~
@dataclasses.dataclass
class Function:
    """A function the model has written into the library: what Coder asks for, and the code it writes."""

    name: str
    spec: str
    module: str
    code: str
    tests: str
    first_code: Optional[str] = None  # a first version that fails its tests
    fix: str = ""  # what the code writer asks for when the tests fail


@dataclasses.dataclass
class Action:
    """One of Coder's commands: extend the library with a function, or run code."""

    function: Optional[Function] = None
    code: str = ""
    language: str = "python"


@dataclasses.dataclass
class CoderTask:
    """A step of Jarvis's plan done by Coder: its goal, the plan Coder's planner writes (steps, each with the
    commands that carry it out) and what Coder says when it finishes."""

    goal: str
    steps: List[Tuple[str, List[Action]]]
    summary: str


@dataclasses.dataclass
class Ask:
    question: str


@dataclasses.dataclass
class Goal:
    name: str
    kind: str
    text: str
    work: List[Any]  # CoderTask or Ask, in the order of Jarvis's plan
    answer: str
    files: Dict[str, str] = dataclasses.field(default_factory=dict)  # put in the working folder first
    memory_of: Optional[str] = None  # runs in the memory folder (and working folder) of this earlier goal
    made: List[str] = dataclasses.field(default_factory=list)  # files the goal must leave in the working folder
    library: List[str] = dataclasses.field(default_factory=list)  # functions the library must have afterwards
    seen: List[str] = dataclasses.field(default_factory=list)  # texts some prompt must show (results the model read)
    answer_from_library: List[str] = dataclasses.field(default_factory=list)  # names a prompt may show to answer

    def plan(self, answered_from_library: bool) -> str:
        steps = (
            []
            if answered_from_library
            else [
                f"Ask Coder to: {item.goal}" if isinstance(item, CoderTask) else f"Ask the user: {item.question}"
                for item in self.work
            ]
        )
        steps.append("Give the user the final answer.")
        return "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))


def _orders() -> str:
    rng = random.Random(7)
    products = {"apples": 1.2, "bread": 2.5, "cheese": 6.0, "dates": 4.0, "eggs": 3.0, "flour": 1.8}
    growth = {"apples": 1.00, "bread": 1.02, "cheese": 1.10, "dates": 0.95, "eggs": 1.04, "flour": 1.01}
    rows = ["date,product,quantity,unit_price"]
    for month in range(1, 7):
        for _ in range(77 + (month == 6) * 2):
            product = rng.choice(sorted(products))
            quantity = max(1, round(rng.randint(1, 9) * growth[product] ** (month * 2)))
            rows.append(f"2026-{month:02d}-{rng.randint(1, 28):02d},{product},{quantity},{products[product]}")
    return "\n".join(rows) + "\n"


REVENUE = Function(
    name="revenue_by_month_product",
    spec=(
        "revenue_by_month_product(path: str) -> dict[str, dict[str, float]]: read a CSV file with the columns "
        "date (YYYY-MM-DD), product, quantity and unit_price, and return the revenue (quantity * unit_price) per "
        "month ('YYYY-MM') and product, as {month: {product: revenue}}, months in order. Standard library only."
    ),
    module="sales",
    code='''def revenue_by_month_product(path: str) -> dict[str, dict[str, float]]:
    """Revenue per month and product from a CSV file of orders.

    Parameters:
    path (str): a CSV file with the columns date (YYYY-MM-DD), product, quantity, unit_price.

    Returns:
    dict: {month ('YYYY-MM'): {product: revenue}}, months in order; revenue is quantity * unit_price.
    """
    import csv

    totals: dict[str, dict[str, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            month = row["date"][:7]
            revenue = float(row["quantity"]) * float(row["unit_price"])
            by_product = totals.setdefault(month, {})
            by_product[row["product"]] = by_product.get(row["product"], 0.0) + revenue
    return {month: totals[month] for month in sorted(totals)}''',
    tests=(
        "import os, tempfile\n"
        "path = os.path.join(tempfile.mkdtemp(), 'o.csv')\n"
        "open(path, 'w').write('date,product,quantity,unit_price\\n2026-01-02,a,2,1.5\\n2026-01-09,a,1,1.5\\n"
        "2026-02-01,b,3,2.0\\n')\n"
        "assert revenue_by_month_product(path) == {'2026-01': {'a': 4.5}, '2026-02': {'b': 6.0}}"
    ),
)

MEDIAN = Function(
    name="median",
    spec=(
        "median(values: list[float]) -> float: the median of the values (the mean of the two middle ones when "
        "there is an even number of them); raise ValueError when values is empty. Standard library only."
    ),
    module="stats",
    first_code='''def median(values: list[float]) -> float:
    """The median of the values.

    Parameters:
    values (list of float): the values, in any order.

    Returns:
    float: the middle value, or the mean of the two middle values.
    """
    if not values:
        raise ValueError("median of no values")
    middle = len(values) // 2
    if len(values) % 2:
        return float(values[middle])
    return (values[middle - 1] + values[middle]) / 2''',
    code='''def median(values: list[float]) -> float:
    """The median of the values.

    Parameters:
    values (list of float): the values, in any order.

    Returns:
    float: the middle value, or the mean of the two middle values.
    """
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2''',
    tests=(
        "assert median([3, 1, 2]) == 2\nassert median([4, 1, 3, 2]) == 2.5\n"
        "try:\n    median([])\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no ValueError')"
    ),
    fix="The tests failed: median([3, 1, 2]) is not 2 because the values are not sorted. Sort them first.",
)

REPORT = """from library import revenue_by_month_product
import csv

revenue = revenue_by_month_product("orders.csv")
months = list(revenue)
products = sorted({p for by_product in revenue.values() for p in by_product})
with open("monthly_revenue.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["month"] + products)
    for month in months:
        writer.writerow([month] + [round(revenue[month].get(p, 0.0), 2) for p in products])
growth = {p: revenue[months[-1]].get(p, 0.0) - revenue[months[0]].get(p, 0.0) for p in products}
best = max(growth, key=growth.get)
print(f"grew most: {best} ({growth[best]:+.2f} from {months[0]} to {months[-1]})")
top = sorted(products, key=lambda p: -sum(revenue[m].get(p, 0.0) for m in months))[:3]
high = max(revenue[m].get(p, 0.0) for m in months for p in top)
lines = []
for i, p in enumerate(top):
    points = " ".join(f"{40 + 80 * k},{260 - 220 * revenue[m].get(p, 0.0) / high:.1f}" for k, m in enumerate(months))
    lines.append(f'<polyline fill="none" stroke="{["#c33", "#36c", "#393"][i]}" points="{points}"/>')
    lines.append(f'<text x="470" y="{40 + 20 * i}">{p}</text>')
with open("revenue.svg", "w") as f:
    f.write('<svg xmlns="http://www.w3.org/2000/svg" width="560" height="300">' + "".join(lines) + "</svg>")
print("top 3:", ", ".join(top), "- chart: revenue.svg")"""

BEST_MONTH = """from library import revenue_by_month_product

totals = {m: sum(by_product.values()) for m, by_product in revenue_by_month_product("orders.csv").items()}
best = max(totals, key=totals.get)
print(f"highest total revenue: {best} ({totals[best]:.2f})")"""

YAML_FILE = "name: shop\nversion: 3\nowners:\n  - ana\n  - bo\nlimits:\n  orders: 500\n"
INSTALL = "pip install pyyaml"
CONVERT = """import json, yaml

with open("config.yaml") as f:
    config = yaml.safe_load(f)
with open("config.json", "w") as f:
    json.dump(config, f, indent=2)
print("keys:", ", ".join(config))"""

SALES = "region,amount\nnorth,120\nsouth,80\nnorth,40\neast,55\nsouth,20\n"
TOTAL = """import csv

totals = {}
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] = totals.get(row["region"], 0) + float(row["amount"])
print("totals per region:", totals, "- all regions:", sum(totals.values()))"""

MEDIAN_RUN = "from library import median\n\nprint('median:', median([3, 1, 4, 1, 5, 9]))"

DATA = "12\n\n15\nn/a\n11\n14\n \nn/a\n18\n"
CLEAN = """kept = [line.strip() for line in open("data.txt") if line.strip() and line.strip() != "n/a"]
with open("clean.txt", "w") as f:
    f.write("\\n".join(kept) + "\\n")
print(len(kept), "numbers kept in clean.txt")"""
STATS = """import statistics

values = [float(line) for line in open("clean.txt") if line.strip()]
print(f"mean {statistics.mean(values):.2f}, standard deviation {statistics.stdev(values):.2f}")"""

TEMPS = "\n".join(str(round(12 + 6 * ((day * 37) % 11) / 10, 1)) for day in range(1, 31)) + "\n"
PLOT = """temps = [float(line) for line in open("temps.txt") if line.strip()]
high, low = max(temps), min(temps)
points = " ".join(f"{20 + 18 * i},{220 - 200 * (t - low) / (high - low):.1f}" for i, t in enumerate(temps))
with open("temps.svg", "w") as f:
    f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="580" height="240"><polyline fill="none" '
            f'stroke="#c33" points="{points}"/></svg>')
print(f"warmest: day {temps.index(high) + 1} ({high})")"""


GOALS = [
    Goal(
        "csv_and_chart",
        "data from a CSV file, a function written, a chart",
        "orders.csv holds a shop's orders (date, product, quantity, unit_price). Add a reusable function that "
        "computes the revenue per month and product, write monthly_revenue.csv, tell me which product grew most "
        "from the first month to the last, and plot the top 3 products' monthly revenue as lines in revenue.svg.",
        work=[
            CoderTask(
                "Add to the code library a function that computes the revenue per month and product of an orders CSV "
                "file (date, product, quantity, unit_price); use it on orders.csv to write monthly_revenue.csv, print "
                "the product whose revenue grew most from the first month to the last, and draw the top 3 products' "
                "monthly revenue as lines in revenue.svg.",
                [
                    (f"Extend the code library with `{REVENUE.spec.split(':')[0]}`.", [Action(REVENUE)]),
                    (
                        "Run code: write monthly_revenue.csv, print the product that grew most, draw revenue.svg.",
                        [Action(code=REPORT)],
                    ),
                    ("Give the final answer: the product that grew most and the files written.", []),
                ],
                "revenue_by_month_product is in the library; monthly_revenue.csv and revenue.svg are written.",
            )
        ],
        answer="cheese grew most; the monthly revenue is in monthly_revenue.csv and the top 3 in revenue.svg.",
        files={"orders.csv": _orders()},
        made=["monthly_revenue.csv", "revenue.svg"],
        library=["revenue_by_month_product"],
        seen=["grew most: cheese"],
    ),
    Goal(
        "reuse_function",
        "a function already in the library, reused",
        "Using the function already in the library, which month had the highest total revenue in orders.csv?",
        work=[
            CoderTask(
                "With revenue_by_month_product from the code library, find the month of orders.csv with the highest "
                "total revenue and print it with the total.",
                [
                    (
                        "Run code: sum the revenue per month with revenue_by_month_product and print the highest.",
                        [Action(code=BEST_MONTH)],
                    ),
                    ("Give the final answer: the month and its total.", []),
                ],
                "The month with the highest total revenue is printed above.",
            )
        ],
        answer="June (2026-06) had the highest total revenue.",
        memory_of="csv_and_chart",
        library=["revenue_by_month_product"],
        seen=["highest total revenue: 2026-06"],
    ),
    Goal(
        "package_install",
        "a package to install",
        "Convert config.yaml to config.json with PyYAML (install it if it is missing) and tell me its top-level keys.",
        work=[
            CoderTask(
                "Install PyYAML with pip if it is missing, then convert config.yaml to config.json and print its "
                "top-level keys.",
                [
                    ("Run code: pip install pyyaml.", [Action(code=INSTALL, language="bash")]),
                    ("Run code: convert config.yaml to config.json and print the keys.", [Action(code=CONVERT)]),
                    ("Give the final answer: the keys and the file.", []),
                ],
                "config.json is written; its keys are printed above.",
            )
        ],
        answer="config.json is written; its top-level keys are name, version, owners and limits.",
        files={"config.yaml": YAML_FILE},
        made=["config.json"],
        seen=["keys: name, version, owners, limits"],
    ),
    Goal(
        "user_answer",
        "a question only the user can answer",
        "Total the amounts in sales.csv for the region I choose: ask me which region.",
        work=[
            Ask("Which region of sales.csv should I total (north, south or east)?"),
            CoderTask(
                "Total the amount column of sales.csv per region and over all regions, and print the totals.",
                [
                    ("Run code: total the amounts per region and overall.", [Action(code=TOTAL)]),
                    ("Give the final answer: the totals.", []),
                ],
                "The totals per region and overall are printed above.",
            ),
        ],
        answer="You left the choice to me: north totals 160, south 100, east 55; all regions 315.",
        files={"sales.csv": SALES},
        seen=["all regions: 315.0"],
    ),
    Goal(
        "failing_test_fixed",
        "a function whose first version fails its tests",
        "Add a reusable median function to the library and tell me the median of 3, 1, 4, 1, 5, 9.",
        work=[
            CoderTask(
                "Add to the code library a function median(values) (the mean of the two middle values for an even "
                "count), then print the median of 3, 1, 4, 1, 5, 9.",
                [
                    (f"Extend the code library with `{MEDIAN.spec.split(':')[0]}`.", [Action(MEDIAN)]),
                    ("Run code: print the median of 3, 1, 4, 1, 5, 9.", [Action(code=MEDIAN_RUN)]),
                    ("Give the final answer: the median.", []),
                ],
                "median is in the library; the median of the values is printed above.",
            )
        ],
        answer="The median of 3, 1, 4, 1, 5, 9 is 3.5; median() is now in the library.",
        memory_of="csv_and_chart",
        library=["median", "revenue_by_month_product"],
        seen=["median: 3.5"],
    ),
    Goal(
        "two_coder_steps",
        "a goal of two Coder steps",
        "data.txt has one number per line, with empty lines and 'n/a' among them: clean it into clean.txt, then "
        "give me the mean and standard deviation of clean.txt.",
        work=[
            CoderTask(
                "Write the numbers of data.txt into clean.txt, one per line, leaving out empty lines and 'n/a'.",
                [
                    ("Run code: write clean.txt without empty lines and 'n/a'.", [Action(code=CLEAN)]),
                    ("Give the final answer: how many numbers were kept.", []),
                ],
                "clean.txt holds the numbers of data.txt.",
            ),
            CoderTask(
                "Print the mean and the standard deviation of the numbers in clean.txt.",
                [
                    ("Run code: compute and print the mean and standard deviation.", [Action(code=STATS)]),
                    ("Give the final answer: the two figures.", []),
                ],
                "The mean and standard deviation are printed above.",
            ),
        ],
        answer="clean.txt holds 5 numbers; their mean is 14.00 and their standard deviation 2.74.",
        files={"data.txt": DATA},
        made=["clean.txt"],
        seen=["mean 14.00, standard deviation 2.74"],
    ),
    Goal(
        "plot_from_text",
        "a plot from a text file",
        "temps.txt has one temperature per line for 30 days: plot them as a line chart in temps.svg and tell me "
        "the warmest day.",
        work=[
            CoderTask(
                "Draw the temperatures of temps.txt (one per line, one per day) as a line chart in "
                "temps.svg and print the warmest day.",
                [
                    ("Run code: draw temps.svg and print the warmest day.", [Action(code=PLOT)]),
                    ("Give the final answer: the warmest day and the chart.", []),
                ],
                "temps.svg is drawn; the warmest day is printed above.",
            )
        ],
        answer="The chart is in temps.svg; the warmest day is day 8.",
        files={"temps.txt": TEMPS},
        made=["temps.svg"],
        seen=["warmest: day 8 (18.0)"],
    ),
    Goal(
        "question_from_library",
        "a question answered from the library",
        "Which functions does my code library have, and in which modules?",
        work=[
            CoderTask(
                "List the functions of the code library with their modules.",
                [("Give the final answer: the functions and their modules.", [])],
                "The library has median (stats) and revenue_by_month_product (sales).",
            )
        ],
        answer="Your library has median (module stats) and revenue_by_month_product (module sales).",
        memory_of="failing_test_fixed",
        library=["median", "revenue_by_month_product"],
        answer_from_library=["median", "revenue_by_month_product"],
    ),
]


# ~~~ Reading a prompt ~~~
ROLES = [  # (role, a phrase of its system prompt); the first that matches
    ("jarvis_planner", "planner of Jarvis"),
    ("coder_planner", "plan how to reach a goal with code"),
    ("extlib_planner", "plan how to extend a Python code library"),
    ("plan_writer", "write a step-by-step plan"),
    ("jarvis", "You are Jarvis"),
    ("coder", "controller of Coder"),
    ("coder", "You are Coder"),
    ("extlib", "controller of ExtendLibrary"),
    ("extlib", "You are ExtendLibrary"),
    ("codegen", "You write Python functions"),
    ("codewriter", "write one Python function"),
]


def role_of(messages: List[dict]) -> str:
    system = str(messages[0].get("content") or "") if messages else ""
    for role, phrase in ROLES:
        if phrase in system:
            return role
    raise BenchmarkError(f"a prompt of no known chat: {system[:200]!r}")


class BenchmarkError(Exception):
    pass


def issued(messages: List[dict]) -> List[Tuple[str, Dict[str, Any]]]:
    """The commands this chat's earlier replies issued."""
    found = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        try:
            reply = json.loads(message["content"])
        except (TypeError, ValueError):
            continue
        if isinstance(reply, dict) and "command" in reply:
            found.append((reply["command"], reply.get("command_args") or {}))
    return found


def text_of(messages: List[dict]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def last_user(messages: List[dict]) -> str:
    return next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")


_PLAN_BLOCK = re.compile(r"(?:The plan \(stored in [^)]*\)|The plan is now|Your plan):\n(.*?)(?:\n\n|\Z)", re.S)
_DONE_STEP = re.compile(r"^\s*(\d+)[.)].*\[done\]", re.M)
_MARKED = re.compile(r"[Ss]teps? ((?:\d+(?:, | and )?)+)(?: is| are)? now marked (?:\[)?done")


def steps_marked(messages: List[dict]) -> set:
    """The plan steps the prompt shows as done: in the last plan it shows, or said to be marked done since."""
    text = text_of(messages)
    blocks = list(_PLAN_BLOCK.finditer(text))
    done = set(_DONE_STEP.findall(blocks[-1].group(1))) if blocks else set()
    after = text[blocks[-1].end() :] if blocks else text
    for match in _MARKED.finditer(after):
        done |= set(re.findall(r"\d+", match.group(1)))
    return {int(n) for n in done}


def plan_shown(messages: List[dict]) -> str:
    blocks = list(_PLAN_BLOCK.finditer(text_of(messages)))
    return blocks[-1].group(1) if blocks else ""


def mark(plan: str, numbers: List[int]) -> str:
    lines = []
    for line in plan.splitlines():
        step = re.match(r"\s*(\d+)[.)]", line)
        if step and int(step.group(1)) in numbers and "[done]" not in line:
            line += " [done]"
        lines.append(line)
    return "\n".join(lines)


def offers(messages: List[dict], argument: str, command: str = "") -> bool:
    """Whether the prompt's list of commands offers ``argument`` (for ``command``, or for any command)."""
    system = str(messages[0].get("content") or "")
    if not command:
        return argument in system
    line = re.search(rf"^\d+\. {re.escape(command)}: .*$", system, re.M)
    arguments = line.group(0).rsplit("Input arguments:", 1)[-1] if line else ""
    return bool(re.search(rf"\b{re.escape(argument)}\b", arguments))


def plan_steps_shown(messages: List[dict]) -> int:
    return len(re.findall(r"^\s*\d+[.)]\s", plan_shown(messages), re.M))


# ~~~ The model ~~~
class GoodModel:
    """Answers each request of one goal from what its prompt shows; records every request."""

    def __init__(self, goal: Goal):
        self.goal = goal
        self.calls: List[Tuple[str, List[dict], str]] = []  # (role, messages, reply)
        self.errors: List[str] = []

    def __call__(self, request: Dict[str, Any]) -> str:
        messages = request.get("messages") or []
        try:
            role = role_of(messages)
            reply = getattr(self, role)(messages)
        except BenchmarkError as error:
            self.errors.append(str(error))
            role, reply = "unknown", "I cannot answer this."
        self.calls.append((role, messages, reply))
        return reply

    # ~~~ Finding what a prompt is about ~~~
    def task_of(self, messages: List[dict]) -> CoderTask:
        text = text_of(messages)
        for item in self.goal.work:
            if isinstance(item, CoderTask) and item.goal in text:
                return item
        raise BenchmarkError("Coder's prompt holds none of the goals Jarvis gave")

    def function_of(self, messages: List[dict]) -> Function:
        text = text_of(messages)
        for item in self.goal.work:
            for _, actions in getattr(item, "steps", []):
                for action in actions:
                    if action.function and (action.function.spec in text or action.function.name in text):
                        return action.function
        raise BenchmarkError("the prompt names none of the functions of the goal")

    def library_shown(self, messages: List[dict]) -> bool:
        text = text_of(messages)
        names = self.goal.answer_from_library
        return bool(names) and all(name in text for name in names)

    # ~~~ Planners ~~~
    def jarvis_planner(self, messages: List[dict]) -> str:
        return self.goal.plan(self.library_shown(messages))

    def coder_planner(self, messages: List[dict]) -> str:
        task = self.task_of(messages)
        return "\n".join(f"{i}. {text}" for i, (text, _) in enumerate(task.steps, 1))

    def extlib_planner(self, messages: List[dict]) -> str:
        function = self.function_of(messages)
        return f"1. Write and test `{function.spec.split(':')[0]}`.\n2. Save it to the code library."

    def plan_writer(self, messages: List[dict]) -> str:
        return cmd("finish", summary="The user approved the plan.")

    # ~~~ Controllers ~~~
    def jarvis(self, messages: List[dict]) -> str:
        done = issued(messages)
        if done and done[-1][0] == "final_answer":
            return cmd("finish", summary="The user accepted the final answer.")
        answered_from_library = self.library_shown(messages) and plan_steps_shown(messages) <= 1
        work = [] if answered_from_library else self.goal.work
        count = len([c for c, _ in done if c in ("Coder", "ask_user")])
        completes = offers(messages, "completes_step", "Coder")
        if count and not completes and count not in steps_marked(messages):
            return cmd("update_plan", updated_plan=mark(plan_shown(messages), list(range(1, count + 1))))
        if count < len(work):
            item, extra = work[count], ({"completes_step": count + 1} if completes else {})
            if isinstance(item, Ask):
                extra = extra if offers(messages, "completes_step", "ask_user") else {}
                return cmd("ask_user", question=item.question, **extra)
            return cmd("Coder", goal=item.goal, **extra)
        extra = {"completes_step": len(work) + 1} if offers(messages, "completes_step", "final_answer") else {}
        return cmd("final_answer", answer=self.goal.answer, **extra)

    def coder(self, messages: List[dict]) -> str:
        task = self.task_of(messages)
        actions = [(step, action) for step, (_, items) in enumerate(task.steps, 1) for action in items]
        done = [c for c, _ in issued(messages) if c in ("extend_library", "run_code")]
        completes = offers(messages, "completes_step")
        steps = plan_steps_shown(messages)
        if done and not completes:
            finished = [
                step
                for step, (_, items) in enumerate(task.steps, 1)
                if items and all(i < len(done) for i, (s, _) in enumerate(actions) if s == step)
            ]
            if finished and not set(finished) <= steps_marked(messages):
                return cmd("update_plan", updated_plan=mark(plan_shown(messages), finished))
        if len(done) < len(actions):
            step, action = actions[len(done)]
            extra = {}
            if completes:
                last_of_step = all(s != step for s, _ in actions[len(done) + 1 :])
                if steps <= 1 and len(done) + 1 == len(actions):
                    extra = {"completes_step": 1}
                elif steps > 1 and last_of_step:
                    extra = {"completes_step": step}
            if action.function:
                if offers(messages, "module", "extend_library"):
                    extra["module"] = action.function.module
                return cmd("extend_library", goal=action.function.spec, **extra)
            return cmd("run_code", language=action.language, code=action.code, **extra)
        return cmd("finish", summary=task.summary)

    def extlib(self, messages: List[dict]) -> str:
        function = self.function_of(messages)
        text = text_of(messages)
        names = [c for c, _ in issued(messages)]
        wrote = "write_code" in names or "tests passed" in text.lower() or "passed: true" in text
        saved = "save_code" in names or f"Saved {function.name}" in text
        if not wrote:
            return cmd("write_code", goal=function.spec)
        if not saved:
            return cmd("save_code", module=function.module)
        if not offers(messages, "completes_step") and not {1, 2} <= steps_marked(messages):
            return cmd("update_plan", updated_plan=mark(plan_shown(messages), [1, 2]))
        return cmd("finish", summary=f"The library now has {function.name}.")

    def codegen(self, messages: List[dict]) -> str:
        function = self.function_of(messages)
        revising = any(m.get("role") == "assistant" for m in messages) or "revise" in last_user(messages).lower()
        code = function.code if revising or function.first_code is None else function.first_code
        return f"```python\n{code}\n```"

    def codewriter(self, messages: List[dict]) -> str:
        function = self.function_of(messages)
        done = [c for c, _ in issued(messages)]
        result = last_user(messages)
        if done and done[-1] == "test":
            if re.search(r"passed: true|tests passed|proposed tests passed", result, re.I) and not re.search(
                r"passed: false|failed", result, re.I
            ):
                return cmd("finish", summary=f"{function.name} is written, tested and accepted.")
            return cmd("write_code", goal=function.fix or "Fix the code so that the tests pass.")
        return cmd("test", tests=function.tests)


# ~~~ Running a goal ~~~
@dataclasses.dataclass
class Outcome:
    goal: str
    kind: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reuse: Optional[float] = None  # all controllers' calls after their chat's first: of the previous prompt
    lowest_reuse: Optional[float] = None
    lowest_chat: str = ""
    reuse_with_reply: Optional[float] = None  # of the previous prompt and its reply (what a server's KV cache holds)
    lowest_with_reply: Optional[float] = None
    new_tokens: int = 0  # controllers' prompt tokens not reusable from their previous call (prompt and reply)
    per_role: Dict[str, int] = dataclasses.field(default_factory=dict)
    problems: List[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def measure(model: GoodModel, outcome: Outcome) -> None:
    """Calls, tokens, and per controller chat the share of each prompt equal to the start of the chat's previous
    prompt (as OpenAI's prompt caching reuses it), and of the previous prompt followed by its reply (as a llama.cpp or
    vLLM server's cache holds it: the reply was generated there)."""
    from aiflows_jarvis.CoreFlowModule import cl100k_tokenizer

    encode = cl100k_tokenizer().encode
    previous: Dict[str, Tuple[List[int], List[int]]] = {}
    reused: Dict[str, List[int]] = defaultdict(lambda: [0, 0, 0])
    per_role: Dict[str, int] = defaultdict(int)
    for role, messages, reply in model.calls:
        tokens = encode(layout(messages), disallowed_special=())
        outcome.prompt_tokens += len(tokens)
        outcome.completion_tokens += len(encode(reply, disallowed_special=()))
        per_role[role] += 1
        if role not in ("jarvis", "coder", "extlib", "codewriter", "plan_writer"):
            continue
        chat = f"{role}:{hash(str(messages[0].get('content')))}"
        before = previous.get(chat)
        previous[chat] = (
            tokens,
            encode(layout(messages + [{"role": "assistant", "content": reply}]), disallowed_special=()),
        )
        if before is None:
            continue
        shared, with_reply = common_prefix(before[0], tokens), common_prefix(before[1], tokens)
        figures = reused[chat]
        figures[0] += shared
        figures[1] += with_reply
        figures[2] += len(tokens)
        outcome.new_tokens += len(tokens) - with_reply
    outcome.calls = len(model.calls)
    outcome.per_role = dict(per_role)
    if reused:
        total = sum(t for _, _, t in reused.values())
        outcome.reuse = sum(r for r, _, _ in reused.values()) / total
        outcome.reuse_with_reply = sum(r for _, r, _ in reused.values()) / total
        chat, (r, _, t) = min(reused.items(), key=lambda item: item[1][0] / item[1][2])
        outcome.lowest_reuse, outcome.lowest_chat = r / t, chat.split(":")[0]
        outcome.lowest_with_reply = min(r / t for _, r, t in reused.values())


def run_goal(goal: Goal, folders: Dict[str, Tuple[str, str]], work: str, root: str) -> Outcome:
    import time

    outcome = Outcome(goal.name, goal.kind)
    if goal.memory_of:
        memory, workdir = folders[goal.memory_of]
    else:
        memory, workdir = os.path.join(work, goal.name, "memory"), os.path.join(work, goal.name, "work")
        os.makedirs(memory)
        os.makedirs(workdir)
    folders[goal.name] = (memory, workdir)
    for name, content in goal.files.items():
        with open(os.path.join(workdir, name), "w") as f:
            f.write(content)
    model = GoodModel(goal)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AZURE_API_KEY", "JARVIS_TRACE")}
    env["NO_COLOR"] = "1"
    started = time.monotonic()
    with LoopbackLLMServer(replies=[model] * 400) as server:
        done = subprocess.run(
            [
                sys.executable,
                os.path.join(root, "run_jarvis.py"),
                "--api-base",
                server.url,
                "--model",
                "bench-model",
                "--context-window",
                "32768",
                "--yes",
                "--memory-dir",
                memory,
                "--workdir",
                workdir,
                goal.text,
            ],
            env=env,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=600,
        )
    outcome.seconds = time.monotonic() - started
    measure(model, outcome)
    if done.returncode != 0:
        outcome.problems.append(f"exit code {done.returncode}: {(done.stdout + done.stderr)[-600:]}")
    outcome.problems += model.errors
    for name in goal.made:
        if not os.path.exists(os.path.join(workdir, name)):
            outcome.problems.append(f"{name} was not written")
    library = ""
    for folder, _, names in os.walk(os.path.join(memory, "library")):
        library += "".join(open(os.path.join(folder, n), errors="replace").read() for n in names if n.endswith(".py"))
    for name in goal.library:
        if f"def {name}(" not in library:
            outcome.problems.append(f"the library has no {name}")
    everything = "\n".join(text_of(messages) for _, messages, _ in model.calls)
    for text in goal.seen:
        if text not in everything:
            outcome.problems.append(f"no prompt showed {text!r}")
    if not any(reply.startswith('{"command": "final_answer"') for _, _, reply in model.calls):
        outcome.problems.append("no final answer was given")
    return outcome


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", help="only these goals (comma-separated; the goals they build on run too)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--root", default=ROOT, help="the checkout whose run_jarvis.py runs (default: this one)")
    parser.add_argument("--keep", metavar="DIR", help="keep the memory and working folders in DIR")
    args = parser.parse_args(argv)
    wanted = set(args.goals.split(",")) if args.goals else {g.name for g in GOALS}
    by_name = {g.name: g for g in GOALS}
    for name in list(wanted):
        while name and by_name[name].memory_of:
            name = by_name[name].memory_of
            wanted.add(name)
    work = args.keep or tempfile.mkdtemp(prefix="jarvis-calls-")
    outcomes: List[Outcome] = []
    folders: Dict[str, Tuple[str, str]] = {}
    try:
        for goal in GOALS:
            if goal.name in wanted:
                outcomes.append(run_goal(goal, folders, work, os.path.abspath(args.root)))
                if not args.json:
                    print(f"  {goal.name}: {outcomes[-1].calls} calls", file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps([dataclasses.asdict(o) for o in outcomes], indent=1))
        return 0 if all(not o.problems for o in outcomes) else 1
    print(f"{'':<22} {'':>5} {'prompt':>8} {'compl.':>7} {'prefix reuse':>13} {'with reply':>13} {'new':>6}")
    print(
        f"{'goal':<22} {'calls':>5} {'tokens':>8} {'tokens':>7} {'all':>6} {'lowest':>6} {'all':>6} "
        f"{'lowest':>6} {'tokens':>6}"
    )

    def share(value: Optional[float]) -> str:
        return f"{value:.1%}" if value is not None else "-"

    for o in outcomes:
        print(
            f"{o.goal:<22} {o.calls:>5} {o.prompt_tokens:>8,} {o.completion_tokens:>7,} {share(o.reuse):>6} "
            f"{share(o.lowest_reuse):>6} {share(o.reuse_with_reply):>6} {share(o.lowest_with_reply):>6} "
            f"{o.new_tokens:>6,}{'  FAILED' if o.problems else ''}"
        )
    total = [o for o in outcomes if not o.problems]
    print(
        f"{'total':<22} {sum(o.calls for o in total):>5} {sum(o.prompt_tokens for o in total):>8,} "
        f"{sum(o.completion_tokens for o in total):>7,} {'':>27} {sum(o.new_tokens for o in total):>6,}"
    )
    for o in outcomes:
        for problem in o.problems:
            print(f"FAILED {o.goal}: {problem}")
    return 0 if all(not o.problems for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
