#!/usr/bin/env python
"""Stage the flow modules as they would stand on the aiflows hub (FlowVerse, on Hugging Face), check them, and
optionally push them.

    python scripts/publish.py --namespace NAME --out DIR [--modules A,B] [--revision REV | --local] [--push]

For each module (and the modules it depends on), DIR/NAME/<Module>/ receives:
  * the module's code and YAML files, with import paths and `_target_`s rewritten from `flow_modules.aiflows.` to
    `flow_modules.NAME.`;
  * an `__init__.py` that declares `dependencies` on the other modules (`NAME/<Dep>` at REV, default `main`) and
    calls `flow_verse.sync_dependencies(dependencies)` before importing its classes;
  * `pip_requirements.txt`: what the module and its dependencies need beyond aiflows;
  * `README.md`, generated from the class docstrings and default configurations (configuration parameters, input
    and output interfaces), with the hub's front matter;
  * `demo.yaml` and `run.py`, which run the module on its own (`cd DIR/NAME/<Module> && python run.py`).

With --local, dependencies point at the staged sibling folders (their real paths), so another project can use the
staged modules offline: `flow_verse.sync_dependencies([{"url": "NAME/CoderFlowModule", "revision": "<path>"}])`.

Before anything is written to DIR, every module is staged in a temporary folder and checked in a separate Python
process, from a separate project folder, offline: it imports, and each flow class instantiates from its default
configuration. Nothing leaves the machine unless --push is given: then, with the token in HF_TOKEN, each module's
repository NAME/<Module> is created (if needed) on the Hugging Face Hub and the staged folder is uploaded (to the
branch REV). What was done is printed.

--verify-venv builds a fresh virtual environment with only aiflows and a module's pip_requirements.txt (this needs
the package registry) and checks that each staged module imports there, and that the demo of each module that needs
no LLM (`run.py --yes`) runs there.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Iterable, List, Optional, Set

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES_DIR = os.path.join(ROOT, "flow_modules", "aiflows")
SOURCE_NAMESPACE = "aiflows"
SKIP = {"__pycache__", "flow_modules", "memory", ".flow_cache"}
NAME_PATTERN = re.compile(r"^[A-Za-z_][\w-]*$")
MODULE_REFERENCE = re.compile(r"flow_modules\.aiflows\.(\w+Module)\b")

# ~~~ What each module's demo runs (class, config overrides, input, whether it needs an LLM) ~~~
_MEMORY = {"plan": "memory/plan.txt", "logs": "memory/logs.txt", "code_library": "memory/library.py"}
DEMOS: Dict[str, dict] = {
    "ChatFlowModule": dict(cls="ChatAtomicFlow", llm=True, input={"query": "In one sentence: what is a flow?"}),
    "HumanStandardInputFlowModule": dict(cls="HumanStandardInputFlow", input={"question": "What is your name?"}),
    "MemoryReadingFlowModule": dict(cls="MemoryReadingAtomicFlow", overrides={"output_interface": ["plan", "logs"]},
                                    input={"memory_files": _MEMORY}),
    "MemoryWritingFlowModule": dict(cls="MemoryWritingAtomicFlow", input={
        "memory_files": _MEMORY, "command": "demo", "command_args": {"n": 1}, "result": "a log entry"}),
    "UpdatePlanFlowModule": dict(cls="UpdatePlanAtomicFlow", input={
        "memory_files": _MEMORY, "updated_plan": "1. Try the module [done]\n2. Read its README"}),
    "ControllerFlowModule": dict(cls="ControllerAtomicFlow", llm=True, overrides={"commands": {
        "say_hello": {"description": "Greet someone.", "input_args": ["name"]}}}, input={
        "goal": "Greet Ada.", "plan": "1. Greet Ada.\n2. Finish.", "logs": "", "memory_files": {}}),
    "PlanWriterFlowModule": dict(cls="PlanWriterFlow", llm=True, input={
        "goal": "Plan a picnic for four people.", "memory_files": _MEMORY}),
    "ReplanningFlowModule": dict(cls="ReplanningFlow", llm=True, input={
        "goal": "It rains: the picnic must move indoors.", "plan": "1. Book a park table.\n2. Buy food.",
        "memory_files": _MEMORY}),
    "AbstractBossFlowModule": dict(cls="AbstractBossFlow", llm=True, memory=True, overrides={
        "memory_file_names": {"plan": "plan_boss.txt", "logs": "logs_boss.txt"},
        "subflows_config": {"CtrlExMem": {"subflows_config": {
            "Controller": {"commands": {"ask_user": {"description": "Ask the user a question.",
                                                     "input_args": ["question"]}}},
            "Executor": {"subflows_config": {"ask_user": {
                "_target_": "flow_modules.aiflows.HumanStandardInputFlowModule.HumanStandardInputFlow"
                            ".instantiate_from_default_config"}}}}}}},
        input={"goal": "Find out the user's favourite colour."}),
    "InterpreterFlowModule": dict(cls="InterpreterAtomicFlow", overrides={"workspace": "memory"}, input={
        "code": "import sys\nprint('Python', sys.version.split()[0], 'says', 6 * 7)", "language": "python"}),
    "RunCodeFlowModule": dict(cls="RunCodeFlow", input={
        "code": "squares = [n * n for n in range(10)]\nprint(squares)", "language": "python",
        "memory_files": _MEMORY}),
    "InteractiveCodeGenFlowModule": dict(cls="InteractiveCodeGenFlow", llm=True, input={
        "goal": "is_prime(n: int) -> bool", "memory_files": _MEMORY, "code": ""}),
    "TestCodeFlowModule": dict(cls="TestCodeFlow", input={
        "code": "def double(x):\n    \"\"\"Twice x.\"\"\"\n    return 2 * x\n", "memory_files": _MEMORY}),
    "CodeWriterFlowModule": dict(cls="CodeWriterFlow", llm=True, input={
        "goal": "is_prime(n: int) -> bool", "memory_files": _MEMORY}),
    "ExtendLibraryFlowModule": dict(cls="ExtendLibraryFlow", llm=True, memory=True, input={
        "goal": "Add is_prime(n) and primes_below(n) to the library."}),
    "CoderFlowModule": dict(cls="CoderFlow", llm=True, memory=True, input={
        "goal": "Write a reusable is_prime function, then list the primes below 50."}),
    "JarvisFlowModule": dict(cls="JarvisFlow", llm=True, memory=True, input={
        "goal": "Compute the first 20 Fibonacci numbers and save them to fibonacci.txt."}),
}


class PublishError(Exception):
    """What went wrong, for the user."""


# ~~~ Reading the modules ~~~
def module_names() -> List[str]:
    return sorted(d for d in os.listdir(MODULES_DIR)
                  if d.endswith("Module") and os.path.isfile(os.path.join(MODULES_DIR, d, "__init__.py")))


def module_files(module: str) -> List[str]:
    """Paths (relative to the module folder) of the files published with it."""
    base = os.path.join(MODULES_DIR, module)
    out = []
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP)
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            out.append(os.path.relpath(os.path.join(root, name), base))
    return out


def flow_classes(module: str) -> List[str]:
    """The flow classes of a module: each `<Class>.py` with a `<Class>.yaml` beside it."""
    base = os.path.join(MODULES_DIR, module)
    return sorted(f[:-5] for f in os.listdir(base)
                  if f.endswith(".yaml") and os.path.isfile(os.path.join(base, f[:-5] + ".py")))


def direct_dependencies(module: str) -> Set[str]:
    """The other modules a module's code and configurations refer to."""
    found = set()
    base = os.path.join(MODULES_DIR, module)
    for rel in module_files(module):
        if rel.endswith((".py", ".yaml")) and rel != "__init__.py":
            with open(os.path.join(base, rel), encoding="utf-8") as f:
                found |= set(MODULE_REFERENCE.findall(f.read()))
    return found - {module}


