"""Each staged module usable from its hub README alone (issue 12, item 3): every boss's "How to use" run as written
through the loopback LLM server; Jarvis's run.py replaying the shipped demo offline; demo.yaml in the aiflows
authors' `flow:` format; no staged file naming the repository's command line or its configuration folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from fakes import command, finish
from helpers import publish
from loopback_llm import LoopbackLLMServer

NS = "bob"
BOSS_REPLIES = {
    # Coder's plan is its goal, written by code; its one step done, it finishes by itself
    "CoderFlowModule": [command("run_code", language="python", code="print(6 * 7)", completes_step=1)],
    "AbstractBossFlowModule": [
        "1. Ask the user.\n2. Finish.",
        command("ask_user", question="Your favourite colour?"),
        finish("The user leaves it to me: blue."),
    ],
    # ExtendLibrary writes the code at once (its plan is the goal); tested and approved, it is saved and it finishes
    "ExtendLibraryFlowModule": [
        '```python\ndef is_prime(n: int) -> bool:\n    """Whether n is prime."""\n'
        "    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n\n\n"
        'def primes_below(n: int) -> list:\n    """The primes below n."""\n'
        "    return [k for k in range(n) if is_prime(k)]\n```",
        command("test", tests="assert primes_below(10) == [2, 3, 5, 7]"),
    ],
    "JarvisFlowModule": ["1. Answer.\n2. Finish.", finish("Done.")],
}


@pytest.fixture(scope="module")
def staged_all(tmp_path_factory):
    """Every module staged with --local (no check: what publish.py writes), its READMEs syncing from there."""
    out = os.path.realpath(tmp_path_factory.mktemp("hub"))
    staged = os.path.join(out, NS)
    for module in publish.module_names():
        publish.stage_module(module, out, NS, "main", local=True, local_dir=staged)
    publish.add_digests(staged, publish.module_names(), NS, "main", local=True)
    return staged


def readme_snippet(staged, module):
    with open(os.path.join(staged, module, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return text.split("## How to use", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def run_snippet(project, snippet, env):
    (project / "main.py").write_text(snippet)
    runner = publish.project_python("import runpy\nrunpy.run_path('main.py', run_name='__main__')")
    return subprocess.run(
        runner, cwd=project, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("module", sorted(BOSS_REPLIES))
def test_a_boss_runs_from_its_hub_readme_alone(tmp_path, staged_all, module):
    """The "How to use" snippet as written, in a new project with stdin closed, the LLM at the loopback server: it
    sets the api_infos, the memory files and the input source, and the call finishes. CoderFlowModule's runs with
    no OPENAI_API_KEY (a local server needs none)."""
    snippet = readme_snippet(staged_all, module)
    assert 'memory_dir="memory"' in snippet and "set_memory_files" not in snippet, snippet
    assert "with RunContext(backend_factory=" in snippet and "input_source=AutoApproveInput()" in snippet, (
        "the run is built with its settings: " + snippet
    )
    assert "set_" not in snippet, "the run is configured when it is built, with no setter"
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in publish.project_env().items() if k != "OPENAI_API_KEY"}
    with LoopbackLLMServer(replies=list(BOSS_REPLIES[module])) as server:
        env.update(OPENAI_API_BASE=server.url, **({} if module == "CoderFlowModule" else {"OPENAI_API_KEY": "sk-test"}))
        done = run_snippet(project, snippet, env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        assert not server.errors and server.pending == 0, (server.errors, server.pending)
    assert "'status': 'finished'" in done.stdout, done.stdout[-3000:]
    assert any(name.startswith("plan_") for name in os.listdir(project / "memory")), "the memory files were set"


def test_a_readme_with_no_llm_configured_says_what_to_set(tmp_path, staged_all):
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in publish.project_env().items() if not k.startswith("OPENAI_")}
    done = run_snippet(project, readme_snippet(staged_all, "CoderFlowModule"), env)
    assert done.returncode == 1 and "KeyError" not in done.stderr, done.stderr[-3000:]
    assert "Set OPENAI_API_KEY, or OPENAI_API_BASE" in done.stderr, done.stderr[-3000:]


def test_jarvis_run_py_replays_the_shipped_demo_offline(staged_all):
    """No LLM configured, stdin closed, no network (the check's isolation): run.py replays the recording."""
    folder = os.path.join(staged_all, "JarvisFlowModule")
    runner = publish.project_python("import runpy\nrunpy.run_path('run.py', run_name='__main__')")
    env = {k: v for k, v in publish.project_env().items() if not k.startswith("OPENAI_")}
    try:
        done = subprocess.run(
            runner, cwd=folder, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
        )
    finally:
        for leftover in ("flow_modules", "memory"):
            shutil.rmtree(os.path.join(folder, leftover), ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "Replaying the recorded demo" in done.stdout and "'status': 'finished'" in done.stdout, done.stdout[-3000:]


def test_staged_demos_use_the_authors_flow_format_and_no_file_names_the_command_line(staged_all):
    import yaml

    for module in publish.module_names():
        folder = os.path.join(staged_all, module)
        if module not in ("CoreFlowModule", "CodeLibraryFlowModule"):  # those two have no flow: a code demo each
            with open(os.path.join(folder, "demo.yaml"), encoding="utf-8") as f:
                demo = yaml.safe_load(f)
            cls = publish.DEMOS[module]["cls"]
            assert demo["flow"]["_target_"] == f"flow_modules.{NS}.{module}.{cls}.instantiate_from_default_config"
            assert "input_data" in demo
        for rel in publish.folder_files(folder):
            if rel.endswith((".py", ".yaml", ".md", ".txt")):
                with open(os.path.join(folder, rel), encoding="utf-8") as f:
                    text = f.read()
                assert "run_jarvis" not in text and "configs/" not in text, f"{module}/{rel}"


def synced_from_the_hub(tmp_path, modules, revision="main"):
    """A project with ``modules`` (and their dependencies) as a sync from the hub leaves them: copies in
    `flow_modules/NS/<Module>`, flow.mod recording each at ``revision``, FlowVerse's `__init__.py` files. They are
    staged for the hub (dependencies at ``revision``), so a module's own sync finds each dependency there."""
    from aiflows.flow_verse import loading

    out = os.path.realpath(tmp_path / "hub")
    needed = publish.dependency_closure(list(modules))
    for module in needed:
        publish.stage_module(module, out, NS, revision, local=False)
    publish.add_digests(os.path.join(out, NS), list(needed), NS, revision, local=False)
    project = tmp_path / "project"
    sync_root = project / "flow_modules"
    summary = loading.FlowModuleSpecSummary(str(sync_root), loading.DEFAULT_CACHE_PATH)
    for module in needed:
        shutil.copytree(os.path.join(out, NS, module), sync_root / NS / module)
        summary.add_mod(
            loading.FlowModuleSpec(
                f"{NS}/{module}", revision, "0" * 40, str(tmp_path / "cache" / module), str(sync_root / NS / module)
            )
        )
    (sync_root / "__init__.py").write_text("")
    (sync_root / NS / "__init__.py").write_text("")
    (sync_root / ".gitignore").write_text("*\n")
    loading.write_flow_mod_summary(str(sync_root / "flow.mod"), summary)
    return project


@pytest.mark.parametrize("module", ["InterpreterFlowModule", "ChatFlowModule"])
def test_run_py_runs_where_a_sync_from_the_hub_put_the_module(tmp_path, module):
    """`python run.py` in `<project>/flow_modules/NS/<Module>` (FlowVerse refuses to sync a folder inside
    flow_modules/): the module and its dependencies are the project's, nothing is synced again, nothing fetched."""
    from subprocess_guard import network_guarded

    project = synced_from_the_hub(tmp_path, [module])
    folder = project / "flow_modules" / NS / module
    before = (project / "flow_modules" / "flow.mod").read_text()
    with LoopbackLLMServer(replies=["A flow is a unit of work."]) as server:
        with network_guarded(dict(publish.project_env(), OPENAI_API_BASE=server.url), keep_pythonpath=False) as env:
            done = subprocess.run(
                [sys.executable, "run.py"],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        assert not server.errors
    assert (
        ("says 42" in done.stdout)
        if module == "InterpreterFlowModule"
        else ("A flow is a unit of work." in done.stdout)
    ), done.stdout[-3000:]
    assert not (folder / "flow_modules").exists(), "nothing synced into the module's folder"
    assert (project / "flow_modules" / "flow.mod").read_text() == before


def test_the_readme_sync_keeps_the_users_gitignore(tmp_path, staged_all):
    """A project with a `flow_modules/` of its own and its `.gitignore` (no flow.mod yet: FlowVerse's first sync
    there writes `*` over it): the README's snippet, as written, leaves the user's lines and adds no `*`."""
    snippet = readme_snippet(staged_all, "UpdatePlanFlowModule")
    project = tmp_path / "project"
    (project / "flow_modules" / "mytools").mkdir(parents=True)
    (project / "flow_modules" / "__init__.py").write_text("")
    (project / "flow_modules" / "mytools" / "__init__.py").write_text("")
    mine = "# my project's rules\n__pycache__/\nscratch/\n"  # no `*` in it: FlowVerse keeps a file that has one
    (project / "flow_modules" / ".gitignore").write_text(mine)
    done = run_snippet(project, snippet, publish.project_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "[done]" in (project / "memory" / "plan.txt").read_text(), "the module ran"
    text = (project / "flow_modules" / ".gitignore").read_text()
    assert text.startswith(mine) and "*" not in text.splitlines(), text
    assert (project / "flow_modules" / "flow.mod").exists() and (project / "flow_modules" / "mytools").is_dir()
