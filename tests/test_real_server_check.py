"""benchmarks/real_server_check.py against the loopback server: every controller is asked (or named with the reason),
and the figures it reports (first token, prefill tokens, reusable prefix) are printed (never asserted as timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import KEYS
from loopback_llm import HTTPError
from subprocess_guard import network_guarded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, "benchmarks", "real_server_check.py")


def first_command(body: dict) -> str:
    """A valid reply to any controller: its first command, each argument filled, as its schema asks."""
    schema = body["response_format"]["json_schema"]["schema"]
    command = schema["properties"]["command"]["enum"][0]
    args = schema["properties"]["command_args"]["anyOf"][0]["properties"]
    return json.dumps({"command": command, "command_args": {name: "x" for name in args}})


def run_check(url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    with network_guarded(env) as guarded:
        return subprocess.run(
            [sys.executable, CHECK, "--api-base", url, "--model", "local-model", "--rounds", "1", *extra],
            cwd=ROOT,
            env=guarded,
            capture_output=True,
            text=True,
            timeout=300,
        )


def controller_rows(stdout: str) -> dict:
    rows = {}
    for line in stdout.splitlines():
        words = line.split()
        if "/" in line and len(words) > 9 and words[1].isdigit():
            rows[words[0]] = int(words[2])  # calls
    return rows


def test_every_controller_is_called_once_with_rounds_1(loopback):
    loopback.add(*[first_command] * 40)
    loopback.window_answers["/props"] = {"default_generation_settings": {"n_ctx": 8192}}
    done = run_check(loopback.url)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)
    rows = controller_rows(done.stdout)
    assert len(rows) == 10, done.stdout
    assert all(calls >= 1 for calls in rows.values()), done.stdout
    assert "controllers called: 10 of 10" in done.stdout
    assert "not called" not in done.stdout
    assert "context window: 8192 tokens from the server's" in done.stdout
    assert all(r["json"].get("stream") is True for r in loopback.requests), "the calls are streamed (first token)"
    assert "reusable prefix:" in done.stdout and "first token:" in done.stdout


def test_a_controller_that_fails_is_named_with_the_reason(loopback):
    loopback.add(HTTPError(401, "Invalid API key for this one"), *[first_command] * 40)
    done = run_check(loopback.url)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)
    assert "controllers called: 9 of 10" in done.stdout
    assert done.stdout.count("not called:") == 1
    assert "Invalid API key for this one" in done.stdout


def test_prefill_and_reusable_prefix_figures(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    from server_tap import Call

    assert Call("c", [], True, timings={"prompt_n": 12, "prompt_ms": 250.0}).prefill_tokens == 12
    assert Call("c", [], True, timings={"prompt_ms": 250.0}).prefill_seconds == 0.25
    assert (
        Call(
            "c", [], False, usage={"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 64}}
        ).prefill_tokens
        == 36
    )
    assert Call("c", [], False, usage={"prompt_tokens": 100}).prefill_tokens is None, "unknown is not 100"

    monkeypatch.syspath_prepend(ROOT)
    import importlib.util

    spec = importlib.util.spec_from_file_location("real_server_check", CHECK)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    head = [{"role": "system", "content": "rules " * 200}]
    first = Call("c", head + [{"role": "user", "content": "one"}], True)
    second = Call(
        "c",
        head
        + [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "two"},
        ],
        True,
    )
    changed = Call("c", [{"role": "system", "content": "new plan " + "rules " * 200}], True)
    reused, total = check.reused_prefix([first, second])
    assert 0.9 < reused / total < 1.0, "the second prompt begins with the first"
    reused, total = check.reused_prefix([second, changed])
    assert reused / total < 0.05, "a rewritten system prompt breaks the prefix at its start"
    assert check.reused_prefix([first]) == (0, 0)
