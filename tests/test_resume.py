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
from loopback_llm import LoopbackLLMServer
from test_cli import DEMO, commands, run_jarvis
from aiflows_jarvis.AbstractBossFlowModule.AbstractBossFlow import task_record_path
from aiflows_jarvis.ChatFlowModule import Transcript
from aiflows_jarvis.CoreFlowModule import AutoApproveInput, set_input_source
from aiflows_jarvis.CoreFlowModule.budget import BudgetExceeded
from aiflows_jarvis.CoreFlowModule.library_package import library_entries
from aiflows_jarvis.CoreFlowModule.memory import read_text, split_log_entries
from aiflows_jarvis.ExtendLibraryFlowModule.ExtendLibraryFlow import steps_done_by_saving
from aiflows_jarvis.ExtendLibraryFlowModule.SaveCodeAtomicFlow import definition_digests
from aiflows_jarvis.app import launcher

SESSION_NOTE = "The Python session is new"
UNSAVED_NOTE = "Code written with write_code and not saved is gone"
LOGS = ("logs_jarvis.txt", "logs_coder.txt", "logs_extlib.txt")
# What Coder's controller does after reading that the session is new: the second run_code of the demo uses `months`
# and `sales` from the first, so it defines them again.
DRAW_AGAIN = command("run_code", language="python", code=(
    'from library import svg_bar_chart\n\nmonths = ["Jan", "Feb", "Mar", "Apr", "May", "Jun"]\n'
    'sales = [120, 135, 128, 150, 171, 165]\nprint(svg_bar_chart(months, sales, "sales_chart.svg", "Monthly sales"))'))


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
@pytest.fixture(scope="module")
def replies():
    """The demo's 29 replies: [0] Jarvis's plan, [1] Jarvis -> Coder, [13] Coder's first run_code, [14] Coder ->
    extend_library (svg_bar_chart), [15] its plan, [20] its save_code, [21] its update_plan, [23] Coder's second
    run_code, [24:] the rest."""
    replies = Transcript.load(DEMO).replies()
    assert len(replies) == 29 and '"save_code"' in replies[20] and '"update_plan"' in replies[21]
    assert '"run_code"' in replies[13] and "months" in replies[23] and '"extend_library"' in replies[14]
    return replies


def first_run(tmp_path, replies, calls):
    """A --yes run on the demo's goal, stopped by --max-calls after ``calls`` LLM calls (exit code 3)."""
    with LoopbackLLMServer(replies=replies[:calls]) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--max-calls", str(calls),
                          Transcript.load(DEMO).header["goal"])
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


def test_a_run_stopped_in_extend_library_between_save_code_and_update_plan_resumes_there(tmp_path, replies):
    memory = tmp_path / "memory"
    first_run(tmp_path, replies, 21)  # the 22nd call, ExtendLibrary's controller after save_code, is not made
    assert library_names(memory) == ["growth_rates", "svg_bar_chart"]
    assert "[done]" not in read_text(memory / "plan_extlib.txt"), "the run stopped before update_plan"
    assert task_records(memory) == sorted(LOGS), "each boss was inside its task when the run stopped"
    run_file = json.loads(read_text(memory / "jarvis_run.json"))
    assert run_file["yes"] is True and run_file["config"] is None and run_file["editor"] is None

    # Jarvis calls Coder with the same task, Coder calls ExtendLibrary with the same task: both resume it.
    done, requests = resumed_run(tmp_path, [replies[1], replies[14], *replies[21:23], DRAW_AGAIN, *replies[24:]])
    assert "(auto)" in done.stdout, "--yes was remembered: plans and code are approved with nobody asked"
    assert not any("You plan how to" in r["messages"][0]["content"] for r in requests), \
        "no boss wrote a new plan: each continued with the one it had"
    extlib_prompt = "\n".join(m["content"] for m in requests[2]["messages"])  # its head, then its memory
    assert "You are the controller of ExtendLibrary" in extlib_prompt
    assert "Standard library only. [done]\n2. Save it to the code library. [done]" in extlib_prompt, \
        "the function saved before the run stopped has its steps marked done before the controller is asked"

    assert commands(memory / "logs_jarvis.txt", markers=True)[0] == "resume"
    assert commands(memory / "logs_coder.txt", markers=True) == [
        "extend_library", "update_plan", "run_code", "resume", "extend_library", "run_code", "update_plan"]
    coder_resume = entry(memory / "logs_coder.txt", "resume")
    assert SESSION_NOTE in coder_resume and "Entries [1] to [3] above are this task's" in coder_resume
    assert commands(memory / "logs_extlib.txt", markers=True) == [
        "write_code", "save_code", "update_plan", "new_task", "write_code", "save_code", "resume", "update_plan"]
    extlib_resume = entry(memory / "logs_extlib.txt", "resume")
    assert "svg_bar_chart was saved into the library before the run stopped" in extlib_resume
    assert "steps 1, 2 now marked done" in extlib_resume and UNSAVED_NOTE in extlib_resume
    last = split_log_entries(read_text(memory / "logs_extlib.txt"))[-1][1]
    assert " update_plan ---" in last and "already held this plan" in last, \
        "the controller's own update then changes nothing"

    plan = read_text(memory / "plan_extlib.txt")
    assert plan.count("[done]") == 2
    assert library_names(memory) == ["growth_rates", "svg_bar_chart"], \
        "every function saved is in the library once"
    assert "<svg" in read_text(tmp_path / "sales_chart.svg"), "the code ran in the working folder (the run's, remembered)"
    assert json.loads(read_text(memory / "jarvis_run.json"))["yes"] is True
    assert task_records(memory) == [], "every task ended"


