"""Waiting for a slow local server while it writes, never sending a request twice into its queue, and stopping a
reply that repeats itself: against a paced loopback server (one generation at a time, an abandoned non-streamed
request still written to its end). Time scales are small; the tests count generations and events, not seconds."""

from __future__ import annotations

import pytest
from aiflows.backends.api_info import ApiInfo
from paced_llm import Drop, PacedLLMServer, Stall

from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, openai_http, with_api_infos
from aiflows_jarvis.ChatFlowModule.generation import pace_of, send
from aiflows_jarvis.ChatFlowModule.repetition import find_repetition
from aiflows_jarvis.CoreFlowModule import USAGE, current_run
from aiflows_jarvis.CoreFlowModule.console.interaction import Status

LONG = " ".join(f"word{i}" for i in range(60))  # 60 tokens: 3 s at 20 tokens/s
LOOP = "Plan:\n" + "".join(f"{i}. Compute the first primes and write them to the file.\n" for i in range(1, 200))


@pytest.fixture(autouse=True)
def _fresh_connections():
    openai_http.close_connections()
    yield
    openai_http.close_connections()


def chat_on(server, timeout=0.5, **overrides):
    """A chat of the test's run on ``server``."""
    api = ApiInfo(backend_used="openai", api_key="sk-test", api_base=server.url)
    current_run().backend_factory = with_api_infos([api])
    config = {
        "name": "Asker",
        "retry": {"max_attempts": 3, "initial_delay": 0.01, "max_delay": 0.05, "call_deadline": 1.0},
        "backend": {"request_timeout": timeout},
    }
    config.update(overrides)
    return ChatAtomicFlow.instantiate_from_default_config(**config)


def test_a_reply_longer_than_the_timeout_is_waited_for_while_tokens_flow_and_generated_once(quiet_console):
    with PacedLLMServer([LONG], tokens_per_second=20) as server:
        # a 0.5 s timeout between chunks and a 1 s deadline for the call; the reply takes about 3 s
        assert chat_on(server).call({"query": "write"}) == {"api_output": LONG}
        server.wait_idle()
        assert server.started == 1 and server.finished == 1 and server.cancelled == 0, "no retry, no duplicate"
        request = server.generations[0].request
        assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    usage = USAGE.per_flow["Asker"]
    assert usage.retries == 0 and usage.completion_tokens == 60 and usage.reported_calls == 1
    assert "retrying" not in quiet_console.text


def test_a_stalled_stream_is_closed_first_then_asked_again_once(quiet_console):
    with PacedLLMServer([Stall(LONG, after=3), "fine"], tokens_per_second=100) as server:
        assert chat_on(server).call({"query": "write"}) == {"api_output": "fine"}
        server.wait_idle()
        assert server.started == 2
        assert server.generations[0].cancelled and server.generations[1].delivered
        assert server.queue_lengths == [0, 0], "the retry did not wait behind the stalled generation"
    assert "the streamed reply stalled" in quiet_console.text and "retrying" in quiet_console.text
    assert USAGE.per_flow["Asker"].retries == 1


@pytest.mark.parametrize("chunked", [False, True], ids=["plain", "chunked"])
def test_a_stream_cut_off_mid_reply_is_no_reply_it_is_asked_again_and_said_so(quiet_console, chunked):
    with PacedLLMServer([Drop(LONG, after=5, chunked=chunked), "fine"], tokens_per_second=100) as server:
        assert chat_on(server).call({"query": "write"}) == {"api_output": "fine"}, "not the first five words"
        server.wait_idle()
        assert server.started == 2
    assert "the streamed reply was cut off" in quiet_console.text and "retrying" in quiet_console.text
    assert USAGE.per_flow["Asker"].retries == 1


def test_a_server_that_does_not_stream_is_learned_once_and_waited_for_by_its_max_tokens(quiet_console):
    with PacedLLMServer(["short reply", LONG], tokens_per_second=50, streams=False) as server:
        chat = chat_on(server, backend={"request_timeout": 0.5, "max_tokens": 60})
        assert chat.call({"query": "first"}) == {"api_output": "short reply"}
        # 60 tokens take 1.2 s, over the 0.5 s timeout: the non-streamed request's timeout grows with max_tokens
        assert chat.call({"query": "second"}) == {"api_output": LONG}
        server.wait_idle()
        assert server.started == 2 and server.cancelled == 0 and all(g.delivered for g in server.generations)
        assert server.generations[0].request["stream"] is True
        assert "stream" not in server.generations[1].request and "stream_options" not in server.generations[1].request
        assert pace_of(server.url + "/chat/completions").streams is False
    assert USAGE.per_flow["Asker"].retries == 0


