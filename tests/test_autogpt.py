"""AutoGPT end to end: the loopback server answers the controller (through litellm), the embeddings and the
Wikipedia API; the DuckDuckGo tool's network call is replaced; the user is scripted."""

from __future__ import annotations

import importlib.util

import pytest
from aiflows.backends.api_info import ApiInfo
from fakes import command, last_user_message

from aiflows_jarvis.AutoGPTFlowModule import AutoGPTFlow
from aiflows_jarvis.CoreFlowModule import set_memory_files
from aiflows_jarvis.VectorStoreFlowModule import embeddings_with_api_infos

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec("chromadb") and importlib.util.find_spec("langchain_community")),
    reason='AutoGPT needs its extra: pip install -e ".[autogpt]"',
)

GOAL = "When was the Eiffel Tower finished, and how tall is it?"
EIFFEL = "The Eiffel Tower is a wrought-iron lattice tower in Paris, finished in 1889."


@pytest.fixture
def autogpt(loopback_llm, tmp_path, monkeypatch, run_context):
    """An AutoGPTFlow whose memory is in tmp_path, embedding through the loopback server, searching its wiki."""
    from langchain_community.utilities.duckduckgo_search import DuckDuckGoSearchAPIWrapper

    monkeypatch.setattr(
        DuckDuckGoSearchAPIWrapper,
        "_ddgs_text",
        lambda self, query, max_results=None: [
            {"title": "Eiffel Tower", "body": f"Height: 330 m (result for {query})", "href": "https://example.org"}
        ],
    )
    loopback_llm.wiki_pages["Eiffel Tower"] = EIFFEL
    run_context.embeddings_factory = embeddings_with_api_infos(
        [ApiInfo(backend_used="openai", api_key="sk-test", api_base=loopback_llm.url)]
    )

    def build(**overrides):
        flow = AutoGPTFlow.instantiate_from_default_config(**overrides)
        flow.subflows["Executor"].subflows["wiki_search"].flow_config["api_url"] = loopback_llm.wiki_url
        set_memory_files(flow, str(tmp_path / "memory"), workdir=str(tmp_path))
        return flow

    return build


def controller_calls(server):
    return [r["messages"] for r in server.requests if r["messages"]]


def test_a_whole_run_searches_remembers_takes_feedback_and_finishes(autogpt, loopback_llm, user):
    loopback_llm.add(
        command("wiki_search", search_term="Eiffel Tower"),
        command("ddg_search", query="Eiffel Tower height"),
        command("finish", answer="Finished in 1889; 330 m tall."),
    )
    user.add("Also look up its height.", "")
    out = autogpt().call({"goal": GOAL})
    assert out == {"answer": "Finished in 1889; 330 m tall.", "status": "finished"}

    calls = controller_calls(loopback_llm)
    assert len(calls) == 3
    assert "(no memories yet)" in calls[0][1]["content"], "the memories: in the first message, after the head"
    assert last_user_message(calls[1]).startswith(
        f"Here is the observation of your previous command:\nPage: Eiffel Tower\nSummary: {EIFFEL}"
    )
    assert "The user's feedback: Also look up its height." in last_user_message(calls[1]), "feedback appended"
    assert "Command: wiki_search" in last_user_message(calls[1]) and EIFFEL in last_user_message(calls[1]), (
        "the memory written after round 1 is read back, in the next message"
    )
    assert calls[1][:2] == calls[0] and calls[2][:4] == calls[1], "each call's prompt begins with the previous call's"
    assert "Height: 330 m" in last_user_message(calls[2])
    assert "Command: wiki_search" not in last_user_message(calls[2]), "a memory already shown is not sent again"
    assert [a["kind"] for a in user.asked] == ["feedback", "feedback"], "asked after each command, not at finish"
    assert "AutoGPT ran `wiki_search`" in user.asked[0]["prompt"]
    assert len(loopback_llm.embedding_requests) == 4, "2 reads (the first, on an empty store, needs none) + 2 writes"


def test_stop_ends_the_run_early(autogpt, loopback_llm, user):
    loopback_llm.add(command("wiki_search", search_term="Eiffel Tower"))
    user.add("stop")
    out = autogpt().call({"goal": GOAL})
    assert out == {"answer": "", "status": "stopped: the user said 'stop'"}
    assert len(controller_calls(loopback_llm)) == 1


