#!/usr/bin/env python
"""Stage the flow modules as they would stand on the aiflows hub (FlowVerse, on Hugging Face), check them, and
optionally push them.

    python scripts/publish.py --namespace NAME --out DIR [--modules A,B] [--revision REV | --local] [--verify-venv]
                              [--push | --dry-run] [--private] [--only A,B] [--no-pin]

For each module (and the modules it depends on), DIR/NAME/<Module>/ receives:
  * the module's code and YAML files, with import paths and `_target_`s rewritten from `aiflows_jarvis.` to
    `flow_modules.NAME.`;
  * an `__init__.py` that declares `dependencies` on the other modules (`NAME/<Dep>` at REV, default `main`; --push
    pins each at a commit, see below) and syncs them (with its copy of CoreFlowModule/dependency_sync.py, which never
    prompts, deletes or replaces, unlike FlowVerse's sync_dependencies) before importing its
    classes;
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
configuration. That process cannot import this repository's `aiflows_jarvis` (only the project's
`flow_modules/` folder is searched) and cannot open network connections (loopback and Unix sockets excepted).
DIR/NAME/<Module> is replaced only if publish.py wrote it (it holds a `.jarvis-staged` file, never pushed) and it
holds no `.git` (a clone of a hub repository is never replaced); otherwise nothing is written and the folders are
named.

Nothing leaves the machine unless --push (or --dry-run) is given. Then, before anything is staged, the token
(HF_TOKEN, else the one `huggingface-cli login` stored) is checked with the hub: valid, not read-only, and NAME is its
user or one of the user's organisations. After the staging, each module is pushed to the repository NAME/<Module>
(created if needed, private with --private; branch REV), each after the modules it depends on, stopping at the first
failure. A repository ends up holding exactly its staged folder: changed files are uploaded and files no longer
staged are deleted upstream (the hub's .gitattributes excepted), in one commit; one that already holds it gets no
commit. The `dependencies` of each pushed module's __init__.py name each dependency at the commit its repository has
just been given (FlowVerse accepts a commit hash as a revision; --no-pin keeps REV), so a module keeps working with the
code it was pushed with; the staged __init__.py is rewritten to match. A summary says what was pushed (with each
repository's commit), what was not, why (HTTP 401/403 and the like say what to do), and the command that pushes the
rest (`--only A,B`: only these of the staged modules, their dependencies pinned at their commit on the hub).
--dry-run says which repositories would be created, which files uploaded and which deleted upstream, and pushes
nothing: it makes read requests only (the token check and each repository's file list, which deletions need).

--verify-venv also builds, for each module, a fresh virtual environment with only aiflows 0.1.7 and the module's
pip_requirements.txt, and runs the same check there, plus the demo of each module that needs no LLM
(`run.py --yes`). It verifies the temporary --local-style staging, so dependencies are synced from local folders,
never from the hub; the only network it needs is pip's: reaching a package index (PyPI, or the one pip is
configured with) for aiflows 0.1.7 and the requirements. If it fails, nothing is written to DIR.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES_DIR = os.path.join(ROOT, "flow_modules", "aiflows_jarvis")
SOURCE_PACKAGE = "aiflows_jarvis"  # this repository's package: staged code imports flow_modules.NAME instead
SOURCE_NAMESPACE = "aiflows"  # the namespace of the source modules' `dependencies` urls
# Every staged module with dependencies gets a copy of this file, which its __init__.py syncs them with
SYNC_SOURCE = os.path.join(MODULES_DIR, "CoreFlowModule", "dependency_sync.py")
SYNC_FILE = "_dependency_sync.py"
SKIP = {"__pycache__", "flow_modules", "memory", ".flow_cache", ".git"}
# Written into every module folder publish.py stages: --out replaces only folders that have it (and no .git). It is
# never pushed.
STAGED_MARK = ".jarvis-staged"
# NAME is a Hugging Face user/organisation and a Python package name in `flow_modules.NAME` (which the staged code
# imports): only what both accept. FlowVerse would map a leading digit to `user_<NAME>`, which the code does not use.
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# aiflows 0.1.7 (flow_verse/loading.py) refuses a remote revision with any `\W` character.
REVISION_PATTERN = re.compile(r"^\w+$")
MODULE_REFERENCE = re.compile(r"aiflows_jarvis\.(\w+Module)\b")

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
        "subflows_config": {"CtrlExMem": {"commands": {"ask_user": {
            "description": "Ask the user a question.", "input_args": ["question"],
            "flow": {"_target_": "aiflows_jarvis.HumanStandardInputFlowModule.HumanStandardInputFlow"
                                 ".instantiate_from_default_config"}}}}}},
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
    "JarvisFlowModule": dict(cls="JarvisFlow", llm=True, memory=True, replay="demo/demo_transcript.jsonl",
                             overrides={"name": "Jarvis"}, input={
        "goal": "Compute the first 20 Fibonacci numbers and save them to fibonacci.txt."}),
    # ~~~ AutoGPT's modules ~~~
    "VectorStoreFlowModule": dict(cls="VectorStoreFlow", memory=True, overrides={
        "type": "faiss", "embedding": {"type": "hash"}}, input={  # hash: deterministic local vectors, no model
        "operation": "write", "content": ["The Eiffel Tower was finished in 1889.", "Bananas are yellow."]}),
    # network: the demo asks a web service (not run by --verify-venv, which is offline apart from pip)
    "LCToolFlowModule": dict(cls="LCToolFlow", network=True, overrides={
        "name": "ddg_search", "backend": {"_target_": "langchain_community.tools.DuckDuckGoSearchRun"}},
        input={"query": "aiflows EPFL"}),
    "WikiSearchFlowModule": dict(cls="WikiSearchAtomicFlow", network=True, input={"search_term": "Eiffel Tower"}),
    "AutoGPTFlowModule": dict(cls="AutoGPTFlow", llm=True, memory=True, overrides={
        "subflows_config": {"Memory": {"type": "faiss"}}}, input={
        "goal": "When was the Eiffel Tower finished, and how tall is it?"}),
}


class PublishError(Exception):
    """What went wrong, for the user."""


# ~~~ Reading the modules ~~~
def module_names() -> List[str]:
    return sorted(d for d in os.listdir(MODULES_DIR)
                  if d.endswith("Module") and os.path.isfile(os.path.join(MODULES_DIR, d, "__init__.py")))


def folder_files(base: str) -> List[str]:
    """Paths (relative to ``base``, '/'-separated) of the files published from a module folder: no caches, synced
    modules, memory, .git or staging mark."""
    out = []
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIP)
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")) or name == STAGED_MARK:
                continue
            out.append(os.path.relpath(os.path.join(root, name), base).replace(os.sep, "/"))
    return out


def module_files(module: str) -> List[str]:
    """Paths (relative to the module folder) of the files published with it."""
    return folder_files(os.path.join(MODULES_DIR, module))


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
    return (re.sub(rf"\b{SOURCE_PACKAGE}\.", f"flow_modules.{namespace}.", text)
                .replace(f'"url": "{SOURCE_NAMESPACE}/', f'"url": "{namespace}/'))


def _docstring_literal(text: str) -> str:
    """``text`` as a triple-quoted docstring literal that parses back to ``text``: backslashes escaped (no escape
    sequence is interpreted), and so are a `\"\"\"` inside and a `"` at the end (either would close the literal)."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    return f'"""{body}"""'


def _sync_module():
    """CoreFlowModule/dependency_sync.py, loaded on its own (it needs only the standard library and aiflows)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_jarvis_dependency_sync", SYNC_SOURCE)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def staged_digests(staged_namespace_dir: str, module: str) -> Dict[str, str]:
    """The content digest of each staged dependency of ``module`` (those staged in ``staged_namespace_dir``)."""
    digest = _sync_module().content_digest
    return {d: digest(os.path.join(staged_namespace_dir, d)) for d in sorted(direct_dependencies(module))
            if os.path.isdir(os.path.join(staged_namespace_dir, d))}