def test_a_run_stopped_in_coder_resumes_coder_and_its_log_says_the_session_is_new(tmp_path, replies):
    memory = tmp_path / "memory"
    first_run(tmp_path, replies, 14)  # after Coder's first run_code: `months` and `sales` are in the session
    assert commands(memory / "logs_coder.txt") == ["extend_library", "update_plan", "run_code"]
    assert task_records(memory) == ["logs_coder.txt", "logs_jarvis.txt"], "ExtendLibrary's task had ended"

    done, requests = resumed_run(tmp_path, [replies[1], *replies[14:23], DRAW_AGAIN, *replies[24:]])
    assert "You are the controller of Coder" in requests[1]["messages"][0]["content"], "Coder did not plan again"
    assert commands(memory / "logs_coder.txt", markers=True) == [
        "extend_library", "update_plan", "run_code", "resume", "extend_library", "run_code", "update_plan"]
    assert SESSION_NOTE in entry(memory / "logs_coder.txt", "resume"), \
        "Coder's controller, which uses the session's variables, is told they are gone"
    assert SESSION_NOTE in requests[1]["messages"][1]["content"], "... in its prompt (its memory: the first message)"
    extlib = commands(memory / "logs_extlib.txt", markers=True)
    assert extlib == ["write_code", "save_code", "update_plan", "new_task", "write_code", "save_code", "update_plan"]
    assert "The run was stopped and resumed before this task" in entry(memory / "logs_extlib.txt", "new_task"), \
        "ExtendLibrary's finished task is not resumed: its next one is new"
    assert read_text(memory / "plan_coder.txt").strip() == json.loads(replies[24])["command_args"]["updated_plan"], \
        "Coder's plan is the one it resumed, updated by its controller"
    assert library_names(memory) == ["growth_rates", "svg_bar_chart"]
    assert task_records(memory) == []


def test_no_yes_on_the_resume_command_line_asks_again(tmp_path, replies):
    memory = tmp_path / "memory"
    first_run(tmp_path, replies, 1)  # Jarvis's plan is written and approved; its controller is not asked
    with LoopbackLLMServer(replies=replies[1:3]) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--resume", "--no-yes")
    assert done.returncode == 1 and "terminal input is closed" in done.stdout, done.stdout[-3000:]
    assert json.loads(read_text(memory / "jarvis_run.json"))["yes"] is False, "the run file says what this run did"


# ~~~ In one process: which task a boss below a resumed one is given decides what its log says ~~~
GOAL = "Count the words of 'a b c'."
CODER_GOAL = "Count the words of 'a b c' with code."


@pytest.fixture
def jarvis(tmp_path, scripted_llm, quiet_console):
    """``start(resume)``: Jarvis (every chat scripted) on the memory folder, as run_jarvis.py prepares it, --yes."""
    memory = tmp_path / "memory"
    flows = []

    def start(resume):
        flow = launcher.instantiate(launcher.DEFAULT_FLOW_CONFIG, [{"backend_used": "openai", "api_key": "x"}],
                                    str(memory))
        launcher.prepare_memory(flow, str(memory), resume=resume)
        set_input_source(AutoApproveInput())
        flows.append(flow)
        return flow

    yield start, memory
    for flow in flows:
        launcher.close_interpreters(flow)


def stopped_inside_coder(start, scripted_llm, coder_done=False):
    """A run stopped by its budget inside Coder's task (or, with ``coder_done``, after it, in Jarvis's loop)."""
    scripted_llm.add("1. Ask Coder to count the words.", command("Coder", goal=CODER_GOAL), "1. Count.\n2. Say it.",
                     command("update_plan", updated_plan="1. Count. [done]\n2. Say it."))
    if coder_done:
        scripted_llm.add(finish("3 words"))
    scripted_llm.add(BudgetExceeded("The run reached its budget."))
    with pytest.raises(BudgetExceeded):
        start(False).call({"goal": GOAL})


