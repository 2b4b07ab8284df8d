"""The run report (app/run_report.py, written by run_jarvis.py): what it holds, that it is self-contained,
that hostile text is shown as text, --report FILE, a report that cannot be written, a stopped and a resumed run; and
the demo's report opened in a real headless Chromium (skipped when none is installed).

`python tests/test_run_report.py --screenshots docs/` makes the README's screenshots again.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from types import SimpleNamespace

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakes import Sink  # noqa: E402
from helpers import DEMO, DEMO_CALLS, run_jarvis, transcript_answering  # noqa: E402
from loopback_llm import HTTPError, LoopbackLLMServer  # noqa: E402

from aiflows_jarvis.app import report_html, run_report  # noqa: E402
from aiflows_jarvis.ChatFlowModule import Transcript  # noqa: E402
from aiflows_jarvis.CoreFlowModule import (
    Console,  # noqa: E402
    format_log_entry,  # noqa: E402
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTILE_ANSWER = "April grew the most. <script>window.pwned = 1; alert('answer')</script> <img src=x onerror=alert(2)>"
HOSTILE_PRINT = 'print("</pre><script>window.pwned = 2</script>")\n'


# ~~~ Reading a report ~~~
def report_of(folder) -> str:
    with open(os.path.join(folder, "report.html"), encoding="utf-8") as f:
        return f.read()


def loads_from_outside(page: str) -> list:
    """What a page would fetch: src/href/srcset/action/url(...) that is not a data: URI or an anchor in the page, and
    any <link> or <script src> or <iframe>/<object>/<embed> at all."""
    found = []
    for match in re.finditer(r"""\b(src|href|srcset|action|poster|data)\s*=\s*(["']?)([^"'\s>]*)""", page, re.I):
        value = match.group(3)
        if not (value.startswith("data:") or value.startswith("#")):
            found.append(match.group(0))
    found += re.findall(r"<(?:link|iframe|object|embed|base)\b[^>]*>", page, re.I)
    found += re.findall(r"url\((?!['\"]?data:)[^)]*\)", page, re.I)
    found += re.findall(r"<script\b[^>]*\bsrc\b[^>]*>", page, re.I)
    return found


def text_of(page: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities decoded), for assertions on what is shown."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)))


def section(page: str, name: str) -> str:
    """The text of one section of the page (``plans``, ``run``, ``figures``, ``library``, ``usage``, ...)."""
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, re.S)
    assert match, f"no {name} section"
    return text_of(match.group(1))


def summaries(page: str) -> list:
    """The tree's steps, in page order: (boss, command) from each step's summary."""
    return re.findall(r"<span class=\"who\">([^<]*)</span> <b class=\"cmd\">([^<]*)</b>", page)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo, run once for the tests that read its report."""
    folder = tmp_path_factory.mktemp("demo")
    done = run_jarvis(folder, "--demo", "--memory-dir", "mem")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return SimpleNamespace(folder=folder, memory=folder / "mem", stdout=done.stdout, page=report_of(folder / "mem"))


# ~~~ What the demo's report holds ~~~
def test_the_demo_writes_a_self_contained_report_of_the_whole_run(demo_run):
    page, shown = demo_run.page, text_of(demo_run.page)
    assert "Run report: mem/report.html" in demo_run.stdout, "the run says where its report is"
    assert not loads_from_outside(page), loads_from_outside(page)
    assert page.count("<script") == 1 and "default-src 'none'" in page, "one inline script; a CSP that loads nothing"
    goal = Transcript.load(DEMO).header["goal"]
    assert " ".join(goal.split()) in " ".join(shown.split()), "the goal"
    answer = section(page, "answer")
    assert "April grew the most (+17.2%, from 128 to 150)" in answer, "the final answer"
    assert "a replay of the recorded demo" in shown and "finished" in shown
    plans = section(page, "plans")
    # a sub-boss's plan is its goal, one step: Coder's is the goal Jarvis gave it, ExtendLibrary's the function
    for boss, step in (
        ("Jarvis", "Ask Coder to write a reusable function"),
        ("Coder", "The monthly sales of a shop"),
        ("ExtendLibrary", "svg_bar_chart(labels: list[str]"),
    ):
        assert boss in plans and step in plans, f"{boss}'s plan"
    assert "\u2713 done" in plans, "the done marks"
    assert summaries(page) == [
        ("Jarvis", "Coder"),
        ("Coder", "extend_library"),
        ("ExtendLibrary", "write_code"),
        ("ExtendLibrary", "save_code"),
        ("ExtendLibrary", "update_plan"),
        ("Coder", "run_code"),
        ("Coder", "extend_library"),
        ("ExtendLibrary", "write_code"),
        ("ExtendLibrary", "save_code"),
        ("ExtendLibrary", "update_plan"),
        ("Coder", "run_code"),
        ("Coder", "update_plan"),
        ("Jarvis", "update_plan"),
        ("Jarvis", "final_answer"),
        ("Jarvis", "update_plan"),
    ], "each sub-boss's task inside the command that ran it"
    assert "a new task starts" in shown, "ExtendLibrary's second task is marked"
    run = section(page, "run")
    assert "characters left out at" not in run and "[... " not in run, (
        "without --trace too, arguments and results are whole (the run's step record, mem/jarvis_steps.jsonl)"
    )
    spec = json.loads(Transcript.load(DEMO).replies()[6])["command_args"]["goal"]
    assert " ".join(spec.split()) in " ".join(run.split()), "the second function's spec, whole (the log cuts it)"
    assert run.count("by code") >= 6, "the steps made by code say so: write_code, save_code, update_plan"
    run_code = section(page, "run").split("run_code")[1]
    assert "Highest growth: Apr (+17.2%)" in run_code and "growth = growth_rates(sales)" in run_code, (
        "a code run with its code and output"
    )
    assert run_code.count("best = max(range(len(growth)), key=lambda i: growth[i])") == 1, (
        "the code the log shortened in the arguments is whole again, from code_runs/ (the result does not repeat it)"
    )
    assert re.search(r'<img src="data:image/svg\+xml;base64,[A-Za-z0-9+/=]+" alt="sales_chart.svg">', page), (
        "the chart is inlined"
    )
    assert '<a href="#figure-1">sales_chart.svg</a>' in page, "the code run that drew it links to it"
    library = section(page, "library")
    assert "def growth_rates(values: list[float]) -> list[float]:" in library
    assert 'def svg_bar_chart(labels: list[str], values: list[float], path: str, title: str = "") -> str:' in library
    assert "growth_rates (library/data.py)" in library and "svg_bar_chart (library/charts.py)" in library
    assert "The library's modules" in library
    assert re.search(r"charts\s+\(1\): Charts and images", library), "the library's modules, one line each"
    usage = section(page, "usage")
    assert (
        f"{DEMO_CALLS} LLM calls" in usage and "extend_library/write_code/CodeGenerator" in usage and "total" in usage
    )


def test_hostile_text_is_shown_as_text_and_report_writes_elsewhere(tmp_path):
    """A final answer and code with <script> (and the code's output) are shown as text; --report FILE writes there."""
    transcript = hostile_transcript(tmp_path)
    report = tmp_path / "out" / "run.html"
    done = run_jarvis(
        tmp_path,
        "--replay",
        str(transcript),
        "--yes",
        "--report",
        str(report),
        "--trace",
        str(tmp_path / "trace.jsonl"),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Run report: out/run.html" in done.stdout
    assert not (tmp_path / "memory" / "report.html").exists(), "--report FILE instead of the memory folder's"
    page = report.read_text(encoding="utf-8")
    assert page.count("<script") == 1 and "<img src=x" not in page and "window.pwned" in page
    shown = text_of(page)
    assert "<script>window.pwned = 1; alert('answer')</script> <img src=x onerror=alert(2)>" in shown, (
        "the answer is shown as the LLM wrote it"
    )
    assert shown.count("</pre><script>window.pwned = 2</script>") >= 2, "in the code, and in its output"
    assert f"a replay of {transcript}" in shown
    coder_goal = json.loads(Transcript.load(DEMO).replies()[1])["command_args"]["goal"]
    assert coder_goal in section(page, "run"), "with a trace, the arguments the log shortens are whole"
    assert "svg_bar_chart(labels" in section(page, "plans"), "... and the plans (ExtendLibrary's is its goal)"


def hostile_transcript(tmp_path):
    """The demo's recording with a hostile final answer, and a first code run that prints a script tag."""
    path = transcript_answering(tmp_path, HOSTILE_ANSWER)
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    for record in records:
        reply = record.get("reply", "")
        if '"run_code"' in reply and "growth_rates(sales)" in reply:
            reply = json.loads(reply)
            reply["command_args"]["code"] = HOSTILE_PRINT + reply["command_args"]["code"]
            record["reply"] = json.dumps(reply)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_the_report_does_not_contradict_or_repeat_itself(demo_run):
    page, shown = demo_run.page, text_of(demo_run.page)
    progress = re.findall(r'<b>(\w+)</b> <span class="meta">([^<]*)', page)
    assert progress == [("Jarvis", "finished"), ("Coder", "finished"), ("ExtendLibrary", "finished")], (
        "a boss that finished is not shown with steps left (the answer step is done by finishing)"
    )
    assert "result: result:" not in shown, "a boss's result carries its last step's: one key"
    assert "A new task starts here" not in shown and "ExtendLibrary: a new task starts." in shown
    assert "characters cut" not in shown, "the log's cut marker is not shown inside the text"
    assert (
        "the configured model" not in shown
        and "a replay of the recorded demo (LLM replies written by hand)" in shown
        and "model:" not in shown
    ), "where the replies come from, once"
    assert "repaired" not in section(page, "usage") and "\u2713" not in section(page, "usage"), (
        "no column of zeros, no legend of marks the table does not have"
    )
    assert "(no plan" not in section(page, "plans")
    for step in re.findall(r'<details class="step">.*?</details>', section(page, "run"), re.S):
        results = step.split("<h4>Result</h4>")[1:] if "<h4>Result</h4>" in step else []
        for result in results:
            assert (
                "<dt>failed</dt>" not in result
                and "<dt>code</dt>" not in result.split("<h4>")[0]
                or "write_code" in step
            ), "a result shows what the arguments do not: not the code run again, no flag"
    files = section(page, "files")
    assert "made by the run: sales_chart.svg" in " ".join(files.split()), "the files the run made"
    assert str(demo_run.memory) not in files, "paths relative to the memory folder"


def test_a_cut_text_is_cut_at_words_with_the_count_after_it():
    shown = text_of(report_html.pre_block("alpha beta gamma\n[... 10 characters cut ...]\nlta epsilon"))
    assert "alpha beta \u2026 epsilon" in shown and "18 characters left out" in shown, shown


# ~~~ When the report cannot be written ~~~
def test_a_report_that_cannot_be_written_is_one_line_and_the_exit_code_stays(tmp_path):
    (tmp_path / "memory" / "report.html").mkdir(parents=True)  # in the way of the file
    done = run_jarvis(tmp_path, "--demo")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if "run report" in line.lower()]
    assert len(lines) == 1 and lines[0].startswith("(The run report could not be written:"), lines
    assert "Traceback" not in done.stdout + done.stderr


def test_an_unexpected_failure_of_the_report_is_one_line(monkeypatch, tmp_path):
    from aiflows_jarvis.app import ending
    from aiflows_jarvis.app.jarvis import JARVIS
    from aiflows_jarvis.app.run import Session

    def broken(*args, **kwargs):
        raise RuntimeError("something unexpected")

    monkeypatch.setattr(run_report, "build_report", broken)
    sink = Sink()
    args = SimpleNamespace(demo=False, replay=None, resume=False, report=None)
    ending.write_run_report(
        Session(JARVIS, args, Console(stream=sink, color=False), str(tmp_path), 0.0, memory={}), None
    )
    assert sink.text.strip() == "(The run report could not be written: RuntimeError: something unexpected)"


def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    (tmp_path / "a_file").write_text("")
    for where, says in ((tmp_path, "is a folder"), (tmp_path / "a_file" / "r.html", "is not a folder")):
        done = run_jarvis(tmp_path, "--demo", "--report", str(where))
        assert done.returncode == 2 and says in done.stdout, done.stdout[-2000:]
    assert not (tmp_path / "memory").exists(), "nothing ran"


# ~~~ A stopped run, then the run resumed ~~~
def test_a_stopped_run_and_its_resumed_run_each_have_a_report(tmp_path):
    replies = Transcript.load(DEMO).replies()
    goal = Transcript.load(DEMO).header["goal"]
    extend = next(i for i, reply in enumerate(replies) if '"extend_library"' in reply)
    calls = extend + 2  # ... and the first function's code: the run stops before its tests are written
    with LoopbackLLMServer(replies=replies[:calls]) as server:
        first = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--max-calls", str(calls), goal)
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-2000:]
    said = [line for line in first.stdout.splitlines() if "budget" in line]
    assert said and not said[0].startswith(" "), "the stop is said at the margin, not at the depth of the stop"
    stopped = report_of(tmp_path / "memory")
    assert "stopped before the end" in stopped and "No final answer" in stopped
    assert summaries(stopped) == [
        ("Coder", "task under way when the run stopped"),
        ("ExtendLibrary", "task under way when the run stopped"),
    ], "Coder's task and ExtendLibrary's were under way: nothing of them was done yet"
    assert text_of(stopped).count("task under way when the run stopped") == 2, "Coder's task and ExtendLibrary's"
    started = json.loads((tmp_path / "memory" / "jarvis_run.json").read_text())["task_started"]

    # Jarvis asks Coder again, Coder (its plan kept) asks ExtendLibrary again, which writes the code again (code
    # written and not saved is gone after a stop) and goes on as recorded.
    with LoopbackLLMServer(replies=[replies[1], replies[extend]] + replies[extend + 1 :]) as server:
        second = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--resume")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
    run = json.loads((tmp_path / "memory" / "jarvis_run.json").read_text())
    assert run["task_started"] == started < run["started"], "the task started with the first run"
    resumed = report_of(tmp_path / "memory")
    shown = text_of(resumed)
    assert "resumed" in shown and "April grew the most" in section(resumed, "answer")
    assert "task under way" not in shown, "the resumed tasks are inside the commands that finished them"
    steps = summaries(resumed)
    assert steps[0] == ("Jarvis", "Coder") and steps[-2:] == [("Jarvis", "final_answer"), ("Jarvis", "update_plan")]
    assert steps.count(("ExtendLibrary", "save_code")) == 2 and steps.count(("Coder", "run_code")) == 2
    assert "the run was resumed here" in shown
    assert 'alt="sales_chart.svg"' in resumed and "def growth_rates(" in shown
    kept = list((tmp_path / "memory" / "archive").glob("report-*.html"))
    assert len(kept) == 1 and "No final answer" in kept[0].read_text(), "the stopped part's report is kept"


# ~~~ Reports kept per run ~~~
def test_a_later_run_archives_the_report_of_the_run_before_with_its_plans_and_logs(demo_run, tmp_path):
    shutil.copytree(demo_run.memory, tmp_path / "mem")
    goal = Transcript.load(DEMO).header["goal"]
    with LoopbackLLMServer(replies=[HTTPError(401, "invalid key")]) as server:  # the new run fails at once
        later = run_jarvis(tmp_path, "--memory-dir", "mem", "--api-base", server.url, "--yes", goal)
    assert later.returncode in (1, 2), later.stdout[-3000:] + later.stderr[-2000:]
    kept = [p for p in (tmp_path / "mem" / "archive").iterdir() if (p / "report.html").exists()]
    assert len(kept) == 1 and (kept[0] / "logs_jarvis.txt").exists(), "the report went with its plans and logs"
    page = (kept[0] / "report.html").read_text()
    assert 'badge ok">finished' in page and "April grew the most" in section(page, "answer"), "the good run's"
    newest = report_of(tmp_path / "mem")
    assert "No final answer" in newest and 'badge bad">failed' in newest, "the newest is the failed run's"
    assert f"kept in {os.path.join('mem', 'archive', kept[0].name)}" in later.stdout


def test_resume_after_a_finished_run_says_so_and_changes_nothing(demo_run, tmp_path):
    shutil.copytree(demo_run.memory, tmp_path / "mem")
    before = report_of(tmp_path / "mem")
    done = run_jarvis(tmp_path, "--memory-dir", "mem", "--resume", "--api-base", "http://127.0.0.1:9/v1")
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-2000:]
    assert "had finished: there is nothing to resume" in done.stdout and "without --resume" in done.stdout
    assert report_of(tmp_path / "mem") == before and not (tmp_path / "mem" / "archive").exists()


