#!/usr/bin/env python
"""Stage the flow modules as they would stand on the aiflows hub (FlowVerse, on Hugging Face), check them, and
optionally push them.

    python scripts/publish.py --namespace NAME --out DIR [--modules A,B] [--revision REV | --local] [--push]
                              [--verify-venv]

For each module (and the modules it depends on), DIR/NAME/<Module>/ receives:
  * the module's code and YAML files, with import paths and `_target_`s rewritten from `flow_modules.aiflows.` to
    `flow_modules.NAME.`;
  * an `__init__.py` that declares `dependencies` on the other modules (`NAME/<Dep>` at REV, default `main`) and
    calls `flow_verse.sync_dependencies(dependencies)` before importing its classes;
  * `pip_requirements.txt`: what the module and its dependencies need beyond aiflows;
  * `README.md`, generated from the class docstrings and default configurations (configuration parameters, input
    and output interfaces), with the hub's front matter;
  * `demo.yaml` and `run.py`, which run the module on its own (`cd DIR/NAME/<Module> && python run.py`).

NAME is both your Hugging Face user or organisation and a Python package name (`flow_modules.NAME`): ASCII letters,
digits and '_', starting with a letter. REV is a branch or commit that aiflows 0.1.7's FlowVerse accepts as a remote
revision: letters, digits and '_' only (`v1_0`, not `v1.0` or `my-branch`).

With --local, dependencies point at the staged sibling folders (their real paths), so another project can use the
staged modules offline: `flow_verse.sync_dependencies([{"url": "NAME/CoderFlowModule", "revision": "<path>"}])`
where <path> is the real path of DIR/NAME/CoderFlowModule, as printed (DIR's symlinks are resolved, e.g. macOS's
/tmp -> /private/tmp: a module synced through a symlinked path and again, by a module that depends on it, through
its real path makes FlowVerse ask whether to overwrite it). A --local staging points at this machine's folders, so
it cannot be pushed: --local and --push do not go together.

Before anything is written to DIR, every module is staged (with --local-style dependencies) in a temporary folder
and checked, offline, each in its own Python process started from its own empty project folder: FlowVerse syncs
the module there, it imports, each flow class comes from the staged folder and instantiates from its default
configuration. That process cannot import this repository's `flow_modules.aiflows` (only the project's
`flow_modules/` folder is searched) and cannot open network connections (loopback and Unix sockets excepted).
Nothing leaves the machine unless --push is given: then, with the token in HF_TOKEN, each module's repository
NAME/<Module> is created (if needed) on the Hugging Face Hub and the staged folder is uploaded (to the branch REV).
What was done is printed.

--verify-venv also builds, for each module, a fresh virtual environment with only aiflows 0.1.7 and the module's
pip_requirements.txt, and runs the same check there, plus the demo of each module that needs no LLM
(`run.py --yes`). It verifies the temporary --local-style staging, so dependencies are synced from local folders,
never from the hub; the only network it needs is pip's: reaching a package index (PyPI, or the one pip is
configured with) for aiflows 0.1.7 and the requirements. If it fails, nothing is written to DIR.
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
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES_DIR = os.path.join(ROOT, "flow_modules", "aiflows")
SOURCE_NAMESPACE = "aiflows"
SKIP = {"__pycache__", "flow_modules", "memory", ".flow_cache"}
# NAME is a Hugging Face user/organisation and a Python package name in `flow_modules.NAME` (which the staged code
# imports): only what both accept. FlowVerse would map a leading digit to `user_<NAME>`, which the code does not use.
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# aiflows 0.1.7 (flow_verse/loading.py) refuses a remote revision with any `\W` character.
REVISION_PATTERN = re.compile(r"^\w+$")
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


def _docstring_literal(text: str) -> str:
    """``text`` as a triple-quoted docstring literal that parses back to ``text``: backslashes escaped (no escape
    sequence is interpreted), and so are a `\"\"\"` inside and a `"` at the end (either would close the literal)."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    return f'"""{body}"""'


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
    out = [_docstring_literal(docstring)]
    if deps:
        if local:
            out += ["import os", "", "from aiflows import flow_verse", ""]
            out.append("_STAGED = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the staged modules")
            entries = [f'    {{"url": "{namespace}/{d}", "revision": os.path.join(_STAGED, "{d}")}},' for d in deps]
        else:
            out += ["from aiflows import flow_verse", ""]
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


def _default_config(module: str, cls: str) -> dict:
    with open(os.path.join(MODULES_DIR, module, f"{cls}.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def base_flow_class(module: str, cls: str) -> Optional[Tuple[str, str]]:
    """(module, class) of a flow class's base class when that is a flow class of these modules, found from the
    imports of the class's file; None for a base from aiflows or elsewhere."""
    bases = _base_names(module, cls)
    if not bases:
        return None
    base = bases[0]  # aiflows builds a default configuration from `cls.__base__`, the first base
    with open(os.path.join(MODULES_DIR, module, f"{cls}.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) != base:
                    continue
                if node.level == 1:
                    owner = module  # from .Other import Base
                else:
                    found = MODULE_REFERENCE.match(node.module or "") if node.level == 0 else None
                    owner = found.group(1) if found else None
                if owner and alias.name in flow_classes(owner):
                    return owner, alias.name
        elif isinstance(node, ast.ClassDef) and node.name == base and base in flow_classes(module):
            return module, base
    return None


def inherited_value(module: str, cls: str, key: str) -> Tuple[Optional[object], Optional[str]]:
    """``key`` of a flow class's default configuration as aiflows builds it (the class's YAML merged over its base
    classes'; a list replaces the base's whole) and the class whose YAML sets it; (None, None) if none of the base
    classes of these modules sets it."""
    seen: Set[Tuple[str, str]] = set()
    current: Optional[Tuple[str, str]] = (module, cls)
    while current is not None and current not in seen:
        seen.add(current)
        config = _default_config(*current)
        if key in config:
            return config[key], current[1]
        current = base_flow_class(*current)
    return None, None


def _interface_lines(module: str, cls: str, keys: Tuple[str, ...]) -> List[str]:
    """The README list of an interface: the first of ``keys`` the class's default configuration has (a chat's
    `input_interface_non_initialized` stands in when it declares no `input_interface`), inherited or not."""
    for key in keys:
        value, owner = inherited_value(module, cls, key)
        if value is not None:
            lines = [f"- `{k}`" for k in value] or ["- (none)"]
            return lines + ([] if owner == cls else ["", f"(inherited from `{owner}`)"])
    bases = _base_names(module, cls)
    return [f"- as declared by its base class `{bases[0]}` (see its documentation)" if bases else "- (none)"]


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


def readme(module: str, namespace: str, revision: str, local_dir: Optional[str] = None) -> str:
    """The hub README: front matter, what the module is, how to use it, and for each flow class its docstring, its
    configuration parameters and its input and output interfaces (from the default configuration, or the base
    class's it inherits them from). With ``local_dir`` (the staged namespace folder of a --local staging), the
    snippet syncs the module from there instead of from the hub."""
    with open(os.path.join(MODULES_DIR, module, "__init__.py"), encoding="utf-8") as f:
        about = ast.get_docstring(ast.parse(f.read())) or module
    deps = sorted(direct_dependencies(module))
    reqs = requirements(module)
    classes = flow_classes(module)
    if local_dir is not None:
        where = json.dumps(os.path.join(local_dir, module))
        sync = [f'dependencies = [{{"url": "{namespace}/{module}", "revision": {where}}}]  # staged on this machine']
    else:
        sync = [f'dependencies = [{{"url": "{namespace}/{module}", "revision": "{revision}"}}]']
    main_class = DEMOS.get(module, {}).get("cls") or (classes[0] if classes else None)
    parts = [
        "---", "license: mit", "---", "", f"# {module}", "", about, "",
        "## How to use", "",
        "```python",
        "from aiflows import flow_verse",
        *sync,
        "flow_verse.sync_dependencies(dependencies)",
        "",
        f"from flow_modules.{namespace}.{module} import {', '.join(classes) or '*'}",
        "```",
        "",
        "Import a module of this namespace before `aiflows.backends` or `litellm`: it points litellm at the tokenizer "
        "the CoreFlowModule carries, so nothing is downloaded.",
        "",
    ]
    if main_class and "ChatFlowModule" in dependency_closure([module]):
        # quick_load fills `api_infos: ???` keys, which a composite flow's default configuration does not have at
        # its top: the skeleton puts one at every chat of the tree.
        parts += [
            "LLM chats have `backend.api_infos: ???`. Build a configuration with one at every chat of the flow's tree "
            "(`chat_backends_skeleton`), fill it with `quick_load`, and instantiate from it:",
            "",
            "```python",
            "import os",
            "",
            "from aiflows.backends.api_info import ApiInfo",
            "from aiflows.utils.general_helpers import quick_load",
            f"from flow_modules.{namespace}.CoreFlowModule.config_tree import chat_backends_skeleton",
            "",
            f'cfg = chat_backends_skeleton("flow_modules.{namespace}.{module}.{main_class}'
            '.instantiate_from_default_config")',
            'cfg.pop("_target_")',
            'quick_load(cfg, [ApiInfo(backend_used="openai", api_key=os.environ["OPENAI_API_KEY"])])',
            f"flow = {main_class}.instantiate_from_default_config(**cfg)",
            "```",
            "",
            "Or give every chat built from then on its api_infos at once: "
            f"`flow_modules.{namespace}.ChatFlowModule.set_backend_factory(with_api_infos([ApiInfo(...)]))`.",
            "",
        ]
    parts += [
        "`demo.yaml` and `run.py` run the module on its own: `python run.py` in this folder.",
        "",
        f"Depends on: {', '.join(f'{namespace}/{d}' for d in deps) or 'nothing but aiflows'}. "
        f"Needs beyond aiflows: {', '.join(reqs) or 'nothing'} (see `pip_requirements.txt`).",
        "",
    ]
    for cls in classes:
        own = _default_config(module, cls)
        doc = _class_docstring(module, cls)
        parts += [f"## {cls}", "", f"`class {cls}({', '.join(_base_names(module, cls))})`", "", doc, ""]
        parts += ["### Configuration parameters (this class's default configuration)", ""]
        parts += _parameter_lines(own) or ["- (none beyond its base class's)"]
        subflows = own.get("subflows_config") or {}
        if subflows:
            parts += [f"- `subflows_config`: {', '.join(f'`{s}`' for s in subflows)}"]
        parts += ["", "### Input interface", ""]
        parts += _interface_lines(module, cls, ("input_interface", "input_interface_non_initialized"))
        parts += ["", "### Output interface", ""]
        parts += _interface_lines(module, cls, ("output_interface",))
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


def stage_module(module: str, out_root: str, namespace: str, revision: str, local: bool,
                 local_dir: Optional[str] = None) -> str:
    """Write OUT_ROOT/NAMESPACE/<module> as it will stand on the hub (or, with ``local``, as a --local staging whose
    README syncs it from ``local_dir``, the folder the staged namespace finally lives in)."""
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
    readme_dir = (local_dir or os.path.realpath(os.path.join(out_root, namespace))) if local else None
    files = {
        "__init__.py": staged_init(module, namespace, revision, local),
        "pip_requirements.txt": "".join(f"{r}\n" for r in requirements(module)),
        "README.md": readme(module, namespace, revision, local_dir=readme_dir),
        **demo_files(module, namespace),
    }
    for name, text in files.items():
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write(text)
    return target


def write_staging(modules: List[str], out: str, namespace: str, revision: str, local: bool) -> str:
    """Stage ``modules`` into OUT/NAMESPACE and return that folder. All of them are staged in a temporary folder
    beside it first and only then moved into place, so a failure while writing leaves the previous folders."""
    staged_dir = os.path.join(out, namespace)
    os.makedirs(staged_dir, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=".publish_", dir=staged_dir)  # same file system: the moves are renames
    try:
        for module in modules:
            stage_module(module, temporary, namespace, revision, local, local_dir=staged_dir)
        for module in modules:
            target = os.path.join(staged_dir, module)
            if os.path.islink(target) or os.path.isfile(target):
                os.unlink(target)
            elif os.path.exists(target):
                shutil.rmtree(target)
            os.rename(os.path.join(temporary, namespace, module), target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return staged_dir


# ~~~ Checking ~~~
# Runs first in every process that checks a staged module, so that the process sees what a separate aiflows project
# sees. `flow_modules` and everything under it resolve only from the project's own `flow_modules/` folder (where
# FlowVerse syncs, in the working directory): an installed copy of this repository is never consulted (an editable
# install's finder maps `flow_modules.aiflows` to the source folder from any directory, and would hide staged code
# that still imports the source namespace). Connections other than loopback and Unix sockets are refused: the check
# is offline. `foreign_flow_modules` names what was loaded from elsewhere anyway.
ISOLATION = r'''
import importlib.machinery as _machinery
import os as _os
import socket as _socket
import sys as _sys

PROJECT = _os.path.realpath(_os.getcwd())


class _ProjectFlowModules:
    """Finds `flow_modules` in PROJECT only, and its submodules in their parent package's folders only."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname != "flow_modules" and not fullname.startswith("flow_modules."):
            return None
        spec = _machinery.PathFinder.find_spec(fullname, [PROJECT] if fullname == "flow_modules" else path)
        if spec is None:  # raise, not return None: the finders after this one (an editable install) get no say
            raise ModuleNotFoundError(f"No module named {fullname!r} in the project {PROJECT}", name=fullname)
        return spec


_sys.meta_path.insert(0, _ProjectFlowModules)
for _name in [n for n in _sys.modules if n == "flow_modules" or n.startswith("flow_modules.")]:
    del _sys.modules[_name]


def _loopback(address):
    host = address[0] if isinstance(address, tuple) and address else address
    host = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    return host in ("localhost", "::1", "0.0.0.0", "") or host.startswith(("127.", "::ffff:127."))


def _offline(real):
    def guarded(sock, address, *args):
        if sock.family in (_socket.AF_INET, _socket.AF_INET6) and not _loopback(address):
            raise ConnectionRefusedError(f"offline: no connection to {address!r} from this process")
        return real(sock, address, *args)
    return guarded


def _offline_getaddrinfo(host, *args, _real=_socket.getaddrinfo, **kwargs):
    if host is not None and not _loopback(host):
        raise _socket.gaierror(f"offline: {host!r} is not looked up from this process")
    return _real(host, *args, **kwargs)


_socket.socket.connect = _offline(_socket.socket.connect)
_socket.socket.connect_ex = _offline(_socket.socket.connect_ex)
_socket.getaddrinfo = _offline_getaddrinfo


def foreign_flow_modules(staged, namespace):
    """Loaded `flow_modules.*` modules whose files are neither under `staged` nor the sync root's own packages."""
    root = _os.path.join(PROJECT, "flow_modules")
    own = {root, _os.path.join(root, "__init__.py"), _os.path.join(root, namespace),
           _os.path.join(root, namespace, "__init__.py")}
    foreign = []
    for name, module in list(_sys.modules.items()):
        if name == "flow_modules" or name.startswith("flow_modules."):
            places = [module.__file__] if getattr(module, "__file__", None) else list(getattr(module, "__path__", []))
            for place in places:
                real = _os.path.realpath(place)
                if real not in own and not real.startswith(staged + _os.sep):
                    foreign.append(f"{name} ({real})")
    return foreign
'''

_CHECK = r'''
import importlib, json, traceback
namespace, staged, module = _sys.argv[1], _os.path.realpath(_sys.argv[2]), _sys.argv[3]
classes = json.loads(_sys.argv[4])
here = _os.path.join(staged, module)
try:
    from aiflows import flow_verse
    flow_verse.sync_dependencies([{"url": f"{namespace}/{module}", "revision": here}])
    imported = importlib.import_module(f"flow_modules.{namespace}.{module}")
    if _os.path.isdir(_os.path.join(PROJECT, "flow_modules", namespace, "ChatFlowModule")):  # it has LLM chats
        from aiflows.backends.api_info import ApiInfo
        chat = importlib.import_module(f"flow_modules.{namespace}.ChatFlowModule")
        chat.set_backend_factory(chat.with_api_infos([ApiInfo(backend_used="openai", api_key="sk-check")]))
    for name in classes:
        cls = getattr(imported, name)
        origin = _os.path.realpath(_sys.modules[cls.__module__].__file__)
        if not origin.startswith(here + _os.sep):
            raise ImportError(f"{name} was loaded from {origin}, not from the staged {module}")
        flow = cls.instantiate_from_default_config()
        if hasattr(flow, "close"):
            flow.close()
    foreign = foreign_flow_modules(staged, namespace)
    if foreign:
        raise ImportError("loaded from outside the staged folder: " + ", ".join(foreign))
    result = "ok"
except BaseException:
    result = traceback.format_exc(limit=-8)  # the innermost frames: where it failed
print("\n" + json.dumps({"check": result}))
'''


def project_env() -> Dict[str, str]:
    """The environment of a process that stands for another project: no PYTHONPATH into this repository, and no
    tokenizer cache chosen by this repository's package (the staged CoreFlowModule must provide its own)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TIKTOKEN_CACHE_DIR")}


def project_python(code: str, python: Optional[str] = None) -> List[str]:
    """The command that runs ``code`` after ISOLATION, as a separate aiflows project whose folder is the working
    directory would (append the script's arguments; run it with ``env=project_env()``)."""
    return [python or sys.executable, "-c", ISOLATION + "\n" + code]


def check_module(staged_namespace_dir: str, namespace: str, module: str, python: Optional[str] = None) -> str:
    """Check one staged module in its own process, started in a fresh project folder: "ok", or what went wrong."""
    command = project_python(_CHECK, python) + [namespace, staged_namespace_dir, module,
                                                json.dumps(flow_classes(module))]
    with tempfile.TemporaryDirectory(prefix="publish_check_") as project:
        try:
            done = subprocess.run(command, cwd=project, env=project_env(), capture_output=True, text=True,
                                  timeout=600, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return "the check did not finish within 600 s"
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"check": ')]
    if not lines:
        return f"the check process failed (exit status {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(lines[-1])["check"]


def check_staged(staged_namespace_dir: str, namespace: str, modules: List[str]) -> Dict[str, str]:
    """Import each staged module and instantiate its flow classes from their default configurations. Each module is
    checked in its own process (a dependency one module fails to declare is not hidden by another module loaded
    earlier), a few at a time."""
    # the biggest trees first: they take longest, and the small ones fill the gaps at the end
    order = sorted(modules, key=lambda m: -len(dependency_closure([m])))
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        results = dict(zip(order, pool.map(lambda m: check_module(staged_namespace_dir, namespace, m), order)))
    return {m: results[m] for m in modules}


def fresh_venv(folder: str, requirements_file: str) -> str:
    """A new virtual environment in ``folder`` with only aiflows 0.1.7 and ``requirements_file`` installed by pip
    (which must reach a package index); returns its python. Raises PublishError if pip fails."""
    venv = os.path.join(folder, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
    python = os.path.join(venv, "Scripts" if os.name == "nt" else "bin", "python")
    install = [python, "-m", "pip", "install", "-q", "aiflows==0.1.7", "-r", requirements_file]
    done = subprocess.run(install, capture_output=True, text=True)
    if done.returncode != 0:
        raise PublishError(f"pip failed: {done.stderr[-1000:]}")
    return python


def _run_demo(python: str, module_dir: str) -> str:
    """Run a staged module's `run.py --yes` in its folder, isolated like a separate project: "ok" or the error."""
    code = "import runpy\n_sys.argv = ['run.py', '--yes']\nrunpy.run_path('run.py', run_name='__main__')"
    try:
        done = subprocess.run(project_python(code, python), cwd=module_dir, env=project_env(), capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "run.py did not finish within 300 s"
    finally:
        for leftover in ("flow_modules", "memory"):
            shutil.rmtree(os.path.join(module_dir, leftover), ignore_errors=True)
    return "ok" if done.returncode == 0 else f"run.py failed: {done.stderr[-1500:]}"


def verify_venv(staged_namespace_dir: str, namespace: str, modules: List[str], say=print) -> Dict[str, str]:
    """For each module, in a fresh virtual environment holding only aiflows and the module's pip_requirements.txt:
    the check of check_staged, then the demo (`run.py --yes`) of a module that needs no LLM. Give it a --local
    staging: dependencies are then synced from the staged folders, never from the hub."""
    report = {}
    for module in modules:
        module_dir = os.path.join(staged_namespace_dir, module)
        with tempfile.TemporaryDirectory(prefix="publish_venv_") as folder:
            try:
                python = fresh_venv(folder, os.path.join(module_dir, "pip_requirements.txt"))
            except (PublishError, subprocess.CalledProcessError, OSError) as error:
                report[module] = f"no virtual environment: {error}"
            else:
                report[module] = check_module(staged_namespace_dir, namespace, module, python)
                if report[module] == "ok" and not DEMOS.get(module, {}).get("llm"):
                    report[module] = _run_demo(python, module_dir)
        say(f"{module}: {report[module] if report[module] == 'ok' else 'FAILED'} in a fresh virtual environment")
    return report


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


# ~~~ Command line ~~~
def main(argv: Optional[List[str]] = None, api_factory=None) -> int:
    parser = argparse.ArgumentParser(prog="publish.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespace", required=True, metavar="NAME",
                        help="your Hugging Face user or organisation name, also the Python package flow_modules.NAME: "
                             "ASCII letters, digits and '_', starting with a letter")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the folder the modules are staged in (DIR/NAME/<Module>); its symlinks are resolved and "
                             "the real paths printed: sync --local modules from those")
    parser.add_argument("--modules", metavar="A,B",
                        help="comma-separated module names (default: all); their dependencies come too")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--revision", default="main", metavar="REV",
                       help="the branch pushed to and that dependencies point at (default: main); letters, digits "
                            "and '_' only, as FlowVerse requires of a remote revision")
    where.add_argument("--local", action="store_true",
                       help="dependencies point at the staged sibling folders, for use offline on this machine (not "
                            "with --push)")
    parser.add_argument("--push", action="store_true", help="create the repositories and upload (token: HF_TOKEN)")
    parser.add_argument("--verify-venv", action="store_true",
                        help="also check each module in a fresh venv with only aiflows 0.1.7 + its "
                             "pip_requirements.txt (pip must reach a package index; dependencies come from the "
                             "local staging, not the hub)")
    args = parser.parse_args(argv)
    try:
        if not NAME_PATTERN.match(args.namespace):
            raise PublishError(f"--namespace {args.namespace!r}: use ASCII letters, digits and '_', starting with a "
                               "letter. It is your Hugging Face user or organisation name and also a Python package "
                               f"name: the staged code imports flow_modules.{args.namespace}, which a '-', a '.' or a "
                               "leading digit would break")
        if not args.local and not REVISION_PATTERN.match(args.revision):
            raise PublishError(f"--revision {args.revision!r}: aiflows 0.1.7's FlowVerse accepts only remote "
                               "revisions made of letters, digits and '_' (no '.', '-' or '/'): e.g. v1_0, a branch "
                               "named so, or a commit hash")
        if args.local and args.push:
            raise PublishError("--local stages modules whose __init__.py sync their dependencies from this "
                               "machine's folders: they cannot be pushed. Push without --local (dependencies "
                               "NAME/<Module> at --revision)")
        out = os.path.realpath(args.out)  # a symlinked path and the real one would be two revisions to FlowVerse
        if args.local and "flow_modules" in out:
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
            # The code as it will be published, with dependencies synced from the staged folders (offline, whatever
            # --revision says); real paths, for the same reason as --out's.
            checked = os.path.join(os.path.realpath(scratch), args.namespace)
            for module in modules:
                stage_module(module, os.path.dirname(checked), args.namespace, args.revision, local=True)
            report = check_staged(checked, args.namespace, modules)
            failed = {m: r for m, r in report.items() if r != "ok"}
            if failed:
                raise PublishError("the staged modules do not pass their check; nothing was written:\n" +
                                   "\n".join(f"--- {m}:\n{r}" for m, r in failed.items()))
            if args.verify_venv:
                bad = {m: r for m, r in verify_venv(checked, args.namespace, modules).items() if r != "ok"}
                if bad:
                    raise PublishError("some modules do not work with only aiflows + their pip_requirements.txt; "
                                       "nothing was written:\n" + "\n".join(f"--- {m}:\n{r}" for m, r in bad.items()))
        staged_dir = write_staging(modules, out, args.namespace, args.revision, args.local)
        for module in modules:
            print(f"staged {module} -> {os.path.join(staged_dir, module)}")
        if args.push:
            push(staged_dir, args.namespace, modules, args.revision, token, api_factory)
        else:
            print(f"{len(modules)} modules staged and checked in {staged_dir}; nothing was pushed (--push pushes).")
            if args.local:
                print(f'Use one from another project: flow_verse.sync_dependencies([{{"url": "{args.namespace}/'
                      f'<Module>", "revision": "{staged_dir}/<Module>"}}])')
        return 0
    except PublishError as error:
        print(f"publish.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