def test_q_on_the_command_line_says_the_stop_once_and_exits_with_its_own_code(
    autogpt, loopback_llm, user, tmp_path, run_context
):
    from fakes import Sink

    from aiflows_jarvis.app import autogpt as app
    from aiflows_jarvis.app.run import STOPPED_BY_USER
    from aiflows_jarvis.CoreFlowModule import Console

    loopback_llm.add(command("ddg_search", query="Eiffel Tower"))
    user.add("q")
    sink = Sink()
    run_context.console = Console(stream=sink, color=False)
    code = app.main(["--api-base", loopback_llm.url, "--memory-dir", str(tmp_path / "m"), GOAL])
    assert code == STOPPED_BY_USER == 4, sink.text[-2000:]
    assert sink.text.count("the user said 'q'") == 1, "the stop is said once: " + sink.text[-1500:]
    assert "Answer:" not in sink.text and "(no answer)" not in sink.text
    assert "AutoGPT stopped (see above): no answer." in sink.text and "LLM call" in sink.text
    assert "  4   stopped by the user" in app.EPILOG, "--help names the exit code"


def test_a_second_run_retrieves_what_the_first_one_wrote(autogpt, loopback_llm, user):
    loopback_llm.add(command("wiki_search", search_term="Eiffel Tower"), command("finish", answer="1889"))
    user.add("")
    assert autogpt().call({"goal": GOAL})["status"] == "finished"

    loopback_llm.add(command("finish", answer="1889, from memory"))
    second = autogpt()  # a new flow, as a new process would build it
    assert second.call({"goal": "When was the Eiffel Tower finished?"})["answer"] == "1889, from memory"
    first_prompt = controller_calls(loopback_llm)[-1][1]["content"]
    assert EIFFEL in first_prompt, "the second run's first prompt holds the first run's memory"


def test_a_tool_that_raises_is_an_observation_and_the_run_goes_on(autogpt, loopback_llm, user, monkeypatch):
    from langchain_community.utilities.duckduckgo_search import DuckDuckGoSearchAPIWrapper

    def down(self, query, max_results=None):
        raise ConnectionError("DuckDuckGo is unreachable")

    monkeypatch.setattr(DuckDuckGoSearchAPIWrapper, "_ddgs_text", down)
    loopback_llm.add(command("ddg_search", query="Eiffel Tower"), command("finish", answer="unknown"))
    user.add("")
    assert autogpt().call({"goal": GOAL}) == {"answer": "unknown", "status": "finished"}
    observation = last_user_message(controller_calls(loopback_llm)[1])
    assert "Error: the tool ddg_search failed" in observation and "DuckDuckGo is unreachable" in observation


def test_the_prompt_at_round_30_is_no_larger_than_in_an_earlier_block_plus_a_bound(autogpt, loopback_llm, user):
    rounds = 30
    loopback_llm.add(
        *[command("wiki_search", search_term=f"Eiffel Tower part {i}") for i in range(rounds - 1)],
        command("finish", answer="done"),
    )
    user.add(*[f"feedback number {i} " * 3 for i in range(rounds - 1)])
    out = autogpt(max_rounds=rounds, max_repeats=0).call({"goal": GOAL})
    assert out["status"] == "finished"
    sizes = [sum(len(m["content"]) for m in messages) for messages in controller_calls(loopback_llm)]
    assert len(sizes) == rounds
    # the chat is appended to and rebuilt once per block of 10 calls: its size goes up and down, within a bound
    rebuilt = [n for n in range(1, rounds) if len(sizes) > n and sizes[n] < sizes[n - 1]]
    assert rebuilt == [10, 20], f"prompt sizes by round: {sizes}"
    bound = 800  # the memories and observations differ a little in length (numbers, feedback)
    assert max(sizes[20:]) <= max(sizes[10:20]) + bound, f"prompt sizes by round: {sizes}"
    assert max(len(messages) for messages in controller_calls(loopback_llm)) == 2 + 2 * 10, (
        "head, first message, and at most 10 exchanges"
    )


def test_the_skeleton_that_quick_load_fills_gives_the_embeddings_their_key_too():
    """The modules' READMEs build a configuration with chat_backends_skeleton and fill it with quick_load: the vector
    store's `embedding.api_infos: ???` is in the skeleton, so the memory gets the key as the controller does."""
    from aiflows.utils.general_helpers import quick_load

    from aiflows_jarvis.CoreFlowModule.flows.config_tree import chat_backends_skeleton

    config = chat_backends_skeleton("aiflows_jarvis.AutoGPTFlowModule.AutoGPTFlow.instantiate_from_default_config")
    assert config["subflows_config"]["Memory"] == {"embedding": {"api_infos": "???"}}
    config.pop("_target_")
    quick_load(config, [ApiInfo(backend_used="openai", api_key="sk-test")])
    flow = AutoGPTFlow.instantiate_from_default_config(**config)
    assert flow.subflows["Memory"].embeddings.api_info["api_key"] == "sk-test"
