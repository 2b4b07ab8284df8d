"""Runaway protection inside a run: a controller stuck on one command, and plans over their budget.

Stuck loops (ControllerExecutorFlow's `max_repeats`): the same command with the same arguments N times in a row stops
that loop; the user says what to do instead (the command is not run again) or, with Enter or under --yes, the loop
stops with a status saying so. Plans (InteractivePlanGenFlow's `max_plan_chars`): a plan over the limit, or cut off
by `max_tokens`, goes back to the plan generator with the limit; only a plan within it is shown for approval.
"""

from __future__ import annotations

import os

from aiflows.backends.api_info import ApiInfo
from fakes import command, finish, last_user_message, system_message
from helpers import make_boss
from loopback_llm import completion_json

from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow
from aiflows_jarvis.ControllerFlowModule.ControllerExecutorFlow import command_signature
from aiflows_jarvis.CoreFlowModule import AutoApproveInput, read_text, split_log_entries
from aiflows_jarvis.PlanWriterFlowModule import InteractivePlanGenFlow, PlanWriterFlow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COUNT_WORDS = {
    "command": {"description": "Count the words of a text.", "input_args": ["text"]},
    "branch": {"_target_": "flows_for_tests.WordCountFlow.instantiate_from_default_config"},
}
STUCK_STATUS = "stopped: stuck: count_words issued 3 times in a row with the same arguments"


def loop_config(**overrides):
    cfg = {
        "subflows_config": {
            "Controller": {"commands": {"count_words": COUNT_WORDS["command"]}},
            "Executor": {"subflows_config": {"count_words": COUNT_WORDS["branch"]}},
        }
    }
    cfg.update(overrides)
    return cfg


def make_loop(**overrides):
    return ControllerExecutorFlow.instantiate_from_default_config(**loop_config(**overrides))


def record_runs(flow, branch="count_words"):
    """The inputs the branch ran with (its `run` is wrapped)."""
    node = flow.subflows["Executor"].subflows[branch]
    runs = []
    original = node.run

    def run(input_data):
        runs.append(dict(input_data))
        return original(input_data)

    node.run = run
    return runs


LOOP_INPUT = {"goal": "count the words", "plan": "1. count", "logs": "", "memory_files": {"plan": "plan.txt"}}


# ~~~ Stuck loops ~~~
def test_the_same_command_three_times_asks_the_user_and_their_answer_replaces_the_command(
    scripted_llm, user, quiet_console
):
    flow = make_loop()
    runs = record_runs(flow)
    same = command("count_words", text="a b")
    scripted_llm.add(same, same, same, finish("counted a b c"))
    user.add("count 'a b c' instead")

    out = flow.call(LOOP_INPUT)

    assert out["status"] == "finished" and out["summary"] == "counted a b c"
    assert len(runs) == 2, "the third identical command is not executed"
    (asked,) = user.asked
    assert asked["kind"] == "question"
    assert asked["prompt"] == (
        "The controller of ControllerExecutorFlow issued `count_words` with the same arguments "
        "3 times in a row. What should it do instead? (Enter to stop this loop)"
    )
    told = last_user_message(scripted_llm.calls[3]["messages"])
    assert "`count_words` was NOT executed" in told and "3 times in a row" in told, "the controller is told why"
    assert "count 'a b c' instead" in told, "and what the user wants instead"


def test_enter_at_the_question_stops_the_loop_with_a_stuck_status(scripted_llm, user, quiet_console):
    flow = make_loop()
    runs = record_runs(flow)
    same = command("count_words", text="a b")
    scripted_llm.add(same, same, same)
    user.add("")

    out = flow.call(LOOP_INPUT)

    assert out["status"] == STUCK_STATUS
    assert "issued `count_words` 3 times in a row with the same arguments" in out["summary"]
    assert len(runs) == 2 and len(scripted_llm.calls) == 3, "nothing runs after the third identical command"
    assert f"ControllerExecutorFlow: {STUCK_STATUS}" in quiet_console.text, "a warning line on the console"


def test_under_yes_a_stuck_loop_stops_without_asking(scripted_llm, quiet_console, run_context):
    auto = AutoApproveInput()
    run_context.input_source = auto
    flow = make_loop()
    same = command("count_words", text="a b")
    scripted_llm.add(same, same, same)

    out = flow.call(LOOP_INPUT)

    assert out["status"] == STUCK_STATUS
    assert auto.asked == [], "no one to ask under --yes: the loop stops"


