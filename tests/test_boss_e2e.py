"""A small boss built from AbstractBossFlow, end to end through LiteLLMBackend -> litellm -> HTTP (loopback server).

Its own command is count_words; ask_user, re_plan, update_plan and search_logs it has as every boss. The user edits
the plan in the (fake) editor; the controller's first reply is malformed and gets corrected; the boss runs twice in
one process.
"""

from __future__ import annotations

import pytest
from fakes import command, finish
from helpers import make_boss

from aiflows_jarvis.AbstractBossFlowModule import AbstractBossFlow
from aiflows_jarvis.CoreFlowModule import read_text, split_log_entries

PLAN = "1. Ask the user for a sentence.\n2. Count its words.\n3. Finish."
EDITED_LINE = "\n4. Tell the user the count."


def test_a_boss_plans_with_the_user_executes_commands_and_runs_twice(
    tmp_path, loopback_llm, user, fake_editor, monkeypatch
):
    boss, files = make_boss(tmp_path)
    monkeypatch.setenv("FAKE_EDITOR_APPEND", EDITED_LINE)
    edited_plan = PLAN + EDITED_LINE
    done_plan = edited_plan.replace("sentence.", "sentence. [done]").replace("words.", "words. [done]")
    user.add("e", "", "the quick brown fox")
    loopback_llm.add(
        PLAN,  # Planner's PlanGenerator
        command("ask_user"),  # malformed: no question
        command("ask_user", question="Give me a sentence."),  # corrected
        command("count_words", text="the quick brown fox"),
        command("update_plan", updated_plan=done_plan),
        finish("The sentence has 4 words."),
    )

    out = boss.call({"goal": "Count the words of a sentence the user gives."})

    assert out == {"summary": "The sentence has 4 words.", "status": "finished", "result": "The text has 4 words."}, (
        "result: the last command that did work (not update_plan)"
    )
    # the plan: written by the plan writer as the user edited it, then rewritten by update_plan
    assert fake_editor.read_text().count("\n") == 1, "the editor was opened once"
    assert read_text(files["plan"]).strip() == done_plan
    # the logs: one entry per executed command, in order
    entries = split_log_entries(read_text(files["logs"]))
    assert [e.split(" ---")[0].split()[-1] for _, e in entries] == ["ask_user", "count_words", "update_plan"]
    assert "The text has 4 words." in entries[1][1]
    # the HTTP exchanges, in order
    requests = [r["messages"] for r in loopback_llm.requests]
    assert len(requests) == 6
    assert requests[0][-1]["content"].endswith("Count the words of a sentence the user gives.")
    first_controller_prompt = requests[1][1]["content"]  # its memory: in its first message, after the head
    assert EDITED_LINE.strip() in first_controller_prompt, "the controller sees the plan the user edited"
    assert "missing argument(s): question" in requests[2][-1]["content"], "the malformed reply is corrected"
    assert "The user replied: the quick brown fox" in requests[3][-1]["content"]
    assert requests[4][:-1] == requests[3] + [requests[4][-2]], "each call's prompt begins with the previous call's"
    assert "count_words" in requests[4][-2]["content"] and "The text has 4 words." in requests[4][-1]["content"], (
        "each command comes back as the model's reply and its result"
    )
    assert "--- [" not in requests[4][-1]["content"], "its own commands' log entries are not repeated"
    assert "4. Tell the user the count." in requests[5][1]["content"]
    assert "The plan is now as you gave it to update_plan." in requests[5][-1]["content"], (
        "a plan it wrote itself is named, not repeated"
    )
    assert [u["kind"] for u in user.asked] == ["approval", "approval", "question"]

    # ~~~ The same boss, a second task, in the same process ~~~
    monkeypatch.delenv("FAKE_EDITOR_APPEND")
    user.add("", "a b c d e f")
    loopback_llm.add(
        "1. Ask for a text.\n2. Count.",
        command("ask_user", question="Text?"),
        command("count_words", text="a b c d e f"),
        finish("6 words."),
    )
    again = boss.call({"goal": "Count the words of another text."})
    assert again["status"] == "finished" and again["summary"] == "6 words."
    second_run_first_controller_call = loopback_llm.requests[7]["messages"]
    assert [m["role"] for m in second_run_first_controller_call] == ["system", "user"], "no chat left from run 1"
    assert "Count the words of another text." in second_run_first_controller_call[0]["content"]
    assert read_text(files["plan"]).strip() == "1. Ask for a text.\n2. Count."
    entries = split_log_entries(read_text(files["logs"]))
    assert len(entries) == 6, "logs keep growing across tasks"
    assert " new_task ---" in entries[3][1] and "the entries above belong to earlier tasks" in entries[3][1], (
        "a line tells the controller where its own task's entries start"
    )
    assert "new_task" in loopback_llm.requests[7]["messages"][1]["content"], "in the memory of its first message"
    assert boss.subflows["CtrlExMem"].subflows["Controller"].flow_state["previous_messages"] == [], (
        "a finished boss is reset: its controllers' chat histories are dropped"
    )


