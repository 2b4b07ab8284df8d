"""Real usage and cost: the API's token counts survive LiteLLMBackend, calls are priced from litellm's price list,
and the end of a run says calls, tokens, cost, repairs and corrections per chat and in total."""

from __future__ import annotations

import json

import pytest
from aiflows.backends.api_info import ApiInfo
from loopback_llm import Malformed, chunk_json, completion_json

from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
from aiflows_jarvis.ChatFlowModule.backends import instantiate_backend
from aiflows_jarvis.ChatFlowModule.responses import Replies, ResponseInfo, response_info
from aiflows_jarvis.CoreFlowModule import USAGE, short_paths
from aiflows_jarvis.CoreFlowModule.run.usage import MAX_CALLS, cost_of, price_of

GPT4_PROMPT, GPT4_COMPLETION = 3e-05, 6e-05  # litellm 1.0.0's price list: dollars per token
MESSAGES = [{"role": "user", "content": "Capital of France?"}]


def backend_for(server, **params):
    """What a config naming aiflows' LiteLLMBackend gets: built exactly as a chat flow builds it."""
    config = {
        "_target_": "aiflows.backends.llm_lite.LiteLLMBackend",
        "model_name": "gpt-4",
        "wait_time_per_key": 0,
        "api_infos": [ApiInfo(backend_used="openai", api_key="sk-test", api_base=server.url)],
        **params,
    }
    return instantiate_backend(config, "Asker")


def sse(*chunks) -> Malformed:
    """A raw SSE stream (the loopback server's own stream always ends with finish_reason "stop")."""
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return Malformed(body, content_type="text/event-stream")


# ~~~ The API's usage and finish_reason survive the backend ~~~
def test_a_config_naming_aiflows_backend_gets_the_one_that_keeps_usage(loopback):
    from aiflows.backends.llm_lite import LiteLLMBackend

    backend = backend_for(loopback)
    assert isinstance(backend, LiteLLMBackend) and type(backend).__name__ == "UsageLiteLLMBackend", (
        "same class family and constructor: user configs naming aiflows' backend keep working"
    )


def test_usage_finish_reason_and_model_are_kept_for_a_completion(loopback):
    reply = completion_json(
        "Paris, and the answer was cut", model="gpt-4-0613", prompt_tokens=1234, finish_reason="length"
    )
    loopback.add(reply)
    messages = backend_for(loopback)(messages=MESSAGES)
    assert messages[0]["content"] == "Paris, and the answer was cut", "the messages come back as before"
    assert isinstance(messages, list)
    info = response_info(messages)
    assert info == ResponseInfo(1234, reply["usage"]["completion_tokens"], "length", "gpt-4-0613")


def test_a_server_that_reports_no_usage_leaves_the_counts_unknown(loopback):
    reply = completion_json("Paris.")
    del reply["usage"]
    loopback.add(reply)
    info = response_info(backend_for(loopback)(messages=MESSAGES))
    assert (info.prompt_tokens, info.completion_tokens, info.finish_reason) == (None, None, "stop")
    assert not info.has_usage, "the caller then estimates with cl100k"


def test_a_streamed_reply_keeps_the_servers_finish_reason(loopback):
    loopback.add(
        sse(
            chunk_json({"role": "assistant", "content": ""}),
            chunk_json({"content": "Par"}),
            chunk_json({"content": "is"}),
            chunk_json({}, finish_reason="length"),
        )
    )
    messages = backend_for(loopback, stream=True)(messages=MESSAGES)
    assert messages == [{"content": "Paris"}]
    info = response_info(messages)
    assert info.finish_reason == "length", "litellm's own closing 'stop' chunk does not hide the server's 'length'"
    assert (info.prompt_tokens, info.completion_tokens, info.model) == (None, None, "gpt-4")
    loopback.add("a whole reply")
    assert response_info(backend_for(loopback, stream=True)(messages=MESSAGES)).finish_reason == "stop"


def test_the_response_info_travels_with_its_reply_only():
    info = ResponseInfo(1, 2, "stop", "gpt-4")
    replies = Replies([{"role": "assistant", "content": "Paris."}], info)
    assert replies == [{"role": "assistant", "content": "Paris."}] and response_info(replies) is info
    assert response_info([{"role": "assistant", "content": "Paris."}]) is None, "a plain list carries none"
    assert response_info(list(replies)) is None, "a copy of the messages is not the completion's account"


