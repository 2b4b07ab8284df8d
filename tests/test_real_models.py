"""What a real model meets, through the loopback server: the reply's format in the HTTP body, a server that
refuses a format, prompts fitted to the context window, the run's budget, the per-call deadline."""

from __future__ import annotations

import json
import time

import pytest
from fakes import command, finish
from helpers import controller, goal_input, long_logs, use_server
from loopback_llm import HTTPError, Slow, completion_json

from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
from aiflows_jarvis.ChatFlowModule.context import ContextOverflow
from aiflows_jarvis.CoreFlowModule import (
    USAGE,
    BudgetExceeded,
    LLMCallError,
    RunBudget,
    check_budget,
    count_message_tokens,
    current_run,
)


# ~~~ The format of the reply, in the HTTP body ~~~
@pytest.mark.parametrize("mode", ["json_schema", "json_object", "off", "auto"])
def test_the_request_body_carries_the_schema_in_each_mode(loopback, quiet_console, mode):
    use_server(loopback)
    loopback.add(finish("hi"))
    out = controller(structured_output=mode).call(goal_input())
    assert out == {"command": "finish", "command_args": {"summary": "hi"}}
    body = loopback.requests[-1]["json"]
    if mode == "off":
        assert "response_format" not in body
        return
    response_format = body["response_format"]
    if mode in ("json_schema", "auto"):  # auto asks an unknown server for the strictest form first
        assert response_format["type"] == "json_schema"
        schema = response_format["json_schema"]["schema"]
        assert response_format["json_schema"]["strict"] is True
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["properties"]["command"]["enum"]) == {"ask_user", "finish"}
    else:
        assert response_format["type"] == "json_object"
        text = json.dumps(response_format["schema"])
        assert '"ask_user"' in text and '"question"' in text and '"summary"' in text


def test_a_plain_chat_sends_no_response_format(loopback, quiet_console):
    use_server(loopback)
    loopback.add("a plan")
    chat = ChatAtomicFlow.instantiate_from_default_config(name="Chat")
    assert chat.call({"query": "plan it"})["api_output"] == "a plan"
    assert "response_format" not in loopback.requests[-1]["json"]


@pytest.mark.parametrize(
    "model, expected", [("gpt-4", None), ("openai/gpt-4o", "json_schema"), ("openai/gpt-4-1106-preview", "json_object")]
)
def test_auto_asks_openai_models_for_what_they_are_known_to_accept(loopback, quiet_console, model, expected):
    # api.openai.com cannot be reached from a test: the loopback server stands in for it under that name.
    use_server(loopback, model=model)
    from aiflows_jarvis.ChatFlowModule import servers

    flow = controller()
    settings = servers.server_settings(flow.backend)
    settings.api_base = None  # what an OpenAI model without --api-base is
    settings.structured_output = servers.openai_response_format_support(model)
    loopback.add(finish())
    flow.call(goal_input())
    body = loopback.requests[-1]["json"]
    if expected is None:
        assert "response_format" not in body, "gpt-4 (0613) refuses response_format"
    else:
        assert body["response_format"]["type"] == expected
        if expected == "json_object":
            assert body["response_format"] == {"type": "json_object"}, "OpenAI's json_object takes no schema"


# ~~~ A server that refuses a format ~~~
def test_a_server_refusing_json_schema_is_asked_again_one_level_down_and_keeps_it(loopback, quiet_console):
    use_server(loopback)
    refusal = HTTPError(
        422,
        "1 validation error: {'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\"}",
    )
    loopback.add(refusal, finish("one"), finish("two"))
    first, second = controller(), controller()
    assert first.call(goal_input())["command_args"] == {"summary": "one"}
    assert second.call(goal_input())["command_args"] == {"summary": "two"}
    kinds = [r["json"].get("response_format", {}).get("type") for r in loopback.requests]
    assert kinds == ["json_schema", "json_object", "json_object"], "asked again once, then kept for every chat"
    assert quiet_console.text.count("does not accept response_format json_schema") == 1, "said once, on one line"


def test_llama_cpp_python_500_validation_error_on_response_format_is_a_refusal_not_a_retry(loopback, quiet_console):
    """llama-cpp-python's server answers json_schema with HTTP 500 and a pydantic error naming response_format."""
    use_server(loopback)
    loopback.add(
        HTTPError(
            500,
            "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
            "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}",
        ),
        finish(),
    )
    assert controller().call(goal_input())["command"] == "finish"
    assert len(loopback.requests) == 2, "no retries with backoff: one refusal, one request one level down"
    assert "retrying" not in quiet_console.text


def test_a_server_refusing_every_format_is_asked_without_one(loopback, quiet_console):
    use_server(loopback)
    loopback.add(
        HTTPError(400, "response_format is not supported"),
        HTTPError(400, "unknown field: response_format.schema"),
        finish(),
    )
    assert controller().call(goal_input())["command"] == "finish"
    kinds = [r["json"].get("response_format", {}).get("type") for r in loopback.requests]
    assert kinds == ["json_schema", "json_object", None]


