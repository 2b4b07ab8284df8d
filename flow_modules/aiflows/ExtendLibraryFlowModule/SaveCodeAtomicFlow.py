from __future__ import annotations

import ast
from typing import Any, Dict, List, Tuple

from flow_modules.aiflows.CoreFlowModule import LeanAtomicFlow, get_console
from flow_modules.aiflows.CoreFlowModule.memory import (
    archive_copy,
    atomic_write,
    defined_names,
    memory_path,
    read_text,
    split_future_imports,
)


def _definition_spans(tree: ast.Module, names: set) -> List[Tuple[int, int]]:
    """1-based line spans (decorators included) of the top-level definitions of ``names``."""
    spans = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans.append((start, node.end_lineno))
    return spans


def without_definitions(source: str, names: set) -> str:
    """``source`` with the top-level definitions of ``names`` removed."""
    lines = source.split("\n")
    for start, end in sorted(_definition_spans(ast.parse(source), names), reverse=True):
        del lines[start - 1:end]
    return "\n".join(lines)


class SaveCodeAtomicFlow(LeanAtomicFlow):
    """Appends code (a function written and tested by `write_code`) to the code library file.

    Code that does not compile is refused. Code that would redefine a function or class the library already has is
    refused unless the controller says so (`replace_existing: true`); then the old definition is replaced, and the
    library as it was is kept in `archive/` beside it. `from __future__` imports are moved to the top of the
    library. The library is rewritten atomically and checked to compile before it is.

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
        code = str(input_data.get("code") or "").strip()
        if not code:
            return {"result": "Nothing was saved: no code has been written yet (call write_code first)."}
        try:
            names = defined_names(code)
        except SyntaxError as error:
            return {"result": f"Nothing was saved: the code does not compile (line {error.lineno}: {error.msg})."}
        if not names:
            return {"result": "Nothing was saved: the code defines no function or class."}
        path = memory_path(self, input_data, "code_library")
        library = read_text(path)
        try:
            existing = set(defined_names(library)) if library.strip() else set()
        except SyntaxError as error:
            return {"result": f"Nothing was saved: {path} itself does not compile (line {error.lineno}: "
                              f"{error.msg}); it must be fixed first."}
        clashes = sorted(existing & set(names))
        replace = str(input_data.get("replace_existing", False)).strip().lower() in ("true", "1", "yes")
        if clashes and not replace:
            return {"result": f"Nothing was saved: the library already defines {', '.join(clashes)}. To replace "
                              "the existing definition, call save_code again with replace_existing: true; to keep "
                              "both, rename the new function with write_code."}
        if clashes:
            archive_copy(path, library)
            library = without_definitions(library, set(clashes))
        library_futures, library_body = split_future_imports(library) if library.strip() else ([], "")
        code_futures, code_body = split_future_imports(code)
        futures = list(dict.fromkeys(library_futures + code_futures))  # they must open the file
        head = "\n".join(futures) + "\n\n" if futures else ""
        new_library = head + (library_body.rstrip() + "\n\n\n" if library_body.strip() else "") + code_body + "\n"
        try:
            compile(new_library, path, "exec")
        except SyntaxError as error:
            return {"result": f"Nothing was saved: the library would not compile (line {error.lineno}: {error.msg})."}
        atomic_write(path, new_library)
        verb = "Replaced" if clashes else "Saved"
        total = len(defined_names(new_library))
        get_console().line("result", f"{verb} {', '.join(names)} in {path}.")
        return {"result": f"{verb} {', '.join(names)} in the code library ({path}); it now defines {total} "
                          f"function(s)/class(es)."}