# ~~~ The tree, from logs made here ~~~
def write_log(path, entries):
    with open(path, "w", encoding="utf-8") as f:
        for number, (when, command, args, result) in enumerate(entries, 1):
            f.write(format_log_entry(number, command, args, result, when=when) + "\n")


def test_a_task_without_entries_does_not_shift_the_tasks_after_it(tmp_path):
    """Coder ran twice; its first task logged nothing, so its second has no `new_task` line: by their times, the
    entries go to the second command."""
    layout = {
        "Jarvis": {"plan": str(tmp_path / "plan_j.txt"), "logs": str(tmp_path / "logs_j.txt")},
        "Jarvis/CtrlExMem/Executor/Coder": {"plan": str(tmp_path / "plan_c.txt"), "logs": str(tmp_path / "logs_c.txt")},
    }
    t = 1_800_000_000
    write_log(
        tmp_path / "logs_j.txt",
        [
            (t + 10, "Coder", {"goal": "first"}, "status: stopped: gave up"),
            (t + 20, "Coder", {"goal": "second"}, "status: finished"),
        ],
    )
    write_log(tmp_path / "logs_c.txt", [(t + 15, "run_code", {"code": "print(2)"}, "2")])
    tree = run_report.build_tree(run_report.bosses_of(layout), t)
    assert [len(node.children) for node in tree] == [0, 1]
    assert tree[1].children[0].entry.command == "run_code" and tree[1].children[0].start == t + 10
    page = run_report.build_report(str(tmp_path), layout, outcome={"status": "finished", "answer": "done"})
    assert "stopped: gave up" in page and "5 s" in page, "the stopped sub-boss, and the time since the step before"


PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAfbLI3wAAAABJRU5ErkJggg=="
)


def test_a_boss_the_run_never_used_has_no_plan_and_no_files_in_the_report(tmp_path):
    """Coder ran code only: ExtendLibrary wrote nothing, so neither Plans nor Files name it (they said "(no plan)"
    and "ExtendLibrary:" over nothing)."""
    layout = {
        "Jarvis": {"plan": str(tmp_path / "plan_jarvis.txt"), "logs": str(tmp_path / "logs_jarvis.txt")},
        "Jarvis/CtrlExMem/Executor/Coder": {
            "plan": str(tmp_path / "plan_coder.txt"),
            "logs": str(tmp_path / "logs_coder.txt"),
        },
        "Jarvis/CtrlExMem/Executor/Coder/CtrlExMem/Executor/extend_library": {
            "plan": str(tmp_path / "plan_extlib.txt"),
            "logs": str(tmp_path / "logs_extlib.txt"),
        },
    }
    (tmp_path / "plan_jarvis.txt").write_text("1. Print it. [done]\n")
    (tmp_path / "plan_coder.txt").write_text("1. Print it. [done]\n")
    write_log(tmp_path / "logs_jarvis.txt", [(None, "Coder", {"goal": "Print it."}, "Coder finished: 42")])
    write_log(tmp_path / "logs_coder.txt", [(None, "run_code", {"code": "print(42)"}, "42")])
    page = run_report.build_report(str(tmp_path), layout, outcome={"status": "finished", "answer": "42"})
    assert "ExtendLibrary" not in section(page, "plans") and "(no plan" not in section(page, "plans")
    assert "ExtendLibrary" not in section(page, "files"), section(page, "files")


