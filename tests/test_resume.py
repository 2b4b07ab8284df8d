"""--resume: a run stopped inside Coder or inside ExtendLibrary goes on where it was stopped.

The sub-boss given its interrupted task again resumes it (a `resume` entry in its log, its plan kept, no `new_task`),
its log says what its controller must know (the Python session is new; code written and not saved is gone), a
function saved just before the run stopped has its plan steps marked done, and a resumed unattended run stays
unattended (`jarvis_run.json` keeps --yes).
"""

from __future__ import annotations

import json
import os

import pytest
from fakes import command, finish, library_text
from helpers import DEMO, commands, run_jarvis
from loopback_llm import LoopbackLLMServer

from aiflows_jarvis.AbstractBossFlowModule.AbstractBossFlow import task_record_path
from aiflows_jarvis.app import launcher
from aiflows_jarvis.ChatFlowModule import Transcript
from aiflows_jarvis.CodeLibraryFlowModule import library_entries
from aiflows_jarvis.CoreFlowModule import AutoApproveInput, BudgetExceeded, read_text, split_log_entries, undone_steps
from aiflows_jarvis.ExtendLibraryFlowModule.ExtendLibraryFlow import steps_done_by_saving
from aiflows_jarvis.ExtendLibraryFlowModule.SaveCodeAtomicFlow import definition_digests

SESSION_NOTE = "The Python session is new"
UNSAVED_NOTE = "Code written with write_code and not saved is gone"
LOGS = ("logs_jarvis.txt", "logs_coder.txt", "logs_extlib.txt")
# What Coder's controller does after reading that the session is new: the second run_code of the demo uses `months`
# and `sales` from the first, so it defines them again.
DRAW_AGAIN = command(
    "run_code",
    language="python",
    code=(
        'from library import svg_bar_chart\n\nmonths = ["Jan", "Feb", "Mar", "Apr", "May", "Jun"]\n'
        "sales = [120, 135, 128, 150, 171, 165]\n"
        'print(svg_bar_chart(months, sales, "sales_chart.svg", "Monthly sales"))'
    ),
)


def library_names(memory) -> list:
    """The names the library package defines, module by module (functions and classes)."""
    return [e["name"] for e in library_entries(str(memory / "library.py")) if e["kind"] != "constant"]


def entry(log, command_name):
    """The text of the (only) entry of ``command_name`` in the log file ``log``."""
    (found,) = [text for _, text in split_log_entries(read_text(log)) if text.split(" ---")[0].endswith(command_name)]
    return found


def task_records(memory):
    return sorted(name for name in LOGS if os.path.exists(task_record_path(str(memory / name))))


# ~~~ Through the command line: the demo's replies, a budget stops the run where wanted, --resume goes on ~~~
# In the seed's mode (`bookkeeping_by_code: false`, every step through the LLM), a budget can stop the run between
# any two steps: between ExtendLibrary's save_code and its update_plan, say. Its recording is the demo's goal made
# the seed's way (scripts/make_demo_transcript.py --seed).
SEED_DEMO = os.path.join(os.path.dirname(__file__), "data", "seed_demo_transcript.jsonl")
CONFIG = os.path.join(os.path.dirname(os.path.dirname(__file__)), "configs", "jarvis.yaml")


@pytest.fixture(scope="module")
def seed_replies():
    """The seed-mode demo's 39 replies: [3] Jarvis -> Coder, [20] Coder's first run_code, [21] Coder ->
    extend_library (svg_bar_chart), [22:25] its plan, [30] its save_code, [31] its update_plan, [33] Coder's second
    run_code, [34:] the rest."""
    replies = Transcript.load(SEED_DEMO).replies()
    assert len(replies) == 39 and '"save_code"' in replies[30] and '"update_plan"' in replies[31]
    assert '"run_code"' in replies[20] and "months" in replies[33] and '"extend_library"' in replies[21]
    assert '"Coder"' in replies[3]
    return replies


@pytest.fixture
def seed_config(tmp_path):
    """configs/jarvis.yaml with `bookkeeping_by_code: false`."""
    text = read_text(CONFIG)
    seed = text.replace("bookkeeping_by_code: true", "bookkeeping_by_code: false")
    assert seed != text
    path = tmp_path / "seed.yaml"
    path.write_text(seed)
    return str(path)