def test_a_command_repeated_twice_then_changed_is_not_stuck(scripted_llm, user, quiet_console):
    flow = make_loop()
    runs = record_runs(flow)
    a, b = command("count_words", text="a"), command("count_words", text="b")
    scripted_llm.add(a, a, b, b, a, a, finish())

    out = flow.call(LOOP_INPUT)  # the user has no answer scripted: a question would fail the test

    assert out["status"] == "finished"
    assert [r["text"] for r in runs] == ["a", "a", "b", "b", "a", "a"], "the counter restarts when the call changes"


def test_max_repeats_zero_turns_the_check_off(scripted_llm, user, quiet_console):
    flow = make_loop(max_repeats=0)
    runs = record_runs(flow)
    same = command("count_words", text="a b")
    scripted_llm.add(same, same, same, same, finish())
    assert flow.call(LOOP_INPUT)["status"] == "finished" and len(runs) == 4


def test_a_controller_that_ignores_the_answer_is_asked_again_at_once(scripted_llm, user, quiet_console):
    flow = make_loop()
    runs = record_runs(flow)
    same = command("count_words", text="a b")
    scripted_llm.add(same, same, same, same)
    user.add("count something else", "")

    out = flow.call(LOOP_INPUT)

    assert len(runs) == 2, "neither the third nor the fourth identical command runs"
    assert "4 times in a row" in user.asked[1]["prompt"]
    assert out["status"] == "stopped: stuck: count_words issued 4 times in a row with the same arguments"


def test_the_signature_ignores_key_order_and_its_size_does_not_grow(scripted_llm, user, quiet_console):
    assert command_signature("run", {"a": 1, "b": [1, 2]}) == command_signature("run", {"b": [1, 2], "a": 1})
    assert command_signature("run", {"a": 1}) != command_signature("walk", {"a": 1})
    flow = make_loop()
    big = command("count_words", text=" ".join(f"word{i}" for i in range(20_000)))  # long, and not a loop
    scripted_llm.add(big, big, finish())
    flow.call(LOOP_INPUT)
    assert flow.flow_state["repeat_count"] == 2 and len(flow.flow_state["repeat_signature"]) == 64, (
        "what the check keeps between rounds is one digest and one number"
    )


def test_a_loop_above_sees_the_stuck_status_of_the_loop_below(scripted_llm, quiet_console, run_context):
    run_context.input_source = AutoApproveInput()
    inner = loop_config(name="counter", input_interface=["goal", "plan", "logs", "memory_files"])
    inner["_target_"] = "aiflows_jarvis.ControllerFlowModule.ControllerExecutorFlow.instantiate_from_default_config"
    outer = ControllerExecutorFlow.instantiate_from_default_config(
        subflows_config={
            "Controller": {"commands": {"counter": {"description": "Have the counter count.", "input_args": ["goal"]}}},
            "Executor": {"subflows_config": {"counter": inner}},
        }
    )
    same = command("count_words", text="a b")
    scripted_llm.add(command("counter", goal="count a b"), same, same, same, finish("the counter got stuck"))

    out = outer.call(LOOP_INPUT)

    assert out["status"] == "finished" and out["summary"] == "the counter got stuck"
    told = last_user_message(scripted_llm.calls[4]["messages"])
    assert f"counter stopped ({STUCK_STATUS.removeprefix('stopped: ')})" in told, (
        "the outer controller reads the inner loop's status"
    )


def test_a_boss_logs_the_command_that_was_not_executed_and_goes_on(tmp_path, scripted_llm, user, quiet_console):
    boss, files = make_boss(tmp_path)
    same = command("count_words", text="a b")
    user.add("", "count the words of 'x y z' instead")  # approve the plan; then the stuck question
    scripted_llm.add("1. Count.", same, same, same, command("count_words", text="x y z"), finish("3 words"))

    out = boss.call({"goal": "Count words."})

    assert out["status"] == "finished"
    entries = split_log_entries(read_text(files["logs"]))
    assert len(entries) == 4, "the not-executed command has a log entry too"
    assert "was NOT executed" in entries[2][1] and "The text has 3 words." in entries[3][1]