def test_each_legend_of_the_usage_table_only_when_it_applies():
    from aiflows_jarvis.CoreFlowModule.run.usage import UsageMeter

    reported = UsageMeter()
    reported.record("Jarvis/CtrlExMem/Controller", 1_000, 100, 0.2, model="gpt-4", reported=True)
    page = run_report._usage_html(reported)
    assert "cl100k" not in page and "~" not in text_of(page) and "repaired" not in page, (
        "the API reported every count: no estimate to explain, no column of zeros"
    )
    assert "$ from litellm's price list" in text_of(page)
    mended = UsageMeter()
    mended.record("Jarvis/CtrlExMem/Controller", 1_000, 100, 0.2, model="openai/local", reported=False)
    mended.record_repair("Jarvis/CtrlExMem/Controller", "fence")
    shown = text_of(run_report._usage_html(mended))
    assert "~ estimated with cl100k" in shown and "- no price for openai/local" in shown
    assert "repaired: replies read once their form was mended" in shown, "a column shown is explained"


def test_plan_versions_of_this_run_and_figures_only_from_where_code_ran(tmp_path):
    memory, outside = tmp_path / "mem", tmp_path / "outside"
    (memory / "archive").mkdir(parents=True)
    outside.mkdir()
    layout = {"Jarvis": {"plan": str(memory / "plan_jarvis.txt"), "logs": str(memory / "logs_jarvis.txt")}}
    started = time.time() - 60
    (memory / "jarvis_run.json").write_text(json.dumps({"goal": "draw", "started": started}))
    (memory / "plan_jarvis.txt").write_text("1. Draw it again. [done]\n2. Answer.\n")
    (memory / "archive" / "plan_jarvis-20990101-000000-1.txt").write_text("1. Draw it.\n2. Answer.\n")
    old = memory / "archive" / "plan_jarvis-20000101-000000-1.txt"
    old.write_text("1. A plan of an earlier run.\n")
    os.utime(old, (started - 3600, started - 3600))
    for path in (memory / "chart.png", outside / "secret.png"):
        path.write_bytes(PNG)
    os.symlink(outside / "secret.png", memory / "link.png")
    (memory / "fake.png").write_text("<html>not a png</html>")
    notes = (
        f"[figure saved: {outside / 'secret.png'}]\n[files created or modified: chart.png, ../outside/secret.png, "
        "link.png, fake.png]"
    )
    write_log(memory / "logs_jarvis.txt", [(None, "run_code", {"code": "draw()"}, notes)])
    page = run_report.build_report(str(memory), layout, outcome={"status": "finished", "answer": "drawn"})
    plans = section(page, "plans")
    assert "finished, 1 earlier version" in plans and "Draw it again." in plans
    assert "Earlier version 1" in plans and "Draw it." in plans and "earlier run" not in plans, (
        "the copy re_plan kept in this run, not one of an earlier run"
    )
    figures = section(page, "figures")
    assert page.count("data:image/png;base64,") == 1 and "chart.png" in figures, "the figure made where code ran"
    assert "secret.png" not in figures and "link.png" not in figures, (
        "a file outside where code ran is not brought in, named or through a link"
    )
    assert "fake.png (not shown" in figures, "a file named like a figure that is not one is named, not shown"


