"""Every Python snippet of README.md and docs/using-the-flows.md runs when pasted alone into a new file: each is run
in a fresh process, in an empty folder, with no OPENAI_API_KEY, the LLM a loopback server given as OPENAI_API_BASE
(the network guarded). A snippet with no LLM configured at all stops with a message that says what to set."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from fakes import command, finish
from loopback_llm import LoopbackLLMServer
from subprocess_guard import network_guarded

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ("README.md", os.path.join("docs", "using-the-flows.md"))
# what a snippet that calls a flow is answered: a plan, a command, the end
REPLIES = [
    "1. Run code that prints 6 * 7.\n2. Finish.",
    command("run_code", language="python", code="print(6 * 7)"),
    finish("42"),
]


def snippets():
    found = []
    for page in PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        for number, match in enumerate(re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M), 1):
            found.append(pytest.param(match.group(1), id=f"{page}-{number}"))
    return found


def run_alone(folder, code, environ):
    (folder / "snippet.py").write_text(code)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_", "PYTHONPATH"))}
    base.update(environ)
    with network_guarded(base, keep_pythonpath=False) as env:
        return subprocess.run(
            [sys.executable, "snippet.py"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )


def test_the_pages_have_python_snippets():
    assert len(snippets()) >= 3


@pytest.mark.parametrize("code", snippets())
def test_a_snippet_runs_alone_with_a_local_server_and_no_key(tmp_path, code):
    with LoopbackLLMServer(replies=list(REPLIES)) as server:
        done = run_alone(tmp_path, code, {"OPENAI_API_BASE": server.url})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        assert not server.errors, server.errors
        if ".call(" in code:
            assert server.pending == 0 and "'status': 'finished'" in done.stdout, done.stdout[-3000:]
            assert "42" in server.requests[2]["messages"][-1]["content"], "the code ran"


def test_the_recipe_with_no_llm_configured_says_what_to_set(tmp_path):
    [recipe] = [p.values[0] for p in snippets() if ".call(" in p.values[0]]
    done = run_alone(tmp_path, recipe, {})
    assert done.returncode != 0
    assert "KeyError" not in done.stderr and "No LLM is configured" in done.stderr, done.stderr[-3000:]
    assert "OPENAI_API_BASE=" in done.stderr and "OPENAI_API_KEY=" in done.stderr
