"""scripts/publish.py: staged modules work in another aiflows project (offline, through FlowVerse), pushing goes
through huggingface_hub's HfApi, READMEs and pip requirements are right."""
from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from fakes import command, finish
from loopback_llm import LoopbackLLMServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMESPACE = "alice"


def load_publish():
    spec = importlib.util.spec_from_file_location("publish", os.path.join(ROOT, "scripts", "publish.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


publish = load_publish()


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    out = tmp_path_factory.mktemp("hub")
    assert publish.main(["--namespace", NAMESPACE, "--out", str(out), "--local"]) == 0
    return out / NAMESPACE


def run_in_new_project(tmp_path, script: str, **env):
    """Run ``script`` as a file in a fresh project folder, in a separate Python process."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text(textwrap.dedent(script))
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TIKTOKEN_CACHE_DIR")}
    environment.update(env)
    done = subprocess.run([sys.executable, "main.py"], cwd=project, env=environment, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return project, json.loads(done.stdout.strip().splitlines()[-1])


SYNC = '''
import json, os, sys
from aiflows import flow_verse
from aiflows.utils import logging
logging.set_verbosity_error()
flow_verse.sync_dependencies([{"url": "alice/MODULE", "revision": os.environ["STAGED"] + "/MODULE"}])
'''


def test_coder_from_the_staged_modules_runs_in_another_project(tmp_path, staged):
    script = SYNC.replace("MODULE", "CoderFlowModule") + '''
from flow_modules.alice.CoderFlowModule import CoderFlow
from aiflows.backends.api_info import ApiInfo
from aiflows.utils.general_helpers import quick_load
from flow_modules.alice.CoreFlowModule import AutoApproveInput, set_input_source
from flow_modules.alice.CoreFlowModule.config_tree import chat_backends_skeleton
from flow_modules.alice.CoreFlowModule.memory import set_memory_files

config = chat_backends_skeleton("flow_modules.alice.CoderFlowModule.CoderFlow.instantiate_from_default_config")
config.pop("_target_")
quick_load(config, [ApiInfo(backend_used="openai", api_key="sk-test", api_base=os.environ["LOOPBACK_URL"])])
coder = CoderFlow.instantiate_from_default_config(**config)
set_memory_files(coder, "memory")
set_input_source(AutoApproveInput())
try:
    output = coder.call({"goal": "List the primes below 20."})
finally:
    coder.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"].close()
print(json.dumps({"output": output, "module": CoderFlow.__module__}))
'''
    replies = ["1. Run code that prints the primes below 20.\n2. Give the final answer.",
               command("run_code", language="python",
                       code="primes = [n for n in range(2, 20) if all(n % d for d in range(2, n))]\nprint(primes)"),
               finish("The primes below 20 are 2, 3, 5, 7, 11, 13, 17, 19 (in `primes`).")]
    with LoopbackLLMServer(replies=replies) as server:
        project, out = run_in_new_project(tmp_path, script, STAGED=str(staged), LOOPBACK_URL=server.url)
        assert len(server.requests) == 3 and not server.errors
        assert "[2, 3, 5, 7, 11, 13, 17, 19]" in server.requests[2]["messages"][-1]["content"], "the code ran"
    assert out["module"] == "flow_modules.alice.CoderFlowModule.CoderFlow"
    assert out["output"]["status"] == "finished"
    assert (project / "memory" / "plan_coder.txt").exists() and (project / "memory" / "logs_coder.txt").exists()
    synced = sorted(os.listdir(project / "flow_modules" / NAMESPACE))
    assert {"CoderFlowModule", "ExtendLibraryFlowModule", "CoreFlowModule", "InterpreterFlowModule"} <= set(synced)
    assert os.path.realpath(project / "flow_modules" / NAMESPACE / "CoreFlowModule") == str(staged / "CoreFlowModule")


def test_the_interpreter_alone_from_the_staged_modules(tmp_path, staged):
    script = SYNC.replace("MODULE", "InterpreterFlowModule") + '''
from flow_modules.alice.InterpreterFlowModule import InterpreterAtomicFlow
flow = InterpreterAtomicFlow.instantiate_from_default_config(workspace="work")
try:
    first = flow.run({"code": "x = 6 * 7", "language": "python"})
    second = flow.run({"code": "print(x)", "language": "python"})
    shell = flow.run({"code": "echo from bash", "language": "bash"})
finally:
    flow.close()
print(json.dumps({"second": second["interpreter_output"], "shell": shell["interpreter_output"]}))
'''
    project, out = run_in_new_project(tmp_path, script, STAGED=str(staged))
    assert out == {"second": "42", "shell": "from bash"}
    synced = sorted(os.listdir(project / "flow_modules" / NAMESPACE))
    assert [s for s in synced if s.endswith("Module")] == ["CoreFlowModule", "InterpreterFlowModule"], \
        "only what it depends on"


def test_the_generic_controller_from_the_staged_modules(tmp_path, staged):
    script = SYNC.replace("MODULE", "ControllerFlowModule") + '''
from flow_modules.alice.ControllerFlowModule import ControllerAtomicFlow
from aiflows.backends.api_info import ApiInfo
from aiflows.utils.general_helpers import quick_load

config = {"backend": {"api_infos": "???"},
          "commands": {"greet": {"description": "Greet someone.", "input_args": ["name"]}}}
quick_load(config, [ApiInfo(backend_used="openai", api_key="sk-test", api_base=os.environ["LOOPBACK_URL"])])
controller = ControllerAtomicFlow.instantiate_from_default_config(**config)
output = controller.run({"goal": "Greet Ada.", "plan": "1. Greet Ada.", "logs": "", "memory_files": {}})
print(json.dumps(output))
'''
    with LoopbackLLMServer(replies=["Sure! " + command("greet", name="Ada"), command("greet", name="Ada")]) as server:
        _, out = run_in_new_project(tmp_path, script, STAGED=str(staged), LOOPBACK_URL=server.url)
        assert "greet: Greet someone. Input arguments: name" in server.requests[0]["messages"][0]["content"]
    assert out == {"command": "greet", "command_args": {"name": "Ada"}}


def test_a_staged_module_runs_on_its_own_with_its_run_py(staged, tmp_path):
    folder = tmp_path / "InterpreterFlowModule"
    import shutil

    shutil.copytree(staged / "InterpreterFlowModule", folder, symlinks=True)
    # its dependencies are found beside it, as in the staged folder
    os.symlink(staged / "CoreFlowModule", tmp_path / "CoreFlowModule")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TIKTOKEN_CACHE_DIR")}
    done = subprocess.run([sys.executable, "run.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'interpreter_output': 'Python" in done.stdout and "says 42" in done.stdout


def test_push_creates_each_repository_and_uploads_its_folder(tmp_path, monkeypatch):
    calls = []

    class FakeHfApi:
        def __init__(self, token=None):
            calls.append(("HfApi", token))

        def create_repo(self, repo_id, exist_ok=False, token=None, **kwargs):
            calls.append(("create_repo", repo_id, exist_ok))
            return f"https://huggingface.co/{repo_id}"

        def create_branch(self, repo_id, branch, exist_ok=False, token=None, **kwargs):
            calls.append(("create_branch", repo_id, branch))

        def upload_folder(self, repo_id, folder_path, revision=None, ignore_patterns=(), **kwargs):
            files = sorted(os.path.relpath(os.path.join(r, f), folder_path)
                           for r, _, fs in os.walk(folder_path) for f in fs)
            calls.append(("upload_folder", repo_id, revision, files))

    monkeypatch.setenv("HF_TOKEN", "hf_test")
    code = publish.main(["--namespace", "bob", "--out", str(tmp_path), "--modules", "InterpreterFlowModule",
                         "--revision", "v1", "--push"], api_factory=FakeHfApi)
    assert code == 0
    assert calls[0] == ("HfApi", "hf_test")
    created = [c[1] for c in calls if c[0] == "create_repo"]
    assert created == ["bob/CoreFlowModule", "bob/InterpreterFlowModule"], "the dependency is published too"
    assert [c[2] for c in calls if c[0] == "create_branch"] == ["v1", "v1"]
    uploads = {c[1]: c[3] for c in calls if c[0] == "upload_folder"}
    assert {"__init__.py", "InterpreterAtomicFlow.py", "InterpreterAtomicFlow.yaml", "kernel.py", "README.md",
            "pip_requirements.txt", "demo.yaml", "run.py"} <= set(uploads["bob/InterpreterFlowModule"])
    assert "tiktoken_cache/9b5ad71b2ce5302211f9c61530b329a4922fc6a4" in uploads["bob/CoreFlowModule"]
    init = (tmp_path / "bob" / "InterpreterFlowModule" / "__init__.py").read_text()
    assert '{"url": "bob/CoreFlowModule", "revision": "v1"}' in init
    assert init.index("sync_dependencies(dependencies)") < init.index("from .InterpreterAtomicFlow import")


def test_without_push_nothing_leaves_the_machine_and_a_bad_name_is_refused(tmp_path, capsys):
    assert publish.main(["--namespace", "9lives", "--out", str(tmp_path)]) == 2
    assert "not starting with a digit" in capsys.readouterr().err
    assert publish.main(["--namespace", "bob", "--out", str(tmp_path), "--modules", "NoSuchModule"]) == 2
    assert not os.listdir(tmp_path), "nothing was written"


def test_every_staged_readme_lists_parameters_and_interfaces(staged):
    for module in publish.module_names():
        text = (staged / module / "README.md").read_text()
        assert text.startswith("---\nlicense: mit\n---\n"), module
        for cls in publish.flow_classes(module):
            section = text.split(f"## {cls}\n", 1)[1].split("\n## ", 1)[0]
            for heading in ("### Configuration parameters", "### Input interface", "### Output interface"):
                assert heading in section, f"{module}.{cls}: {heading}"
        assert "flow_modules.aiflows." not in text and f"flow_modules.{NAMESPACE}." in text


def test_no_staged_file_refers_to_the_source_namespace(staged):
    for root, _, files in os.walk(staged):
        for name in files:
            if name.endswith((".py", ".yaml")):
                text = open(os.path.join(root, name), encoding="utf-8").read()
                assert "flow_modules.aiflows" not in text and '"url": "aiflows/' not in text, os.path.join(root, name)


def test_declared_dependencies_match_what_the_code_uses():
    for module in publish.module_names():
        assert publish.declared_dependencies(module) == publish.direct_dependencies(module), module


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
    provided = _provided_by_aiflows() | set(sys.stdlib_module_names) | {"flow_modules", "__future__"}
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
        missing = needed - provided - {r.replace("-", "_") for r in publish.requirements(module)}
        assert not missing, f"{module} imports {missing}: add them to pip_requirements.txt"


def test_the_module_readmes_are_up_to_date_with_the_docstrings():
    spec = importlib.util.spec_from_file_location("update_readmes", os.path.join(ROOT, "scripts", "update_readmes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, "run python scripts/update_readmes.py"