# ~~~ In a real browser ~~~
CHROMIUM = next(
    (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(name)),
    None,
)


class Chromium:
    """Headless Chromium driven through the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
    ended by NUL on file descriptors 3 and 4), so no websocket client or port is needed."""

    def __init__(self, profile: str):
        self._to_r, self._to_w = os.pipe()
        self._from_r, self._from_w = os.pipe()
        to_r, from_w = self._to_r, self._from_w

        def pipes_as_3_and_4():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--mute-audio",
                "--hide-scrollbars",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=pipes_as_3_and_4,
            pass_fds=(3, 4),
            env={**os.environ, "HOME": profile, "XDG_CONFIG_HOME": profile, "XDG_CACHE_HOME": profile},
        )  # all in it
        os.close(self._to_r)
        os.close(self._from_w)
        self._buffer, self._next_id, self.events = b"", 0, []
        self.session = None

    def send(self, method: str, params: dict = None, session: bool = True, wait: float = 60):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_w, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(wait)
            if reply.get("id") == self._next_id:
                assert "error" not in reply, (method, reply["error"])
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, wait: float = 60) -> dict:
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._read(wait))

    def _read(self, wait: float) -> dict:
        """The next message; a bound on the wait (not a timing assertion): a browser that hangs fails the test."""
        deadline = time.monotonic() + wait
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_r], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "Chromium did not answer"
            chunk = os.read(self._from_r, 1 << 16)
            assert chunk, "Chromium closed the pipe"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url: str, width: int = 1200, height: int = 900) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Network"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) in the middle of the element."""
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView("
            "{block: 'center'}); const r = e.getBoundingClientRect(); return [r.x + Math.min(r.width / 2, "
            "40), r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1}
            )

    def screenshot(self, path: str) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, wait=10)
        except (AssertionError, OSError):
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_w, self._from_r):
            os.close(fd)


