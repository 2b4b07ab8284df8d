"""The controller protocol: parsing, corrections, giving up, the opening command, the sliding window."""

from __future__ import annotations

import pytest
from fakes import Expect, command, finish, last_user_message, system_message

from aiflows_jarvis.ControllerFlowModule import (
    Command,
    ControllerAtomicFlow,
    ControllerExecutorFlow,
    InvalidReply,
    parse_command,
)
from aiflows_jarvis.ControllerFlowModule.commands import read_command
from aiflows_jarvis.CoreFlowModule import USAGE

COMMANDS = [
    Command("ask_user", "ask", ["question"]),
    Command("update_plan", "update", ["updated_plan"]),
    Command("finish", "end", ["summary"]),
]


def test_a_valid_reply_is_parsed():
    assert parse_command(' {"command": "ask_user", "command_args": {"question": "why?"}} ', COMMANDS) == (
        "ask_user",
        {"question": "why?"},
    )


@pytest.mark.parametrize(
    "reply, repairs",
    [
        ('```json\n{"command": "finish", "command_args": {"summary": "x"}}\n```', ["code fence"]),
        ('Sure! {"command": "finish", "command_args": {"summary": "x"}}', ["prose"]),
        ('{"command": "finish", "command_args": {"summary": "x"}} Hope this helps', ["prose"]),
        ("{'command': 'finish', 'command_args': {'summary': 'x'}}", ["python dict"]),
        ('{"command": "finish", "command_args": {"summary": "x",},}', ["trailing comma"]),
    ],
)
def test_one_command_in_a_fence_in_prose_or_as_a_python_dict_is_read_and_the_repair_named(reply, repairs):
    assert read_command(reply, COMMANDS) == ("finish", {"summary": "x"}, repairs)


@pytest.mark.parametrize(
    "reply, says",
    [
        ("", "empty"),
        ("I will ask the user.", "not valid JSON"),
        ('["finish"]', "must be a JSON object"),
        ('{"command": "finish"}', "no 'command_args'"),
        ('{"command": "finish", "command_args": {"summary": "x"}, "thought": "t"}', "keys other than"),
        ('{"command": "run_code", "command_args": {}}', "'run_code' is not a command"),
        ('{"command": "ask_user", "command_args": {}}', "missing argument(s): question"),
        ('{"command": "ask_user", "command_args": {"question": "q", "when": "now"}}', "unknown argument(s): when"),
        ('{"command": "ask_user", "command_args": "q"}', "must be a JSON object mapping"),
        (
            '{"command": "finish", "command_args": {"summary": "x"}}\n{"command": "ask_user", "command_args": '
            '{"question": "q"}}',
            "2 JSON objects",
        ),
    ],
)
def test_each_invalid_reply_gets_a_precise_problem(reply, says):
    with pytest.raises(InvalidReply) as error:
        parse_command(reply, COMMANDS)
    assert says in str(error.value), "the correction must say exactly what is wrong"


def make_loop(**overrides):
    cfg = {
        "subflows_config": {
            "Controller": {
                "commands": {"ask_user": {"description": "ask", "input_args": ["question"]}},
                "max_corrections": 2,
            },
            "Executor": {
                "subflows_config": {
                    "ask_user": {
                        "_target_": "aiflows_jarvis.HumanStandardInputFlowModule.HumanStandardInputFlow"
                        ".instantiate_from_default_config"
                    }
                }
            },
        }
    }
    cfg.update(overrides)
    return ControllerExecutorFlow.instantiate_from_default_config(**cfg)


LOOP_INPUT = {"goal": "learn the user's colour", "plan": "1. ask", "logs": "", "memory_files": {"plan": "plan.txt"}}


def test_an_invalid_reply_is_corrected_and_not_kept_in_the_chat(scripted_llm, user):
    user.add("blue")
    scripted_llm.add(command("ask_user"), command("ask_user", question="Your colour?"), finish("the user likes blue"))
    out = make_loop().call(LOOP_INPUT)
    assert out["status"] == "finished" and out["summary"] == "the user likes blue"
    correction_call = scripted_llm.calls[1]["messages"]
    assert "missing argument(s): question" in last_user_message(correction_call), "the correction names the problem"
    assert correction_call[-2]["content"] == command("ask_user"), "the invalid reply is shown back to the model"
    third = scripted_llm.calls[2]["messages"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user"], (
        "the chat: its head, the first message (memory and goal), the last reply, the new message"
    )
    assert all(m["content"] != command("ask_user") for m in third), "failed attempts are dropped from the chat"
    assert user.asked[0]["prompt"] == "Your colour?"
    (usage,) = [u for flow, u in USAGE.per_flow.items() if flow.endswith("Controller")]
    assert usage.corrections == 1 and usage.repairs == 0