def staged_init(module: str, namespace: str, revision: str, local: bool,
                pins: Optional[Dict[str, str]] = None, digests: Optional[Dict[str, str]] = None) -> str:
    """The module's `__init__.py` with its dependencies synced before its classes are imported: at ``revision``, or
    for a dependency in ``pins`` at its pinned revision (the commit a push made). The sync is the module's own copy
    of CoreFlowModule/dependency_sync.py, not FlowVerse's: it never prompts, deletes or replaces (see
    docs/using-the-flows.md); a dependency already synced with the code of ``digests`` (two stagings of the same
    code) is taken as it is."""
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
        digests = digests or {}

        def digest(d):
            return f', "digest": "{digests[d]}"' if d in digests else ""

        sync_import = f"from .{SYNC_FILE[:-3]} import sync_dependencies  # never prompts, deletes or replaces"
        if local:
            out += ["import os", "", sync_import, ""]
            out.append("_STAGED = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the staged modules")
            entries = [f'    {{"url": "{namespace}/{d}", "revision": os.path.join(_STAGED, "{d}"){digest(d)}}},'
                       for d in deps]
        else:
            out += [sync_import, ""]
            entries = [f'    {{"url": "{namespace}/{d}", "revision": "{(pins or {}).get(d, revision)}"{digest(d)}}},'
                       for d in deps]
        out += ["dependencies = ["] + entries + ["]", f'sync_dependencies(dependencies, caller="{namespace}/{module}")',
                ""]
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


def _literal(value) -> str:
    """``value`` as Python source, indented like JSON when JSON reads back the same (no true/false/null)."""
    text = json.dumps(value, indent=4)
    try:
        if ast.literal_eval(text) == value:
            return text
    except (ValueError, SyntaxError):
        pass
    return repr(value)