def first_run(tmp_path, replies, calls, *options):
    """A --yes run on the demo's goal, stopped by --max-calls after ``calls`` LLM calls (exit code 3)."""
    with LoopbackLLMServer(replies=replies[:calls]) as server:
        done = run_jarvis(
            tmp_path,
            "--api-base",
            server.url,
            "--yes",
            "--max-calls",
            str(calls),
            *options,
            Transcript.load(DEMO).header["goal"],
        )
        assert len(server.requests) == calls
    assert done.returncode == 3 and "reached its budget" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    return done


def resumed_run(tmp_path, replies):
    """``run_jarvis.py --resume`` (no --yes: it is remembered), stdin closed: a question would end it with exit 1."""
    with LoopbackLLMServer(replies=replies) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--resume")
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        assert len(server.requests) == len(replies) and not server.errors
        return done, server.requests


def test_a_run_stopped_in_extend_library_between_save_code_and_update_plan_resumes_there(
    tmp_path, seed_replies, seed_config
):
    replies, memory = seed_replies, tmp_path / "memory"
    first_run(tmp_path, replies, 31, "--config", seed_config)  # ExtendLibrary's call after save_code is not made
    assert library_names(memory) == ["growth_rates", "svg_bar_chart"]
    assert "[done]" not in read_text(memory / "plan_extlib.txt"), "the run stopped before update_plan"
    assert task_records(memory) == sorted(LOGS), "each boss was inside its task when the run stopped"
    run_file = json.loads(read_text(memory / "jarvis_run.json"))
    assert run_file["yes"] is True and run_file["config"] == seed_config and run_file["editor"] is None

    # Jarvis calls Coder with the same task, Coder calls ExtendLibrary with the same task: both resume it.
    done, requests = resumed_run(tmp_path, [replies[3], replies[21], *replies[31:33], DRAW_AGAIN, *replies[34:]])
    assert "(auto)" in done.stdout, "--yes was remembered: plans and code are approved with nobody asked"
    assert not any("plan how to" in r["messages"][0]["content"] for r in requests), (
        "no boss wrote a new plan: each continued with the one it had"
    )
    extlib_prompt = "\n".join(m["content"] for m in requests[2]["messages"])  # its head, then its memory
    assert "You are ExtendLibrary" in extlib_prompt
    assert "Standard library only. [done]\n2. Save it to the code library. [done]" in extlib_prompt, (
        "the function saved before the run stopped has its steps marked done before the controller is asked"
    )

    assert commands(memory / "logs_jarvis.txt", markers=True)[0] == "resume"
    assert commands(memory / "logs_coder.txt", markers=True) == [
        "extend_library",
        "update_plan",
        "run_code",
        "resume",
        "extend_library",
        "run_code",
        "update_plan",
    ]
    coder_resume = entry(memory / "logs_coder.txt", "resume")
    assert SESSION_NOTE in coder_resume and "Entries [1] to [3] above are this task's" in coder_resume
    assert commands(memory / "logs_extlib.txt", markers=True) == [
        "write_code",
        "save_code",
        "update_plan",
        "new_task",
        "write_code",
        "save_code",
        "resume",
        "update_plan",
    ]
    extlib_resume = entry(memory / "logs_extlib.txt", "resume")
    assert "svg_bar_chart was saved into the library before the run stopped" in extlib_resume
    assert "steps 1, 2 now marked done" in extlib_resume and UNSAVED_NOTE in extlib_resume
    last = split_log_entries(read_text(memory / "logs_extlib.txt"))[-1][1]
    assert " update_plan ---" in last and "already held this plan" in last, (
        "the controller's own update then changes nothing"
    )

    plan = read_text(memory / "plan_extlib.txt")
    assert plan.count("[done]") == 2
    assert library_names(memory) == ["growth_rates", "svg_bar_chart"], "every function saved is in the library once"
    assert "<svg" in read_text(tmp_path / "sales_chart.svg"), (
        "the code ran in the working folder (the run's, remembered)"
    )
    assert json.loads(read_text(memory / "jarvis_run.json"))["yes"] is True
    assert task_records(memory) == [], "every task ended"


