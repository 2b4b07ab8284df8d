"""AutoGPT's tools: LCToolFlow (any LangChain tool; errors and timeouts become observations), the DuckDuckGo tool
with its network call replaced, WikiSearchAtomicFlow against the loopback stand-in for the MediaWiki API, and tool
calls recorded to / replayed from a transcript."""

from __future__ import annotations

import threading

import pytest

from aiflows_jarvis.ChatFlowModule import Transcript, TranscriptRecorder
from aiflows_jarvis.CoreFlowModule import ConfigurationError, TranscriptError
from aiflows_jarvis.LCToolFlowModule import LCToolFlow
from aiflows_jarvis.WikiSearchFlowModule import WikiSearchAtomicFlow

langchain_core = pytest.importorskip(
    "langchain_core", reason='LangChain is not installed (pip install -e ".[autogpt]")'
)
from langchain_core.tools import BaseTool  # noqa: E402

RELEASE = threading.Event()


class EchoTool(BaseTool):
    name: str = "echo"
    description: str = "Repeats the query."

    def _run(self, query: str) -> str:
        return f"echo: {query}"


class BrokenTool(BaseTool):
    name: str = "broken"
    description: str = "Always fails."

    def _run(self, query: str) -> str:
        raise RuntimeError("the service is down")


class StuckTool(BaseTool):
    name: str = "stuck"
    description: str = "Never answers in time."

    def _run(self, query: str) -> str:
        RELEASE.wait(30)
        return "too late"


@pytest.fixture(autouse=True)
def _release_stuck_tools():
    yield
    RELEASE.set()


def tool_flow(target: str, **overrides) -> LCToolFlow:
    return LCToolFlow.instantiate_from_default_config(name="tool", backend={"_target_": target}, **overrides)


def test_a_langchain_tool_gets_its_keyword_arguments_and_answers_an_observation():
    flow = tool_flow("test_tools.EchoTool")
    assert flow.call({"query": "hello", "ignored": 1}) == {"observation": "echo: hello"}


def test_a_tool_that_raises_becomes_an_observation_not_a_crash():
    out = tool_flow("test_tools.BrokenTool").call({"query": "x"})
    assert out["observation"].startswith("Error: the tool tool failed (RuntimeError: the service is down)")


def test_a_tool_that_does_not_answer_in_time_becomes_an_observation():
    RELEASE.clear()
    out = tool_flow("test_tools.StuckTool", timeout=0.2).call({"query": "x"})
    assert "TimeoutError: no answer within 0.2 s" in out["observation"]
    RELEASE.set()


def test_long_observations_are_cut_and_say_so():
    out = tool_flow("test_tools.EchoTool", max_observation_chars=200).call({"query": "word " * 500})
    assert len(out["observation"]) < 400 and "characters cut" in out["observation"]


def test_a_tool_that_cannot_be_built_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="cannot be imported|cannot build"):
        tool_flow("no_such_package.Tool").call({"query": "x"})
    with pytest.raises(ConfigurationError, match="must name a LangChain tool"):
        LCToolFlow.instantiate_from_default_config().call({"query": "x"})


def test_the_duckduckgo_tool_runs_with_its_network_call_replaced(monkeypatch):
    pytest.importorskip("ddgs", reason='ddgs is not installed (pip install -e ".[autogpt]")')
    from langchain_community.utilities.duckduckgo_search import DuckDuckGoSearchAPIWrapper

    asked = []

    def fake_text(self, query, max_results=None):
        asked.append(query)
        return [{"title": "Eiffel Tower", "body": "Completed in 1889, 330 m tall.", "href": "https://example.org"}]

    monkeypatch.setattr(DuckDuckGoSearchAPIWrapper, "_ddgs_text", fake_text)
    flow = tool_flow("langchain_community.tools.DuckDuckGoSearchRun")
    out = flow.call({"query": "Eiffel Tower height"})
    assert asked == ["Eiffel Tower height"]
    assert "Completed in 1889, 330 m tall." in out["observation"]


def wiki(loopback, **overrides) -> WikiSearchAtomicFlow:
    return WikiSearchAtomicFlow.instantiate_from_default_config(
        name="wiki_search", api_url=loopback.wiki_url, **overrides
    )


