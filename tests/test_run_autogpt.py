"""run_autogpt.py: the offline demo (recorded LLM replies and tool results, local embeddings) in process and, with
the README's command, from a fresh clone; missing credentials."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from helpers import KEYS
from subprocess_guard import check_guarded_run, guarded_environment

from aiflows_jarvis.app import autogpt as run_autogpt

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec("chromadb") and importlib.util.find_spec("langchain_community")),
    reason='AutoGPT needs its extra: pip install -e ".[autogpt]"',
)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_demo_runs_offline_and_finishes(tmp_path, quiet_console):
    assert run_autogpt.main(["--demo", "--memory-dir", str(tmp_path / "memory")]) == 0
    assert "This is a REPLAY" in quiet_console.text
    shown = quiet_console.text
    assert "AutoGPT finished: the answer is above." in shown and shown.count("330 m (1,083 ft)") == 1, (
        "the finish step showed the answer whole: it is not shown again"
    )
    assert "context window" not in quiet_console.text, "a replay has no model whose context window to set"
    assert (tmp_path / "memory" / "autogpt_demo_store").is_dir(), "the demo's memory ran for real"


def test_no_credentials_is_exit_code_2(tmp_path, quiet_console, monkeypatch):
    for name in ("OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert run_autogpt.main(["--memory-dir", str(tmp_path / "m"), "When was the Eiffel Tower finished?"]) == 2
    assert "needs an LLM" in quiet_console.text


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
    assert steps == [
        "python3 -m venv .venv",
        '.venv/bin/pip install -e ".[autogpt]"',
        ".venv/bin/python run_autogpt.py --demo",
    ], steps
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
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in KEYS + ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    env, attempts = guarded_environment(str(tmp_path / "guard"), dict(env, NO_COLOR="1"))
    done = subprocess.run(
        [sys.executable, "run_autogpt.py", "--demo"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "AutoGPT finished: the answer is above." in done.stdout and "330 m" in done.stdout
    check_guarded_run(attempts)
    assert (clone / "memory" / "autogpt_demo_store").is_dir()
    assert (clone / "flow_modules" / "aiflows_jarvis" / "AutoGPTFlowModule" / "__pycache__").is_dir(), (
        "the clone's modules ran (its folder comes before the editable install on sys.path)"
    )


def test_a_store_of_another_kind_is_refused_at_the_start_and_migrate_copies_its_memories(
    tmp_path, quiet_console, loopback_llm, run_context
):
    from aiflows.backends.api_info import ApiInfo
    from fakes import command

    from aiflows_jarvis.VectorStoreFlowModule import VectorStoreFlow, embeddings_with_api_infos

    memory, fact = tmp_path / "m", "The Eiffel Tower was finished in 1889."
    run_context.embeddings_factory = embeddings_with_api_infos(
        [ApiInfo(backend_used="openai", api_key="sk-test", api_base=loopback_llm.url)]
    )
    chroma = VectorStoreFlow.instantiate_from_default_config(
        type="chroma", persist_directory=str(memory / "vector_store")
    )
    chroma.call({"operation": "write", "content": fact})  # what an earlier run with the default store remembered
    chroma.close()
    before = sorted(p.name for p in memory.rglob("*"))
    argv = ["--api-base", loopback_llm.url, "--memory-dir", str(memory), "--yes", "--store", "faiss", GOAL_TEXT]

    assert run_autogpt.main(argv) == 2, quiet_console.text[-2000:]
    assert "was written with --store chroma (Chroma); this run uses --store faiss (FAISS)" in quiet_console.text
    assert "--store faiss --migrate" in quiet_console.text
    assert "Run with --store chroma to use them" in quiet_console.text
    after = sorted(p.name for p in memory.rglob("*") if p.name != ".jarvis.lock")  # the run lock, released
    assert after == before, "refused before anything in the folder is written"
    assert not loopback_llm.requests, "no LLM call before the refusal"

    loopback_llm.add(command("finish", answer="1889"))
    assert run_autogpt.main(argv[:-1] + ["--migrate", GOAL_TEXT]) == 0, quiet_console.text[-2000:]
    assert "Copied 1 memory from the Chroma store into a FAISS store" in quiet_console.text
    first = loopback_llm.requests[0]["messages"]
    assert any(fact in m["content"] for m in first[:2]), "the controller reads the old memory (head, first message)"
    assert (memory / "vector_store.chroma" / "chroma.sqlite3").is_file(), "the Chroma store is kept"


GOAL_TEXT = "When was the Eiffel Tower finished?"


def autogpt_config(tmp_path, wiki_url: str) -> str:
    """configs/autogpt.yaml with the wiki_search key it documents pointed at ``wiki_url``; returns the copy's path."""
    import yaml

    with open(os.path.join(ROOT, "configs", "autogpt.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    wiki = config["flow"]["commands"]["wiki_search"]["flow"]
    assert wiki["api_url"] == "https://{lang}.wikipedia.org/w/api.php", "the key is in configs/autogpt.yaml"
    wiki["api_url"] = wiki_url
    path = tmp_path / "autogpt.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def test_the_wiki_key_of_configs_autogpt_yaml_reaches_the_wiki_tool(tmp_path, quiet_console, loopback_llm):
    from fakes import command

    loopback_llm.wiki_pages["Eiffel Tower"] = "The Eiffel Tower was finished in 1889."
    loopback_llm.add(command("wiki_search", search_term="Eiffel Tower"), command("finish", answer="1889"))
    argv = [
        "--config",
        autogpt_config(tmp_path, loopback_llm.wiki_url),
        "--api-base",
        loopback_llm.url,
        "--memory-dir",
        str(tmp_path / "m"),
        "--yes",
        "--store",
        "faiss",
        GOAL_TEXT,
    ]
    assert run_autogpt.main(argv) == 0, quiet_console.text[-2000:]
    assert [r.get("srsearch") for r in loopback_llm.wiki_requests][:1] == ["Eiffel Tower"], "searched the wiki set"
    assert "finished in 1889" in loopback_llm.requests[1]["messages"][-1]["content"]


def test_max_time_bounds_a_tool_that_hangs(tmp_path, quiet_console, loopback_llm):
    import time

    from fakes import command

    from aiflows_jarvis.app.run import BUDGET_REACHED

    loopback_llm.wiki_hangs = True
    loopback_llm.add(command("wiki_search", search_term="Eiffel Tower"))
    argv = [
        "--config",
        autogpt_config(tmp_path, loopback_llm.wiki_url),
        "--api-base",
        loopback_llm.url,
        "--memory-dir",
        str(tmp_path / "m"),
        "--yes",
        "--store",
        "faiss",
        "--max-time",
        "5",
        GOAL_TEXT,
    ]
    started = time.monotonic()
    code = run_autogpt.main(argv)
    elapsed = time.monotonic() - started
    shown = quiet_console.text
    assert code == BUDGET_REACHED, shown[-2000:]
    assert "The run reached its budget during AutoGPT/Executor/wiki_search: 5 s of running time" in shown, shown[-2000:]
    assert loopback_llm.wiki_held == 1, "the run ended while the wiki still held its request, unanswered"
    assert len(loopback_llm.requests) == 1 and len(loopback_llm.embedding_requests) == 0, (
        "nothing after the search: the budget stopped the run in the tool"
    )
    print(f"--max-time 5 against a hanging wiki (own timeout 15 s): the run returned after {elapsed:.1f} s")
