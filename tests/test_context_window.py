"""The context window a chat fits its prompts to: the configuration's, else what the server says when asked
(vLLM's /v1/models, llama.cpp's /props, Ollama's /api/show), else litellm's map, else an assumed one said once."""

from __future__ import annotations

import base64
import functools
import logging
import re

import helpers
import pytest
from fakes import finish
from helpers import long_logs, use_server
from loopback_llm import HTTPError, Slow

from aiflows_jarvis.ChatFlowModule import servers, window_probe
from aiflows_jarvis.ChatFlowModule.servers import ServerSettings, server_settings
from aiflows_jarvis.CoreFlowModule import count_message_tokens

COMMANDS = {"finish": {"description": "End.", "input_args": ["summary"]}}
NOT_KNOWN = "context window of local-model is not known"


# a controller that finishes only, with 300 tokens for its reply; its input has 40 log entries
controller = functools.partial(helpers.controller, commands=COMMANDS, backend={"max_tokens": 300})
goal_input = functools.partial(helpers.goal_input, logs=long_logs())


def asked(server):
    return [f"{method} {path}" for method, path, _ in server.window_requests]


def assert_fitted_to(server, window):
    sent = server.requests[-1]["messages"]
    assert count_message_tokens(sent) + 300 <= window, "the prompt was fitted to the window the server stated"
    # the logs were shortened to fit (or a new block's snapshot already shows only their last entries)
    assert any(re.search(r"earlier entries are (left out|in )", m["content"]) for m in sent), sent


# ~~~ Each way of learning it ~~~
def test_vllm_max_model_len_from_v1_models(loopback, quiet_console):
    use_server(loopback)
    loopback.window_answers["/v1/models"] = {
        "object": "list",
        "data": [{"id": "other-model", "max_model_len": 32768}, {"id": "local-model", "max_model_len": 2048}],
    }
    loopback.add(finish(), finish())
    flow = controller()
    flow.call(goal_input())
    flow.call(goal_input(result="done"))
    assert_fitted_to(loopback, 2048)
    assert asked(loopback) == ["GET /v1/models"], "asked once for the run, and no further once it was said"
    assert NOT_KNOWN not in quiet_console.text
    assert server_settings(flow.backend).window_source.endswith("/v1/models (max_model_len)")


def test_llama_cpp_n_ctx_from_props(loopback, quiet_console):
    use_server(loopback)
    loopback.window_answers["/v1/models"] = {"data": [{"id": "local-model", "meta": {"n_ctx_train": 131072}}]}
    loopback.window_answers["/props"] = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}
    loopback.add(finish())
    controller().call(goal_input())
    assert_fitted_to(loopback, 2048)
    assert asked(loopback) == ["GET /v1/models", "GET /props"], "the training length of /v1/models is not the window"
    assert NOT_KNOWN not in quiet_console.text


def test_ollama_context_length_from_api_show_at_the_root_of_a_v1_api_base(loopback, quiet_console):
    use_server(loopback, model="openai/local-model")
    loopback.window_answers["/api/show"] = {
        "parameters": 'stop "<end>"',
        "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 2048, "gemma3.embedding_length": 640},
    }
    loopback.add(finish())
    controller().call(goal_input())
    assert_fitted_to(loopback, 2048)
    assert asked(loopback) == ["GET /v1/models", "GET /props", "POST /api/show"]
    assert loopback.window_requests[-1][2]["model"] == "local-model"
    assert NOT_KNOWN not in quiet_console.text


def test_ollama_num_ctx_parameter_comes_before_the_models_length():
    answer = {
        "parameters": "num_ctx 4096\nstop x",
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    }
    assert window_probe.from_show(answer) == 4096
    assert (
        window_probe.from_show({"model_info": {"general.architecture": "llama", "llama.context_length": 8192}}) == 8192
    )
    assert window_probe.from_show({"model_info": {"qwen2.context_length": "32768"}}) == 32768
    assert window_probe.from_show({"details": {}}) is None


def test_the_window_said_is_told_with_verbose(loopback, quiet_console):
    use_server(loopback)
    loopback.window_answers["/props"] = {"default_generation_settings": {"n_ctx": 4096}}
    loopback.add(finish())
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(servers.log.name)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        controller().call(goal_input())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert any(
        "local-model is 4096 tokens (from the server's" in r.getMessage() and "/props" in r.getMessage()
        for r in records
    )


# ~~~ When the server is not asked ~~~
def test_a_configured_window_asks_nothing(loopback, quiet_console):
    use_server(loopback)
    loopback.window_answers["/props"] = {"default_generation_settings": {"n_ctx": 100000}}
    loopback.add(finish())
    controller(context_window=2048).call(goal_input())
    assert loopback.window_requests == []
    assert_fitted_to(loopback, 2048)
    assert NOT_KNOWN not in quiet_console.text