def dependency_closure(modules: Iterable[str]) -> List[str]:
    todo, seen = list(modules), set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(direct_dependencies(module))
    return sorted(seen)


def declared_dependencies(module: str) -> Set[str]:
    """The modules a module's `__init__.py` declares in `dependencies`."""
    with open(os.path.join(MODULES_DIR, module, "__init__.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "dependencies" for t in node.targets):
            return {d["url"].split("/", 1)[1] for d in ast.literal_eval(node.value)}
    return set()


def own_requirements(module: str) -> List[str]:
    path = os.path.join(MODULES_DIR, module, "pip_requirements.txt")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def requirements(module: str) -> List[str]:
    """What a module needs beyond aiflows: its own requirements and those of the modules it depends on."""
    out: List[str] = []
    for dep in dependency_closure([module]):
        for requirement in own_requirements(dep):
            if requirement not in out:
                out.append(requirement)
    return out


# ~~~ Writing a staged module ~~~
def rewrite(text: str, namespace: str) -> str:
    return (text.replace(f"flow_modules.{SOURCE_NAMESPACE}.", f"flow_modules.{namespace}.")
                .replace(f'"url": "{SOURCE_NAMESPACE}/', f'"url": "{namespace}/'))


def staged_init(module: str, namespace: str, revision: str, local: bool) -> str:
    """The module's `__init__.py` with its dependencies synced (by FlowVerse) before its classes are imported."""
    with open(os.path.join(MODULES_DIR, module, "__init__.py"), encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    lines = source.splitlines()
    docstring = ast.get_docstring(tree) or module
    body = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) and node is tree.body[0]:
            continue  # the docstring
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "dependencies" for t in node.targets):
            continue
        body.append("\n".join(lines[node.lineno - 1:node.end_lineno]))
    deps = sorted(direct_dependencies(module))
    out = [f'"""{docstring}"""']
    if deps:
        out += ["import os", "", "from aiflows import flow_verse", ""]
        if local:
            out.append("_STAGED = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the staged modules")
            entries = [f'    {{"url": "{namespace}/{d}", "revision": os.path.join(_STAGED, "{d}")}},' for d in deps]
        else:
            entries = [f'    {{"url": "{namespace}/{d}", "revision": "{revision}"}},' for d in deps]
        out += ["dependencies = ["] + entries + ["]", "flow_verse.sync_dependencies(dependencies)", ""]
    else:
        out += ["", "dependencies = []", ""]
    out += [rewrite(b, namespace) for b in body]
    return "\n".join(out).rstrip() + "\n"


def _class_docstring(module: str, cls: str) -> str:
    with open(os.path.join(MODULES_DIR, module, f"{cls}.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return ast.get_docstring(node) or ""
    return ""


def _base_names(module: str, cls: str) -> List[str]:
    with open(os.path.join(MODULES_DIR, module, f"{cls}.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [ast.unparse(b) for b in node.bases]
    return []


def _parameter_lines(config: dict, skip=("name", "description", "input_interface", "output_interface",
                                         "subflows_config", "topology")) -> List[str]:
    out = []
    for key, value in config.items():
        if key in skip:
            continue
        if isinstance(value, dict) and "template" in value:
            text = "a Jinja template (see the default configuration)"
        else:
            text = json.dumps(value, default=str)
            text = text if len(text) <= 100 else text[:97] + "..."
        out.append(f"- `{key}`: `{text}`" if not text.startswith("a Jinja") else f"- `{key}`: {text}")
    return out


def readme(module: str, namespace: str, revision: str) -> str:
    """The hub README: front matter, what the module is, how to use it, and for each flow class its docstring, its
    configuration parameters and its input and output interfaces (from the default configuration)."""
    with open(os.path.join(MODULES_DIR, module, "__init__.py"), encoding="utf-8") as f:
        about = ast.get_docstring(ast.parse(f.read())) or module
    deps = sorted(direct_dependencies(module))
    reqs = requirements(module)
    parts = [
        "---", "license: mit", "---", "", f"# {module}", "", about, "",
        "## How to use", "",
        "```python",
        "from aiflows import flow_verse",
        f'dependencies = [{{"url": "{namespace}/{module}", "revision": "{revision}"}}]',
        "flow_verse.sync_dependencies(dependencies)",
        "",
        f"from flow_modules.{namespace}.{module} import {', '.join(flow_classes(module)) or '*'}",
        "```",
        "",
        "Import a module of this namespace before `aiflows.backends` or `litellm`: it points litellm at the tokenizer "
        "the CoreFlowModule carries, so nothing is downloaded. LLM chats have `backend.api_infos: ???`: fill them "
        "with `quick_load(cfg, [ApiInfo(...)])`, or for every chat at once with "
        f"`flow_modules.{namespace}.ChatFlowModule.set_backend_factory(with_api_infos([...]))`. "
        "`demo.yaml` and `run.py` run the module on its own: `python run.py` in this folder.",
        "",
        f"Depends on: {', '.join(f'{namespace}/{d}' for d in deps) or 'nothing but aiflows'}. "
        f"Needs beyond aiflows: {', '.join(reqs) or 'nothing'} (see `pip_requirements.txt`).",
        "",
    ]
    for cls in flow_classes(module):
        with open(os.path.join(MODULES_DIR, module, f"{cls}.yaml"), encoding="utf-8") as f:
            own = yaml.safe_load(f) or {}
        doc = _class_docstring(module, cls)
        parts += [f"## {cls}", "", f"`class {cls}({', '.join(_base_names(module, cls))})`", "", doc, ""]
        parts += ["### Configuration parameters (this class's default configuration)", ""]
        parts += _parameter_lines(own) or ["- (none beyond its base class's)"]
        subflows = own.get("subflows_config") or {}
        if subflows:
            parts += [f"- `subflows_config`: {', '.join(f'`{s}`' for s in subflows)}"]
        parts += ["", "### Input interface", ""]
        parts += [f"- `{k}`" for k in own.get("input_interface", own.get("input_interface_non_initialized", []))] \
            or ["- as its base class"]
        parts += ["", "### Output interface", ""]
        parts += [f"- `{k}`" for k in own.get("output_interface", [])] or ["- as its base class"]
        parts += ["", "<details><summary>Default configuration</summary>", "", "```yaml",
                  rewrite(yaml.safe_dump(own, sort_keys=False, width=120), namespace).rstrip(), "```", "",
                  "</details>", ""]
    return "\n".join(parts).rstrip() + "\n"


_RUN_PY = '''\
"""Run {cls} on its own: `python run.py` in this folder ({llm_note}). `--yes` approves automatically."""
import os
import sys

from aiflows import flow_verse

HERE = os.path.dirname(os.path.realpath(__file__))
flow_verse.sync_dependencies([{{"url": "{namespace}/{module}", "revision": HERE}}])

from flow_modules.{namespace}.{module} import {cls}  # noqa: E402  (first: the tokenizer is found offline)
from aiflows.utils import logging  # noqa: E402
from aiflows.utils.general_helpers import read_yaml_file  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule import AutoApproveInput, set_input_source  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule.memory import set_memory_files  # noqa: E402

logging.set_verbosity_warning()
demo = read_yaml_file(os.path.join(HERE, "demo.yaml"))
if demo.get("uses_llm"):
    from aiflows.backends.api_info import ApiInfo
    from flow_modules.{namespace}.ChatFlowModule import set_backend_factory, with_api_infos

    key, base = os.environ.get("OPENAI_API_KEY"), os.environ.get("OPENAI_API_BASE")
    if not key and not base:
        sys.exit("Set OPENAI_API_KEY (or OPENAI_API_BASE for an OpenAI-compatible server) to run this demo.")
    overrides = {{"model_name": os.environ["OPENAI_MODEL"]}} if os.environ.get("OPENAI_MODEL") else {{}}
    set_backend_factory(with_api_infos([ApiInfo(backend_used="openai", api_key=key or "sk-no-key", api_base=base)],
                                       **overrides))
flow = {cls}.instantiate_from_default_config(**(demo.get("flow") or {{}}))
if demo.get("memory_dir"):
    set_memory_files(flow, demo["memory_dir"])
if demo.get("auto_approve") or "--yes" in sys.argv:
    set_input_source(AutoApproveInput())
try:
    print(flow.call(demo["input_data"]))
finally:
    for node in [flow] + [s for s in getattr(flow, "subflows", {{}}).values()]:
        if hasattr(node, "close"):
            node.close()
'''

_CORE_RUN_PY = '''\
"""Run a small flow on CoreFlowModule's lean base: `python run.py` in this folder (no LLM needed)."""
import os

from aiflows import flow_verse

HERE = os.path.dirname(os.path.realpath(__file__))
flow_verse.sync_dependencies([{{"url": "{namespace}/CoreFlowModule", "revision": HERE}}])

from flow_modules.{namespace}.CoreFlowModule import LeanAtomicFlow  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule.usage import count_tokens  # noqa: E402
from aiflows.utils.general_helpers import read_yaml_file  # noqa: E402


class CountFlow(LeanAtomicFlow):
    """Counts the tokens of `text` (with the tokenizer the module carries: no download)."""

    def run(self, input_data):
        return {{"tokens": count_tokens(input_data["text"])}}


demo = read_yaml_file(os.path.join(HERE, "demo.yaml"))
flow = CountFlow.instantiate_from_config({{"name": "CountFlow", "description": "counts tokens", "enable_cache": False,
                                          **(demo.get("flow") or {{}})}})
for _ in range(demo["calls"]):
    output = flow.call(demo["input_data"])
print(output, "- history kept:", len(flow.history), "of", flow.history.total, "messages")
'''


def demo_files(module: str, namespace: str) -> Dict[str, str]:
    if module == "CoreFlowModule":
        demo = {"flow": {"history_size": 8}, "calls": 100, "input_data": {"text": "Flows all the way down."}}
        return {"demo.yaml": yaml.safe_dump(demo, sort_keys=False), "run.py": _CORE_RUN_PY.format(namespace=namespace)}
    spec = DEMOS.get(module)
    if spec is None:
        raise PublishError(f"{module} has no demo in scripts/publish.py's DEMOS: add one")
    demo = {"uses_llm": bool(spec.get("llm")), "auto_approve": False}
    if spec.get("overrides"):
        demo["flow"] = spec["overrides"]
    if spec.get("memory"):
        demo["memory_dir"] = "memory"
    demo["input_data"] = spec["input"]
    header = f"# Run {spec['cls']} on its own: python run.py (in this folder)."
    if spec.get("llm"):
        header += "\n# The LLM: OPENAI_API_KEY, or OPENAI_API_BASE for an OpenAI-compatible server (and OPENAI_MODEL)."
    text = header + "\n" + rewrite(yaml.safe_dump(demo, sort_keys=False, width=120), namespace)
    llm_note = "the LLM: OPENAI_API_KEY or OPENAI_API_BASE" if spec.get("llm") else "no LLM needed"
    run = _RUN_PY.format(cls=spec["cls"], module=module, namespace=namespace, llm_note=llm_note)
    return {"demo.yaml": text, "run.py": run}


def stage_module(module: str, out_root: str, namespace: str, revision: str, local: bool) -> str:
    source = os.path.join(MODULES_DIR, module)
    target = os.path.join(out_root, namespace, module)
    if os.path.exists(target):
        shutil.rmtree(target)
    for rel in module_files(module):
        destination = os.path.join(target, rel)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        if rel.endswith((".py", ".yaml", ".md", ".txt")) and rel != "__init__.py":
            with open(os.path.join(source, rel), encoding="utf-8") as f:
                text = f.read()
            with open(destination, "w", encoding="utf-8") as f:
                f.write(rewrite(text, namespace))
        elif rel != "__init__.py":
            shutil.copy2(os.path.join(source, rel), destination)
    files = {
        "__init__.py": staged_init(module, namespace, revision, local),
        "pip_requirements.txt": "".join(f"{r}\n" for r in requirements(module)),
        "README.md": readme(module, namespace, revision),
        **demo_files(module, namespace),
    }
    for name, text in files.items():
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write(text)
    return target


# ~~~ Checking ~~~
_CHECK = '''
import importlib, json, os, sys, traceback
from aiflows import flow_verse
namespace, staged, modules = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
report = {}
for module, classes in modules.items():
    try:
        flow_verse.sync_dependencies([{"url": f"{namespace}/{module}", "revision": os.path.join(staged, module)}])
        imported = importlib.import_module(f"flow_modules.{namespace}.{module}")
        from aiflows.backends.api_info import ApiInfo
        try:  # modules with LLM chats depend on ChatFlowModule: fill every chat's api_infos
            chat = importlib.import_module(f"flow_modules.{namespace}.ChatFlowModule")
        except ModuleNotFoundError:
            chat = None
        if chat is not None:
            chat.set_backend_factory(chat.with_api_infos([ApiInfo(backend_used="openai", api_key="sk-check")]))
        for name in classes:
            flow = getattr(imported, name).instantiate_from_default_config()
            if hasattr(flow, "close"):
                flow.close()
        report[module] = "ok"
    except BaseException:
        report[module] = traceback.format_exc(limit=6)
print(json.dumps(report))
'''


def check_staged(staged_namespace_dir: str, namespace: str, modules: List[str]) -> Dict[str, str]:
    """Import each staged module and instantiate its flow classes from their default configurations, in a separate
    process whose working directory is a fresh project folder (FlowVerse syncs into it, offline)."""
    classes = {m: flow_classes(m) for m in modules}
    with tempfile.TemporaryDirectory(prefix="publish_check_") as project:
        done = subprocess.run([sys.executable, "-c", _CHECK, namespace, staged_namespace_dir, json.dumps(classes)],
                              cwd=project, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": ""}, stdin=subprocess.DEVNULL)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise PublishError(f"the check process failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


# ~~~ Pushing ~~~
def push(staged_namespace_dir: str, namespace: str, modules: List[str], revision: str, token: str,
         api_factory: Optional[Callable[..., object]] = None, say: Callable[[str], None] = print) -> List[str]:
    """Create each repository (if needed) and upload its staged folder; returns the repository ids."""
    if api_factory is None:
        from huggingface_hub import HfApi as api_factory  # noqa: N813
    api = api_factory(token=token)
    pushed = []
    for module in modules:
        repo_id = f"{namespace}/{module}"
        url = api.create_repo(repo_id=repo_id, exist_ok=True, token=token)
        say(f"repository {repo_id}: {url}")
        if revision != "main":
            api.create_branch(repo_id=repo_id, branch=revision, exist_ok=True, token=token)
        api.upload_folder(repo_id=repo_id, folder_path=os.path.join(staged_namespace_dir, module), token=token,
                          revision=revision, commit_message=f"Publish {module}",
                          ignore_patterns=["__pycache__/*", "*.pyc", "flow_modules/*", "memory/*"])
        say(f"uploaded {module} to {repo_id}@{revision}")
        pushed.append(repo_id)
    return pushed


def verify_venv(staged_namespace_dir: str, namespace: str, modules: List[str], say=print) -> Dict[str, str]:
    """In a fresh virtual environment holding only aiflows and a module's pip_requirements.txt, import the module."""
    report = {}
    for module in modules:
        with tempfile.TemporaryDirectory(prefix="publish_venv_") as folder:
            venv = os.path.join(folder, "venv")
            python = os.path.join(venv, "bin", "python")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            requirements_file = os.path.join(staged_namespace_dir, module, "pip_requirements.txt")
            install = [python, "-m", "pip", "install", "-q", "aiflows==0.1.7", "-r", requirements_file]
            done = subprocess.run(install, capture_output=True, text=True)
            if done.returncode != 0:
                report[module] = f"pip failed: {done.stderr[-1000:]}"
                continue
            probe = (f"import os; from aiflows import flow_verse; flow_verse.sync_dependencies("
                     f"[{{'url': '{namespace}/{module}', 'revision': {os.path.join(staged_namespace_dir, module)!r}}}]);"
                     f" import flow_modules.{namespace}.{module}")
            done = subprocess.run([python, "-c", probe], cwd=folder, capture_output=True, text=True)
            report[module] = "ok" if done.returncode == 0 else done.stderr[-1500:]
            spec = DEMOS.get(module, {})
            if report[module] == "ok" and not spec.get("llm"):  # modules that need no LLM also run their demo
                module_dir = os.path.join(staged_namespace_dir, module)
                done = subprocess.run([python, "run.py", "--yes"], cwd=module_dir, capture_output=True, text=True,
                                      timeout=300, stdin=subprocess.DEVNULL)
                for leftover in ("flow_modules", "memory"):
                    shutil.rmtree(os.path.join(module_dir, leftover), ignore_errors=True)
                report[module] = "ok" if done.returncode == 0 else f"run.py failed: {done.stderr[-1500:]}"
            say(f"{module}: {report[module] if report[module] == 'ok' else 'FAILED'}")
    return report


# ~~~ Command line ~~~
def main(argv: Optional[List[str]] = None, api_factory=None) -> int:
    parser = argparse.ArgumentParser(prog="publish.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespace", required=True, help="your Hugging Face user or organisation name")
    parser.add_argument("--out", required=True, help="the folder the modules are staged in (DIR/NAME/<Module>)")
    parser.add_argument("--modules", help="comma-separated module names (default: all); their dependencies come too")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--revision", default="main", help="the revision dependencies point at (default: main)")
    where.add_argument("--local", action="store_true", help="dependencies point at the staged sibling folders")
    parser.add_argument("--push", action="store_true", help="create the repositories and upload (token: HF_TOKEN)")
    parser.add_argument("--verify-venv", action="store_true",
                        help="also import each module in a fresh venv with only aiflows + its pip_requirements.txt")
    args = parser.parse_args(argv)
    try:
        if not NAME_PATTERN.match(args.namespace) or args.namespace[0].isdigit():
            raise PublishError(f"--namespace {args.namespace!r}: use letters, digits, '_' or '-', not starting with "
                               "a digit (FlowVerse needs a valid Python name)")
        if args.local and "flow_modules" in os.path.realpath(args.out):
            raise PublishError("--out must not be inside a folder named flow_modules: FlowVerse refuses to sync "
                               "local revisions from there")
        available = module_names()
        wanted = [m.strip() for m in args.modules.split(",")] if args.modules else available
        unknown = [m for m in wanted if m not in available]
        if unknown:
            raise PublishError(f"unknown module(s) {unknown}; the modules are: {', '.join(available)}")
        modules = dependency_closure(wanted)
        if set(modules) != set(wanted):
            print(f"also staging their dependencies: {', '.join(sorted(set(modules) - set(wanted)))}")
        token = os.environ.get("HF_TOKEN")
        if args.push and not token:
            raise PublishError("--push needs a Hugging Face token with write access in HF_TOKEN")

        with tempfile.TemporaryDirectory(prefix="publish_stage_") as scratch:
            # check the code as it will be published (dependencies synced from the staged folders: offline)
            for module in modules:
                stage_module(module, scratch, args.namespace, args.revision, local=True)
            report = check_staged(os.path.join(scratch, args.namespace), args.namespace, modules)
            failed = {m: r for m, r in report.items() if r != "ok"}
            if failed:
                raise PublishError("the staged modules do not pass their check; nothing was written:\n" +
                                   "\n".join(f"--- {m}:\n{r}" for m, r in failed.items()))
        staged_dir = os.path.join(os.path.abspath(args.out), args.namespace)
        for module in modules:
            stage_module(module, os.path.abspath(args.out), args.namespace, args.revision, local=args.local)
            print(f"staged {module} -> {os.path.join(staged_dir, module)}")
        if args.verify_venv:
            bad = {m: r for m, r in verify_venv(staged_dir, args.namespace, modules).items() if r != "ok"}
            if bad:
                raise PublishError("some modules do not import with only aiflows + their pip_requirements.txt:\n"
                                   + "\n".join(f"--- {m}:\n{r}" for m, r in bad.items()))
        if args.push:
            push(staged_dir, args.namespace, modules, args.revision, token, api_factory)
        else:
            print(f"{len(modules)} modules staged and checked in {staged_dir}; nothing was pushed (--push pushes).")
        return 0
    except PublishError as error:
        print(f"publish.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