def look_at(report: str, screenshot: str = None) -> dict:
    """Open a report in headless Chromium: expand a step with a mouse click, then every step with the button; what
    was seen, and the requests the page made."""
    with tempfile.TemporaryDirectory() as profile:
        browser = Chromium(profile)
        try:
            browser.open("file://" + os.path.abspath(report), height=1700 if screenshot else 900)
            seen = {"images": browser.js("Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth])")}
            step = "#run details.step"
            seen["step_before"] = browser.js(
                f"(() => {{ const d = document.querySelector('{step}'); return [d.open, "
                "d.querySelector(':scope > div').checkVisibility()]; })()"
            )
            browser.click(f"{step} > summary")
            seen["step_after"] = browser.js(
                f"(() => {{ const d = document.querySelector('{step}'); return [d.open, "
                "d.querySelector(':scope > div').checkVisibility(), "
                "d.querySelector(':scope > div').getBoundingClientRect().height]; })()"
            )
            seen["closed_before_all"] = browser.js("document.querySelectorAll('#run details:not([open])').length")
            browser.click("button[data-open=yes]")
            seen["closed_after_all"] = browser.js("document.querySelectorAll('#run details:not([open])').length")
            seen["pwned"] = browser.js("typeof window.pwned")
            seen["text"] = browser.js("document.body.innerText")
            if screenshot:  # the bosses open, and the first code run
                browser.click("button[data-open=no]")
                browser.js(
                    "document.querySelectorAll('#run details.boss').forEach(d => d.open = true);"
                    "Array.from(document.querySelectorAll('#run details.step > summary')).find("
                    "s => s.querySelector('.cmd').textContent === 'run_code').id = 'shot'"
                )
                browser.click("#shot")
                browser.js("window.scrollTo(0, 0)")
                browser.screenshot(screenshot)
            seen["requests"] = [
                e["params"]["request"]["url"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"
            ]
            seen["dialogs"] = [e for e in browser.events if e.get("method") == "Page.javascriptDialogOpening"]
        finally:
            browser.close()
    return seen


@pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on PATH (apt-get install chromium): the report is not opened in a browser"
)
def test_the_demo_report_in_headless_chromium(demo_run, tmp_path):
    seen = look_at(str(demo_run.memory / "report.html"), screenshot=str(tmp_path / "report.png"))
    assert seen["images"] == [["sales_chart.svg", True, seen["images"][0][2]]] and seen["images"][0][2] > 0, (
        "the figure shows"
    )
    assert seen["step_before"] == [False, False], "a step starts closed, its content hidden"
    assert seen["step_after"][:2] == [True, True] and seen["step_after"][2] > 0, "a click opens it"
    assert seen["closed_before_all"] > 0 and seen["closed_after_all"] == 0, "Expand all opens every step"
    assert "Highest growth: Apr (+17.2%)" in seen["text"]
    assert all(url.startswith(("file://", "data:")) for url in seen["requests"]), seen["requests"]
    assert not seen["dialogs"] and seen["pwned"] == "undefined"
    with open(tmp_path / "report.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (apt-get install chromium)")