def test_a_fenced_reply_with_prose_is_repaired_without_asking_again_and_kept_in_canonical_form(scripted_llm, user):
    user.add("blue")
    fenced = "Let me ask the user.\n```json\n" + command("ask_user", question="Your colour?") + "\n```"
    scripted_llm.add(fenced, finish("the user likes blue"))
    out = make_loop().call(LOOP_INPUT)
    assert out["status"] == "finished" and len(scripted_llm.calls) == 2, "no correction: one call per command"
    second = scripted_llm.calls[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": command("ask_user", question="Your colour?")}, (
        "the chat keeps the command as the protocol wants it, not the fenced prose"
    )
    (usage,) = [u for flow, u in USAGE.per_flow.items() if flow.endswith("Controller")]
    assert usage.repair_kinds == {"code fence": 1, "prose": 1} and usage.corrections == 0


def test_a_reply_cut_off_at_max_tokens_is_told_so(scripted_llm, monkeypatch):
    controller = ControllerAtomicFlow.instantiate_from_default_config(
        commands={"ask_user": {"description": "ask", "input_args": ["question"]}}, backend={"max_tokens": 300}
    )
    real_call = controller.call_llm

    def cut_off_first(messages):
        reply = real_call(messages)
        controller.last_finish_reason = "length" if len(scripted_llm.calls) == 1 else "stop"
        return reply

    monkeypatch.setattr(controller, "call_llm", cut_off_first)
    scripted_llm.add(
        '{"command": "ask_user", "command_args": {"question": "a very long question, ',
        command("ask_user", question="short?"),
    )
    assert controller.run(LOOP_INPUT) == {"command": "ask_user", "command_args": {"question": "short?"}}
    correction = last_user_message(scripted_llm.calls[1]["messages"])
    assert "cut off at the max_tokens limit (300 tokens)" in correction and "split" in correction


def test_a_controller_that_keeps_failing_stops_the_loop_with_a_clear_status(scripted_llm, user):
    scripted_llm.add("no", "still no", "never")
    out = make_loop().call(LOOP_INPUT)
    assert out["status"].startswith("stopped: the controller gave 3 invalid replies"), out
    assert "not valid JSON" in out["status"]


def test_max_rounds_stops_the_loop_and_says_so(scripted_llm, user):
    user.add("a", "b")
    scripted_llm.add(command("ask_user", question="1?"), command("ask_user", question="2?"))
    out = make_loop(max_rounds=2).call(LOOP_INPUT)
    assert out["status"] == "stopped: reached max_rounds (2) before the controller called finish"
    assert out["result"] == "The user replied: b"


def test_the_head_stays_and_the_memory_comes_in_messages(scripted_llm):
    controller = ControllerAtomicFlow.instantiate_from_default_config(
        commands={"ask_user": {"description": "ask", "input_args": ["question"]}}
    )
    scripted_llm.add(command("ask_user", question="Your colour?"), finish())
    controller.run(LOOP_INPUT)
    controller.run({**LOOP_INPUT, "plan": "1. ask [done]", "logs": "--- [1] ask_user ---", "result": "blue"})
    first, second = (c["messages"] for c in scripted_llm.calls)
    head = system_message(first)
    assert "ask_user: ask Input arguments: question" in head, "commands come from the YAML"
    assert "Reply with exactly one JSON object" in head, "the protocol is appended to every controller's prompt"
    assert "plan.txt" not in head and "1. ask\n" in first[1]["content"] and "plan.txt" in first[1]["content"], (
        "plan and plan file location are in the first message, not in the head"
    )
    assert second[:2] == first, "the second call's messages start with the first call's"
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert "Plan: step 1 now marked done (the plan's one step is done)" in second[-1]["content"], (
        "a plan that changed only in its done marks comes as one line"
    )
    assert "--- [1] ask_user ---" not in second[-1]["content"], "its own command's log entry is not repeated"


def test_raw_line_breaks_in_json_strings_are_accepted_and_a_cut_reply_is_named():
    code_reply = '{"command": "ask_user", "command_args": {"question": "line one\nline two"}}'
    assert parse_command(code_reply, COMMANDS)[1]["question"] == "line one\nline two"
    with pytest.raises(InvalidReply, match="cut off"):
        parse_command('{"command": "ask_user", "command_args": {"question": "a very long', COMMANDS)


def test_a_failed_first_call_leaves_the_chat_unstarted(scripted_llm):
    from aiflows_jarvis.CoreFlowModule import LLMCallError

    controller = ControllerAtomicFlow.instantiate_from_default_config(
        commands={"ask_user": {"description": "ask", "input_args": ["question"]}}
    )
    scripted_llm.add(LLMCallError("boom"), command("ask_user", question="?"))
    with pytest.raises(LLMCallError):
        controller.run(LOOP_INPUT)
    assert controller.run(LOOP_INPUT) == {"command": "ask_user", "command_args": {"question": "?"}}, (
        "the retry starts the conversation again (no 'result' is needed)"
    )


