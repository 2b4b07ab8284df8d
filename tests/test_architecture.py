"""The package's structure, read from its source: the doors other modules import Core and the code library through,
no import cycle (imports inside functions included), no private name imported from another file.

Tests may reach inside a module (to patch one of its functions, or test one file alone); the package, the scripts
and the benchmarks may not.
"""

import ast
import os
import sys
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "aiflows_jarvis"
PACKAGE_DIR = os.path.join(ROOT, "flow_modules", PACKAGE)
# The modules others import only through their __init__ (their "door").
DOORS = ("CoreFlowModule", "CodeLibraryFlowModule")


def _python_files(*folders: str) -> Iterator[str]:
    for folder in folders:
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith(".") and "egg-info" not in d)
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


def _module_of(path: str) -> Tuple[Optional[str], bool]:
    """(dotted name, is a package) of a file of the package; (None, False) for a file outside it."""
    rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))
    if rel.startswith(".."):
        return None, False
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


MODULES: Dict[str, str] = {}
for _path in _python_files(os.path.relpath(PACKAGE_DIR, ROOT)):
    MODULES[_module_of(_path)[0]] = _path


def _type_checking_only(tree: ast.AST) -> Set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (never executed: they make no cycle)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    return skipped


def imports_of(path: str) -> List[Tuple[ast.AST, str, List[str]]]:
    """Every import of a file, at any depth: (node, the absolute module imported from, the names imported)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    current, is_package = _module_of(path)
    skipped = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((node, alias.name, []))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if current is None:  # a script's own sibling module
                    found.append((node, "." * node.level + (node.module or ""), [a.name for a in node.names]))
                    continue
                base = current.split(".") if is_package else current.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node, module, [alias.name for alias in node.names]))
    return found


def _targets(module: str, names: List[str]) -> List[str]:
    """The package's modules an import executes for what it uses: `from p import m` (m a submodule) is m, not p."""
    if not names:
        parts = module.split(".")
        while parts and ".".join(parts) not in MODULES:
            parts.pop()
        return [".".join(parts)] if parts else []
    out = []
    for name in names:
        if f"{module}.{name}" in MODULES:
            out.append(f"{module}.{name}")
        elif module in MODULES:
            out.append(module)
    return out


def import_graph() -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {module: set() for module in MODULES}
    for module, path in MODULES.items():
        for _, target, names in imports_of(path):
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                graph[module] |= {t for t in _targets(target, names) if t != module}
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _outside_files() -> Iterator[str]:
    """The files that are not tests: the package, the scripts, the benchmarks, the launchers."""
    yield from _python_files("flow_modules", "scripts", "benchmarks")
    yield from (os.path.join(ROOT, f) for f in sorted(os.listdir(ROOT)) if f.endswith(".py"))


def test_the_graph_reader_finds_a_cycle_and_an_import_inside_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    # the library's index is read inside a function of MemoryReading's retrieval: that import counts
    edges = import_graph()[f"{PACKAGE}.MemoryReadingFlowModule.retrieval"]
    assert f"{PACKAGE}.MemoryReadingFlowModule.search_index" in edges


def test_no_import_cycle_in_the_package():
    found = cycles(import_graph())
    assert not found, "import cycles (imports inside functions included):\n" + "\n".join(map(str, found))


@pytest.mark.parametrize("door", DOORS)
def test_other_modules_import_core_and_the_code_library_through_their_door(door):
    package = f"{PACKAGE}.{door}"
    wrong = []
    for path in _outside_files():
        current, _ = _module_of(path)
        if current is not None and (current == package or current.startswith(package + ".")):
            continue
        for node, module, names in imports_of(path):
            inside = [t for t in _targets(module, names) if t.startswith(package + ".")]
            if inside or module.startswith(package + "."):
                wrong.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} imports {module}")
    assert not wrong, f"import {door}'s names from {package} itself:\n" + "\n".join(wrong)


def test_inside_a_package_modules_import_their_siblings_not_their_own_door():
    wrong = []
    for module, path in MODULES.items():
        top = ".".join(module.split(".")[:2])
        for node, target, names in imports_of(path):
            if target == top and module != top and any(t == top for t in _targets(target, names)):
                wrong.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} imports its own package's door {top}")
    assert not wrong, "\n".join(wrong)


def test_no_private_name_is_imported_from_another_file():
    wrong = []
    for path in _outside_files():
        for node, module, names in imports_of(path):
            if not isinstance(node, ast.ImportFrom) or module == "__future__":
                continue
            ours = module.startswith(PACKAGE) or node.level or module.split(".")[0] in {"scripts", "benchmarks"}
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if ours and private:
                wrong.append(
                    f"{os.path.relpath(path, ROOT)}:{node.lineno} imports {', '.join(private)} from {module or '.'}"
                )
    assert not wrong, "private names imported across files (make them public, or keep them in one file):\n" + "\n".join(
        wrong
    )


def test_the_doors_export_what_they_list():
    import importlib

    for door in DOORS:
        module = importlib.import_module(f"{PACKAGE}.{door}")
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert not missing, f"{door}.__all__ lists names it does not have: {missing}"
        assert len(set(module.__all__)) == len(module.__all__)


def _calls_of_current_run() -> List[str]:
    found = []
    for path in _python_files(os.path.relpath(PACKAGE_DIR, ROOT)):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        found += [
            f"{os.path.relpath(path, ROOT)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "current_run"
        ]
    return found


def test_the_run_is_read_in_few_places():
    """Flows read their run through ``run_context``, the console and the budget through their accessors: the
    ambient read stays in a handful of places."""
    calls = _calls_of_current_run()
    assert 0 < len(calls) <= 25, f"{len(calls)} calls of current_run():\n" + "\n".join(calls)


def test_nothing_in_the_package_changes_a_run_once_it_is_entered():
    """A run is built with its settings (RunContext(...)); only the deprecated set_* aliases change one."""
    import inspect

    from aiflows_jarvis.CoreFlowModule import RunContext

    settings = set(inspect.signature(RunContext.__init__).parameters) - {"self"}  # what a run is built with
    assert {"input_source", "console", "backend_factory", "budget", "memory_dir"} <= settings
    wrong = []
    for path in _python_files(os.path.relpath(PACKAGE_DIR, ROOT)):
        if path.endswith(os.path.join("run", "deprecated.py")) or path.endswith(os.path.join("run", "context.py")):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        deprecated = {
            id(n)
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef) and (ast.get_docstring(fn) or "").startswith("Deprecated")
            for n in ast.walk(fn)
        }
        for node in ast.walk(tree):
            if id(node) in deprecated:
                continue
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                else []
            )
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr in settings
                    and "run" in ast.unparse(target.value).lower()
                ):
                    wrong.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {ast.unparse(target)} = ...")
    assert not wrong, "build the RunContext with it instead:\n" + "\n".join(wrong)


def test_the_readme_teaches_no_deprecated_setter():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    import re

    assert not re.findall(r"\bset_\w+\(", readme), "the README configures a run with RunContext(...), no setter"


if __name__ == "__main__":  # python tests/test_architecture.py: the cycles, for a look
    for component in cycles(import_graph()):
        print(component)
    sys.exit(0)
