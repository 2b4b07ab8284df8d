from __future__ import annotations

import ast
import hashlib
import os
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CodeLibraryFlowModule import (
    check_module_name,
    default_module,
    defined_names,
    definition_spans,
    ensure_library,
    entries_of_source,
    load_index,
    save_code,
)
from aiflows_jarvis.CoreFlowModule import (
    APPROVAL,
    LeanAtomicFlow,
    MemoryFileError,
    file_lock,
    get_console,
    get_input_source,
    is_approval,
    memory_path,
    shown_path,
)


def definition_digests(source: str) -> Dict[str, str]:
    """``{name: digest of its source}`` for the top-level functions and classes of ``source``, to tell later which
    were added or changed (SyntaxError propagates)."""
    lines = source.split("\n")
    return {
        name: hashlib.sha256("\n".join(lines[start - 1 : end]).encode("utf-8")).hexdigest()
        for name, start, end in definition_spans(source)
    }


# Top-level statements a library may hold: they define names. (An assignment's value is computed on import, e.g.
# `PATTERN = re.compile(...)`: that is how constants are made, so assignments are accepted whatever they call.)
_DEFINITIONS = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Pass,
) + ((ast.TypeAlias,) if hasattr(ast, "TypeAlias") else ())
# Blocks whose bodies are checked with the same rule (conditional imports, `try: import ujson except ImportError`).
_BLOCKS = (ast.If, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either order of the comparison)."""
    if not (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and len(node.test.ops) == 1
        and isinstance(node.test.ops[0], ast.Eq)
    ):
        return False
    sides = [node.test.left, node.test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def statements_run_on_import(body: List[ast.stmt], nested: bool = False) -> List[ast.stmt]:
    """The statements of a module body that would do something when the module is imported: anything but imports,
    definitions, assignments, string (or other constant) expressions, and `if` / `try` blocks holding only those.
    ``if __name__ == "__main__":`` blocks do not run on import and are accepted. In a block (``nested``), a `raise`
    is accepted too: a conditional raise (`except ImportError: raise ...`) only runs when the import fails."""
    found: List[ast.stmt] = []
    for node in body:
        if isinstance(node, _DEFINITIONS) or (nested and isinstance(node, ast.Raise)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # docstrings, string constants
            continue
        if _is_main_guard(node):
            continue
        if isinstance(node, _BLOCKS):
            parts = [node.body, node.orelse] + [h.body for h in getattr(node, "handlers", [])]
            for part in parts + [getattr(node, "finalbody", [])]:
                found += statements_run_on_import(part, nested=True)
            continue
        found.append(node)
    return found


def _describe(code: str, node: ast.stmt, limit: int = 60) -> str:
    """``line N: `statement` `` with the statement cut to its first line and ``limit`` characters."""
    text = (ast.get_source_segment(code, node) or type(node).__name__).strip().split("\n")[0]
    return f"line {node.lineno}: `{text if len(text) <= limit else text[: limit - 3] + '...'}`"


class SaveCodeAtomicFlow(LeanAtomicFlow):
    """Saves code (a function written and tested by `write_code`) into a module of the code library package.

    The library is the package `library/` in the memory folder, one module per topic (a `library.py` is moved into
    it on first use, and kept in `archive/`). The controller may name the `module`; by default it is the topic's
    (from the function's name and docstring). With `confirm_module`, the user is shown the module and may type
    another one (an approval keeps it; any other answer is returned as feedback and nothing is saved).

    The library is imported by every run, so what goes in must compile and must not do anything on import: code
    with top-level statements (a call, a print, a loop: they belong in `run_code`) is refused, while imports,
    definitions, assignments, constants, `if`/`try` blocks of those and `if __name__ == "__main__":` are accepted.
    Redefining a name the library has (in any module) is refused unless `replace_existing: true` (the module as it
    was is then kept in `archive/`). A function or class named like a module of the library (or a module named like
    one of its functions) is refused: `from library import data` could give either. Only the module changed is read
    and written, under the library's lock and atomically (see CodeLibraryFlowModule's `save`). A refusal is returned to
    the controller and shown as a warning.

    *Configuration Parameters*:
    - `memory_files` (dict, optional): used when the input has none; `code_library` is the library (its package
      folder, or a `library.py` to migrate).
    - `confirm_module` (bool): ask the user to confirm or change the module before saving (default false).

    *Input Interface*:
    - `code` (str): the code to save.
    - `memory_files` (dict): `code_library` is the library.
    - `module` (str, optional): the library module to save into (e.g. `text`, `charts`).
    - `replace_existing` (bool, optional): allow replacing definitions the library has.

    *Output Interface*:
    - `result` (str): what was saved, or why nothing was.
    - `saved` (bool): whether the code was saved.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        result, saved = self._save(input_data)
        if not saved:  # the controller reads the result; the user sees why nothing was saved too
            get_console().line("warning", result)
        return {"result": result, "saved": saved}

    def _save(self, input_data: Dict[str, Any]) -> Tuple[str, bool]:
        """Saves the code if it may be saved; returns the result for the controller and whether anything was saved."""
        code = str(input_data.get("code") or "").strip()
        if not code:
            return "Nothing was saved: no code has been written yet (call write_code first).", False
        try:
            tree = ast.parse(code)
        except SyntaxError as error:
            return f"Nothing was saved: the code does not compile (line {error.lineno}: {error.msg}).", False
        on_import = statements_run_on_import(tree.body)
        if on_import:
            shown = "; ".join(_describe(code, node) for node in on_import[:3])
            more = f" (and {len(on_import) - 3} more)" if len(on_import) > 3 else ""
            why = (
                f"Nothing was saved: the code has top-level statements that would run every time the library is "
                f"imported or reloaded: {shown}{more}. The library may hold only imports, function and class "
                "definitions and constants. Remove these statements from the code (call write_code to revise it), "
                "then save_code again; to run them, use run_code (e.g. `from library import ...` first)."
            )
            return why, False
        names = defined_names(code)
        if not names:
            return "Nothing was saved: the code defines no function or class.", False
        try:
            package = ensure_library(memory_path(self, input_data, "code_library"))
        except MemoryFileError as error:
            return f"Nothing was saved: {error}", False
        replace = str(input_data.get("replace_existing", False)).strip().lower() in ("true", "1", "yes")
        module = str(input_data.get("module") or "").strip().lower().removesuffix(".py").removeprefix("library.")
        module = module.removeprefix("library/") or None
        if self.flow_config.get("confirm_module"):
            module, feedback = self._confirm(package, names, code, module)
            if feedback:
                return f"Nothing was saved: the user said: {feedback}", False
        # Read, change and write back under the library's lock: another process saving at the same time (a second
        # Jarvis, a program using save_code) would otherwise write back a module without this function.
        with file_lock(package):
            refusal, module, clashes = save_code(package, code, module, replace)
        if refusal:
            return refusal, False
        verb = "Replaced" if clashes else "Saved"
        index = load_index(package)
        where = f"library/{module}.py"
        get_console().line("result", f"{verb} {', '.join(names)} in {shown_path(os.path.join(package, module))}.py.")
        return (
            f"{verb} {', '.join(names)} in the code library, module {module} ({where}; `from library import "
            f"{names[0]}`); it now defines {len(index['names'])} name(s) in {len(index['modules'])} "
            "module(s)."
        ), True

    @staticmethod
    def _confirm(package: str, names: List[str], code: str, module: Optional[str]) -> Tuple[str, str]:
        """``(the module the user chose, their feedback or "")``: the module proposed is kept on approval, replaced
        by a module name typed, and any other answer is feedback."""
        index = load_index(package)
        entries = entries_of_source(code)[1]
        proposed = module or default_module(package, names, entries[0]["doc"] if entries else "", index)
        while True:
            state = "an existing module" if proposed in index["modules"] else "a new module"
            answer = (
                get_input_source()
                .ask(
                    f"Save {', '.join(names)} in library/{proposed}.py ({state})? Enter to save it there, or type "
                    "another module.",
                    kind=APPROVAL,
                )
                .strip()
            )
            if is_approval(answer):
                return proposed, ""
            candidate = answer.lower().removesuffix(".py").removeprefix("library/")
            if " " in candidate or not candidate:
                return proposed, answer
            why = check_module_name(candidate, set(index["names"]) | set(names))
            if not why:
                return candidate, ""
            get_console().line("warning", why)
