"""Bookkeeping by code: each LLM call the state decides is made by code, and the user's review that came before it
still decides.

One test per kind of call that is gone: the state it is decided from, the call not made, and a review that rejects
the work stopping the bookkeeping (the controller is asked instead). Then `bookkeeping_by_code: false`, which makes
every call again, as the seed's Jarvis did.
"""

from __future__ import annotations

import json
import os

import pytest
from fakes import command, finish, last_user_message, library_text
from helpers import commands, run_jarvis
from loopback_llm import LoopbackLLMServer

from aiflows_jarvis.app import launcher
from aiflows_jarvis.ChatFlowModule import Transcript
from aiflows_jarvis.CoderFlowModule import CoderFlow
from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow
from aiflows_jarvis.CoreFlowModule import AutoApproveInput, read_text, set_memory_files, undone_steps
from aiflows_jarvis.ExtendLibraryFlowModule import ExtendLibraryFlow

HERE = os.path.dirname(os.path.abspath(__file__))
SEED_DEMO = os.path.join(HERE, "data", "seed_demo_transcript.jsonl")
DOUBLE = '```python\ndef double(x: int) -> int:\n    """Twice x."""\n    return 2 * x\n```'
TRIPLE = '```python\ndef triple(x: int) -> int:\n    """Three times x."""\n    return 3 * x\n```'


def flows_asked(scripted_llm):
    """The chats the LLM was asked by, as the last two parts of their paths (``CtrlExMem/Controller``)."""
    return ["/".join(flow.split("/")[-2:]) for flow in scripted_llm.flows()]


@pytest.fixture
def extend_library(tmp_path, scripted_llm):
    flow = ExtendLibraryFlow.instantiate_from_default_config()
    files = set_memory_files(flow, str(tmp_path), workdir=str(tmp_path))
    return flow, files["ExtendLibraryFlow"]


@pytest.fixture
def coder(tmp_path, scripted_llm):
    flow = CoderFlow.instantiate_from_default_config()
    files = set_memory_files(flow, str(tmp_path), workdir=str(tmp_path))
    yield flow, files["CoderFlow"]
    flow.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"].close()


# ~~~ ExtendLibrary: its plan, write_code, save_code, update_plan and finish ~~~
def test_a_function_asked_for_is_written_tested_saved_and_its_plan_done_with_two_calls(
    extend_library, scripted_llm, user
):
    flow, files = extend_library
    user.add("", "", "", "")  # the code, the proposed tests, their results, the module: all approved
    scripted_llm.add(DOUBLE, command("test", tests="assert double(2) == 4"))
    out = flow.call({"goal": "double(x: int) -> int: twice x.", "module": "numbers"})
    assert out["status"] == "finished", out
    assert flows_asked(scripted_llm) == ["write_code/CodeGenerator", "write_code/Controller"], (
        "no plan, no choice of write_code, no finish of the tests, no save_code, no update_plan, no finish asked for"
    )
    assert "def double" in library_text(files["code_library"]) and os.path.exists(
        os.path.join(os.path.dirname(files["code_library"]), "library", "numbers.py")
    ), "saved in the module extend_library named"
    assert read_text(files["plan"]).strip() == "1. double(x: int) -> int: twice x. [done]", (
        "the plan is the goal, one step, marked done"
    )
    assert commands(files["logs"]) == ["write_code", "save_code", "update_plan"], "the logs read as before"
    assert out["summary"].startswith("Saved double in the code library, module numbers")
    assert "Save double in library/numbers.py" in user.asked[-1]["prompt"], "the user still sees the module"