def test_a_chat_counts_the_tokens_the_api_reported_and_their_cost(loopback_llm):
    loopback_llm.add(completion_json("Paris.", prompt_tokens=1234))
    chat = ChatAtomicFlow.instantiate_from_default_config(name="Asker")
    assert chat.call({"query": "Capital of France?"}) == {"api_output": "Paris."}
    (call,) = USAGE.calls
    assert (call.prompt_tokens, call.completion_tokens, call.reported) == (1234, 2, True), (
        "the API's usage, not a cl100k estimate of the prompt (about 20 tokens)"
    )
    assert call.cost == pytest.approx(1234 * GPT4_PROMPT + 2 * GPT4_COMPLETION)
    assert chat.last_finish_reason == "stop"
    assert "reported by the API" in USAGE.summary()


# ~~~ Cost ~~~
def test_a_priced_model_costs_dollars_and_an_unknown_one_counts_tokens_only():
    assert price_of("gpt-4") == (GPT4_PROMPT, GPT4_COMPLETION)
    assert price_of("openai/gpt-4") == price_of("gpt-4"), "the provider prefix is dropped before the look-up"
    assert cost_of("gpt-4", 1000, 100) == pytest.approx(0.036)
    assert price_of("gemma-3-270m") is None and cost_of("openai/gemma-3-270m", 1000, 100) is None
    assert price_of(None) is None

    USAGE.record("Jarvis/Controller", 1000, 100, 1.0, model="gpt-4", reported=True)
    assert USAGE.total().cost == pytest.approx(0.036) and USAGE.total().priced
    USAGE.reset()
    USAGE.record("Jarvis/Controller", 1000, 100, 1.0, model="openai/gemma-3-270m", reported=True)
    total = USAGE.total()
    assert (total.cost, total.priced, total.unpriced_calls, total.total_tokens) == (0.0, False, 1, 1100)
    assert "no price known for openai/gemma-3-270m" in USAGE.summary()
    assert "$" not in USAGE.summary()


def test_the_old_positional_record_still_works_and_counts_as_estimated():
    USAGE.record("Asker", 20, 3, 0.5, 2)
    (call,) = USAGE.calls
    assert (call.flow, call.prompt_tokens, call.completion_tokens, call.retries) == ("Asker", 20, 3, 2)
    assert (call.model, call.reported, call.cost) == (None, False, None)
    assert USAGE.per_flow["Asker"].retries == 2
    assert USAGE.calls.maxlen == MAX_CALLS, "a long run keeps a bounded number of call records"


# ~~~ What the end of a run says ~~~
def record_a_run():
    for _ in range(2):
        USAGE.record("Jarvis/CtrlExMem/Controller", 10_000, 1_500, 1.0, model="gpt-4", reported=True)
    USAGE.record("Jarvis/PlanWriter/PlanGenerator", 1_000, 200, 2.2, 1, model="gpt-4", reported=True)
    USAGE.record_repair("Jarvis/CtrlExMem/Controller", "code fence")
    USAGE.record_repair("Jarvis/CtrlExMem/Controller", "prose")
    USAGE.record_repair("Jarvis/PlanWriter/PlanGenerator", "python dict")
    USAGE.record_correction("Jarvis/CtrlExMem/Controller")


def test_repairs_and_corrections_are_counted_per_chat():
    record_a_run()
    controller = USAGE.per_flow["Jarvis/CtrlExMem/Controller"]
    assert (controller.calls, controller.repairs, controller.corrections) == (2, 2, 1)
    assert controller.repair_kinds == {"code fence": 1, "prose": 1}
    total = USAGE.total()
    assert (total.calls, total.repairs, total.corrections, total.retries) == (3, 3, 1, 1)


def test_the_summary_is_one_line_with_calls_tokens_cost_repairs_and_corrections():
    record_a_run()
    assert USAGE.summary() == (
        "3 LLM calls, 24.2K tokens (21.0K prompt + 3.2K completion, reported by the API), "
        "$0.82; 3 replies repaired, 1 corrected, 1 retry, 4.2s waiting"
    )
    USAGE.record("Jarvis/Final", 100, 10, 0.1, model="gpt-4")  # no usage from the API: a cl100k estimate
    assert "estimated with cl100k for 1 of 4 calls" in USAGE.summary()
    assert "\n" not in USAGE.summary()