def test_at_phone_width_the_triangles_of_the_top_steps_are_on_the_page(demo_run):
    """At 420 px the page has 12 px of margin: a top step's triangle (outside its summary) needs room of its own,
    else half of it is cut at the left edge."""
    with tempfile.TemporaryDirectory() as profile:
        browser = Chromium(profile)
        try:
            browser.open("file://" + str(demo_run.memory / "report.html"), width=420)
            left = browser.js("document.querySelector('#run details > summary').getBoundingClientRect().left")
            width = browser.js("document.documentElement.scrollWidth")
        finally:
            browser.close()
    assert left >= 20, f"the first step's summary starts {left} px from the edge: its triangle is cut"
    assert width <= 420, "nothing wider than the screen"


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (apt-get install chromium)")
def test_hostile_text_runs_nothing_in_the_browser(tmp_path):
    layout = {"Jarvis": {"plan": str(tmp_path / "plan.txt"), "logs": str(tmp_path / "logs.txt")}}
    (tmp_path / "plan.txt").write_text("1. <script>window.pwned = 3</script> [done]\n")
    write_log(
        tmp_path / "logs.txt",
        [(None, "run_code", {"code": HOSTILE_PRINT}, "</pre><script>window.pwned=4</script>\nfeedback: <b>hi</b>")],
    )
    (tmp_path / "jarvis_run.json").write_text(json.dumps({"goal": "<script>window.pwned = 5</script>"}))
    run_report.write_report(
        str(tmp_path / "report.html"), str(tmp_path), layout, outcome={"status": "finished", "answer": HOSTILE_ANSWER}
    )
    seen = look_at(str(tmp_path / "report.html"))
    assert seen["pwned"] == "undefined" and not seen["dialogs"]
    for text in (
        "<script>window.pwned = 5</script>",
        "<script>window.pwned = 3</script>",
        "<b>hi</b>",
        "</pre><script>window.pwned=4</script>",
        HOSTILE_ANSWER,
    ):
        assert text in seen["text"], text