def test_under_yes_a_stuck_boss_stops_with_the_status(tmp_path, scripted_llm, quiet_console, run_context):
    run_context.input_source = AutoApproveInput()
    boss, files = make_boss(tmp_path)
    same = command("count_words", text="a b")
    scripted_llm.add("1. Count.", same, same, same)
    out = boss.call({"goal": "Count words."})
    assert out["status"] == STUCK_STATUS
    assert len(split_log_entries(read_text(files["logs"]))) == 2


# ~~~ Plan budget ~~~
LONG_PLAN = "1. " + "Do a very detailed thing. " * 6  # 158 characters once stripped: over a limit of 100
SHORT_PLAN = "1. Do it.\n2. Check it."


def make_plan_gen(**overrides):
    return InteractivePlanGenFlow.instantiate_from_default_config(**{"max_plan_chars": 100, **overrides})


def cut_off(generator, monkeypatch, *cut_calls):
    """The generator's replies number ``cut_calls`` (0-based) end with finish_reason "length"."""
    original = generator.call_llm
    calls = []

    def call_llm(messages):
        reply = original(messages)
        generator.last_finish_reason = "length" if len(calls) in cut_calls else "stop"
        calls.append(messages)
        return reply

    monkeypatch.setattr(generator, "call_llm", call_llm)


def test_a_plan_over_the_limit_is_rewritten_and_only_the_short_plan_is_shown(scripted_llm, user, quiet_console):
    flow = make_plan_gen()
    scripted_llm.add(LONG_PLAN, SHORT_PLAN)
    user.add("")  # approve

    out = flow.call({"goal": "do it", "plan": ""})

    assert out == {
        "plan": SHORT_PLAN,
        "feedback": "",
        "approved": True,
        "edited": False,
        "over_limit": False,
        "result": f"The user approved the plan:\n{SHORT_PLAN}",
    }
    assert len(user.asked) == 1 and user.asked[0]["kind"] == "approval", "no question about the long draft"
    assert "under 100 characters" in system_message(scripted_llm.calls[0]["messages"]), "the prompt says the limit"
    rewrite = last_user_message(scripted_llm.calls[1]["messages"])
    assert f"Your plan is {len(LONG_PLAN.strip())} characters long; the limit is 100. Rewrite it shorter" in rewrite
    assert LONG_PLAN.strip() in rewrite, "the draft is given back"
    assert LONG_PLAN.strip() not in quiet_console.text, "the long draft is not shown to the user"
    assert "the plan generator is asked to shorten it (rewrite 1 of 2)" in quiet_console.text


def test_a_plan_cut_off_by_max_tokens_is_rewritten(scripted_llm, user, quiet_console, monkeypatch):
    flow = make_plan_gen(max_plan_chars=4000)
    cut_off(flow.subflows["PlanGenerator"], monkeypatch, 0)
    scripted_llm.add("1. Start.\n2. Then", SHORT_PLAN)
    user.add("")

    out = flow.call({"goal": "do it", "plan": ""})

    assert out["approved"] and out["plan"] == SHORT_PLAN
    assert "Your plan was cut off at the length limit" in last_user_message(scripted_llm.calls[1]["messages"])


def test_after_the_rewrites_a_plan_still_too_long_is_not_shown_for_approval(scripted_llm, user, quiet_console):
    flow = make_plan_gen()
    scripted_llm.add(LONG_PLAN, LONG_PLAN + "x", LONG_PLAN + "y")

    out = flow.call({"goal": "do it", "plan": ""})  # the user has no answer scripted: an approval would fail

    assert out["approved"] is False and out["over_limit"] is True and out["edited"] is False
    assert "not shown to the user for approval" in out["feedback"] and "after 2 rewrites" in out["feedback"]
    assert len(scripted_llm.calls) == 3, "the first draft and two rewrites (max_plan_rewrites: 2)"
    assert user.asked == []

    # The same planning session goes on: the next call shows a plan within the limit for approval.
    scripted_llm.add(SHORT_PLAN)
    user.add("")
    again = flow.call({"goal": "much shorter, please", "plan": out["plan"]})
    assert again["approved"] and again["plan"] == SHORT_PLAN and again["over_limit"] is False


