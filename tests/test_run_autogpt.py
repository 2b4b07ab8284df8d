"""run_autogpt.py: the offline demo (recorded LLM replies and tool results, local embeddings), missing credentials."""
from __future__ import annotations

import importlib.util

import pytest

import run_autogpt
from fakes import Sink

from aiflows_jarvis.CoreFlowModule import Console, set_console

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec("chromadb") and importlib.util.find_spec("langchain_community")),
    reason='AutoGPT needs its extra: pip install -e ".[autogpt]"')


@pytest.fixture
def screen():
    sink = Sink()
    set_console(Console(stream=sink, color=False))
    return sink


def test_the_demo_runs_offline_and_finishes(tmp_path, screen):
    assert run_autogpt.main(["--demo", "--memory-dir", str(tmp_path / "memory")]) == 0
    assert "This is a REPLAY" in screen.text
    assert "AutoGPT finished. Answer:" in screen.text and "330 m" in screen.text
    assert (tmp_path / "memory" / "autogpt_demo_store").is_dir(), "the demo's memory ran for real"


def test_no_credentials_is_exit_code_2(tmp_path, screen, monkeypatch):
    for name in ("OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert run_autogpt.main(["--memory-dir", str(tmp_path / "m"), "When was the Eiffel Tower finished?"]) == 2
    assert "needs an LLM" in screen.text


def test_demo_refuses_a_goal(capsys):
    with pytest.raises(SystemExit):
        run_autogpt.parse_args(["--demo", "some goal"])