def how_to_use(module: str, namespace: str, sync: List[str]) -> List[str]:
    """The lines of a README's "How to use" snippet: sync the module, then (for a module with a demo) everything a
    call needs, in the order that works: the api_infos of every chat (set_backend_factory), the memory files of every
    boss (set_memory_files), the input source, and a call with the demo's input."""
    spec = DEMOS.get(module)
    classes = flow_classes(module)
    lines = ["import os", "", "from aiflows import flow_verse", "", *sync, "flow_verse.sync_dependencies(dependencies)",
             "", f"from flow_modules.{namespace}.{module} import {', '.join(classes) or '*'}  # before litellm"]
    if spec is None:
        return lines
    llm = "ChatFlowModule" in dependency_closure([module])
    if llm:
        lines += ["from aiflows.backends.api_info import ApiInfo",
                  f"from flow_modules.{namespace}.ChatFlowModule import set_backend_factory, with_api_infos"]
    lines.append(f"from flow_modules.{namespace}.CoreFlowModule import AutoApproveInput, set_input_source")
    if spec.get("memory"):
        lines.append(f"from flow_modules.{namespace}.CoreFlowModule.memory import set_memory_files")
    lines.append("")
    if llm:
        lines += ["# every chat of the flow: OPENAI_API_KEY, and OPENAI_API_BASE for an OpenAI-compatible server",
                  'api = ApiInfo(backend_used="openai", api_key=os.environ["OPENAI_API_KEY"], '
                  'api_base=os.environ.get("OPENAI_API_BASE"))',
                  "set_backend_factory(with_api_infos([api]))  # before instantiating"]
    if spec.get("overrides"):
        lines += [rewrite(f"overrides = {_literal(spec['overrides'])}", namespace),
                  f"flow = {spec['cls']}.instantiate_from_default_config(**overrides)"]
    else:
        lines.append(f"flow = {spec['cls']}.instantiate_from_default_config()")
    if spec.get("memory"):
        lines.append('set_memory_files(flow, "memory")  # the plan, logs and code library of every boss of the tree')
    lines += ["set_input_source(AutoApproveInput())  # approves plans and code; leave it out to review them yourself",
              f"print(flow.call({_literal(spec['input'])}))"]
    return lines


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
    parts = ["---", "license: mit", "---", "", f"# {module}", "", about, "", "## How to use", ""]
    parts += ["```python"] + how_to_use(module, namespace, sync) + ["```", ""]
    parts += [
        "Import a module of this namespace before `aiflows.backends` or `litellm`: it points litellm at the tokenizer "
        "the CoreFlowModule carries, so nothing is downloaded, and litellm imports quietly, without its price-list "
        "request. Once a module has been imported on a machine, the other order works offline too: the tokenizer is "
        "copied where tiktoken looks for it (`TIKTOKEN_CACHE_DIR`, else `DATA_GYM_CACHE_DIR`, else "
        "`<tmp>/data-gym-cache`; `AIFLOWS_JARVIS_NO_TOKENIZER_SEED=1` turns the copy off).",
        "",
    ]
    if main_class and "ChatFlowModule" in dependency_closure([module]):
        # quick_load fills `api_infos: ???` keys, which a composite flow's default configuration does not have at
        # its top: the skeleton puts one at every chat of the tree.
        embeddings = "VectorStoreFlowModule" in dependency_closure([module])
        parts += [
            "Instead of `set_backend_factory`, aiflows' `quick_load` can fill the chats' `backend.api_infos: ???`"
            + (" (and the vector store's embeddings' `embedding.api_infos: ???`)" if embeddings else "")
            + ". A flow's default configuration has them only at each chat, deep in its tree, so build a "
            "configuration with one at every chat first (`chat_backends_skeleton`), fill it, and instantiate from it:",
            "",
            "```python",
            "from aiflows.utils.general_helpers import quick_load",
            f"from flow_modules.{namespace}.CoreFlowModule.config_tree import chat_backends_skeleton",
            "",
            f'cfg = chat_backends_skeleton("flow_modules.{namespace}.{module}.{main_class}'
            '.instantiate_from_default_config")',
            'cfg.pop("_target_")',
            "quick_load(cfg, [api])",
            f"flow = {main_class}.instantiate_from_default_config(**cfg)",
            "```",
            "",
            *([f"Or give every vector store built from then on its embeddings at once: `flow_modules.{namespace}"
               ".VectorStoreFlowModule.set_embeddings_factory(embeddings_with_api_infos([api]))`.", ""]
              if embeddings else []),
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
import time

from aiflows import flow_verse

HERE = os.path.dirname(os.path.realpath(__file__))
flow_verse.sync_dependencies([{{"url": "{namespace}/{module}", "revision": HERE}}])

from flow_modules.{namespace}.{module} import {cls}  # noqa: E402,F401  (first: the tokenizer is found offline)
import hydra  # noqa: E402
from aiflows.utils import logging  # noqa: E402
from aiflows.utils.general_helpers import read_yaml_file  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule import AutoApproveInput, set_input_source  # noqa: E402
from flow_modules.{namespace}.CoreFlowModule.memory import set_memory_files  # noqa: E402

logging.set_verbosity_warning()
demo = read_yaml_file(os.path.join(HERE, "demo.yaml"))
input_data, memory_dir, auto_approve = demo["input_data"], demo.get("memory_dir"), demo.get("auto_approve")
have_llm = os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_API_BASE")
if demo.get("replay") and ("--replay" in sys.argv or not have_llm):
    # the recorded run: every chat answers from the transcript, offline, into a new memory folder (it was recorded
    # from an empty one), plans and code approved as they were
    from flow_modules.{namespace}.ChatFlowModule import set_backend_factory
    from flow_modules.{namespace}.ChatFlowModule.transcripts import Transcript, replay_factory

    transcript = Transcript.load(os.path.join(HERE, demo["replay"]))
    set_backend_factory(replay_factory(transcript))
    input_data = {{**input_data, "goal": transcript.header["goal"]}}
    memory_dir = os.path.join(memory_dir or "memory", time.strftime("replay-%Y%m%d-%H%M%S"))
    auto_approve = True
    print(f"Replaying the recorded demo (no LLM): {{transcript.path}}; memory files in {{memory_dir}}")
elif demo.get("uses_llm"):
    from aiflows.backends.api_info import ApiInfo
    from flow_modules.{namespace}.ChatFlowModule import set_backend_factory, with_api_infos

    if not have_llm:
        sys.exit("Set OPENAI_API_KEY (or OPENAI_API_BASE for an OpenAI-compatible server) to run this demo.")
    key, base = os.environ.get("OPENAI_API_KEY"), os.environ.get("OPENAI_API_BASE")
    api_infos = [ApiInfo(backend_used="openai", api_key=key or "sk-no-key", api_base=base)]
    overrides = {{"model_name": os.environ["OPENAI_MODEL"]}} if os.environ.get("OPENAI_MODEL") else {{}}
    set_backend_factory(with_api_infos(api_infos, **overrides)){embeddings}
# the aiflows authors' demo.yaml format: `flow:` is instantiated by hydra
flow = hydra.utils.instantiate(demo["flow"], _recursive_=False, _convert_="partial")
if memory_dir:
    set_memory_files(flow, memory_dir)
if auto_approve or "--yes" in sys.argv:
    set_input_source(AutoApproveInput())


def close(node):
    """Shut down what the flow started (interpreter kernels), everywhere in its tree."""
    for sub in getattr(node, "subflows", {{}}).values():
        close(sub)
    if callable(getattr(node, "close", None)):
        node.close()


try:
    print(flow.call(input_data))
finally:  # every flow of the tree that holds something (an interpreter's kernel, a vector store) lets it go
    close(flow)
'''

# In run.py, for a module with a vector store: its embeddings come from the same server, with the same key.
_RUN_PY_EMBEDDINGS = '''

    from flow_modules.{namespace}.VectorStoreFlowModule import embeddings_with_api_infos, set_embeddings_factory

    set_embeddings_factory(embeddings_with_api_infos(api_infos, model_name=os.environ.get("OPENAI_EMBEDDING_MODEL")))'''

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
    flow = {"_target_": f"{SOURCE_PACKAGE}.{module}.{spec['cls']}.instantiate_from_default_config",
            **(spec.get("overrides") or {})}
    demo = {"flow": flow, "input_data": spec["input"]}
    if spec.get("memory"):
        demo["memory_dir"] = "memory"
    demo.update(uses_llm=bool(spec.get("llm")), auto_approve=False)
    header = f"# Run {spec['cls']} on its own: python run.py (in this folder). `flow:` is instantiated by hydra."
    if spec.get("llm"):
        header += "\n# The LLM: OPENAI_API_KEY, or OPENAI_API_BASE for an OpenAI-compatible server (and OPENAI_MODEL)."
        if "VectorStoreFlowModule" in dependency_closure([module]):
            header += ("\n# Embeddings: the same server and key, text-embedding-3-small unless OPENAI_EMBEDDING_MODEL "
                       "names another.")
    if spec.get("replay"):
        demo["replay"] = spec["replay"]
        header += (f"\n# Without them (or with --replay), run.py replays the recorded run {spec['replay']},\n# "
                   "offline, for the goal it was recorded with.")
    text = header + "\n" + rewrite(yaml.safe_dump(demo, sort_keys=False, width=120), namespace)
    llm_note = ("the LLM: OPENAI_API_KEY or OPENAI_API_BASE" if spec.get("llm")
                else "no LLM needed; it needs the network" if spec.get("network") else "no LLM needed")
    if spec.get("replay"):
        llm_note += ", else the recorded demo is replayed"
    run = _RUN_PY.format(cls=spec["cls"], module=module, namespace=namespace, llm_note=llm_note,
                         embeddings=_RUN_PY_EMBEDDINGS.format(namespace=namespace)
                         if "VectorStoreFlowModule" in dependency_closure([module]) else "")
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
    if direct_dependencies(module):
        shutil.copy2(SYNC_SOURCE, os.path.join(target, SYNC_FILE))
    for name, text in files.items():
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(target, STAGED_MARK), "w", encoding="utf-8") as f:
        f.write("Written by scripts/publish.py, which replaces this folder at its next staging into the same --out.\n"
                "Delete this file to keep publish.py from replacing the folder. It is never pushed.\n")
    return target


def add_digests(staged_namespace_dir: str, modules: List[str], namespace: str, revision: str, local: bool) -> None:
    """Rewrite the staged __init__.py of each of ``modules`` with the content digest of each dependency (the
    modules must all be staged in ``staged_namespace_dir``)."""
    for module in modules:
        if direct_dependencies(module):
            text = staged_init(module, namespace, revision, local,
                               digests=staged_digests(staged_namespace_dir, module))
            with open(os.path.join(staged_namespace_dir, module, "__init__.py"), "w", encoding="utf-8") as f:
                f.write(text)


def check_out_folders(out: str, namespace: str, modules: List[str]) -> None:
    """Raise PublishError unless every OUT/NAMESPACE/<module> that exists is a staging publish.py wrote (it has the
    STAGED_MARK file) and holds no `.git` (a clone of a hub repository, whose history a staging must never delete)."""
    refused = []
    for module in modules:
        target = os.path.join(out, namespace, module)
        if os.path.islink(target):
            refused.append(f"{target} is a symbolic link (to {os.readlink(target)}), not a folder publish.py wrote")
        elif os.path.isdir(os.path.join(target, ".git")):
            refused.append(f"{target} holds a git repository (.git), e.g. a clone of the hub repository: publish.py "
                           "never replaces it")
        elif os.path.isdir(target) and not os.path.isfile(os.path.join(target, STAGED_MARK)):
            refused.append(f"{target} was not written by publish.py (it has no {STAGED_MARK} file)")
        elif os.path.lexists(target) and not os.path.isdir(target):
            refused.append(f"{target} is a file, not a folder publish.py wrote")
    if refused:
        raise PublishError("--out would replace folders publish.py did not write; nothing was written:\n  " +
                           "\n  ".join(refused) + "\nMove them out of the way or choose another --out (a staging "
                           f"publish.py wrote has a {STAGED_MARK} file and is replaced at the next staging).")


def write_staging(modules: List[str], out: str, namespace: str, revision: str, local: bool) -> str:
    """Stage ``modules`` into OUT/NAMESPACE and return that folder. All of them are staged in a temporary folder
    beside it first and only then moved into place, so a failure while writing leaves the previous folders. A
    folder publish.py did not write is never replaced (check_out_folders)."""
    check_out_folders(out, namespace, modules)
    staged_dir = os.path.join(out, namespace)
    os.makedirs(staged_dir, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=".publish_", dir=staged_dir)  # same file system: the moves are renames
    try:
        for module in modules:
            stage_module(module, temporary, namespace, revision, local, local_dir=staged_dir)
        add_digests(os.path.join(temporary, namespace), modules, namespace, revision, local)
        for module in modules:
            target = os.path.join(staged_dir, module)
            if os.path.exists(target):  # a staging of ours (checked just above)
                shutil.rmtree(target)
            os.rename(os.path.join(temporary, namespace, module), target)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return staged_dir


# ~~~ Checking ~~~
# Runs first in every process that checks a staged module, so that the process sees what a separate aiflows project
# sees. `flow_modules` and everything under it resolve only from the project's own `flow_modules/` folder (where
# FlowVerse syncs, in the working directory): an installed copy of this repository is never consulted (an editable
# install's finder maps `aiflows_jarvis` to the source folder from any directory, and would hide staged code
# that still imports the source namespace). Connections other than loopback and Unix sockets are refused: the check
# is offline. `foreign_flow_modules` names what was loaded from elsewhere anyway.
ISOLATION = r'''
import importlib.machinery as _machinery
import os as _os
import socket as _socket
import sys as _sys

PROJECT = _os.path.realpath(_os.getcwd())


class _ProjectFlowModules:
    """Finds `flow_modules` in PROJECT only, and its submodules in their parent package's folders only;
    never this repository's `aiflows_jarvis`."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname == "aiflows_jarvis" or fullname.startswith("aiflows_jarvis."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (the source package is out of reach)",
                                      name=fullname)
        if fullname != "flow_modules" and not fullname.startswith("flow_modules."):
            return None
        spec = _machinery.PathFinder.find_spec(fullname, [PROJECT] if fullname == "flow_modules" else path)
        if spec is None:  # raise, not return None: the finders after this one (an editable install) get no say
            raise ModuleNotFoundError(f"No module named {fullname!r} in the project {PROJECT}", name=fullname)
        return spec


_sys.meta_path.insert(0, _ProjectFlowModules)
for _name in [n for n in _sys.modules if n.split(".")[0] in ("flow_modules", "aiflows_jarvis")]:
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
                if report[module] == "ok" and not (DEMOS.get(module, {}).get("llm")
                                                   or DEMOS.get(module, {}).get("network")):
                    report[module] = _run_demo(python, module_dir)
        say(f"{module}: {report[module] if report[module] == 'ok' else 'FAILED'} in a fresh virtual environment")
    return report


# ~~~ Pushing ~~~
HUB_OWN_FILES = {".gitattributes"}  # the hub writes it into every new repository: never deleted
TOKEN_HELP = ("run `huggingface-cli login` (it stores a token) or set HF_TOKEN to a token with write access "
              "(https://huggingface.co/settings/tokens)")


def push_order(modules: Iterable[str]) -> List[str]:
    """``modules`` ordered so that each comes after every module of the list it depends on (its `dependencies`, as
    its staged __init__.py declares them); alphabetical where the order is free."""
    todo = {m: direct_dependencies(m) for m in modules}
    order: List[str] = []
    while todo:
        ready = sorted(m for m, deps in todo.items() if not deps & set(todo))
        if not ready:
            raise PublishError(f"these modules depend on each other in a cycle: {', '.join(sorted(todo))}")
        order.append(ready[0])
        del todo[ready[0]]
    return order


def find_token() -> str:
    """The Hugging Face token: HF_TOKEN, else the one `huggingface-cli login` stored."""
    from huggingface_hub import HfFolder

    token = HfFolder.get_token()
    if not token:
        raise PublishError(f"pushing needs a Hugging Face token with write access: {TOKEN_HELP}")
    return token


def describe_hub_error(error: BaseException, doing: str) -> str:
    """One paragraph saying what a failed hub request means and what to do (never a traceback). ``doing``: what was
    asked, e.g. "uploading to bob/CoreFlowModule"."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    first_line = (str(error).strip().splitlines() or [""])[0]
    if isinstance(error, KeyboardInterrupt):
        return f"{doing}: interrupted (Ctrl+C); it may or may not have reached the hub"
    if status == 401:
        return f"{doing}: HTTP 401, the token was refused (invalid, expired or revoked): {TOKEN_HELP}"
    if status == 403:
        return (f"{doing}: HTTP 403 Forbidden, the token may not write there. Pushing needs a token with write access "
                f"to the namespace (a read token, or a fine-grained one without write permission on it, cannot "
                f"push): {TOKEN_HELP}")
    if status is not None:
        return f"{doing}: HTTP {status}: {getattr(error, 'server_message', None) or first_line}"
    import requests

    if isinstance(error, (requests.ConnectionError, requests.Timeout)):
        return (f"{doing}: the Hugging Face Hub could not be reached ({first_line}); check the network (and "
                "HF_ENDPOINT if set), then retry")
    return f"{doing}: {type(error).__name__}" + (f": {first_line}" if first_line else "")


def check_hub_access(api, token: str, namespace: str) -> str:
    """Check that ``token`` is valid and may create repositories in ``namespace`` (its user, or one of the user's
    organisations where the user has more than read access); returns the user's name. Raises PublishError."""
    try:
        me = api.whoami(token=token)
    except Exception as error:  # noqa: BLE001 - any failure becomes a message
        raise PublishError(describe_hub_error(error, "checking the token with the Hugging Face Hub")) from None
    user = me.get("name")
    if ((me.get("auth") or {}).get("accessToken") or {}).get("role") == "read":
        raise PublishError(f"the token of {user} is read-only; pushing needs one with write access: {TOKEN_HELP}")
    orgs = {org.get("name"): org.get("roleInOrg") for org in me.get("orgs") or []}
    if namespace != user and namespace not in orgs:
        yours = ", ".join([str(user)] + sorted(map(str, orgs)))
        raise PublishError(f"--namespace {namespace}: the token is {user}'s, who can push to {yours} only. Pass "
                           f"--namespace {user} (or one of those organisations), or log in as an account that can "
                           f"write to {namespace}: {TOKEN_HELP}")
    if orgs.get(namespace) == "read":
        raise PublishError(f"--namespace {namespace}: {user} has only read access to the organisation {namespace}. "
                           f"Ask one of its admins for write access, or pass --namespace {user}")
    return user


class Remote:
    """A repository as it stands on the hub at the branch pushed to, read before anything is pushed. (Plain classes
    here, not dataclasses: this script is also loaded without an entry in sys.modules, which dataclasses need.)"""

    def __init__(self, exists: bool = False, private: Optional[bool] = None, head: Optional[str] = None,
                 files: Optional[Dict[str, object]] = None):
        self.exists, self.private = exists, private
        self.head = head  # the branch's commit; None if the repository or the branch does not exist yet
        self.files = files or {}  # path -> RepoSibling, at the branch (or at main, which a missing branch starts from)


def read_remote(api, repo_id: str, revision: str, token: str) -> Remote:
    """What the hub holds for ``repo_id`` at ``revision`` (read requests only). Raises PublishError."""
    from huggingface_hub.utils import RepositoryNotFoundError, RevisionNotFoundError

    try:
        try:
            info = api.repo_info(repo_id, revision=revision, files_metadata=True, token=token)
            head = info.sha
        except RevisionNotFoundError:  # the branch will be created from main
            info = api.repo_info(repo_id, files_metadata=True, token=token)
            head = None
    except RepositoryNotFoundError:
        return Remote()
    except Exception as error:  # noqa: BLE001 - any failure becomes a message
        raise PublishError(describe_hub_error(error, f"reading {repo_id} on the hub") +
                           "\nNothing was pushed.") from None
    return Remote(True, info.private, head, {sibling.rfilename: sibling for sibling in info.siblings or []})


def same_on_hub(sibling, data: bytes) -> bool:
    """Whether the hub's file (a RepoSibling read with files_metadata) holds exactly ``data``: its LFS sha256, or
    its git blob id."""
    if sibling is None:
        return False
    lfs = getattr(sibling, "lfs", None)
    if lfs:
        return hashlib.sha256(data).hexdigest() == lfs.get("sha256")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == getattr(sibling, "blob_id", None)


class PushResult:
    """What push did."""

    def __init__(self, commits: Dict[str, str]):
        self.status: Dict[str, str] = {}  # module -> "pushed", "unchanged" or "would push", in push order
        self.commits = dict(commits)  # module -> its repository's commit at the branch
        self.failed: Optional[Tuple[str, str]] = None  # (module, what went wrong)
        self.not_pushed: List[str] = []  # the failed module and every one after it
        self.dependents_on_hub: List[str] = []  # modules on the hub, not pushed now, that depend on some pushed now


def push(staged_dir: str, namespace: str, modules: List[str], revision: str, token: str, api, private: bool = False,
         pin: bool = True, dry_run: bool = False, say: Callable[[str], None] = print) -> PushResult:
    """Push each staged module to its repository NAMESPACE/<Module> on the hub (branch ``revision``), each after the
    modules it depends on, stopping at the first failure.

    Each repository ends up holding exactly the staged folder: changed files are uploaded and files the staging no
    longer has are deleted (the hub's .gitattributes excepted), in one commit; a repository already holding exactly
    the staging gets no commit. New repositories are created private with ``private``. With ``pin``, the
    `dependencies` of a module's __init__.py name each dependency at the commit its repository has just been given
    (or, for a dependency not among ``modules``, its commit on the hub now), and the staged __init__.py is rewritten
    so. With ``dry_run``, only read requests are made and what would be done is said.

    Everything is read from the hub before anything is written: a dependency missing from the hub, or a read that
    fails, raises PublishError with nothing pushed. A failed write is returned in the result, never raised."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    order = push_order(modules)
    outside = sorted({d for m in order for d in direct_dependencies(m)} - set(order))
    remotes = {m: read_remote(api, f"{namespace}/{m}", revision, token) for m in outside + order}
    missing = [d for d in outside if remotes[d].head is None]
    if missing:
        raise PublishError(f"the modules to push depend on {', '.join(missing)}, not on the hub at {revision} under "
                           f"{namespace}: add {','.join(missing)} to --only. Nothing was pushed.")
    result = PushResult({d: remotes[d].head for d in outside})
    # modules not pushed now that depend on some that are: those on the hub keep pinning the commits they were pushed
    # with, which the summary warns about
    dependents = [m for m in module_names() if m not in order and m not in outside
                  and set(order) & set(dependency_closure([m]))]
    result.dependents_on_hub = [m for m in dependents if read_remote(api, f"{namespace}/{m}", revision, token).head]
    for index, module in enumerate(order):
        repo_id, remote, doing = f"{namespace}/{module}", remotes[module], f"reading the staged {module}"
        try:
            folder = os.path.join(staged_dir, module)
            files = {}
            for rel in folder_files(folder):
                with open(os.path.join(folder, rel), "rb") as f:
                    files[rel] = f.read()
            deps = sorted(direct_dependencies(module))
            if pin and deps:
                pins = {d: result.commits[d] for d in deps}
                files["__init__.py"] = staged_init(module, namespace, revision, False, pins,
                                                   staged_digests(staged_dir, module)).encode("utf-8")
                if not dry_run:  # the staging shows what the hub holds
                    with open(os.path.join(folder, "__init__.py"), "wb") as f:
                        f.write(files["__init__.py"])
            upload = [rel for rel, data in files.items() if not same_on_hub(remote.files.get(rel), data)]
            delete = sorted(rel for rel in remote.files if rel not in files and rel not in HUB_OWN_FILES)
            if remote.head and not upload and not delete:
                result.status[module], result.commits[module] = "unchanged", remote.head
                say(f"{repo_id}: unchanged, already at commit {remote.head}")
                continue
            if dry_run:
                where = ("new repository, " + ("private" if private else "public") if not remote.exists else
                         "exists, " + ("private" if remote.private else "public") +
                         (f", branch {revision} to be created from main" if remote.head is None else ""))
                say(f"{repo_id} ({where}): would upload {len(upload)} of {len(files)} files, delete {len(delete)}")
                for line in [f"    + {rel}" for rel in upload] + [f"    - {rel} (deleted upstream)" for rel in delete]:
                    say(line)
                if pin and deps:
                    say("    dependencies pinned: " + ", ".join(
                        f"{d} at the commit this push makes" if result.status.get(d) == "would push" else
                        f"{d} at {result.commits[d]}" for d in deps))
                result.status[module], result.commits[module] = "would push", f"<new commit of {repo_id}>"
                continue
            if not remote.exists:
                doing = f"creating the repository {repo_id}"
                api.create_repo(repo_id, private=private, exist_ok=True, token=token)
            if remote.head is None and revision != "main":
                doing = f"creating the branch {revision} of {repo_id}"
                api.create_branch(repo_id, branch=revision, exist_ok=True, token=token)
            if upload or delete:
                doing = f"uploading to {repo_id}"
                operations = ([CommitOperationDelete(path_in_repo=rel) for rel in delete] +
                              [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=files[rel]) for rel in upload])
                commit = api.create_commit(repo_id, operations, commit_message=f"Publish {module}",
                                           revision=revision, token=token).oid
            else:  # a new branch that holds exactly what main holds
                doing = f"reading the branch {revision} of {repo_id}"
                commit = api.repo_info(repo_id, revision=revision, token=token).sha
        except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - the summary says what, the rest is kept
            result.failed, result.not_pushed = (module, describe_hub_error(error, doing)), order[index:]
            return result
        result.status[module], result.commits[module] = "pushed", commit
        say(f"{repo_id}: pushed commit {commit} ({len(upload)} files uploaded, {len(delete)} deleted upstream)")
    return result


def push_summary(result: PushResult, namespace: str, revision: str, private: bool, retry: str) -> str:
    """What was and was not pushed, each repository's commit, and the command that pushes the rest."""
    dry = "would push" in result.status.values()
    lines = [f"{'Dry run' if dry else 'Push'} summary (namespace {namespace}, branch {revision}):"]
    for module, status in result.status.items():
        commit = "" if status == "would push" else f" at commit {result.commits[module]}"
        lines.append(f"  {status:<11} {namespace}/{module}{commit}")
    if result.failed:
        module, why = result.failed
        lines.append(f"  FAILED      {namespace}/{module}: {why}")
        rest = result.not_pushed[1:]
        if rest:
            lines.append(f"  not pushed  {', '.join(f'{namespace}/{m}' for m in rest)} (stopped at the failure: "
                         f"nothing that depends on {module} was pushed)")
        lines += ["What was pushed stays on the hub. Once the cause is fixed, push the rest (the modules already "
                  "pushed are not pushed again; they are pinned at their commit on the hub) with:", f"  {retry}"]
    elif dry:
        lines.append("Nothing was created, uploaded or deleted (a dry run makes read requests only); without "
                     "--dry-run, the repositories above are pushed" + (" (new ones private)." if private else "."))
    changed = {m for m, status in result.status.items() if status != "unchanged"}
    left = [m for m in result.dependents_on_hub if changed & set(dependency_closure([m]))]
    if left:
        one = len(left) == 1
        lines.append(f"On the hub but not part of this push, {', '.join(f'{namespace}/{m}' for m in left)} "
                     f"{'depends' if one else 'depend'} on modules it changes and still {'pins its' if one else 'pin'}"
                     f"{'' if one else ' their'} previous commits: a project using "
                     f"{'it' if one else 'one of them'} with a module pushed now would sync two revisions of the same "
                     f"module. Push {'it' if one else 'them'} too (add to --modules, or leave --modules out).")
    return "\n".join(lines)


def retry_command(args: argparse.Namespace, out: str, rest: List[str]) -> str:
    """The command line that pushes ``rest`` with the options of this run."""
    script = os.path.relpath(os.path.abspath(__file__))
    parts = [os.path.normpath(sys.executable), script if not script.startswith("..") else os.path.abspath(__file__),
             "--namespace", args.namespace, "--out", out]
    if args.revision != "main":
        parts += ["--revision", args.revision]
    if args.modules:
        parts += ["--modules", args.modules]
    parts += ["--private"] * args.private + ["--no-pin"] * args.no_pin + ["--push", "--only", ",".join(rest)]
    return " ".join(shlex.quote(part) for part in parts)


# ~~~ Command line ~~~
def main(argv: Optional[List[str]] = None, api=None) -> int:
    """The command line. ``api`` stands in for huggingface_hub.HfApi (by default one is made with the token)."""
    parser = argparse.ArgumentParser(prog="publish.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespace", required=True, metavar="NAME",
                        help="your Hugging Face user or organisation name, also the Python package flow_modules.NAME: "
                             "ASCII letters, digits and '_', starting with a letter")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the folder the modules are staged in (DIR/NAME/<Module>); its symlinks are resolved and "
                             "the real paths printed: sync --local modules from those. A DIR/NAME/<Module> that "
                             f"publish.py did not write (no {STAGED_MARK} file) or that holds a .git is never "
                             "replaced")
    parser.add_argument("--modules", metavar="A,B",
                        help="comma-separated module names (default: all); their dependencies come too")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--revision", default="main", metavar="REV",
                       help="the branch pushed to (default: main), which staged dependencies point at (a push pins "
                            "them at commits, unless --no-pin); letters, digits and '_' only, as FlowVerse requires "
                            "of a remote revision")
    where.add_argument("--local", action="store_true",
                       help="dependencies point at the staged sibling folders, for use offline on this machine (not "
                            "with --push)")
    parser.add_argument("--push", action="store_true",
                        help="push each module to the hub repository NAME/<Module>, in dependency order (token: "
                             "HF_TOKEN or `huggingface-cli login`)")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what --push would create, upload and delete upstream, and push nothing (only read "
                             "requests to the hub: the token check and each repository's file list)")
    parser.add_argument("--private", action="store_true", help="repositories --push creates are private")
    parser.add_argument("--only", metavar="A,B",
                        help="push only these of the staged modules (the retry command a failed push prints uses it); "
                             "their dependencies must already be on the hub")
    parser.add_argument("--no-pin", action="store_true",
                        help="dependencies name the branch (--revision), not the commit this push gives them")
    parser.add_argument("--verify-venv", action="store_true",
                        help="also check each module in a fresh venv with only aiflows 0.1.7 + its "
                             "pip_requirements.txt (pip must reach a package index; dependencies come from the "
                             "local staging, not the hub)")
    args = parser.parse_args(argv)
    pushing = args.push or args.dry_run
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
        if args.local and pushing:
            raise PublishError("--local stages modules whose __init__.py sync their dependencies from this "
                               "machine's folders: they cannot be pushed. Push without --local (dependencies "
                               "NAME/<Module> at --revision)")
        if not pushing and (args.private or args.only or args.no_pin):
            raise PublishError("--private, --only and --no-pin are options of --push (or --dry-run)")
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
        only = [m.strip() for m in args.only.split(",")] if args.only else modules
        if set(only) - set(modules):
            raise PublishError(f"--only {args.only}: not among the modules staged ({', '.join(modules)}): "
                               f"{', '.join(sorted(set(only) - set(modules)))}; add them to --modules")
        check_out_folders(out, args.namespace, modules)  # before the long check, and again when writing
        token = None
        if pushing:  # the token and the namespace before anything is staged
            token = find_token()
            if api is None:
                from huggingface_hub import HfApi

                api = HfApi(token=token)
            user = check_hub_access(api, token, args.namespace)
            print(f"the token is {user}'s and may push to {args.namespace}")

        with tempfile.TemporaryDirectory(prefix="publish_stage_") as scratch:
            # The code as it will be published, with dependencies synced from the staged folders (offline, whatever
            # --revision says); real paths, for the same reason as --out's.
            checked = os.path.join(os.path.realpath(scratch), args.namespace)
            for module in modules:
                stage_module(module, os.path.dirname(checked), args.namespace, args.revision, local=True)
            add_digests(checked, modules, args.namespace, args.revision, local=True)
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
        if pushing:
            result = push(staged_dir, args.namespace, [m for m in modules if m in only], args.revision, token, api,
                          private=args.private, pin=not args.no_pin, dry_run=args.dry_run)
            retry = retry_command(args, out, result.not_pushed)
            print(push_summary(result, args.namespace, args.revision, args.private, retry))
            return 1 if result.failed else 0
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
