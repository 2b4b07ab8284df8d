"""Write each module's `dependencies` list (its `__init__.py`) from what its code and configurations use.

    python scripts/update_dependencies.py [--check]

A module depends on every other module its `.py` and `.yaml` files (those of its sub-packages too, e.g.
CoreFlowModule/flows/) name as `aiflows_jarvis.<Name>Module` (imports, `_target_`s): what publish.py rewrites to the
hub namespace, and so what FlowVerse must sync with it. The list puts
CoreFlowModule first (the runtime the others are built on), then the rest in alphabetical order; a module without
the assignment gets one after its docstring. --check exits with 1 and names the modules whose list is out of date,
without writing.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
from typing import Iterable, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = "CoreFlowModule"


def _publish():
    spec = importlib.util.spec_from_file_location("publish", os.path.join(HERE, "publish.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dependencies_text(modules: Iterable[str], namespace: str) -> str:
    """The `dependencies = [...]` assignment naming ``modules`` (CoreFlowModule first, then alphabetical)."""
    ordered = sorted(modules, key=lambda name: (name != CORE, name))
    if not ordered:
        return "dependencies = []\n"
    lines = [f'    {{"url": "{namespace}/{name}", "revision": "main"}},\n' for name in ordered]
    return "dependencies = [\n" + "".join(lines) + "]\n"


def with_dependencies(source: str, text: str) -> str:
    """``source`` (an `__init__.py`) with its `dependencies` assignment replaced by ``text``, or ``text`` added after
    the module's docstring (and `from __future__` imports) when it has none."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "dependencies" for t in node.targets):
            return "".join(lines[: node.lineno - 1]) + text + "".join(lines[node.end_lineno :])
    after = 0
    for index, node in enumerate(tree.body):
        docstring = (
            index == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        if not (docstring or isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            break
        after = node.end_lineno
    return "".join(lines[:after]) + text + "".join(lines[after:])


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only say which modules' lists are out of date")
    args = parser.parse_args(argv)
    publish = _publish()
    stale = []
    for module in publish.module_names():
        path = os.path.join(publish.MODULES_DIR, module, "__init__.py")
        with open(path, encoding="utf-8") as f:
            current = f.read()
        text = with_dependencies(
            current, dependencies_text(publish.direct_dependencies(module), publish.SOURCE_NAMESPACE)
        )
        if text != current:
            stale.append(module)
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    if args.check and stale:
        print("out of date (run python scripts/update_dependencies.py): " + ", ".join(stale))
        return 1
    print(f"{'updated' if stale else 'up to date'}: {', '.join(stale) or 'every module'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