def test_an_explicit_format_is_not_negotiated_and_the_error_says_what_to_set(loopback, quiet_console):
    use_server(loopback)
    loopback.add(HTTPError(400, "response_format json_schema is not supported"))
    with pytest.raises(LLMCallError) as error:
        controller(structured_output="json_schema").call(goal_input())
    assert "set it to auto" in str(error.value) and len(loopback.requests) == 1


def test_a_bad_request_about_something_else_is_not_taken_for_a_format_refusal(loopback, quiet_console):
    use_server(loopback)
    loopback.add(HTTPError(400, "temperature must be at most 2"))
    with pytest.raises(LLMCallError):
        controller().call(goal_input())
    assert len(loopback.requests) == 1


# ~~~ Prompts that fit ~~~
def test_a_prompt_that_would_overflow_is_shortened_oldest_log_entries_first(loopback, quiet_console):
    use_server(loopback)
    loopback.add(finish())
    flow = controller(context_window=1024, backend={"max_tokens": 200})  # its snapshot's 10 entries do not fit
    out = flow.call(goal_input(logs=long_logs(60)))
    assert out["command"] == "finish"
    sent = loopback.requests[-1]["messages"]
    assert count_message_tokens(sent) + 200 <= 1024, "the prompt plus the reply's max_tokens fits the window"
    system = sent[1]["content"]  # the memory: in the first user message
    assert "result 60 " in system, "the newest log entries are kept"
    assert "result 1 " not in system, "the oldest went first"
    assert "earlier entries are left out to fit the model's context window" in system
    assert "the prompt was" in quiet_console.text and "shortened" in quiet_console.text


def test_max_tokens_is_lowered_when_the_shortened_prompt_still_needs_the_room(loopback, quiet_console):
    use_server(loopback)
    loopback.add(finish())
    flow = controller(context_window=2048, backend={"max_tokens": 1900}, min_reply_tokens=200)
    flow.call(goal_input(logs=long_logs(5)))
    body = loopback.requests[-1]["json"]
    assert 200 <= body["max_tokens"] < 1900
    assert count_message_tokens(body["messages"]) + body["max_tokens"] <= 2048


def test_a_prompt_that_cannot_fit_is_not_sent_and_the_advice_fits_a_local_server(loopback, quiet_console):
    use_server(loopback)
    flow = controller(
        context_window=300,
        backend={"max_tokens": 100},
        system_message_prompt_template={"template": "{{goal}} " + "rule " * 400, "input_variables": ["goal"]},
    )
    with pytest.raises(ContextOverflow) as error:
        flow.call(goal_input())
    assert not loopback.requests, "a prompt is never sent to fail"
    message = str(error.value)
    assert "context window of 300" in message and "--context-window" in message
    assert "gpt-4-1106-preview" not in message


def test_a_goal_too_long_for_the_window_is_named_as_what_does_not_fit(loopback, quiet_console):
    use_server(loopback)
    goal = "Summarise this: " + "lorem ipsum " * 8_000
    with pytest.raises(ContextOverflow) as error:
        controller(context_window=8192).call(goal_input(goal=goal, logs=long_logs(3)))
    assert not loopback.requests
    message = str(error.value)
    assert f"the goal itself ({len(goal):,} characters" in message, message
    assert "put the long text in a file and name the file in the goal" in message, message


def test_a_prompt_too_long_for_another_reason_does_not_blame_the_goal(loopback, quiet_console):
    use_server(loopback)
    flow = controller(
        context_window=300,
        backend={"max_tokens": 100},
        system_message_prompt_template={"template": "{{goal}} " + "rule " * 400, "input_variables": ["goal"]},
    )
    with pytest.raises(ContextOverflow) as error:
        flow.call(goal_input(goal="say hi " * 20))
    assert "the goal" not in str(error.value)


def test_a_server_stating_a_smaller_window_is_believed_and_the_call_is_fitted_again(loopback, quiet_console):
    use_server(loopback)
    loopback.add(
        HTTPError(
            400,
            "This model's maximum context length is 1024 tokens. However, you requested 5000 "
            "tokens. Please reduce the length of the messages.",
        ),
        finish(),
    )
    flow = controller(backend={"max_tokens": 300})
    assert flow.call(goal_input(logs=long_logs(20)))["command"] == "finish"
    first, second = loopback.requests
    assert count_message_tokens(second["messages"]) + second["json"]["max_tokens"] <= 1024
    assert count_message_tokens(second["messages"]) < count_message_tokens(first["messages"])
    assert "has a context window of 1024 tokens" in quiet_console.text


def test_the_fitted_user_message_is_what_the_chat_keeps(loopback, quiet_console):
    use_server(loopback)
    loopback.add(command("ask_user", question="q"), finish())
    flow = controller(context_window=3000, backend={"max_tokens": 500})
    flow.call(goal_input())
    flow.call(goal_input(result="R" * 30000))
    kept = flow.flow_state["previous_messages"]
    assert max(len(m["content"]) for m in kept) < 12000, "the 30,000-character result was kept shortened"