def test_wiki_search_reads_the_introductions_of_the_pages_found(loopback):
    loopback.wiki_pages.update(
        {
            "Eiffel Tower": "The Eiffel Tower is a wrought-iron lattice tower in Paris.",
            "Gustave Eiffel": "Alexandre Gustave Eiffel was a French civil engineer.",
            "Banana": "A banana is a fruit.",
        }
    )
    out = wiki(loopback).call({"search_term": "Eiffel"})["wiki_content"]
    assert out.startswith("Page: Eiffel Tower\nSummary: The Eiffel Tower is a wrought-iron")
    assert "Page: Gustave Eiffel" in out and "Banana" not in out
    assert loopback.wiki_requests[0]["srsearch"] == "Eiffel" and loopback.wiki_requests[0]["list"] == "search"


def test_wiki_search_is_bounded_and_says_when_nothing_matches(loopback):
    loopback.wiki_pages["Long"] = "word " * 5000
    out = wiki(loopback, max_chars=500).call({"search_term": "long"})["wiki_content"]
    assert len(out) < 700
    assert "No Wikipedia page matches 'zebra'" in wiki(loopback).call({"search_term": "zebra"})["wiki_content"]


def test_wiki_search_errors_become_observations(loopback):
    flow = WikiSearchAtomicFlow.instantiate_from_default_config(api_url=loopback.url + "/nothing-here", timeout=5)
    out = flow.call({"search_term": "Eiffel"})["wiki_content"]
    assert out.startswith("Error: the Wikipedia search for 'Eiffel' failed (HTTPError")
    loopback.errors.clear()  # the 404 was the point


def test_wiki_search_endpoint_and_language_come_from_the_yaml():
    flow = WikiSearchAtomicFlow.instantiate_from_default_config(lang="fr")
    assert flow.endpoint() == "https://fr.wikipedia.org/w/api.php"


def test_tool_calls_are_recorded_and_replayed_without_the_tool(loopback, tmp_path, run_context):
    loopback.wiki_pages["Eiffel Tower"] = "A tower in Paris."
    path = tmp_path / "run.jsonl"
    recorder = TranscriptRecorder(str(path), goal="g")
    run_context.tool_recorder = recorder.record_tool
    flow = wiki(loopback)
    recorded = flow.call({"search_term": "Eiffel"})
    echo = tool_flow("test_tools.EchoTool").call({"query": "hi"})
    recorder.close()
    run_context.tool_recorder = None

    transcript = Transcript.load(str(path))
    assert [r["flow"] for r in transcript.tool_records] == ["wiki_search", "tool"] and transcript.records == []
    run_context.tool_replay = transcript.next_tool
    requests_before = len(loopback.wiki_requests)
    assert flow.call({"search_term": "Eiffel"}) == recorded
    assert tool_flow("test_tools.BrokenTool").call({"query": "hi"}) == echo, "replayed: the tool is not called"
    assert len(loopback.wiki_requests) == requests_before
    assert transcript.unused() == 0
    with pytest.raises(TranscriptError, match="no more tool results"):
        flow.call({"search_term": "Eiffel"})


def test_a_replayed_tool_call_with_other_arguments_has_left_the_recording(tmp_path, run_context):
    path = tmp_path / "run.jsonl"
    recorder = TranscriptRecorder(str(path), goal="g")
    recorder.record_tool("tool", {"query": "a"}, "A")
    recorder.close()
    run_context.tool_replay = Transcript.load(str(path)).next_tool
    with pytest.raises(TranscriptError, match="left the recording"):
        tool_flow("test_tools.EchoTool").call({"query": "b"})


def test_a_tool_waits_only_the_time_the_run_has_left_then_the_budget_stops_the_run(run_context):
    from aiflows_jarvis.CoreFlowModule import BudgetExceeded, RunBudget

    RELEASE.clear()
    run_context.budget = RunBudget(max_time=0.3)
    with pytest.raises(BudgetExceeded, match="reached its budget during tool: 0 s of running time"):
        tool_flow("test_tools.StuckTool", timeout=30).call({"query": "x"})
    RELEASE.set()


def test_wiki_search_waits_only_the_time_the_run_has_left(loopback, run_context):
    from aiflows_jarvis.CoreFlowModule import BudgetExceeded, RunBudget

    loopback.wiki_hangs = True
    run_context.budget = RunBudget(max_time=0.3)
    with pytest.raises(BudgetExceeded, match="reached its budget during wiki_search"):
        wiki(loopback).call({"search_term": "Eiffel"})  # its own timeout is 15 s
    assert loopback.wiki_held == 1, "the wiki still holds the request: the run's budget ended the wait"
    with pytest.raises(BudgetExceeded, match="during wiki_search"):
        wiki(loopback).call({"search_term": "Eiffel"})
    assert len(loopback.wiki_requests) == 1, "with no time left, no request is sent"
