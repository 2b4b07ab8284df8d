"""The code library as prompts and save_code read it: its signatures and docstrings (a summary bounded in size), the
names it defines and where, its `from __future__` imports; from one parse per version of its text."""
from __future__ import annotations

import ast
import hashlib
import threading
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

from .memory_log import shorten

# What is read from a library is kept per version of its text (a digest of it): MemoryReading reads the library
# every round and save_code reads it again, and parsing a large library is slow. The tree itself is not kept (it is
# many times the text's size): only what the readers use, the names defined, the lines of `from __future__` imports
# and the summaries made; and only for the last few versions of texts large enough to be worth it (the small code of
# one save_code is cheap to parse, and kept it would push a large library out).
_VIEWS_KEPT = 4
_VIEW_MIN_CHARS = 1 << 14
_NO_SUMMARY = object()
# The sizes summaries were asked for lately (`max_library_chars`: one value in a run): a library parsed for another
# reason (save_code's check of the names) gets those summaries made from the same parse, for the next read.
_summary_sizes: "OrderedDict[Optional[int], None]" = OrderedDict()


class _LibraryView:
    """What one version of a library's text holds, from one parse."""

    def __init__(self, tree: Optional[ast.Module], error: Optional[tuple]):
        self.error = error  # the SyntaxError's args when the text does not parse
        body = tree.body if tree is not None else []
        # (name, first line, last line), 1-based, decorators included, of each top-level function and class
        self.spans = tuple((n.name, min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno)
                           for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
        self.names = "\n".join(name for name, _, _ in self.spans)
        self.futures = tuple((n.lineno, n.end_lineno) for n in body
                             if isinstance(n, ast.ImportFrom) and n.module == "__future__")
        self.summaries: Dict[Optional[int], str] = {}

    def check(self) -> None:
        if self.error is not None:
            raise SyntaxError(*self.error)


_views: "OrderedDict[bytes, _LibraryView]" = OrderedDict()
_views_lock = threading.Lock()


def _parse(source: str) -> ast.Module:
    """``ast.parse`` of a library or of code for it (one place: a test counts the parses)."""
    return ast.parse(source)


def _library_view(source: str, summary_chars: Any = _NO_SUMMARY) -> _LibraryView:
    """The view of ``source``, parsed only when this text was not seen lately (or its summary for ``summary_chars``
    was not made yet)."""
    key = (hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=20).digest()
           if len(source) >= _VIEW_MIN_CHARS else None)
    with _views_lock:
        if summary_chars is not _NO_SUMMARY:
            _summary_sizes[summary_chars] = None
            _summary_sizes.move_to_end(summary_chars)
            while len(_summary_sizes) > _VIEWS_KEPT:
                _summary_sizes.popitem(last=False)
        sizes = list(_summary_sizes) if key else [summary_chars]
        view = _views.get(key) if key else None
        if view is not None:
            _views.move_to_end(key)
            if summary_chars is _NO_SUMMARY or summary_chars in view.summaries:
                return view
    try:
        tree, error = _parse(source), None
    except SyntaxError as problem:
        tree, error = None, problem.args
    except ValueError as problem:  # NUL characters (Python 3.11 says so with a ValueError)
        tree, error = None, (str(problem),)
    if view is None:
        view = _LibraryView(tree, error)
    for size in sizes:  # the size asked for, and the bounded ones asked lately (cheap: rendering stops at the size)
        if size is not _NO_SUMMARY and size not in view.summaries and (size or size == summary_chars):
            view.summaries[size] = _summary_of(tree, error, size)
    if key:
        with _views_lock:
            _views[key] = view
            _views.move_to_end(key)
            while len(_views) > _VIEWS_KEPT:
                _views.popitem(last=False)
    return view


def _signature(node: ast.AST) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}:"


def _docstring_block(node: ast.AST, indent: str) -> List[str]:
    doc = ast.get_docstring(node)
    if not doc:
        return [f'{indent}"""(no docstring)"""']
    lines = doc.split("\n")
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}'] + [f"{indent}{line}" if line else "" for line in lines[1:]] + [f'{indent}"""']


def library_summary(source: str, max_chars: Optional[int] = None) -> str:
    """The signatures and docstrings of the top-level functions and classes of a Python file, without their bodies.

    Beyond ``max_chars`` the docstrings are cut to their first line, then only the signatures are given, and at the
    last the names (a line says so): the summary goes into prompts and must not outgrow them. A text summarised
    lately is not parsed again.
    """
    if not source or source.isspace():
        return ""
    return _library_view(source, max_chars).summaries[max_chars]


def _summary_of(tree: Optional[ast.Module], error: Optional[tuple], max_chars: Optional[int]) -> str:
    if tree is None:
        message = error[0] if error else "?"
        line = error[1][1] if error and len(error) > 1 and error[1] else None
        return f"(the code library does not parse: line {line}: {message})" if line else \
            f"(the code library does not parse: {message})"
    full = _library_blocks(tree, "full", max_chars)
    if full is not None:
        return full
    for detail in ("first_line", "signatures"):
        shorter = _library_blocks(tree, detail, max_chars)
        if shorter is not None:
            return f"(the library is large: {'first docstring lines' if detail == 'first_line' else 'signatures'} " \
                   f"only)\n{shorter}"
    names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return shorten(f"(the library is large: names only) {', '.join(names)}", max_chars)


def _library_blocks(tree: ast.Module, detail: str, limit: Optional[int] = None) -> Optional[str]:
    """The summary's blocks at one level of ``detail``; None as soon as they pass ``limit`` characters (a large
    library is not rendered whole three times to learn that it does not fit)."""
    def doc(node, indent):
        if detail == "signatures":
            return []
        block = _docstring_block(node, indent)
        if detail == "first_line":
            first = (ast.get_docstring(node) or "(no docstring)").strip().split("\n")[0]
            return [f'{indent}"""{first}"""']
        return block

    separator = "\n\n" if detail == "full" else "\n"
    blocks: List[str] = []
    size = -len(separator)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            blocks.append("\n".join([_signature(node)] + doc(node, "    ")))
        elif isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            lines = [f"class {node.name}({bases}):" if bases else f"class {node.name}:"]
            lines += doc(node, "    ")
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        not item.name.startswith("_") or item.name == "__init__"):
                    lines.append("    " + _signature(item))
                    lines += doc(item, "        ")
            blocks.append("\n".join(lines))
        else:
            continue
        size += len(blocks[-1]) + len(separator)
        if limit and size > limit:
            return None
    return separator.join(blocks)


def split_future_imports(source: str) -> Tuple[List[str], str]:
    """The ``from __future__ import ...`` lines of some code, and the code without them (such imports must come
    first in a file, so code appended to a library, or run after other statements, has to move them up).
    SyntaxError if the code does not parse."""
    view = _library_view(source)
    view.check()
    lines = source.split("\n")
    futures: List[str] = []
    for first, last in reversed(view.futures):
        futures.insert(0, "\n".join(lines[first - 1:last]).strip())
        del lines[first - 1:last]
    return futures, "\n".join(lines).strip("\n")


def defined_names(source: str) -> List[str]:
    """Names of the top-level functions and classes defined in ``source`` (SyntaxError if it does not parse)."""
    view = _library_view(source)
    view.check()
    return view.names.split("\n") if view.names else []


def definition_spans(source: str) -> List[Tuple[str, int, int]]:
    """``(name, first line, last line)``, 1-based with decorators, of the top-level functions and classes of
    ``source`` (SyntaxError if it does not parse); from the library's cached view, like ``defined_names``."""
    view = _library_view(source)
    view.check()
    return list(view.spans)