def test_the_interrupted_task_given_again_is_resumed_with_its_plan(jarvis, scripted_llm):
    start, memory = jarvis
    stopped_inside_coder(start, scripted_llm)
    scripted_llm.add(command("Coder", goal=f"  {CODER_GOAL}\n"), finish("3 words"), finish("done"))
    start(True).call({"goal": GOAL})
    assert not [c for c in scripted_llm.flows() if "Coder/Planner" in c][1:], "Coder planned once, before the stop"
    assert commands(memory / "logs_coder.txt", markers=True) == ["update_plan", "resume"]
    resume = entry(memory / "logs_coder.txt", "resume")
    assert SESSION_NOTE in resume and "Entries [1] to [1] above are this task's" in resume
    assert read_text(memory / "plan_coder.txt").startswith("1. Count. [done]"), "the plan is the one it had"


def test_another_task_after_a_resume_is_new_but_told_the_session_is_new(jarvis, scripted_llm):
    start, memory = jarvis
    stopped_inside_coder(start, scripted_llm)
    scripted_llm.add(command("Coder", goal="Count the letters instead."), "1. Count letters.", finish("3 letters"),
                     finish("done"))
    start(True).call({"goal": GOAL})
    assert commands(memory / "logs_coder.txt", markers=True) == ["update_plan", "new_task"]
    new_task = entry(memory / "logs_coder.txt", "new_task")
    assert "the entries above belong to earlier tasks" in new_task and SESSION_NOTE in new_task
    assert read_text(memory / "plan_coder.txt").strip() == "1. Count letters."


def test_a_task_that_ended_before_the_stop_is_not_resumed(jarvis, scripted_llm):
    start, memory = jarvis
    stopped_inside_coder(start, scripted_llm, coder_done=True)
    assert task_records(memory) == ["logs_jarvis.txt"], "Coder's task ended, Jarvis's did not"
    scripted_llm.add(command("Coder", goal=CODER_GOAL), "1. Count again.", finish("3 words"), finish("done"))
    start(True).call({"goal": GOAL})
    assert commands(memory / "logs_coder.txt", markers=True) == ["update_plan", "new_task"]
    assert SESSION_NOTE in entry(memory / "logs_coder.txt", "new_task")


def test_a_function_saved_just_before_the_stop_has_its_steps_marked_done_on_resume(jarvis, scripted_llm):
    start, memory = jarvis
    extlib_plan = "1. Write and test `double(x)`: twice x.\n2. Save it to the code library."
    scripted_llm.add("1. Ask Coder for double.", command("Coder", goal=CODER_GOAL),
                     "1. Extend the library with `double(x)`.", command("extend_library", goal="double(x): 2 * x"),
                     extlib_plan, command("write_code", goal="double(x): 2 * x"),
                     "```python\ndef double(x):\n    \"\"\"Twice x.\"\"\"\n    return 2 * x\n```", finish("written"),
                     command("save_code"), BudgetExceeded("The run reached its budget."))
    with pytest.raises(BudgetExceeded):
        start(False).call({"goal": GOAL})
    assert "def double" in library_text(str(memory / "library.py")) and "[done]" not in read_text(memory / "plan_extlib.txt")

    seen = {}

    def extlib_controller(messages):
        seen["prompt"] = "\n".join(m["content"] for m in messages)
        return finish("The library has double.")
    scripted_llm.add(command("Coder", goal=CODER_GOAL), command("extend_library", goal="double(x): 2 * x"),
                     extlib_controller, finish("done"), finish("done"))
    start(True).call({"goal": GOAL})
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
DEMO_PLAN = ("1. Write and test `svg_bar_chart(labels: list[str], values: list[float], path: str) -> str`: one bar "
             "per value.\n2. Save it to the code library.\n3. Write and test `legend(labels)`.\n4. Save it.")


@pytest.mark.parametrize("plan, saved, expected", [
    (DEMO_PLAN, ["svg_bar_chart"], ["1", "2"]),
    (DEMO_PLAN, ["legend"], ["3", "4"]),
    (DEMO_PLAN, ["svg_bar_chart", "legend"], ["1", "2", "3", "4"]),
    ("1. Write `f(x)` and save it.\n2. Write `g(x)` and save it.", ["g"], ["2"]),
    ("1. Write `f(x)`. [done]\n2. Save it.", ["f"], ["1", "2"]),   # mark_steps_done leaves a step marked as it is
    ("1. Write `f2(x)`.\n2. Save it.", ["f"], []),                   # names are whole words
    ("no numbered steps", ["f"], []),
])
def test_the_steps_a_saved_function_completes(plan, saved, expected):
    assert steps_done_by_saving(plan, saved) == expected


def test_definition_digests_tell_a_changed_function_from_one_left_as_it_was():
    before = definition_digests("import os\n\n\ndef f():\n    return 1\n\n\n@cache\ndef g():\n    return 2\n")
    after = definition_digests("import os\n\n\ndef f():\n    return 1\n\n\n@cache\ndef g():\n    return 3\n\n\n"
                               "class H:\n    pass\n")
    assert sorted(before) == ["f", "g"] and sorted(after) == ["H", "f", "g"]
    assert [name for name in after if after[name] != before.get(name)] == ["g", "H"]