def test_code_the_user_rejects_is_revised_by_the_controller_and_nothing_is_saved_before_it_is_approved(
    extend_library, scripted_llm, user
):
    flow, files = extend_library
    user.add("make it triple", "", "", "", "")  # the code rejected; the revised code, tests, results, module approved
    scripted_llm.add(
        DOUBLE,
        command("write_code", goal="triple(x): three times x, as the user asked"),
        TRIPLE,
        command("test", tests="assert triple(2) == 6"),
    )
    out = flow.call({"goal": "double(x: int) -> int: twice x."})
    assert out["status"] == "finished", out
    assert flows_asked(scripted_llm) == [
        "write_code/CodeGenerator",
        "write_code/Controller",
        "write_code/CodeGenerator",
        "write_code/Controller",
    ]
    asked_to_revise = last_user_message(scripted_llm.calls[1]["messages"])
    assert "The user did not approve the code. Their feedback: make it triple" in asked_to_revise
    library = library_text(files["code_library"])
    assert "def triple" in library and "def double" not in library, "only the approved code was saved"


def test_test_results_the_user_objects_to_go_to_the_controller_not_to_save_code(extend_library, scripted_llm, user):
    flow, files = extend_library
    user.add("", "", "double(-1) should raise", "")  # code and tests approved; the results are not fine
    scripted_llm.add(
        DOUBLE,
        command("test", tests="assert double(2) == 4"),
        finish("The user wants double(-1) to raise; I cannot do it without changing the spec."),
        finish("double was not saved: the user wants double(-1) to raise."),
    )
    out = flow.call({"goal": "double(x: int) -> int: twice x."})
    assert flows_asked(scripted_llm)[2:] == ["write_code/Controller", "CtrlExMem/Controller"], (
        "the code writer's controller, then ExtendLibrary's: a finish without accepted tests is not an acceptance"
    )
    assert "The user's feedback: double(-1) should raise" in last_user_message(scripted_llm.calls[2]["messages"])
    assert "def double" not in library_text(files["code_library"]), "nothing was saved"
    assert out["status"] == "finished" and commands(files["logs"]) == ["write_code"]


def test_a_module_the_user_refuses_at_the_save_leaves_the_choice_to_the_controller(extend_library, scripted_llm, user):
    flow, files = extend_library
    user.add("", "", "", "no, not there")  # the code, tests and results approved; the module refused
    scripted_llm.add(DOUBLE, command("test", tests="assert double(2) == 4"), command("save_code", module="arithmetic"))
    user.add("")  # the module the controller chose: approved; saved, ExtendLibrary finishes by itself
    out = flow.call({"goal": "double(x: int) -> int: twice x."})
    assert out["status"] == "finished" and out["summary"].startswith(
        "Saved double in the code library, module arithmetic"
    ), out
    assert flows_asked(scripted_llm)[2:] == ["CtrlExMem/Controller"], "ExtendLibrary's controller chose the module"
    first = last_user_message(scripted_llm.calls[2]["messages"])
    assert "save_code (run for you): Nothing was saved: the user said: no, not there" in first
    assert "def double" in library_text(files["code_library"])


# ~~~ Coder: its plan, update_plan and finish ~~~
def test_coder_plans_its_goal_as_one_step_and_finishes_when_a_command_completes_it(
    coder, scripted_llm, user, quiet_console
):
    flow, files = coder
    user.add("", "", "")  # Coder's plan; run the code; its result is fine
    scripted_llm.add(command("run_code", language="python", code="print(6 * 7)", completes_step=1))
    out = flow.call({"goal": "Print six times seven."})
    assert flows_asked(scripted_llm) == ["CtrlExMem/Controller"], "no planner, no update_plan, no finish asked for"
    assert user.asked[0]["kind"] == "approval" and "1. Print six times seven." in quiet_console.text, (
        "the user still reviews the plan"
    )
    assert out == {"summary": "Every step of the plan is done.", "result": "42", "status": "finished"}
    assert read_text(files["plan"]).strip() == "1. Print six times seven. [done]"
    assert commands(files["logs"]) == ["run_code", "update_plan"]
    head = scripted_llm.calls[0]["messages"]
    assert "1. Reach the goal above." in head[1]["content"], "the plan does not repeat the goal it is"
    assert "completes_step (integer: the number of the plan step it completes" in head[0]["content"]