def _shot(report: str, path: str, width: int, height: int, expand: str) -> None:
    """A screenshot of the top of ``report`` at ``width`` x ``height`` px; ``expand``: "all" opens every step,
    "bosses" the bosses and the first code run."""
    with tempfile.TemporaryDirectory() as profile:
        browser = Chromium(profile)
        try:
            browser.open("file://" + os.path.abspath(report), width=width, height=height)
            if expand == "all":
                browser.click("button[data-open=yes]")
            else:
                browser.js(
                    "document.querySelectorAll('#run details.boss').forEach(d => d.open = true);"
                    "const s = Array.from(document.querySelectorAll('#run details.step')).find("
                    "d => d.querySelector('.cmd').textContent === 'run_code'); if (s) s.open = true;"
                )
            browser.js("window.scrollTo(0, 0)")
            browser.screenshot(path)
        finally:
            browser.close()


def make_screenshots(folder: str) -> None:
    """The README's screenshots, in ``folder``: the reports of Jarvis's demo, AutoGPT's demo and a run that failed
    (the LLM server went away in the middle), each at 1,400 and 420 px."""
    env = {**os.environ, "NO_COLOR": "1"}
    with tempfile.TemporaryDirectory() as scratch:
        for script in ("run_jarvis.py", "run_autogpt.py"):
            done = subprocess.run(
                [sys.executable, os.path.join(ROOT, script), "--demo"],
                cwd=scratch,
                capture_output=True,
                text=True,
                env=env,
            )
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        replies = Transcript.load(DEMO).replies()
        cut = next(i for i, r in enumerate(replies) if '"run_code"' in r) + 1  # after the first code run

        def server_goes_away(body):
            threading.Thread(target=server.close).start()
            return HTTPError(503, "overloaded")

        with LoopbackLLMServer(replies=replies[:cut] + [server_goes_away]) as server:
            done = subprocess.run(
                [
                    sys.executable,
                    os.path.join(ROOT, "run_jarvis.py"),
                    "--api-base",
                    server.url,
                    "--yes",
                    "--memory-dir",
                    "failed",
                    Transcript.load(DEMO).header["goal"],
                ],
                cwd=scratch,
                capture_output=True,
                text=True,
                env=env,
            )
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        reports = {
            "jarvis": ("memory/report.html", "bosses"),
            "autogpt": ("memory/autogpt_report.html", "all"),
            "failed": ("failed/report.html", "bosses"),
        }
        for name, (report, expand) in reports.items():
            for width, height in ((1400, 1500), (420, 1500)):
                _shot(
                    os.path.join(scratch, report),
                    os.path.join(folder, f"report-{name}-{width}.png"),
                    width,
                    height,
                    expand,
                )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--screenshots" and CHROMIUM:
        make_screenshots(sys.argv[2])
    else:
        sys.exit("usage: python tests/test_run_report.py --screenshots docs/   (needs Chromium on PATH)")
