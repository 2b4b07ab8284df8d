"""ChatAtomicFlow through the real LiteLLMBackend -> litellm -> HTTP path: retries, errors, window, templates."""
from __future__ import annotations

import pytest

from loopback_llm import HTTPError, Malformed, Slow
from flow_modules.aiflows.ChatFlowModule import ChatAtomicFlow
from flow_modules.aiflows.CoreFlowModule import USAGE, ConfigurationError, LLMCallError

FAST_RETRY = {"max_attempts": 4, "initial_delay": 0.01, "max_delay": 0.05}


def make_chat(**overrides):
    cfg = {"name": "Asker", "retry": FAST_RETRY}
    cfg.update(overrides)
    return ChatAtomicFlow.instantiate_from_default_config(**cfg)


def test_a_reply_comes_back_through_litellm_and_tokens_are_counted(loopback_llm):
    loopback_llm.add("Paris.")
    out = make_chat().call({"query": "Capital of France?"})
    assert out == {"api_output": "Paris."}
    request = loopback_llm.requests[0]
    assert request["model"] == "gpt-4"
    assert request["messages"] == [{"role": "system", "content": "You are a helpful assistant."},
                                   {"role": "user", "content": "Capital of France?"}]
    usage = USAGE.per_flow["Asker"]
    assert usage.calls == 1 and usage.prompt_tokens > 10 and usage.completion_tokens == 2


def test_transient_errors_are_retried_with_backoff_then_succeed(loopback_llm, quiet_console):
    loopback_llm.add(HTTPError(429), HTTPError(500), Slow(3, "too late"), "finally")
    chat = make_chat(backend={"request_timeout": 0.5})
    assert chat.call({"query": "hi"}) == {"api_output": "finally"}
    assert len(loopback_llm.requests) == 4, "429, 500 and a timeout were each retried"
    assert "rate limited (HTTP 429)" in quiet_console.text
    assert "server error (HTTP 500)" in quiet_console.text
    assert "timed out" in quiet_console.text
    assert USAGE.per_flow["Asker"].retries == 3


def test_a_malformed_body_is_retried(loopback_llm, quiet_console):
    loopback_llm.add(Malformed(b"{not json"), "ok")
    assert make_chat().call({"query": "hi"}) == {"api_output": "ok"}
    assert "malformed response" in quiet_console.text


def test_after_the_last_retry_the_error_names_the_flow_and_the_cause(loopback_llm, quiet_console):
    loopback_llm.add(*[HTTPError(503, "overloaded")] * 4)
    with pytest.raises(LLMCallError) as error:
        make_chat().call({"query": "hi"})
    message = str(error.value)
    assert message.startswith("Asker: the LLM call failed 4 times")
    assert "server error (HTTP 503): overloaded" in message
    assert len(loopback_llm.requests) == 4


@pytest.mark.parametrize("status, says", [(401, "authentication failed (HTTP 401)"),
                                          (400, "the request was rejected (HTTP 400)"),
                                          (404, "not found (HTTP 404)")])
def test_errors_retrying_cannot_fix_stop_at_once(loopback_llm, status, says):
    loopback_llm.add(HTTPError(status, "no way"))
    with pytest.raises(LLMCallError) as error:
        make_chat().call({"query": "hi"})
    assert len(loopback_llm.requests) == 1, "no retry"
    assert says in str(error.value) and "no way" in str(error.value) and "Asker" in str(error.value)


def test_a_model_name_litellm_does_not_know_gets_a_hint(loopback_llm):
    chat = make_chat(backend={"model_name": {"openai": "gpt-4o-mini"}})
    with pytest.raises(LLMCallError, match="'openai/<model>'"):
        chat.call({"query": "hi"})
    loopback_llm.add("hello")
    assert make_chat(backend={"model_name": {"openai": "openai/gpt-4o-mini"}}).call({"query": "hi"})["api_output"] == "hello"
    assert loopback_llm.requests[-1]["model"] == "gpt-4o-mini"


def test_the_sliding_window_keeps_the_fresh_system_prompt_and_the_last_messages(scripted_llm):
    chat = make_chat(
        system_message_prompt_template={"template": "Memory: {{memory}}", "input_variables": ["memory"]},
        init_human_message_prompt_template={"template": "{{query}}", "input_variables": ["query"]},
        input_interface_non_initialized=["memory", "query"],
        input_interface_initialized=["memory", "query"],
        previous_messages={"first_k": None, "last_k": 2},
        refresh_system_prompt=True,
    )
    scripted_llm.add("r1", "r2", "r3")
    for i in range(1, 4):
        chat.run({"memory": f"m{i}", "query": f"q{i}"})
    last = scripted_llm.calls[-1]["messages"]
    assert last == [{"role": "system", "content": "Memory: m3"},
                    {"role": "assistant", "content": "r2"},
                    {"role": "user", "content": "q3"}]
    assert len(chat.flow_state["previous_messages"]) == 2, "what no window can reach is not kept"


def test_without_a_window_the_whole_conversation_is_sent(scripted_llm):
    chat = make_chat()
    scripted_llm.add("r1", "r2")
    chat.run({"query": "q1"})
    chat.run({"query": "q2"})
    assert [m["content"] for m in scripted_llm.calls[-1]["messages"]] == ["You are a helpful assistant.", "q1", "r1", "q2"]


def test_a_template_variable_missing_from_the_input_is_an_error_naming_the_flow(scripted_llm):
    chat = make_chat(init_human_message_prompt_template={"template": "{{query}} {{extra}}",
                                                         "input_variables": ["query", "extra"]})
    with pytest.raises(ConfigurationError, match=r"Asker: the prompt needs \['extra'\]"):
        chat.run({"query": "q"})


def test_an_undeclared_template_variable_is_an_error_not_an_empty_string(scripted_llm):
    chat = make_chat(init_human_message_prompt_template={"template": "{{query}} {{typo}}",
                                                         "input_variables": ["query"]})
    with pytest.raises(ConfigurationError, match="'typo' is undefined"):
        chat.run({"query": "q"})


def test_unfilled_api_infos_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="Asker: backend.api_infos is not set"):
        make_chat()