def test_ctrl_c_during_a_command_asks_the_user_once_and_enter_stops_the_whole_run(scripted_llm, user):
    from aiflows_jarvis.CoreFlowModule import RunStopped

    outer = make_loop()
    inner_flow = make_loop()
    outer.subflows["Executor"].subflows["ask_user"] = inner_flow  # a loop inside a loop, like Coder in Jarvis
    inner_flow.flow_config.update(name="ask_user", input_interface=["goal", "plan", "logs", "memory_files"])

    class Interrupting:
        """A branch that is interrupted (Ctrl+C) while it runs."""

        flow_config = {"name": "slow", "input_interface": ["question"], "private_keys": []}

        def __call__(self, message):
            raise KeyboardInterrupt

        def reset(self, **kwargs):
            pass

    inner_flow.subflows["Executor"].subflows["ask_user"] = Interrupting()
    scripted_llm.add(command("ask_user", question="outer"), command("ask_user", question="inner"))
    user.add("")  # Enter: stop the whole run
    with pytest.raises(RunStopped):
        outer.call(LOOP_INPUT)
    assert len(user.asked) == 1, "only the innermost loop asks"
    assert "of ControllerExecutorFlow > ask_user do" in user.asked[0]["prompt"], (
        "the question says which loop (breadcrumb)"
    )


def test_ctrl_c_then_a_note_goes_to_the_controller(scripted_llm, user):
    flow = make_loop()

    class Interrupting:
        flow_config = {"name": "slow", "input_interface": ["question"], "private_keys": []}

        def __call__(self, message):
            raise KeyboardInterrupt

        def reset(self, **kwargs):
            self.was_reset = True

    branch = flow.subflows["Executor"].subflows["ask_user"] = Interrupting()
    scripted_llm.add(command("ask_user", question="?"), finish("stopped as asked"))
    user.add("skip that, just finish")
    out = flow.call(LOOP_INPUT)
    assert out["summary"] == "stopped as asked" and branch.was_reset
    assert "The user interrupted `ask_user` with Ctrl+C and said: skip that, just finish" in last_user_message(
        scripted_llm.calls[1]["messages"]
    )


def test_ctrl_c_in_a_command_made_by_the_loop_reaches_the_controller_and_stops_what_was_queued(scripted_llm, user):
    class Interrupting:
        flow_config = {"name": "slow", "input_interface": ["question"], "private_keys": []}

        def __call__(self, message):
            raise KeyboardInterrupt

        def reset(self, **kwargs):
            pass

    loop = make_loop(opening_command={"command": "ask_user", "command_args": {"question": "?"}})
    loop.subflows["Executor"].subflows["ask_user"] = Interrupting()
    user.add("ask nothing, finish")
    scripted_llm.add(finish("finished as asked"))
    assert loop.call(LOOP_INPUT)["summary"] == "finished as asked"
    told = last_user_message(scripted_llm.calls[0]["messages"])
    assert "The user interrupted `ask_user` with Ctrl+C and said: ask nothing, finish" in told


def test_the_opening_command_is_made_by_the_loop_and_the_controller_reads_its_result(scripted_llm, user):
    user.add("green")
    loop = make_loop(opening_command={"command": "ask_user", "command_args": {"question": "{{goal}}?"}})
    scripted_llm.add(finish("the user likes green"))
    out = loop.call(LOOP_INPUT)
    assert out["summary"] == "the user likes green"
    assert user.asked[0]["prompt"].startswith("learn the user's colour?"), "the opening's arguments are rendered"
    messages = scripted_llm.calls[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"], "no move the model never made is put in its chat"
    assert last_user_message(messages).endswith("ask_user (run for you): The user replied: green")


def test_without_bookkeeping_by_code_the_controller_makes_the_opening_move(scripted_llm, user):
    user.add("red")
    loop = make_loop(
        opening_command={"command": "ask_user", "command_args": {"question": "{{goal}}?"}}, bookkeeping_by_code=False
    )
    scripted_llm.add(command("ask_user", question="Colour?"), finish("red"))
    assert loop.call(LOOP_INPUT)["summary"] == "red"
    assert len(scripted_llm.calls) == 2 and user.asked[0]["prompt"].startswith("Colour?")


def test_the_controller_reports_who_is_calling(scripted_llm, user):
    user.add("x")
    scripted_llm.add(
        Expect("ControllerExecutorFlow/Controller", command("ask_user", question="?")), Expect("Controller", finish())
    )
    assert make_loop().call(LOOP_INPUT)["status"] == "finished"