def test_a_non_streamed_request_that_times_out_waits_for_the_abandoned_generation():
    with PacedLLMServer([LONG], tokens_per_second=20, streams=False) as server:
        url = server.url + "/chat/completions"
        pace = pace_of(url)
        pace.streams, pace.tokens_per_second = False, 1000.0  # wrongly fast: its timeout comes before the reply
        request = openai_http.DirectRequest(url, "sk-test", {"model": "m", "messages": [], "max_tokens": 60}, 0.2)
        with pytest.raises(openai_http.APITimeoutError) as error:
            send(request)
        assert "may still be writing it" in str(error.value) and error.value.explained
        first_timeout = 0.2 + 1.5 * 60 / 1000.0
        assert error.value.retry_after >= 2 * first_timeout, "the wait covers at least twice what was waited"
        assert pace.tokens_per_second < 60 / first_timeout
        from aiflows_jarvis.ChatFlowModule.llm_errors import classify

        info = classify(error.value)
        assert info.retryable and info.retry_after == error.value.retry_after
        assert "may still be writing it" in info.reason
        server.wait_idle()
        assert server.generations[0].finished and not server.generations[0].delivered, "it was written all the same"


def test_a_reply_that_repeats_itself_is_stopped_early_and_the_next_call_asks_for_less(quiet_console):
    with PacedLLMServer([LOOP, "1. Compute the primes.\n2. Save them."], tokens_per_second=400) as server:
        chat = chat_on(server, timeout=5.0, backend={"request_timeout": 5.0, "max_tokens": 2000})
        reply = chat.call({"query": "plan"})["api_output"]
        assert reply == "Plan:\n1. Compute the first primes and write them to the file."
        assert chat.last_finish_reason == "repetition" and chat.last_repetition.count == 8
        server.wait_idle()
        first = server.generations[0]
        assert first.cancelled and first.tokens < 200, "stopped reading: the connection was closed"
        assert chat.call({"query": "again"})["api_output"].startswith("1. Compute")
        assert server.generations[1].request["max_tokens"] == 1000, "half the max_tokens after a loop"
        assert chat.last_repetition is None and chat.last_finish_reason == "stop"
    assert 'the reply repeated "compute the first primes and write them to the file." 8 times' in quiet_console.text


def test_a_non_streamed_reply_that_repeats_itself_is_cut_the_same_way(quiet_console):
    with PacedLLMServer([LOOP], tokens_per_second=2000, streams=False) as server:
        chat = chat_on(server, timeout=5.0)
        pace_of(server.url + "/chat/completions").streams = False
        assert (
            chat.call({"query": "plan"})["api_output"]
            == "Plan:\n1. Compute the first primes and write them to the file."
        )
        assert chat.last_finish_reason == "repetition"


@pytest.mark.parametrize(
    "text",
    [
        "def f():\n    connection.close()\n    return 1\n" * 3 + "x = 1\n" * 30,
        "\n".join(f"Step {i}: check the value of item {i} against the limit." for i in range(40)),
        "A sound paragraph. " + "It says one thing, then another thing. " + "Each sentence differs from the rest. ",
    ],
)
def test_sound_text_is_not_taken_for_a_loop(text):
    assert find_repetition(text) is None


def test_word_loops_without_line_breaks_are_found():
    found = find_repetition("I will now compute the primes and then " * 40)
    assert found is not None and found.unit == "I will now compute the primes and then"
    assert found.keep == len("I will now compute the primes and then")


def test_the_status_line_shows_the_tokens_and_their_rate():
    status = Status(console=None, echo=False)
    assert status.rate() == ""
    for _ in range(31):
        status.add("tok")
    status.first_at -= 2.0  # as if the first came two seconds ago
    assert status.pieces == 31 and status.rate() == ", 15.0 tokens/s"


def test_a_plan_that_repeats_itself_is_asked_again_without_repeating_not_to_be_shortened(scripted_llm):
    from aiflows_jarvis.PlanWriterFlowModule import InteractivePlanGenFlow

    class Generator:
        last_finish_reason = "repetition"
        last_repetition = find_repetition(LOOP)

    told, reason = InteractivePlanGenFlow.instantiate_from_default_config().draft_problem("", Generator())
    assert told.startswith('Your plan repeated "compute the first primes') and "each step once" in told
    assert "repeated itself" in reason and "cut off" not in told