# ~~~ The budget of a run ~~~
def test_the_budget_stops_before_the_call_that_would_exceed_it(loopback, quiet_console):
    use_server(loopback)
    loopback.add(command("ask_user", question="a"), command("ask_user", question="b"))
    current_run().budget = RunBudget(max_calls=2)
    flow = controller()
    flow.call(goal_input())
    flow.call(goal_input(result="x"))
    with pytest.raises(BudgetExceeded) as error:
        flow.call(goal_input(result="y"))
    assert len(loopback.requests) == 2
    assert "2 LLM calls" in str(error.value) and "--resume" in str(error.value) and "--max-calls" in str(error.value)
    assert isinstance(error.value, KeyboardInterrupt), "it stops the run the way Ctrl+C does"


@pytest.mark.parametrize(
    "limit, flag",
    [({"max_tokens": 10}, "--max-tokens"), ({"max_cost": 0.0001}, "--max-cost"), ({"max_time": 0.001}, "--max-time")],
)
def test_each_limit_of_the_budget(limit, flag):
    USAGE.record("Jarvis/Controller", 5000, 100, 1.0, model="gpt-4", reported=True)
    budget = RunBudget(**limit)
    time.sleep(0.01)
    current_run().budget = budget
    with pytest.raises(BudgetExceeded) as error:
        check_budget("Jarvis/Controller")
    assert flag in str(error.value)


def test_a_budget_from_the_configuration_and_the_command_line():
    budget = RunBudget.from_config({"max_calls": 200, "max_cost": 10, "max_time": 0}, max_calls=5)
    assert (budget.max_calls, budget.max_cost, budget.max_time, budget.max_tokens) == (5, 10.0, None, None)
    from aiflows_jarvis.CoreFlowModule import ConfigurationError

    with pytest.raises(ConfigurationError, match="max_call"):
        RunBudget.from_config({"max_call": 3})


def test_the_time_budget_bounds_a_call_to_a_server_that_hangs(loopback, quiet_console):
    use_server(loopback)
    loopback.add(Slow(None, finish()))
    current_run().budget = RunBudget(max_time=2)
    flow = controller(backend={"request_timeout": 60}, retry={"max_attempts": 1})
    with pytest.raises(BudgetExceeded) as error:  # a call left to run would never have been answered
        flow.call(goal_input())
    assert "--max-time" in str(error.value), "a call cut by the run's time limit stops the run as the budget does"
    assert len(loopback.requests) == 1, "cut at the run's deadline, not retried"


# ~~~ Usage as the API reports it ~~~
def test_usage_comes_from_the_api_when_the_server_reports_it(loopback, quiet_console):
    use_server(loopback, model="gpt-4")
    reply = completion_json(finish(), prompt_tokens=1234)
    loopback.add(reply)
    controller().call(goal_input())
    total = USAGE.total()
    assert total.prompt_tokens == 1234 and total.completion_tokens == reply["usage"]["completion_tokens"]
    assert total.cost == pytest.approx(1234 * 3e-05 + reply["usage"]["completion_tokens"] * 6e-05)


def test_a_controller_reply_cut_by_max_tokens_is_corrected_as_cut(loopback, quiet_console):
    use_server(loopback)
    loopback.add(
        completion_json('{"command": "ask_user", "command_args": {"question": "a very long', finish_reason="length"),
        finish(),
    )
    assert controller().call(goal_input())["command"] == "finish"
    correction = loopback.requests[-1]["messages"][-1]["content"]
    assert "cut off" in correction and "max_tokens" in correction


# ~~~ Replies cut by max_tokens ~~~
def code_writer(tmp_path):
    from aiflows_jarvis.InteractiveCodeGenFlowModule import InteractiveCodeGenFlow

    return InteractiveCodeGenFlow.instantiate_from_default_config(
        memory_files={"code_library": str(tmp_path / "library.py")}
    )


def test_code_cut_by_max_tokens_is_asked_for_again_before_the_user_sees_it(tmp_path, loopback, quiet_console, user):
    use_server(loopback)
    cut = completion_json("```python\ndef f(x):\n    return [x for x in range(", finish_reason="length")
    loopback.add(cut, "```python\ndef f(x):\n    return x\n```")
    user.add("")  # approves what is shown
    out = code_writer(tmp_path).call({"goal": "write f", "code": ""})
    assert out["approved"] and out["code"] == "def f(x):\n    return x"
    assert "cut off at the length limit" in loopback.requests[1]["messages"][-1]["content"]
    assert len(user.asked) == 1, "only the complete code was reviewed"


def test_code_cut_again_is_not_shown_and_the_feedback_says_why(tmp_path, loopback, quiet_console, user):
    use_server(loopback)
    cut = completion_json("```python\ndef f(x):\n    return [x for x in range(", finish_reason="length")
    loopback.add(cut, dict(cut))
    out = code_writer(tmp_path).call({"goal": "write f", "code": ""})
    assert out["approved"] is False and "cut off at the reply's length limit after 1 rewrite" in out["feedback"]
    assert not user.asked, "cut code is never put up for approval"