def test_a_plan_the_user_comments_on_is_written_by_the_planner(coder, scripted_llm, user):
    flow, files = coder
    user.add("first check the input", "", "", "", "", "")  # the plan by code: a comment; then all approved
    scripted_llm.add(
        command("write_plan", goal="Plan: check the input, then print six times seven."),
        "1. Check the input.\n2. Print six times seven.",
        command("run_code", language="python", code="print(6 * 7)", completes_step=2),
        finish("42"),
    )
    out = flow.call({"goal": "Print six times seven."})
    assert flows_asked(scripted_llm)[:2] == ["Planner/Controller", "write_plan/PlanGenerator"]
    told = last_user_message(scripted_llm.calls[0]["messages"])
    assert "The user did not approve the plan. Their feedback: first check the input" in told
    assert read_text(files["plan"]).startswith("1. Check the input.\n2. Print six times seven. [done]")
    assert out["summary"] == "42", "step 1 is not done: Coder's controller finished itself"


def test_code_whose_result_the_user_objects_to_marks_no_step_done(coder, scripted_llm, user):
    flow, files = coder
    user.add("", "", "that is not a product", "", "", "")
    scripted_llm.add(
        command("run_code", language="python", code="print(6 + 7)", completes_step=1),
        command("run_code", language="python", code="print(6 * 7)", completes_step=1),
    )
    out = flow.call({"goal": "Print six times seven."})
    assert flows_asked(scripted_llm) == ["CtrlExMem/Controller", "CtrlExMem/Controller"]
    assert "The user's feedback: that is not a product" in last_user_message(scripted_llm.calls[1]["messages"])
    assert "[done]" not in last_user_message(scripted_llm.calls[1]["messages"])
    assert commands(files["logs"]) == ["run_code", "run_code", "update_plan"] and out["result"].endswith("42")


def test_a_finish_made_because_the_plan_is_done_returns_every_commands_result(tmp_path, scripted_llm, user):
    loop = ControllerExecutorFlow.instantiate_from_default_config(
        finish_when_plan_done=True,
        commands={
            "ask_user": {
                "description": "ask",
                "input_args": ["question"],
                "carries_steps": True,
                "flow": {
                    "_target_": "aiflows_jarvis.HumanStandardInputFlowModule.HumanStandardInputFlow"
                    ".instantiate_from_default_config"
                },
            },
            "update_plan": {
                "description": "mark",
                "input_args": [],
                "optional_args": ["done_steps"],
                "flow": {
                    "_target_": "aiflows_jarvis.UpdatePlanFlowModule.UpdatePlanAtomicFlow"
                    ".instantiate_from_default_config"
                },
            },
        },
        bookkeeping_commands=["update_plan"],
    )
    plan = tmp_path / "plan.txt"
    plan.write_text("1. Ask the colour.\n2. Ask the size.\n")
    user.add("blue", "large")
    scripted_llm.add(
        command("ask_user", question="Colour?", completes_step=1),
        command("ask_user", question="Size?", completes_step=2),
    )
    out = loop.call({"goal": "ask", "plan": plan.read_text(), "logs": "", "memory_files": {"plan": str(plan)}})
    assert len(scripted_llm.calls) == 2 and out["summary"] == "Every step of the plan is done."
    assert "The user replied: blue" in out["result"] and "The user replied: large" in out["result"]
    assert undone_steps(plan.read_text()) == []


# ~~~ Jarvis: update_plan, finish ~~~
@pytest.fixture
def jarvis(tmp_path, scripted_llm, user):
    flow = launcher.instantiate(
        launcher.DEFAULT_FLOW_CONFIG, [{"backend_used": "openai", "api_key": "x"}], str(tmp_path / "memory")
    )
    launcher.prepare_memory(flow, str(tmp_path / "memory"), resume=False)
    yield flow, tmp_path / "memory"
    launcher.close_interpreters(flow)


def test_jarvis_ends_when_the_user_accepts_the_final_answer(jarvis, scripted_llm, user):
    flow, memory = jarvis
    user.add("", "")  # the plan; the answer
    scripted_llm.add("1. Answer.", command("final_answer", answer="42"))
    out = flow.call({"goal": "What is six times seven?"})
    assert out["status"] == "finished" and out["answer"] == "42" and len(scripted_llm.calls) == 2
    assert read_text(memory / "plan_jarvis.txt").strip() == "1. Answer. [done]", "a finished plan reads as finished"