def test_the_report_is_a_table_per_chat_and_a_total():
    record_a_run()
    USAGE.record(
        "Jarvis/CtrlExMem/Executor/Coder/CtrlExMem/Executor/write_code/CodeGenerator",
        300,
        60,
        0.3,
        model="openai/local-model",
        reported=False,
    )
    lines = USAGE.report().splitlines()
    assert lines[0].split() == ["chat", "calls", "prompt", "completion", "cost", "repaired", "corrected"]
    assert lines[1].split() == ["Jarvis/Controller", "2", "20.0K", "3.0K", "$0.78", "2", "1"], (
        "the loop plumbing (CtrlExMem, Executor) is left out, and two parts of the path are kept at least"
    )
    assert lines[2].split() == ["Jarvis/PlanWriter/PlanGenerator", "1", "1.0K", "200", "$0.04", "1", "0"]
    row = lines[3].split()
    assert row[0] == "Jarvis/Coder/write_code/CodeGenerator", "a branch named like its flow is named once"
    assert short_paths(["Jarvis/" + "very_long_branch_name/" * 4 + "write_code/CodeGenerator"])[0].startswith("..."), (
        "a path still too long keeps its end"
    )
    assert row[1:] == ["1", "~300", "~60", "-", "0", "0"], "estimated tokens are marked, an unknown price is '-'"
    assert set(lines[4]) == {"-"}
    assert lines[5].split() == ["total", "4", "~21.3K", "~3.3K", "$0.82+", "3", "1"]
    assert "~ estimated with cl100k for 1 of 4 calls" in lines[6] and "- no price for openai/local-model" in lines[6]
    assert "repaired: " in lines[6] and "corrected: " in lines[6], "the columns shown are explained"
    end = lines[0].index("calls") + len("calls")
    assert all(line[end - 1].isdigit() and line[end] == " " for line in lines[1:4] + lines[5:6]), (
        "the numbers are right-aligned under their heading"
    )


DEEP = "Jarvis/CtrlExMem/Executor/Coder/CtrlExMem/Executor/extend_library/CtrlExMem/Executor/write_code/CodeGenerator"


@pytest.mark.parametrize("width", [80, 100])
def test_the_table_fits_the_terminal_on_screen(width, run_context):
    from fakes import Sink

    from aiflows_jarvis.app import ending
    from aiflows_jarvis.CoreFlowModule import Console

    record_a_run()
    USAGE.record(DEEP, 300, 60, 0.3)
    sink = Sink()
    ending.show_usage(Console(stream=sink, color=False, width=width), run_context.usage)
    lines = sink.text.splitlines()
    assert max(len(line) for line in lines) <= width, "no line folds: " + "\n".join(lines)
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["chat", "calls"])
    table = lines[start : start + 6]
    assert table[0].split() == ["chat", "calls", "prompt", "completion", "cost", "repaired", "corrected"]
    assert all(len(line.split()) == 7 for line in table[1:] if set(line.strip()) != {"-"}), "one row per chat"


def test_a_narrow_screen_gets_each_chat_stacked_and_zero_columns_are_left_out():
    USAGE.record(DEEP, 300, 60, 0.3)
    USAGE.record("Jarvis/CtrlExMem/Controller", 1_000, 100, 0.3)
    wide = USAGE.report().splitlines()
    assert wide[0].split() == ["chat", "calls", "prompt", "completion", "cost"], "no repairs, no corrections"
    lines = USAGE.report(40).splitlines()
    assert lines[:2] == [
        "Jarvis/Coder/extend_library/write_code/CodeGenerator",
        "  calls 1, prompt ~300, completion ~60, cost -",
    ], lines
    assert lines[-3:-1] == ["total", "  calls 2, prompt ~1.3K, completion ~160, cost -"]


def test_an_empty_meter_says_so_briefly():
    assert USAGE.summary() == "0 LLM calls"
    assert USAGE.report().splitlines()[-1].split()[:2] == ["total", "0"], "no legend: no mark to explain"