def test_a_boss_without_memory_files_says_what_to_set(scripted_llm):
    boss = AbstractBossFlow.instantiate_from_default_config(name="Nameless")
    with pytest.raises(Exception, match="`memory_files` is not set"):
        boss.call({"goal": "anything"})


def test_memory_files_given_in_the_input_override_the_configured_ones(tmp_path, scripted_llm, user):
    boss, configured = make_boss(tmp_path)
    (tmp_path / "other").mkdir()
    given = {"plan": str(tmp_path / "other" / "plan.txt"), "logs": str(tmp_path / "other" / "logs.txt")}
    user.add("")  # approve the plan
    scripted_llm.add("1. Count the words.", command("count_words", text="one two three"), finish("3 words"))
    assert boss.call({"goal": "Count three words.", "memory_files": given})["status"] == "finished"
    assert read_text(given["plan"]).strip() == "1. Count the words." and "count_words" in read_text(given["logs"])
    assert read_text(configured["plan"]) == "" and read_text(configured["logs"]) == "", (
        "the configured files are left alone for this run"
    )


def test_when_the_user_never_approves_the_plan_the_boss_stops_without_acting(tmp_path, scripted_llm, user):
    boss, files = make_boss(tmp_path)
    boss.subflows["Planner"].flow_config["max_rounds"] = 2
    user.add("no, shorter", "still too long")
    scripted_llm.add("1. a\n2. b\n3. c", command("write_plan", goal="make it shorter"), "1. a\n2. b")
    out = boss.call({"goal": "something"})
    assert out["status"] == "stopped: planning: stopped: reached max_rounds (2) before the controller called finish"
    assert read_text(files["plan"]) == "" and read_text(files["logs"]) == "", "nothing was executed"


def test_re_plan_rewrites_the_plan_with_the_user_and_tells_the_controller(tmp_path, scripted_llm, user):
    boss, files = make_boss(tmp_path)
    user.add("", "")  # approve the first plan, approve the new plan
    scripted_llm.add(
        "1. Ask for a sentence.\n2. Count its words.",
        command("re_plan", goal="The user wants the characters counted, not the words."),
        "1. Ask for a sentence.\n2. Count its characters.",
        finish("re-planned"),
    )
    out = boss.call({"goal": "Count the words of a sentence."})
    assert out["status"] == "finished"
    assert read_text(files["plan"]).strip() == "1. Ask for a sentence.\n2. Count its characters."
    replanner_prompt = scripted_llm.calls[2]["messages"][-1]["content"]
    assert "1. Ask for a sentence.\n2. Count its words." in replanner_prompt, "the old plan is given to the replanner"
    told = scripted_llm.calls[3]["messages"][-1]["content"]
    assert "The plan has been rewritten" in told and "Count its characters" in told, (
        "the controller is told in a message that the plan changed"
    )
