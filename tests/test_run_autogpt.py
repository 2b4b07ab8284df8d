"""run_autogpt.py: the offline demo (recorded LLM replies and tool results, local embeddings) in process and, with
the README's command, from a fresh clone; missing credentials."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from aiflows_jarvis.app import autogpt as run_autogpt
from fakes import Sink
from subprocess_guard import check_guarded_run, guarded_environment

from aiflows_jarvis.CoreFlowModule import Console, set_console

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec("chromadb") and importlib.util.find_spec("langchain_community")),
    reason='AutoGPT needs its extra: pip install -e ".[autogpt]"')


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = ("OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_API_BASE", "OPENAI_API_BASE")


@pytest.fixture
def screen():
    sink = Sink()
    set_console(Console(stream=sink, color=False))
    return sink


def test_the_demo_runs_offline_and_finishes(tmp_path, screen):
    assert run_autogpt.main(["--demo", "--memory-dir", str(tmp_path / "memory")]) == 0
    assert "This is a REPLAY" in screen.text
    assert "AutoGPT finished: the answer is above." in screen.text and screen.text.count("330 m (1,083 ft)") == 1, \
        "the finish step showed the answer whole: it is not shown again"
    assert "context window" not in screen.text, "a replay has no model whose context window to set"
    assert (tmp_path / "memory" / "autogpt_demo_store").is_dir(), "the demo's memory ran for real"


def test_no_credentials_is_exit_code_2(tmp_path, screen, monkeypatch):
    for name in ("OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert run_autogpt.main(["--memory-dir", str(tmp_path / "m"), "When was the Eiffel Tower finished?"]) == 2
    assert "needs an LLM" in screen.text


def test_demo_refuses_a_goal(capsys):
    with pytest.raises(SystemExit):
        run_autogpt.parse_args(["--demo", "some goal"])


def readme_command() -> str:
    """The set-up command of the README's AutoGPT section."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("\n## AutoGPT\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```bash\n", 1)[1].split("```", 1)[0].strip()


def test_the_readme_command_runs_the_demo_offline_from_a_fresh_clone(tmp_path):
    steps = [step.strip() for step in readme_command().split("&&")]
    assert steps == ["python3 -m venv .venv", '.venv/bin/pip install -e ".[autogpt]"',
                     ".venv/bin/python run_autogpt.py --demo"], steps
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout: {listed.stderr.strip()}")
    clone = tmp_path / "clone"  # what a clone holds: the files git tracks (as they are in the working tree)
    for name in filter(None, listed.stdout.split("\0")):
        if os.path.isfile(os.path.join(ROOT, name)):
            os.makedirs(clone / os.path.dirname(name), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), clone / name)
    # The first two steps are this test run's own venv (pip needs the network); the last runs in the clone, with the
    # network guarded, no key, and nothing of this repository on PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if k not in KEYS + ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE",
                                                                     "PYTHONPYCACHEPREFIX")}
    env, attempts = guarded_environment(str(tmp_path / "guard"), dict(env, NO_COLOR="1"))
    done = subprocess.run([sys.executable, "run_autogpt.py", "--demo"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "AutoGPT finished: the answer is above." in done.stdout and "330 m" in done.stdout
    check_guarded_run(attempts)
    assert (clone / "memory" / "autogpt_demo_store").is_dir()
    assert (clone / "flow_modules" / "aiflows_jarvis" / "AutoGPTFlowModule" / "__pycache__").is_dir(), \
        "the clone's modules ran (its folder comes before the editable install on sys.path)"