def test_an_answer_the_user_finds_lacking_goes_back_to_the_controller(jarvis, scripted_llm, user):
    flow, memory = jarvis
    user.add("", "say it in words", "")
    scripted_llm.add("1. Answer.", command("final_answer", answer="42"), command("final_answer", answer="forty-two"))
    out = flow.call({"goal": "What is six times seven?"})
    assert out["answer"] == "forty-two" and len(scripted_llm.calls) == 3
    assert "The user replied: say it in words" in last_user_message(scripted_llm.calls[2]["messages"])


def test_a_step_done_by_coder_is_marked_by_code_and_jarvis_sees_the_library(jarvis, scripted_llm, run_context):
    flow, memory = jarvis
    run_context.input_source = AutoApproveInput()
    scripted_llm.add(
        "1. Ask Coder to print six times seven.\n2. Answer.",
        command("Coder", goal="Print six times seven.", completes_step=1),
        command("run_code", language="python", code="print(6 * 7)", completes_step=1),
        command("final_answer", answer="42"),
    )
    out = flow.call({"goal": "What is six times seven?"})
    assert out["status"] == "finished" and len(scripted_llm.calls) == 4
    told = last_user_message(scripted_llm.calls[3]["messages"])
    assert told.startswith("Here is the result of your previous command:\nCoder finished: Every step of the plan")
    assert "42" in told and "Plan: step 1 now marked done" in told
    assert commands(memory / "logs_jarvis.txt") == ["Coder", "update_plan", "final_answer", "update_plan"]
    system = scripted_llm.calls[1]["messages"][0]["content"]
    assert f"Code runs in the working folder {memory}" in system, "the prompt names the working folder"


# ~~~ The seed's calls again ~~~
def test_bookkeeping_by_code_false_makes_the_seeds_calls_again(tmp_path):
    """The demo's goal with `bookkeeping_by_code: false`: every plan through its plan writer's controller and
    generator, every command chosen by a controller (write_code first, save_code, update_plan, finish): 39 calls,
    where the default makes 11."""
    config = tmp_path / "seed.yaml"
    text = read_text(os.path.join(os.path.dirname(HERE), "configs", "jarvis.yaml"))
    config.write_text(text.replace("bookkeeping_by_code: true", "bookkeeping_by_code: false"))
    seed = Transcript.load(SEED_DEMO)
    with LoopbackLLMServer(replies=seed.replies()) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--config", str(config), seed.header["goal"])
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        asked = [json.loads(r["json"]["messages"][0]["content"] and "{}") for r in server.requests]
        assert len(asked) == 39 and not server.errors and server.pending == 0
    memory = tmp_path / "memory"
    assert commands(memory / "logs_extlib.txt") == ["write_code", "save_code", "update_plan"] * 2
    assert commands(memory / "logs_coder.txt") == [
        "extend_library",
        "update_plan",
        "run_code",
        "extend_library",
        "run_code",
        "update_plan",
    ]
    assert "Ask Coder to write a reusable function" in read_text(memory / "plan_jarvis.txt")
    assert "Run code: keep the months" in read_text(memory / "plan_coder.txt"), "Coder's planner wrote its plan"


def test_a_long_plan_is_marked_done_at_once_and_said_in_one_short_line(tmp_path, quiet_console):
    from aiflows_jarvis.UpdatePlanFlowModule import UpdatePlanAtomicFlow

    plan = tmp_path / "plan.txt"
    plan.write_text("".join(f"{i}. Step {i}.\n" for i in range(1, 20_001)))
    out = UpdatePlanAtomicFlow.instantiate_from_default_config().call(
        {"done_steps": "all", "memory_files": {"plan": str(plan)}}
    )
    assert undone_steps(plan.read_text()) == [] and plan.read_text().count("[done]") == 20_000
    assert "steps 1 to 20000 now marked done" in out["result"]
    assert len(out["result"]) < 300 and len(quiet_console.text) < 300, "not every number"
