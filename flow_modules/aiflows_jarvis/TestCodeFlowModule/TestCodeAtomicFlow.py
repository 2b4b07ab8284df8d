from __future__ import annotations

import ast
import os
import shlex
import sys
import tempfile
from typing import Any, Dict, List, Tuple

from aiflows_jarvis.CodeLibraryFlowModule import (
    bound_names_of,
    ensure_library,
    load_index,
    split_future_imports,
    used_names,
)
from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow, MemoryFileError, get_console, memory_path
from aiflows_jarvis.InterpreterFlowModule.executor import library_loader_code
from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter

PASSED_MARK = "__JARVIS_TESTS_PASSED__"
IMPORTS_MARK = "__JARVIS_IMPORTS_NOT_FOUND__"
OPTIONAL_MARK = "__JARVIS_OPTIONAL_IMPORTS_NOT_FOUND__"

_SCRIPT = """\
{futures}
import importlib.util, sys
sys.path.insert(0, {library_dir!r})
_missing = [name for name in {modules!r} if importlib.util.find_spec(name) is None]
if _missing:
    print({imports_mark!r}, ", ".join(_missing))
    sys.exit(3)
_optional = [name for name in {optional!r} if importlib.util.find_spec(name) is None]
if _optional:
    print({optional_mark!r}, ", ".join(_optional))
{library_loader}
{library_import}
# ~~~ the code under test, as in the library: its `if __name__ == "__main__":` blocks do not run ~~~
__name__ = "library"
{code}
__name__ = "__main__"

# ~~~ the tests ~~~
{tests}

print({passed_mark!r})
"""

# Exception names whose handler makes the imports of a `try` body optional (the code has a fallback for them).
_IMPORT_ERROR_NAMES = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _handles_import_errors(handler: ast.ExceptHandler) -> bool:
    """True if an `except` clause catches a failed import (bare `except:`, ImportError, Exception, ...) and falls
    back on something: a handler that ends by raising (`raise ImportError("install numpy")`) is no fallback."""
    if handler.body and isinstance(handler.body[-1], ast.Raise):
        return False
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    # `except ImportError`, `except builtins.ImportError`: the last part of the name is what matters
    return any((t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)) in _IMPORT_ERROR_NAMES for t in types)