def test_under_yes_an_oversize_plan_is_never_approved_and_the_plan_writer_acts(
    tmp_path, scripted_llm, quiet_console, run_context
):
    auto = AutoApproveInput()
    run_context.input_source = auto
    flow = PlanWriterFlow.instantiate_from_default_config(
        subflows_config={
            "Executor": {"subflows_config": {"write_plan": {"max_plan_chars": 100, "max_plan_rewrites": 1}}}
        }
    )
    memory_files = {"plan": str(tmp_path / "plan.txt")}
    scripted_llm.add(
        LONG_PLAN,
        LONG_PLAN,  # write_plan (the opening command): 1 rewrite
        command("write_plan", goal="Two steps at most."),  # the controller reads the feedback
        SHORT_PLAN,
    )  # within the limit: auto-approved

    out = flow.call({"goal": "do it", "memory_files": memory_files})

    assert out["status"] == "finished" and out["plan"] == SHORT_PLAN
    assert [a["kind"] for a in auto.asked] == ["approval"], "only the plan within the limit was up for approval"
    told = last_user_message(scripted_llm.calls[2]["messages"])
    assert "not shown to the user for approval" in told and "over_limit" not in told
    assert read_text(memory_files["plan"]).strip() == SHORT_PLAN


def test_a_plan_writer_that_finishes_on_an_oversize_draft_writes_no_plan(
    tmp_path, scripted_llm, quiet_console, run_context
):
    run_context.input_source = AutoApproveInput()
    flow = PlanWriterFlow.instantiate_from_default_config(
        subflows_config={
            "Executor": {"subflows_config": {"write_plan": {"max_plan_chars": 100, "max_plan_rewrites": 0}}}
        }
    )
    memory_files = {"plan": str(tmp_path / "plan.txt")}
    scripted_llm.add(LONG_PLAN, finish("good enough"))
    out = flow.call({"goal": "do it", "memory_files": memory_files})
    assert out["status"] == "stopped: the plan writer finished without a plan within the length limit"
    assert read_text(memory_files["plan"]) == ""


def test_the_coder_planner_rewrites_a_plan_although_its_prompt_needs_the_library(
    tmp_path, scripted_llm, user, quiet_console
):
    from aiflows_jarvis.CoderFlowModule import CoderFlow

    planner = CoderFlow.instantiate_from_default_config().subflows["Planner"]
    planner.subflows["Executor"].subflows["write_plan"].flow_config["max_plan_chars"] = 100
    memory_files = {
        "plan": str(tmp_path / "plan.txt"),
        "logs": str(tmp_path / "logs.txt"),
        "code_library": str(tmp_path / "library.py"),
    }
    scripted_llm.add(LONG_PLAN, SHORT_PLAN)
    user.add("")
    out = planner.call({"goal": "do it", "memory_files": memory_files, "code_library": "def f(): ..."})
    assert out["status"] == "finished" and out["plan"] == SHORT_PLAN
    assert "def f(): ..." in system_message(scripted_llm.calls[1]["messages"]), "the first system prompt is kept"


def test_through_http_a_reply_cut_by_max_tokens_is_sent_back(loopback_llm, user, quiet_console):
    flow = make_plan_gen(max_plan_chars=4000)
    loopback_llm.add(completion_json("1. Start.\n2. Then", finish_reason="length"), SHORT_PLAN)
    user.add("")

    out = flow.call({"goal": "do it", "plan": ""})

    assert out["approved"] and out["plan"] == SHORT_PLAN
    first, second = loopback_llm.requests
    assert first["json"]["max_tokens"] == 1500, "the plan generator's max_tokens fits a plan"
    assert "Your plan was cut off at the length limit" in second["messages"][-1]["content"]


def test_every_plan_generator_of_jarvis_keeps_its_max_tokens_with_the_shipped_config(tmp_path):
    from aiflows_jarvis.app import launcher
    from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow

    config = launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml"))
    flow = launcher.instantiate(config, [ApiInfo(backend_used="openai", api_key="sk-test")], str(tmp_path))
    try:
        generators = [
            (path, node)
            for path, node in launcher.walk(flow)
            if isinstance(node, ChatAtomicFlow) and path.endswith("PlanGenerator")
        ]
        assert len(generators) == 6, [p for p, _ in generators]  # 3 planners and 3 re_plan branches
        for path, node in generators:
            backend = node.flow_config["backend"]
            assert backend["max_tokens"] == 1500 and backend["api_infos"], path
            assert backend["model_name"], path
    finally:
        launcher.close_interpreters(flow)