def test_a_run_stopped_in_coder_resumes_coder_and_its_log_says_the_session_is_new(tmp_path, seed_replies, seed_config):
    replies, memory = seed_replies, tmp_path / "memory"
    first_run(tmp_path, replies, 21, "--config", seed_config)  # after Coder's first run_code: `months` and `sales`
    assert commands(memory / "logs_coder.txt") == ["extend_library", "update_plan", "run_code"]
    assert task_records(memory) == ["logs_coder.txt", "logs_jarvis.txt"], "ExtendLibrary's task had ended"

    done, requests = resumed_run(tmp_path, [replies[3], *replies[21:33], DRAW_AGAIN, *replies[34:]])
    assert "You are Coder" in requests[1]["messages"][0]["content"], "Coder did not plan again"
    assert commands(memory / "logs_coder.txt", markers=True) == [
        "extend_library",
        "update_plan",
        "run_code",
        "resume",
        "extend_library",
        "run_code",
        "update_plan",
    ]
    assert SESSION_NOTE in entry(memory / "logs_coder.txt", "resume"), (
        "Coder's controller, which uses the session's variables, is told they are gone"
    )
    assert SESSION_NOTE in requests[1]["messages"][1]["content"], "... in its prompt (its memory: the first message)"
    extlib = commands(memory / "logs_extlib.txt", markers=True)
    assert extlib == ["write_code", "save_code", "update_plan", "new_task", "write_code", "save_code", "update_plan"]
    assert "The run was stopped and resumed before this task" in entry(memory / "logs_extlib.txt", "new_task"), (
        "ExtendLibrary's finished task is not resumed: its next one is new"
    )
    assert read_text(memory / "plan_coder.txt").strip() == json.loads(replies[34])["command_args"]["updated_plan"], (
        "Coder's plan is the one it resumed, updated by its controller"
    )
    assert library_names(memory) == ["growth_rates", "svg_bar_chart"]
    assert task_records(memory) == []


def test_with_bookkeeping_by_code_a_stopped_coder_resumes_its_one_step_plan(tmp_path):
    """The default mode: Coder's plan is its goal; stopped after its first run_code, it resumes that plan (no
    planner call), is told the session is new, draws the chart and finishes by itself."""
    replies, memory = Transcript.load(DEMO).replies(), tmp_path / "memory"
    chart = [i for i, reply in enumerate(replies) if '"extend_library"' in reply][1]
    first_run(tmp_path, replies, chart)  # Coder's call for the second function is not made
    assert commands(memory / "logs_coder.txt") == ["extend_library", "run_code"]
    assert task_records(memory) == ["logs_coder.txt", "logs_jarvis.txt"]
    draw_again = json.loads(DRAW_AGAIN)
    draw_again["command_args"]["completes_step"] = 1
    done, requests = resumed_run(tmp_path, [replies[1], *replies[chart:-2], json.dumps(draw_again), replies[-1]])
    assert (
        SESSION_NOTE in requests[1]["messages"][1]["content"]
        and "1. Reach the goal above." in requests[1]["messages"][1]["content"]
    ), "Coder resumed its plan of one step, told the session is new"
    assert commands(memory / "logs_coder.txt", markers=True) == [
        "extend_library",
        "run_code",
        "resume",
        "extend_library",
        "run_code",
        "update_plan",
    ]
    assert not undone_steps(read_text(memory / "plan_coder.txt")) and task_records(memory) == []
    assert "<svg" in read_text(tmp_path / "sales_chart.svg")


def test_no_yes_on_the_resume_command_line_asks_again(tmp_path):
    replies, memory = Transcript.load(DEMO).replies(), tmp_path / "memory"
    first_run(tmp_path, replies, 1)  # Jarvis's plan is written and approved; its controller is not asked
    with LoopbackLLMServer(replies=replies[1:3]) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--resume", "--no-yes")
    assert done.returncode == 1 and "terminal input is closed" in done.stdout, done.stdout[-3000:]
    assert json.loads(read_text(memory / "jarvis_run.json"))["yes"] is False, "the run file says what this run did"


# ~~~ In one process: which task a boss below a resumed one is given decides what its log says ~~~
GOAL = "Count the words of 'a b c'."
CODER_GOAL = "Count the words of 'a b c' with code."