@pytest.mark.parametrize(
    "api_base, backend_used",
    [("https://api.openai.com/v1", "openai"), (None, "openai"), ("https://jarvis.openai.azure.com", "azure")],
)
def test_openai_and_azure_are_never_asked(monkeypatch, api_base, backend_used):
    monkeypatch.setattr(servers, "probe_context_window", lambda *a, **k: pytest.fail("a hosted API was asked"))
    settings = ServerSettings("gpt-4", api_base, backend_used)
    assert not settings.askable
    assert settings.learn_context_window() == 8192, "litellm's map knows gpt-4"


# ~~~ When nobody knows ~~~
def test_not_known_is_said_once_per_model_and_names_the_flag(loopback, quiet_console):
    use_server(loopback)
    loopback.add(finish(), finish())
    controller("First").call(goal_input())
    controller("Second").call(goal_input())
    assert quiet_console.text.count(NOT_KNOWN) == 1
    assert "--context-window N" in quiet_console.text
    assert "the server does not say it" in quiet_console.text
    assert asked(loopback) == ["GET /v1/models", "GET /props", "POST /api/show"], "one probe per server and run"


def test_not_known_once_for_the_same_model_at_two_servers(loopback, quiet_console):
    use_server(loopback)
    loopback.add(finish(), finish())
    controller("First").call(goal_input())
    use_server(loopback, api_base=loopback.url + "/")  # another api_base: another server for the run
    controller("Second").call(goal_input())
    assert quiet_console.text.count(NOT_KNOWN) == 1


def test_a_server_that_hangs_on_the_question_is_not_waited_for_nor_asked_again(loopback, quiet_console, monkeypatch):
    monkeypatch.setattr(window_probe, "PROBE_TIMEOUT", 0.3)
    use_server(loopback)
    loopback.window_answers["/v1/models"] = Slow(None, {"data": []})  # answers only when the server closes
    loopback.add(finish(), finish())
    controller("First").call(goal_input())
    controller("Second").call(goal_input())
    assert asked(loopback) == ["GET /v1/models"], "a server that did not answer is not asked anything more"
    assert quiet_console.text.count(NOT_KNOWN) == 1
    assert "did not answer when asked" in quiet_console.text
    assert len(loopback.requests) == 2, "the chat calls went through"


def test_errors_and_odd_answers_move_on_to_the_next_question(loopback, quiet_console):
    use_server(loopback)
    loopback.window_answers["/v1/models"] = HTTPError(401, "Invalid API key")
    loopback.window_answers["/props"] = {"default_generation_settings": {"n_ctx": "lots"}}
    loopback.window_answers["/api/show"] = {"model_info": {"general.architecture": "x", "x.context_length": 3000}}
    loopback.add(finish())
    controller().call(goal_input())
    assert_fitted_to(loopback, 3000)
    assert loopback.errors == []


def test_the_api_key_is_sent_with_the_question(loopback, quiet_console, monkeypatch):
    seen = []
    real_ask = window_probe._ask
    monkeypatch.setattr(window_probe, "_ask", lambda url, key, *a, **k: seen.append(key) or real_ask(url, key, *a, **k))
    use_server(loopback)
    loopback.add(finish())
    controller().call(goal_input())
    assert seen and set(seen) == {"sk-test"}


def test_a_server_that_cannot_be_reached_is_asked_once(quiet_console):
    probe = window_probe.ServerProbe("http://127.0.0.1:9/v1")
    window, why = window_probe.probe_context_window(probe, "openai/local-model", timeout=2)
    assert window is None and "did not answer" in why
    assert window_probe.probe_context_window(probe, "another-model") == (None, why)
    assert probe.asked == {"models"}


def test_litellm_ollama_names_are_asked_by_the_name_ollama_knows(loopback):
    loopback.window_answers["/api/show"] = {
        "model_info": {"general.architecture": "llama", "llama.context_length": 4096}
    }
    probe = window_probe.ServerProbe(loopback.url[:-3])  # litellm's Ollama provider: the root, no /v1
    assert window_probe.probe_context_window(probe, "ollama/llama3:8b")[0] == 4096
    assert loopback.window_requests[-1] == ("POST", "/api/show", {"model": "llama3:8b", "name": "llama3:8b"})


def test_a_password_in_the_api_base_is_sent_as_the_chat_sends_it_but_never_said(loopback):
    host = loopback.url.split("://", 1)[1]
    loopback.window_answers["/props"] = {"default_generation_settings": {"n_ctx": 4096}}
    probe = window_probe.ServerProbe(f"http://alice:pw-secret@{host}")
    window, source = window_probe.probe_context_window(probe, "local-model", api_key="sk-test")
    assert window == 4096 and "pw-secret" not in source and "alice" not in source
    sent = {headers["authorization"] for headers in loopback.window_headers}
    assert sent == {"Basic " + base64.b64encode(b"alice:pw-secret").decode()}, "asked as the chat requests are"
