"""The sources under flow_modules/, one import name for them (docs/layout.md)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_sources_sit_under_flow_modules_which_is_no_package():
    assert os.path.isfile(os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "__init__.py"))
    assert not os.path.exists(os.path.join(ROOT, "flow_modules", "__init__.py")), (
        "flow_modules/__init__.py would make flow_modules.aiflows_jarvis a second name for the package"
    )


def test_a_second_import_name_for_the_package_is_refused_with_what_to_do():
    done = subprocess.run(
        [sys.executable, "-c", "import flow_modules.aiflows_jarvis"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert "ImportError: aiflows_jarvis was imported as 'flow_modules.aiflows_jarvis'" in done.stderr
    assert "Import it as aiflows_jarvis" in done.stderr


def test_no_test_file_imports_another_and_helpers_holds_no_test():
    """What several test files (and the fault suite) share is in tests/helpers.py, conftest.py or fakes.py: a test
    file imported by another runs its module code twice and hides where a helper lives."""
    import ast
    import glob

    importing = []
    files = glob.glob(os.path.join(ROOT, "tests", "*.py")) + glob.glob(
        os.path.join(ROOT, "benchmarks", "**", "*.py"), recursive=True
    )
    for path in files:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            importing += [f"{os.path.relpath(path, ROOT)} imports {n}" for n in names if n.startswith("test_")]
    assert not importing, importing
    with open(os.path.join(ROOT, "tests", "helpers.py"), encoding="utf-8") as f:
        helpers = ast.parse(f.read())
    assert not [n.name for n in helpers.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
