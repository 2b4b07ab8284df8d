from __future__ import annotations

import ast
import hashlib
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow, get_console
from aiflows_jarvis.CoreFlowModule.errors import MemoryFileError
from aiflows_jarvis.CoreFlowModule.locks import file_lock
from aiflows_jarvis.CoreFlowModule.memory_index import library_saved
from aiflows_jarvis.CoreFlowModule.memory import (
    archive_copy,
    atomic_write,
    defined_names,
    definition_spans,
    memory_path,
    read_text,
    split_future_imports,
)


def definition_digests(source: str) -> Dict[str, str]:
    """``{name: digest of its source}`` for the top-level functions and classes of ``source``, to tell later which
    were added or changed (SyntaxError propagates)."""
    lines = source.split("\n")
    return {name: hashlib.sha256("\n".join(lines[start - 1:end]).encode("utf-8")).hexdigest()
            for name, start, end in definition_spans(source)}


# Top-level statements a library may hold: they define names. (An assignment's value is computed on import, e.g.
# `PATTERN = re.compile(...)`: that is how constants are made, so assignments are accepted whatever they call.)
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                ast.AnnAssign, ast.AugAssign, ast.Pass) + ((ast.TypeAlias,) if hasattr(ast, "TypeAlias") else ())
# Blocks whose bodies are checked with the same rule (conditional imports, `try: import ujson except ImportError`).
_BLOCKS = (ast.If, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either order of the comparison)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
            and isinstance(node.test.ops[0], ast.Eq)):
        return False
    sides = [node.test.left, node.test.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


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
    return f"line {node.lineno}: `{text if len(text) <= limit else text[:limit - 3] + '...'}`"


def without_definitions(source: str, names: set) -> str:
    """``source`` with the top-level definitions of ``names`` removed."""
    lines = source.split("\n")
    spans = [span for span in definition_spans(source) if span[0] in names]
    for _, start, end in sorted(spans, key=lambda span: -span[1]):
        del lines[start - 1:end]
    return "\n".join(lines)


class SaveCodeAtomicFlow(LeanAtomicFlow):
    """Appends code (a function written and tested by `write_code`) to the code library file.

    The library is imported by every run, so what goes in must compile and must not do anything on import: code
    with top-level statements (a call, a print, a loop: they belong in `run_code`) is refused, while imports,
    definitions, assignments, constants, `if`/`try` blocks of those and `if __name__ == "__main__":` are accepted.
    Redefining a name the library has is refused unless `replace_existing: true` (the old library is then kept in
    `archive/`). The library is changed under its lock (`locks.file_lock`) and written atomically, so two processes
    saving at once never lose a function. A refusal is returned to the controller and shown as a warning.

    *Configuration Parameters*:
    - `memory_files` (dict, optional): used when the input has none; `code_library` is the library file.

    *Input Interface*:
    - `code` (str): the code to save.
    - `memory_files` (dict): `code_library` is the library file.
    - `replace_existing` (bool, optional): allow replacing definitions the library has.

    *Output Interface*:
    - `result` (str): what was saved, or why nothing was.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        result, saved = self._save(input_data)
        if not saved:  # the controller reads the result; the user sees why nothing was saved too
            get_console().line("warning", result)
        return {"result": result}

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
            why = (f"Nothing was saved: the code has top-level statements that would run every time the library is "
                   f"imported or reloaded: {shown}{more}. The library may hold only imports, function and class "
                   "definitions and constants. Remove these statements from the code (call write_code to revise it), "
                   "then save_code again; to run them, use run_code (e.g. `from library import ...` first).")
            return why, False
        names = defined_names(code)
        if not names:
            return "Nothing was saved: the code defines no function or class.", False
        path = memory_path(self, input_data, "code_library")
        replace = str(input_data.get("replace_existing", False)).strip().lower() in ("true", "1", "yes")
        # Read, change and write back under the library's lock: another process saving at the same time (a second
        # Jarvis, a program using save_code) would otherwise write back a library without this function, or this
        # save would drop its function.
        with file_lock(path):
            old_library = read_text(path)
            refusal, clashes, new_library = self._merge(path, old_library, code, names, replace)
            if refusal:
                return refusal, False
            atomic_write(path, new_library)
            try:  # the library's search index takes the new entries (one line appended to it)
                library_saved(path, old_library, new_library, code)
            except (MemoryFileError, OSError):
                pass  # the function is saved; the index, stale, is rebuilt when it is next read
        verb = "Replaced" if clashes else "Saved"
        total = len(defined_names(new_library))
        get_console().line("result", f"{verb} {', '.join(names)} in {path}.")
        return (f"{verb} {', '.join(names)} in the code library ({path}); it now defines {total} "
                f"function(s)/class(es)."), True

    @staticmethod
    def _merge(path: str, library: str, code: str, names: List[str], replace: bool) -> Tuple[str, List[str], str]:
        """``(why nothing may be saved, or "", the definitions replaced, the new library)``; keeps the library as it
        was in `archive/` when definitions are replaced. Called with the library's lock held, with its text."""
        try:
            existing = set(defined_names(library)) if library.strip() else set()
        except SyntaxError as error:
            return (f"Nothing was saved: {path} itself does not compile (line {error.lineno}: {error.msg}); it must "
                    "be fixed first."), [], ""
        clashes = sorted(existing & set(names))
        if clashes and not replace:
            return (f"Nothing was saved: the library already defines {', '.join(clashes)}. To replace the existing "
                    "definition, call save_code again with replace_existing: true; to keep both, rename the new "
                    "function with write_code."), clashes, ""
        kept = without_definitions(library, set(clashes)) if clashes else library
        library_futures, library_body = split_future_imports(kept) if kept.strip() else ([], "")
        code_futures, code_body = split_future_imports(code)
        futures = list(dict.fromkeys(library_futures + code_futures))  # they must open the file
        head = "\n".join(futures) + "\n\n" if futures else ""
        new_library = head + (library_body.rstrip() + "\n\n\n" if library_body.strip() else "") + code_body + "\n"
        # The library and the code each parse, so does the two joined; only a `__future__` import the code brings
        # to the library can change how the library's text reads, so only then is the whole (maybe large) compiled
        if set(code_futures) - set(library_futures):
            try:
                compile(new_library, path, "exec")
            except SyntaxError as error:
                return (f"Nothing was saved: the library would not compile with the code's `from __future__` imports "
                        f"(line {error.lineno}: {error.msg})."), clashes, ""
        if clashes:
            archive_copy(path, library)
        return "", clashes, new_library