@pytest.fixture
def jarvis(tmp_path, scripted_llm, quiet_console, run_context):
    """``start(resume, seed=False)``: Jarvis (every chat scripted) on the memory folder, as run_jarvis.py prepares it,
    --yes; ``seed``: with `bookkeeping_by_code: false`."""
    memory = tmp_path / "memory"
    flows = []

    def start(resume, seed=False):
        config = dict(launcher.DEFAULT_FLOW_CONFIG, bookkeeping_by_code=not seed)
        flow = launcher.instantiate(config, [{"backend_used": "openai", "api_key": "x"}], str(memory))
        launcher.prepare_memory(flow, str(memory), resume=resume)
        run_context.input_source = AutoApproveInput()
        flows.append(flow)
        return flow

    yield start, memory
    for flow in flows:
        launcher.close_interpreters(flow)


def stopped_inside_coder(start, scripted_llm, coder_done=False):
    """A run stopped by its budget inside Coder's task, after one command (or, with ``coder_done``, after the task,
    in Jarvis's loop). Coder's plan is its goal, written by code."""
    scripted_llm.add(
        "1. Ask Coder to count the words.",
        command("Coder", goal=CODER_GOAL),
        command("ask_user", question="Which text?"),
    )
    if coder_done:
        scripted_llm.add(finish("3 words"))
    scripted_llm.add(BudgetExceeded("The run reached its budget."))
    with pytest.raises(BudgetExceeded):
        start(False).call({"goal": GOAL})


def test_the_interrupted_task_given_again_is_resumed_with_its_plan(jarvis, scripted_llm):
    start, memory = jarvis
    stopped_inside_coder(start, scripted_llm)
    plan = read_text(memory / "plan_coder.txt")
    scripted_llm.add(command("Coder", goal=f"  {CODER_GOAL}\n"), finish("3 words"), finish("done"))
    start(True).call({"goal": GOAL})
    assert not [c for c in scripted_llm.flows() if "Coder/Planner" in c], "Coder's plan is its goal: no planner"
    assert commands(memory / "logs_coder.txt", markers=True) == ["ask_user", "resume"]
    resume = entry(memory / "logs_coder.txt", "resume")
    assert SESSION_NOTE in resume and "Entries [1] to [1] above are this task's" in resume
    assert plan.startswith(f"1. {CODER_GOAL}") and read_text(memory / "plan_coder.txt").startswith(plan.strip()), (
        "the plan is the one it had"
    )


def test_another_task_after_a_resume_is_new_but_told_the_session_is_new(jarvis, scripted_llm):
    start, memory = jarvis
    stopped_inside_coder(start, scripted_llm)
    scripted_llm.add(command("Coder", goal="Count the letters instead."), finish("3 letters"), finish("done"))
    start(True).call({"goal": GOAL})
    assert commands(memory / "logs_coder.txt", markers=True) == ["ask_user", "new_task"]
    new_task = entry(memory / "logs_coder.txt", "new_task")
    assert "the entries above belong to earlier tasks" in new_task and SESSION_NOTE in new_task
    assert read_text(memory / "plan_coder.txt").strip() == "1. Count the letters instead."


def test_a_task_that_ended_before_the_stop_is_not_resumed(jarvis, scripted_llm):
    start, memory = jarvis
    stopped_inside_coder(start, scripted_llm, coder_done=True)
    assert task_records(memory) == ["logs_jarvis.txt"], "Coder's task ended, Jarvis's did not"
    scripted_llm.add(command("Coder", goal=CODER_GOAL), finish("3 words"), finish("done"))
    start(True).call({"goal": GOAL})
    assert commands(memory / "logs_coder.txt", markers=True) == ["ask_user", "new_task"]
    assert SESSION_NOTE in entry(memory / "logs_coder.txt", "new_task")


def planned(plan):
    """A plan writer's replies in the seed's mode: write_plan, the plan, finish."""
    return [command("write_plan", goal="plan it"), plan, finish("The user approved the plan.")]