def imported_modules(tree: ast.AST) -> Tuple[List[str], List[str]]:
    """Top-level names of the modules a piece of code imports, anywhere in it (function bodies included): the
    required ones, and the optional ones (imported only in the body of a `try` whose handlers catch ImportError,
    ModuleNotFoundError, Exception or everything: the code has a fallback). A module imported both ways is required.
    """
    required, optional = set(), set()

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            guarded = False  # a function's body runs when it is called, not inside the `try` that defines it
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            else:
                names = [node.module.split(".")[0]] if node.level == 0 and node.module else []
            (optional if guarded else required).update(names)
            return
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            body_guarded = guarded or any(_handles_import_errors(h) for h in node.handlers)
            for child in node.body:
                visit(child, body_guarded)
            for child in node.handlers + node.orelse + node.finalbody:  # the fallbacks are not guarded by it
                visit(child, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return sorted(required), sorted(optional - required)


class TestCodeAtomicFlow(LeanAtomicFlow):
    """Checks code for the library: it compiles, its imports resolve, and the user's tests (if any) pass.

    Every import is checked, in function bodies too (that is where library functions import what they need); one
    in a `try` whose handlers catch ImportError (or a parent of it) has a fallback, so a missing module is only
    mentioned. The code runs after `from library import *` in a separate Python process, in a temporary folder, with
    a timeout, bounded output and no API keys, so a test can neither change the interactive session nor leave files
    in the workspace.

    *Configuration Parameters*:
    - `timeout` (float): seconds the tests may run.
    - `max_output_chars` (int): bound of the output shown.
    - `memory_files` (dict, optional): must hold `code_library` if the input has no `memory_files`.

    *Input Interface*:
    - `code` (str): the code to test.
    - `proposed_tests` (str, optional): tests the controller proposed (asserts calling the code).
    - `user_tests` (str, optional): tests the user typed; they run after the proposed ones.
    - `tests` (str, optional): tests given directly (when the flow is used on its own). With no tests at all, only
      compiling and imports are checked.
    - `memory_files` (dict): `code_library` is the library file.

    *Output Interface*:
    - `result` (str): what was checked and what happened.
    - `passed` (bool): everything checked passed.
    """

    __test__ = False  # a flow, not a pytest test class

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        code = str(input_data.get("code") or "").strip()
        given = {
            who: str(input_data.get(key) or "").strip()
            for who, key in (("the proposed", "proposed_tests"), ("the user's", "user_tests"), ("the", "tests"))
        }
        given = {who: text for who, text in given.items() if text}
        tests = "\n".join(given.values())
        if not code:
            return {"result": "There is no code to test yet: call write_code first.", "passed": False}
        try:
            tree = ast.parse(code)
            if tests:
                ast.parse(tests)
        except SyntaxError as error:
            which = "the tests" if tests and error.text and error.text.strip() in tests else "the code"
            return {"result": f"Syntax error in {which}, line {error.lineno}: {error.msg}", "passed": False}

        try:
            package = ensure_library(memory_path(self, input_data, "code_library"))
        except MemoryFileError as error:  # a library.py that does not compile cannot be moved into the package
            return {"result": f"The code cannot be tested with the library: {error}", "passed": False}
        library_dir, module = os.path.dirname(package), os.path.basename(package)
        library_import = self._library_import(package, module, tree, tests)
        futures, code_body = split_future_imports(code)
        required, optional = imported_modules(tree)
        script = _SCRIPT.format(
            futures="\n".join(futures),
            library_dir=library_dir,
            modules=required,
            imports_mark=IMPORTS_MARK,
            optional=optional,
            optional_mark=OPTIONAL_MARK,
            library_import=library_import,
            code=code_body,
            tests=tests or "pass",
            library_loader=library_loader_code(module),
            passed_mark=PASSED_MARK,
        )
        with tempfile.TemporaryDirectory(prefix="jarvis_test_") as folder:
            with open(os.path.join(folder, "test_code.py"), "w", encoding="utf-8") as f:
                f.write(script)
            runner = CodeInterpreter(
                folder,
                timeout=float(self.flow_config.get("timeout", 60)),
                max_output_chars=int(self.flow_config.get("max_output_chars", 6000)),
            )
            try:
                outcome = runner.run(f"{shlex.quote(sys.executable)} test_code.py", "bash")
            finally:
                runner.close()
        optional_missing = ""
        if OPTIONAL_MARK in outcome.output:
            optional_missing = outcome.output.split(OPTIONAL_MARK, 1)[1].strip().splitlines()[0]
        output = outcome.output.replace(PASSED_MARK, "").replace(f"{OPTIONAL_MARK} {optional_missing}", "").strip()
        if IMPORTS_MARK in outcome.output:
            missing = outcome.output.split(IMPORTS_MARK, 1)[1].strip().splitlines()[0]
            result = (
                f"The code compiles, but these modules are not installed: {missing}. They must be installed "
                "before the code can run (Coder can do it with run_code, language bash: pip install ...): "
                "finish and say which packages are missing, or use modules that are installed."
            )
            passed = False
        elif PASSED_MARK in outcome.output and not outcome.failed:
            what = f"{' and '.join(given)} tests passed" if tests else "no tests were given"
            result = f"The code compiles, its imports resolve and it runs with the library; {what}."
            if optional_missing:
                result += (
                    f" Optional, not installed: {optional_missing} (imported in a `try` that handles the "
                    "ImportError; the code's fallback was used)."
                )
            if output and output != "(no output)":
                result += f"\nOutput:\n{output}"
            passed = True
        else:
            result = f"The {'tests' if tests else 'code'} failed:\n{output}"
            passed = False
        if "\n" in result:
            get_console().show("result" if passed else "error", "Test result:", result)
        else:  # one paragraph: on the heading's line
            get_console().line("result" if passed else "error", f"Test result: {result}")
        return {"result": result, "passed": passed}

    @staticmethod
    def _library_import(package: str, module: str, tree: ast.AST, tests: str) -> str:
        """``from library import a, b``: the library's names the code and the tests use (the code runs as if it were
        in the library, where they are found); only their modules are imported, not the whole library."""
        names = load_index(package)["names"]
        used = used_names(tree) - bound_names_of(tree)
        if tests:
            used |= used_names(ast.parse(tests))
        wanted = sorted(name for name in used if name in names)
        return f"from {module} import {', '.join(wanted)}" if wanted else ""
