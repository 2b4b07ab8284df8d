"""scripts/publish.py: staged modules work in another aiflows project (offline, through FlowVerse, without this
repository's `aiflows_jarvis` in reach), the pre-write check catches what would break there, nothing leaves
the machine without --push (pushing: test_publish_push.py), READMEs and pip requirements are right."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import guards
import pytest
from fakes import command, finish
from helpers import load_script, publish
from loopback_llm import LoopbackLLMServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMESPACE = "alice"


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """All modules staged with --local, through a symlink to the output folder (as macOS's /tmp is one)."""
    real = tmp_path_factory.mktemp("hub")
    link = tmp_path_factory.mktemp("links") / "hub"
    os.symlink(real, link)
    assert publish.main(["--namespace", NAMESPACE, "--out", str(link), "--local"]) == 0
    return type(real)(os.path.realpath(real)) / NAMESPACE


# Appended to each script run in a new project: proof that the staged code is what ran there.
PROVENANCE = '''
def _provenance(cls):
    """Where ``cls`` and every loaded flow_modules.* module come from; whether the source namespace is in reach."""
    import importlib
    staged = os.path.realpath(os.environ["STAGED"])
    root = os.path.realpath("flow_modules")  # the sync root: only its own packages may live outside the staging
    own = {root, os.path.join(root, "__init__.py"), os.path.join(root, "alice"),
           os.path.join(root, "alice", "__init__.py")}
    elsewhere = []
    for name, module in list(sys.modules.items()):
        if name == "flow_modules" or name.startswith("flow_modules."):
            file = getattr(module, "__file__", None)
            for place in [file] if file else list(module.__path__):
                real = os.path.realpath(place)
                if real not in own and not real.startswith(staged + os.sep):
                    elsewhere.append(f"{name} ({real})")
    try:
        importlib.import_module("aiflows_jarvis")
        source = True
    except ModuleNotFoundError:
        source = False
    return {"file": os.path.realpath(sys.modules[cls.__module__].__file__), "elsewhere": elsewhere,
            "source_importable": source, "source_loaded": "aiflows_jarvis" in sys.modules}
'''


def run_in_new_project(tmp_path, script: str, **env):
    """Run ``script`` as main.py in a fresh project folder, in a separate Python process that cannot import this
    repository's flow_modules (publish.project_python), with stdin closed (a FlowVerse Y/N prompt fails at once)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text(textwrap.dedent(script))
    environment = publish.project_env()
    environment.update(env)
    runner = publish.project_python("import runpy\nrunpy.run_path('main.py', run_name='__main__')")
    done = subprocess.run(
        runner, cwd=project, env=environment, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return project, json.loads(done.stdout.strip().splitlines()[-1])


def assert_staged_code_ran(out, staged, module):
    where = out["provenance"]
    assert where["file"].startswith(str(staged / module) + os.sep), where["file"]
    assert where["elsewhere"] == [], "every flow_modules.* module came from the staged folder"
    assert not where["source_importable"] and not where["source_loaded"], "aiflows_jarvis is out of reach"


SYNC = (
    """
import json, os, sys
from aiflows import flow_verse
from aiflows.utils import logging
logging.set_verbosity_error()
flow_verse.sync_dependencies([{"url": "alice/MODULE", "revision": os.environ["STAGED"] + "/MODULE"}])
"""
    + PROVENANCE
)


def test_coder_from_the_staged_modules_runs_in_another_project(tmp_path, staged):
    script = (
        SYNC.replace("MODULE", "CoderFlowModule")
        + """
from flow_modules.alice.CoderFlowModule import CoderFlow
from aiflows.backends.api_info import ApiInfo
from aiflows.utils.general_helpers import quick_load
from flow_modules.alice.CoreFlowModule import AutoApproveInput, RunContext
from flow_modules.alice.CoreFlowModule.flows.config_tree import chat_backends_skeleton
from flow_modules.alice.CoreFlowModule import set_memory_files

config = chat_backends_skeleton("flow_modules.alice.CoderFlowModule.CoderFlow.instantiate_from_default_config")
config.pop("_target_")
quick_load(config, [ApiInfo(backend_used="openai", api_key="sk-test", api_base=os.environ["LOOPBACK_URL"])])
coder = CoderFlow.instantiate_from_default_config(**config)
set_memory_files(coder, "memory")
try:
    with RunContext(input_source=AutoApproveInput()):
        output = coder.call({"goal": "List the primes below 20."})
finally:
    coder.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"].close()
print(json.dumps({"output": output, "module": CoderFlow.__module__, "provenance": _provenance(CoderFlow)}))
"""
    )
    replies = [
        "1. Run code that prints the primes below 20.\n2. Give the final answer.",
        command(
            "run_code",
            language="python",
            code="primes = [n for n in range(2, 20) if all(n % d for d in range(2, n))]\nprint(primes)",
        ),
        finish("The primes below 20 are 2, 3, 5, 7, 11, 13, 17, 19 (in `primes`)."),
    ]
    with LoopbackLLMServer(replies=replies) as server:
        project, out = run_in_new_project(tmp_path, script, STAGED=str(staged), LOOPBACK_URL=server.url)
        assert len(server.requests) == 3 and not server.errors
        assert "[2, 3, 5, 7, 11, 13, 17, 19]" in server.requests[2]["messages"][-1]["content"], "the code ran"
    assert out["module"] == "flow_modules.alice.CoderFlowModule.CoderFlow"
    assert_staged_code_ran(out, staged, "CoderFlowModule")
    assert out["output"]["status"] == "finished"
    assert (project / "memory" / "plan_coder.txt").exists() and (project / "memory" / "logs_coder.txt").exists()
    synced = sorted(os.listdir(project / "flow_modules" / NAMESPACE))
    assert {"CoderFlowModule", "ExtendLibraryFlowModule", "CoreFlowModule", "InterpreterFlowModule"} <= set(synced)
    assert os.path.realpath(project / "flow_modules" / NAMESPACE / "CoreFlowModule") == str(staged / "CoreFlowModule")


def test_the_interpreter_alone_from_the_staged_modules(tmp_path, staged):
    script = (
        SYNC.replace("MODULE", "InterpreterFlowModule")
        + """
from flow_modules.alice.InterpreterFlowModule import InterpreterAtomicFlow
flow = InterpreterAtomicFlow.instantiate_from_default_config(workspace="work")
try:
    first = flow.run({"code": "x = 6 * 7", "language": "python"})
    second = flow.run({"code": "print(x)", "language": "python"})
    shell = flow.run({"code": "echo from bash", "language": "bash"})
finally:
    flow.close()
print(json.dumps({"second": second["interpreter_output"], "shell": shell["interpreter_output"],
                  "provenance": _provenance(InterpreterAtomicFlow)}))
"""
    )
    project, out = run_in_new_project(tmp_path, script, STAGED=str(staged))
    assert_staged_code_ran(out, staged, "InterpreterFlowModule")
    assert (out["second"], out["shell"]) == ("42", "from bash")
    synced = sorted(os.listdir(project / "flow_modules" / NAMESPACE))
    assert [s for s in synced if s.endswith("Module")] == ["CoreFlowModule", "InterpreterFlowModule"], (
        "only what it depends on"
    )


def test_the_generic_controller_from_the_staged_modules(tmp_path, staged):
    script = (
        SYNC.replace("MODULE", "ControllerFlowModule")
        + """
from flow_modules.alice.ControllerFlowModule import ControllerAtomicFlow
from aiflows.backends.api_info import ApiInfo
from aiflows.utils.general_helpers import quick_load

config = {"backend": {"api_infos": "???"},
          "commands": {"greet": {"description": "Greet someone.", "input_args": ["name"]}}}
quick_load(config, [ApiInfo(backend_used="openai", api_key="sk-test", api_base=os.environ["LOOPBACK_URL"])])
controller = ControllerAtomicFlow.instantiate_from_default_config(**config)
output = controller.run({"goal": "Greet Ada.", "plan": "1. Greet Ada.", "logs": "", "memory_files": {}})
print(json.dumps({"output": output, "provenance": _provenance(ControllerAtomicFlow)}))
"""
    )
    fenced = "Sure! Here it is:\n```json\n" + command("greet", name="Ada") + "\n```"
    with LoopbackLLMServer(replies=[fenced]) as server:
        _, out = run_in_new_project(tmp_path, script, STAGED=str(staged), LOOPBACK_URL=server.url)
        assert "greet: Greet someone. Input arguments: name" in server.requests[0]["messages"][0]["content"]
        assert len(server.requests) == 1, "the staged controller reads a fenced reply without a correction"
        assert server.requests[0]["json"]["response_format"]["type"] == "json_schema", "the schema is sent"
    assert_staged_code_ran(out, staged, "ControllerFlowModule")
    assert out["output"] == {"command": "greet", "command_args": {"name": "Ada"}}


def test_through_a_symlinked_out_a_module_and_its_dependency_sync_together(tmp_path, staged):
    """--out was a symlink: the printed and README paths are real, so syncing a module together with its dependency
    (which the module's __init__ syncs again, by its real path) is one revision to FlowVerse, not a Y/N prompt."""
    revisions = {}
    for module in ("InterpreterFlowModule", "CoreFlowModule"):
        readme = (staged / module / "README.md").read_text()
        assert '"revision": "main"' not in readme, "a --local README syncs from the staged folder"
        revisions[module] = re.search(r'"revision": "([^"]+)"', readme).group(1)
        assert revisions[module] == str(staged / module) == os.path.realpath(revisions[module])
    script = (
        """
import json, os, sys
from aiflows import flow_verse
flow_verse.sync_dependencies([{"url": "alice/InterpreterFlowModule", "revision": os.environ["INTERPRETER"]},
                              {"url": "alice/CoreFlowModule", "revision": os.environ["CORE"]}])
from flow_modules.alice.InterpreterFlowModule import InterpreterAtomicFlow
"""
        + PROVENANCE
        + """
print(json.dumps({"provenance": _provenance(InterpreterAtomicFlow)}))
"""
    )
    _, out = run_in_new_project(
        tmp_path,
        script,
        STAGED=str(staged),
        INTERPRETER=revisions["InterpreterFlowModule"],
        CORE=revisions["CoreFlowModule"],
    )
    assert_staged_code_ran(out, staged, "InterpreterFlowModule")


def run_staged_demo(staged, tmp_path, module, *args, flow=None, **env):
    """A copy of a staged module (and of its dependencies) runs its own demo (`python run.py ARGS` in its folder, as
    another project with no network but loopback), ``flow`` merged into its demo.yaml's flow overrides; returns (the
    folder, the process)."""
    for needed in publish.dependency_closure([module]):  # its dependencies are found beside it, as in the staging
        # copied, not linked: a dependency synced through a link and again through its real path (by another
        # dependency) would make FlowVerse ask whether to overwrite it
        shutil.copytree(staged / needed, tmp_path / needed, symlinks=True)
    folder = tmp_path / module
    if flow:
        import yaml
        from aiflows.utils.general_helpers import recursive_dictionary_update

        demo = yaml.safe_load((folder / "demo.yaml").read_text())
        demo["flow"] = recursive_dictionary_update(demo.get("flow") or {}, flow)
        (folder / "demo.yaml").write_text(yaml.safe_dump(demo))
    runner = publish.project_python("import runpy\nrunpy.run_path('run.py', run_name='__main__')") + list(args)
    done = subprocess.run(
        runner,
        cwd=folder,
        env={**publish.project_env(), **env},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return folder, done


def test_a_staged_module_runs_on_its_own_with_its_run_py(staged, tmp_path):
    _, done = run_staged_demo(staged, tmp_path, "InterpreterFlowModule")
    assert "'interpreter_output': 'Python" in done.stdout and "says 42" in done.stdout


def test_every_staged_module_has_a_readme_a_demo_and_its_requirements(staged):
    for module in publish.module_names():
        files = set(os.listdir(staged / module))
        assert {"README.md", "demo.yaml", "run.py", "pip_requirements.txt", "__init__.py"} <= files, module


def test_the_staged_vector_store_runs_its_demo_offline(staged, tmp_path):
    folder, done = run_staged_demo(staged, tmp_path, "VectorStoreFlowModule")
    assert "{'retrieved': ''}" in done.stdout, "two memories written"
    assert any((folder / "memory").rglob("*.faiss")), "into the demo's FAISS store, in its memory folder"


def test_the_staged_autogpt_runs_its_demo_with_an_llm_server(staged, tmp_path, loopback):
    """AutoGPT's demo with OPENAI_API_BASE: the server answers the controller and the embeddings (the same key), and
    stands in for Wikipedia (the one change to demo.yaml)."""
    loopback.wiki_pages["Eiffel Tower"] = "The Eiffel Tower was finished in 1889."
    loopback.add(command("wiki_search", search_term="Eiffel Tower"), command("finish", answer="In 1889."))
    _, done = run_staged_demo(
        staged,
        tmp_path,
        "AutoGPTFlowModule",
        "--yes",
        flow={"subflows_config": {"Executor": {"subflows_config": {"wiki_search": {"api_url": loopback.wiki_url}}}}},
        OPENAI_API_KEY="sk-test",
        OPENAI_API_BASE=loopback.url,
    )
    assert "{'answer': 'In 1889.', 'status': 'finished'}" in done.stdout
    assert loopback.embedding_requests, "the memory embedded through the server"
    assert {r["headers"]["authorization"] for r in loopback.embedding_requests} == {"Bearer sk-test"}
    second_prompt = loopback.requests[1]["messages"][-1]["content"]  # the memories come with the observation
    assert "finished in 1889" in second_prompt, "the memory written after the search is read back"


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--revision", "v1.0", "letters, digits and '_'"),
        ("--revision", "my-branch", "letters, digits and '_'"),
        ("--revision", "", "letters, digits and '_'"),
        ("--namespace", "my-org", "starting with a letter"),
        ("--namespace", "9lives", "starting with a letter"),
        ("--namespace", "a.b", "starting with a letter"),
    ],
)
def test_a_revision_or_namespace_flow_verse_cannot_use_is_refused(tmp_path, capsys, option, value, message):
    args = {"--namespace": "bob", "--revision": "main", option: value}
    out = tmp_path / "out"
    assert publish.main([*sum(([k, v] for k, v in args.items()), []), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert message in error and repr(value) in error
    assert not out.exists()


def test_the_revision_rule_is_flow_verses(tmp_path, monkeypatch):
    """What publish.py accepts as --revision is what aiflows 0.1.7 accepts as a remote revision, and vice versa."""
    from aiflows.flow_verse import loading

    monkeypatch.chdir(tmp_path)  # FlowVerse takes a revision that exists as a path here for a local one

    for revision in ("main", "v1_0", "0123abcdef", "v1.0", "my-branch", "feature/x"):
        accepted = bool(publish.REVISION_PATTERN.match(revision))
        try:  # the url is valid, the revision (not an existing path) is checked as a remote one
            loading.validate_and_augment_dependency({"url": "bob/CoreFlowModule", "revision": revision}, "test")
            flow_verse_accepts = True
        except ValueError:
            flow_verse_accepts = False
        assert accepted == flow_verse_accepts, revision


def test_without_push_nothing_leaves_the_machine(tmp_path, monkeypatch, capsys):
    """A plain staging and a --local one make no network call (sockets: loopback and Unix only) and never build an
    HfApi; the check processes refuse connections too."""
    attempts = guards.block_network(monkeypatch)  # records every non-loopback attempt (also refused)
    import huggingface_hub
    import huggingface_hub.hf_api

    def no_hub(*args, **kwargs):
        raise AssertionError("HfApi was instantiated without --push")

    monkeypatch.setattr(huggingface_hub, "HfApi", no_hub)
    monkeypatch.setattr(huggingface_hub.hf_api, "HfApi", no_hub)
    monkeypatch.setenv("HF_TOKEN", "hf_test")  # even with a token at hand
    for extra in ([], ["--local"]):
        out = tmp_path / ("local" if extra else "plain")
        assert publish.main(["--namespace", "bob", "--out", str(out), "--modules", "CoreFlowModule", *extra]) == 0
        assert "nothing was pushed" in capsys.readouterr().out
        assert (out / "bob" / "CoreFlowModule" / "__init__.py").exists()
    assert attempts == []
    probe = publish.project_python("import socket\nsocket.create_connection(('93.184.216.34', 80), timeout=2)")
    done = subprocess.run(probe, cwd=tmp_path, env=publish.project_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "offline" in done.stderr, done.stderr[-2000:]


def test_the_check_runs_without_this_repository_and_fails_on_unrewritten_code(tmp_path, monkeypatch, capsys):
    """The check's process cannot fall back on this repository's aiflows_jarvis: staged code that still
    imports it (the namespace rewrite sabotaged) fails the check, and nothing is written."""
    monkeypatch.setattr(publish.staging, "rewrite", lambda text, namespace: text)  # the staged code's rewrite
    out = tmp_path / "out"
    assert publish.main(["--namespace", "bob", "--out", str(out), "--modules", "InterpreterFlowModule"]) == 2
    error = capsys.readouterr().err
    assert "--- InterpreterFlowModule:" in error and "No module named 'aiflows_jarvis'" in error
    assert not out.exists(), "nothing was written"


def test_each_module_is_checked_in_its_own_process(tmp_path, monkeypatch, capsys):
    """A module that fails to sync a dependency fails its check even when the dependency is checked too (in one
    process, the dependency loaded first would hide the omission)."""
    real = publish.direct_dependencies
    monkeypatch.setattr(
        publish.staging,
        "direct_dependencies",  # what the staged __init__.py syncs
        lambda module: set() if module == "InterpreterFlowModule" else real(module),
    )
    out = tmp_path / "out"
    assert (
        publish.main(["--namespace", "bob", "--out", str(out), "--modules", "CoreFlowModule,InterpreterFlowModule"])
        == 2
    )
    error = capsys.readouterr().err
    assert "--- InterpreterFlowModule:" in error and "--- CoreFlowModule:" not in error
    assert "No module named 'flow_modules.bob.CoreFlowModule'" in error
    assert not out.exists()


def test_verify_venv_checks_a_local_staging_and_writes_the_requested_one(tmp_path, monkeypatch, capsys):
    """--verify-venv without --local syncs dependencies from local folders (nothing from the hub, which a first
    publish does not have yet); the staging written is still the requested one. The fresh virtual environment is
    stood in for by this interpreter (isolated from this repository like any check process)."""
    attempts = guards.block_network(monkeypatch)
    environments = []

    def fake_fresh_venv(folder, requirements_file):
        module_dir = os.path.dirname(requirements_file)
        environments.append((os.path.basename(module_dir), open(os.path.join(module_dir, "__init__.py")).read()))
        return sys.executable

    demos = []
    real_run_demo = publish.checks.run_demo

    def recorded_run_demo(python, module_dir):
        demos.append((os.path.basename(module_dir), real_run_demo(python, module_dir)))
        return demos[-1][1]

    monkeypatch.setattr(publish.checks, "fresh_venv", fake_fresh_venv)
    monkeypatch.setattr(publish.checks, "run_demo", recorded_run_demo)
    out = tmp_path / "out"
    assert (
        publish.main(["--namespace", "bob", "--out", str(out), "--modules", "MemoryReadingFlowModule", "--verify-venv"])
        == 0
    )
    printed = capsys.readouterr().out
    assert [m for m, _ in environments] == ["CodeLibraryFlowModule", "CoreFlowModule", "MemoryReadingFlowModule"]
    assert demos == [("CodeLibraryFlowModule", "ok"), ("CoreFlowModule", "ok"), ("MemoryReadingFlowModule", "ok")], (
        "their demos ran there"
    )
    verified_init = dict(environments)["MemoryReadingFlowModule"]
    assert 'os.path.join(_STAGED, "CoreFlowModule")' in verified_init and '"revision": "main"' not in verified_init
    assert "MemoryReadingFlowModule: ok in a fresh virtual environment" in printed, "check and run.py --yes passed"
    written = (out / "bob" / "MemoryReadingFlowModule" / "__init__.py").read_text()
    assert '{"url": "bob/CoreFlowModule", "revision": "main", "digest": ' in written
    assert attempts == []


def test_a_failed_verify_venv_writes_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    (out / "bob" / "CoreFlowModule").mkdir(parents=True)
    (out / "bob" / "CoreFlowModule" / "previous.txt").write_text("kept")
    (out / "bob" / "CoreFlowModule" / publish.STAGED_MARK).write_text("")  # a previous staging
    monkeypatch.setattr(
        publish,
        "verify_venv",
        lambda staged_dir, namespace, modules, say=print: {m: "pip failed: no index" for m in modules},
    )
    assert publish.main(["--namespace", "bob", "--out", str(out), "--modules", "CoreFlowModule", "--verify-venv"]) == 2
    assert "pip failed: no index" in capsys.readouterr().err
    assert sorted(os.listdir(out / "bob" / "CoreFlowModule")) == [publish.STAGED_MARK, "previous.txt"], (
        "the previous staging is untouched"
    )
    assert os.listdir(out / "bob") == ["CoreFlowModule"]


def test_every_staged_readme_lists_parameters_and_interfaces(staged):
    """Each flow class's section lists its configuration parameters and the keys of its interfaces, as aiflows
    builds its default configuration (inherited from a base class when its own YAML declares none)."""
    for module in publish.module_names():
        text = (staged / module / "README.md").read_text()
        assert text.startswith("---\nlicense: mit\n---\n"), module
        assert "as its base class" not in text, module
        package = importlib.import_module(f"aiflows_jarvis.{module}")
        for cls in publish.flow_classes(module):
            section = text.split(f"## {cls}\n", 1)[1].split("\n## ", 1)[0]
            assert "### Configuration parameters" in section, f"{module}.{cls}"
            config = getattr(package, cls).get_config()
            expected = {
                "Input interface": config.get("input_interface", config.get("input_interface_non_initialized")),
                "Output interface": config.get("output_interface"),
            }
            for heading, keys in expected.items():
                listed = section.split(f"### {heading}\n\n", 1)[1].split("\n\n", 1)[0]
                assert keys, f"{module}.{cls} has no {heading.lower()} to list"
                assert listed == "\n".join(f"- `{k}`" for k in keys), f"{module}.{cls}: {heading}"
        assert "aiflows_jarvis." not in text and f"flow_modules.{NAMESPACE}." in text


def test_staged_init_files_parse_and_keep_the_docstring(staged):
    for module in publish.module_names():
        tree = ast.parse((staged / module / "__init__.py").read_text())
        with open(os.path.join(publish.MODULES_DIR, module, "__init__.py"), encoding="utf-8") as f:
            assert ast.get_docstring(tree) == (ast.get_docstring(ast.parse(f.read())) or module), module
    for tricky in ('ends with a "quote"', 'a """ inside', "back\\slash \\n", '"', "x\\"):
        assert ast.literal_eval(publish.docstring_literal(tricky)) == tricky


def test_no_staged_file_refers_to_the_source_namespace(staged):
    for root, _, files in os.walk(staged):
        for name in files:
            if name.endswith((".py", ".yaml")):
                text = open(os.path.join(root, name), encoding="utf-8").read()
                assert "aiflows_jarvis" not in text and '"url": "aiflows/' not in text, os.path.join(root, name)


def test_every_module_declares_the_dependencies_its_code_uses_as_the_script_writes_them():
    assert load_script("update_dependencies").main(["--check"]) == 0, "run python scripts/update_dependencies.py"


def test_the_dependencies_script_replaces_the_list_or_adds_one_after_the_docstring():
    script = load_script("update_dependencies")
    text = script.dependencies_text({"ChatFlowModule", "CoreFlowModule", "AbstractBossFlowModule"}, "aiflows")
    assert text == (
        'dependencies = [\n    {"url": "aiflows/CoreFlowModule", "revision": "main"},\n'
        '    {"url": "aiflows/AbstractBossFlowModule", "revision": "main"},\n'
        '    {"url": "aiflows/ChatFlowModule", "revision": "main"},\n]\n'
    ), "Core first, then by name"
    old = '"""A module."""\ndependencies = [\n    {"url": "aiflows/GoneFlowModule", "revision": "main"},\n]\n\nx = 1\n'
    assert script.with_dependencies(old, "dependencies = []\n") == '"""A module."""\ndependencies = []\n\nx = 1\n'
    new = '"""A new module,\nof two lines."""\nfrom __future__ import annotations\n\nfrom .Flow import Flow\n'
    assert script.with_dependencies(new, "dependencies = []\n") == (
        '"""A new module,\nof two lines."""\n'
        "from __future__ import annotations\n"
        "dependencies = []\n\nfrom .Flow import Flow\n"
    )


def _provided_by_aiflows():
    """Import names available wherever aiflows 0.1.7 is installed (aiflows and what it requires, transitively)."""
    names, todo, seen = set(), ["aiflows"], set()
    by_distribution = {}
    for top, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            by_distribution.setdefault(dist.lower().replace("_", "-"), set()).add(top)
    while todo:
        dist = todo.pop().lower().replace("_", "-")
        if dist in seen:
            continue
        seen.add(dist)
        names |= by_distribution.get(dist, set())
        try:
            requires = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0))
    return names


def test_pip_requirements_cover_every_import_beyond_aiflows():
    provided = (
        _provided_by_aiflows() | set(sys.stdlib_module_names) | {"flow_modules", "__future__", publish.SOURCE_PACKAGE}
    )
    for module in publish.module_names():
        needed = set()
        for dep in publish.dependency_closure([module]):
            folder = os.path.join(publish.MODULES_DIR, dep)
            for rel in publish.module_files(dep):
                if rel.endswith(".py"):
                    tree = ast.parse(open(os.path.join(folder, rel), encoding="utf-8").read())
                    for node in ast.walk(tree):
                        if isinstance(node, ast.Import):
                            needed |= {a.name.split(".")[0] for a in node.names}
                        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                            needed.add(node.module.split(".")[0])
        required = {re.match(r"[A-Za-z0-9_.\-]+", r).group(0) for r in publish.requirements(module)}
        by_distribution = {"faiss-cpu": {"faiss"}}  # a distribution's import names (also when not installed)
        for name, dists in importlib.metadata.packages_distributions().items():
            for dist in dists:
                by_distribution.setdefault(dist.lower().replace("_", "-"), set()).add(name)
        imported = {n for r in required for n in by_distribution.get(r.lower().replace("_", "-"), set())}
        missing = needed - provided - {r.replace("-", "_") for r in required} - imported
        assert not missing, f"{module} imports {missing}: add them to pip_requirements.txt"


def test_a_module_that_starts_the_kernel_requires_ipykernel(staged):
    """The kernel is started as a process (`python -m ipykernel_launcher`), which no import reveals: a module whose
    code (or its dependencies') names it must list ipykernel in its staged pip_requirements.txt."""
    starters = set()
    for module in publish.module_names():
        for rel in publish.module_files(module):
            if rel.endswith(".py"):
                with open(os.path.join(publish.MODULES_DIR, module, rel), encoding="utf-8") as f:
                    if "ipykernel_launcher" in f.read():
                        starters.add(module)
    assert starters, "the interpreter starts a kernel"
    for module in publish.module_names():
        lines = (staged / module / "pip_requirements.txt").read_text().splitlines()
        names = {re.split(r"[<>=!~;\[ ]", line.strip(), maxsplit=1)[0].lower() for line in lines if line.strip()}
        if starters & set(publish.dependency_closure([module])):
            assert "ipykernel" in names, f"{module} starts the kernel: add ipykernel to pip_requirements.txt"


def test_the_module_readmes_are_up_to_date_with_the_docstrings():
    assert load_script("update_readmes").main(["--check"]) == 0, "run python scripts/update_readmes.py"