def test_a_function_saved_just_before_the_stop_has_its_steps_marked_done_on_resume(jarvis, scripted_llm):
    start, memory = jarvis  # in the seed's mode, where a budget can stop the run between save_code and update_plan
    extlib_plan = "1. Write and test `double(x)`: twice x.\n2. Save it to the code library."
    scripted_llm.add(
        *planned("1. Ask Coder for double."),
        command("Coder", goal=CODER_GOAL),
        *planned("1. Extend the library with `double(x)`."),
        command("extend_library", goal="double(x): 2 * x"),
        *planned(extlib_plan),
        command("write_code", goal="double(x): 2 * x"),
        command("write_code", goal="double(x): 2 * x"),
        '```python\ndef double(x):\n    """Twice x."""\n    return 2 * x\n```',
        finish("written"),
        command("save_code"),
        BudgetExceeded("The run reached its budget."),
    )
    with pytest.raises(BudgetExceeded):
        start(False, seed=True).call({"goal": GOAL})
    assert "def double" in library_text(str(memory / "library.py")) and "[done]" not in read_text(
        memory / "plan_extlib.txt"
    )

    seen = {}

    def extlib_controller(messages):
        seen["prompt"] = "\n".join(m["content"] for m in messages)
        return finish("The library has double.")

    scripted_llm.add(
        command("Coder", goal=CODER_GOAL),
        command("extend_library", goal="double(x): 2 * x"),
        extlib_controller,
        finish("done"),
        finish("done"),
    )
    start(True, seed=True).call({"goal": GOAL})
    marked = "1. Write and test `double(x)`: twice x. [done]\n2. Save it to the code library. [done]"
    assert marked in seen["prompt"], "the controller reads a plan that says what was saved"
    assert read_text(memory / "plan_extlib.txt").strip() == marked
    assert commands(memory / "logs_extlib.txt", markers=True) == ["write_code", "save_code", "resume"]
    resume = entry(memory / "logs_extlib.txt", "resume")
    assert "double was saved into the library before the run stopped" in resume and UNSAVED_NOTE in resume
    assert library_names(memory) == ["double"]


def test_a_new_run_archives_the_task_records_with_the_logs(jarvis, scripted_llm):
    start, memory = jarvis
    stopped_inside_coder(start, scripted_llm)
    assert task_records(memory) == ["logs_coder.txt", "logs_jarvis.txt"]
    start(False)
    assert task_records(memory) == [], "a new run has no interrupted task to resume"
    (archive,) = (memory / "archive").iterdir()
    assert json.loads((archive / ".logs_coder.task.json").read_text())["goal"] == CODER_GOAL


# ~~~ ExtendLibrary's plan, brought up to date with the library ~~~
DEMO_PLAN = (
    "1. Write and test `svg_bar_chart(labels: list[str], values: list[float], path: str) -> str`: one bar "
    "per value.\n2. Save it to the code library.\n3. Write and test `legend(labels)`.\n4. Save it."
)


@pytest.mark.parametrize(
    "plan, saved, expected",
    [
        (DEMO_PLAN, ["svg_bar_chart"], ["1", "2"]),
        (DEMO_PLAN, ["legend"], ["3", "4"]),
        (DEMO_PLAN, ["svg_bar_chart", "legend"], ["1", "2", "3", "4"]),
        ("1. Write `f(x)` and save it.\n2. Write `g(x)` and save it.", ["g"], ["2"]),
        ("1. Write `f(x)`. [done]\n2. Save it.", ["f"], ["1", "2"]),  # mark_steps_done leaves a step marked as it is
        ("1. Write `f2(x)`.\n2. Save it.", ["f"], []),  # names are whole words
        ("no numbered steps", ["f"], []),
    ],
)
def test_the_steps_a_saved_function_completes(plan, saved, expected):
    assert steps_done_by_saving(plan, saved) == expected


def test_definition_digests_tell_a_changed_function_from_one_left_as_it_was():
    before = definition_digests("import os\n\n\ndef f():\n    return 1\n\n\n@cache\ndef g():\n    return 2\n")
    after = definition_digests(
        "import os\n\n\ndef f():\n    return 1\n\n\n@cache\ndef g():\n    return 3\n\n\nclass H:\n    pass\n"
    )
    assert sorted(before) == ["f", "g"] and sorted(after) == ["H", "f", "g"]
    assert [name for name in after if after[name] != before.get(name)] == ["g", "H"]
