"""benchmarks/run.py: the parts that need no peer install, on a small scale (figures are printed, never asserted)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from helpers import KEYS
from subprocess_guard import network_guarded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")
AIFLOWS_PEER = os.path.join(ROOT, "benchmarks", "peers", "aiflows_peer.py")
PROJECT_FIGURES = (
    "first_request_s",
    "round_ms_1_20",
    "round_ms_181_200",
    "round_ratio",
    "prompt_ratio",
    "peak_rss_mb",
    "kernel_start_ms",
    "warm_rt_ms_0",
    "warm_rt_ms_5000",
    "demo_s",
    "first_request_s_floor",
    "warm_rt_ms_floor",
    "kernel_start_ms_floor",
    "prefix_share_top_words",
    "prefix_share_loop",
)


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/run.py as a module; the folders it puts on sys.path and the modules it imports are dropped after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("benchmark_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for name in set(sys.modules) - before:
        del sys.modules[name]


def child(argv, cwd, timeout=120):
    """A child Python with no API keys and the network guarded (its own children inherit the guard)."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    with network_guarded(env) as guarded:
        return subprocess.run(
            [sys.executable, *argv],
            cwd=cwd,
            env=guarded,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def test_quick_json_without_peers_has_every_figure_of_the_project(tmp_path):
    done = child([RUN, "--quick", "--no-peers", "--json", "--rounds", "40"], tmp_path, timeout=300)

    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)  # --json: the whole of stdout is one JSON object (progress goes to stderr)
    assert figures["errors"] == {}, figures["errors"]
    for key in PROJECT_FIGURES:
        assert isinstance(figures[key], (int, float)) and not isinstance(figures[key], bool), (key, figures[key])
        assert figures[key] > 0, (key, figures[key])
    assert figures["rounds"] == 40, "the loop ran the rounds asked for"
    assert figures["first_request_s_smolagents"] is None, "the key is there, unmeasured, with --no-peers"
    assert "round_ms_1_20_aiflows" not in figures, "--no-peers runs no peer"
    assert figures["peers"] == {"aiflows": "unavailable (--no-peers)", "smolagents": "unavailable (--no-peers)"}
    assert figures["quick"] is True
    assert not os.listdir(tmp_path), "the benchmark works in scratch folders of its own and leaves nothing behind"


def test_the_aiflows_peer_loop_runs_and_its_chat_keeps_every_message(tmp_path):
    done = child([AIFLOWS_PEER, "rounds", "--rounds", "40"], tmp_path)

    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "finished"
    assert result["calls"] == 41, "40 count_words commands, then finish"
    assert len(result["round_ms"]) == 40, "one duration between each two model calls"
    at_20, at_40 = result["prompts"]["20"], result["prompts"]["40"]
    # aiflows' chat as it comes sends the system prompt and every earlier message: 2 more per call
    assert len(at_20) == 1 + 2 * 19 + 1 and len(at_40) == 1 + 2 * 39 + 1, (len(at_20), len(at_40))
    assert at_40[: len(at_20) - 1] == at_20[:-1], "call 40 repeats everything call 20 sent"


def test_the_table_names_an_unavailable_peer_and_compares_with_the_best_one(bench):
    figures = {
        "first_request_s": 1.0,
        "first_request_s_aiflows": 4.0,
        "first_request_s_floor": 0.05,
        "round_ms_1_20": 1.0,
        "round_ms_1_20_aiflows": 2.0,
        "rounds": 200,
        "rounds_aiflows": 60,
        "round_ratio": 1.1,
        "round_ratio_aiflows": 10.0,
        "peers": {"aiflows": "0.1.7", "smolagents": "unavailable (pip install smolagents[openai] failed)"},
        "machine": {"cpu": "test", "cores": 2, "memory_gb": 24, "python": "3.11"},
        "errors": {},
    }

    text = bench.table(figures)

    rows = {line.split("  ")[0]: line for line in text.splitlines()}
    assert rows["process start -> first LLM request (s)"].split()[-1] == "0.25x", "Jarvis / the best peer (4.0)"
    assert rows["ms per round, rounds 1-20"].split()[-1] == "0.50x"
    assert "10.00*" in rows["round ratio (181-200 / 1-20)"], "a figure from another window is marked"
    assert rows["round ratio (181-200 / 1-20)"].split()[-1] == "-", "and not compared"
    assert "smolagents unavailable (pip install smolagents[openai] failed)" in text


def test_a_peer_that_cannot_be_installed_says_why(tmp_path, bench):
    from install import PeerUnavailable, smolagents_python

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the peers' folder should be")
    with pytest.raises(PeerUnavailable, match="could not create"):
        smolagents_python(str(blocked))
