"""The source modules as publish.py reads them: where they are, their files, flow classes, dependencies and
requirements, and the rewrite of this repository's import names into a hub namespace's."""

from __future__ import annotations

import ast
import os
import re
from typing import Iterable, List, Set

# scripts/publishing/source.py -> the repository
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES_DIR = os.path.join(ROOT, "flow_modules", "aiflows_jarvis")
SOURCE_PACKAGE = "aiflows_jarvis"  # this repository's package: staged code imports flow_modules.NAME instead
SOURCE_NAMESPACE = "aiflows"  # the namespace of the source modules' `dependencies` urls
# Every staged module with dependencies gets a copy of this file, which its __init__.py syncs them with
SYNC_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dependency_sync.py")
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


class PublishError(Exception):
    """What went wrong, for the user."""


def module_names() -> List[str]:
    return sorted(
        d
        for d in os.listdir(MODULES_DIR)
        if d.endswith("Module") and os.path.isfile(os.path.join(MODULES_DIR, d, "__init__.py"))
    )


def folder_files(base: str) -> List[str]:
    """Paths (relative to ``base``, '/'-separated) of the files published from a module folder: no caches, synced
    modules, memory, .git or staging mark."""
    out = []
    for root, dirs, files in os.walk(base):
        # (a Python package named like a skipped folder is code: CoreFlowModule/memory/)
        dirs[:] = sorted(d for d in dirs if d not in SKIP or os.path.isfile(os.path.join(root, d, "__init__.py")))
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
    return sorted(
        f[:-5] for f in os.listdir(base) if f.endswith(".yaml") and os.path.isfile(os.path.join(base, f[:-5] + ".py"))
    )


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


def rewrite(text: str, namespace: str) -> str:
    return re.sub(rf"\b{SOURCE_PACKAGE}\.", f"flow_modules.{namespace}.", text).replace(
        f'"url": "{SOURCE_NAMESPACE}/', f'"url": "{namespace}/'
    )
