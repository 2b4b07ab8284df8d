"""The code library as prompts and save_code read it: its signatures and docstrings (a summary bounded in size), the
names it defines and where, its `from __future__` imports; from one parse per version of its text, block by block."""

from __future__ import annotations

import ast
import re
import threading
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import shorten

# What is read from a library is kept per version of its text (a digest of it): MemoryReading reads the library
# every round and save_code reads it again, and parsing a large library is slow. Its text is parsed in blocks of
# top-level statements (about _BLOCK_CHARS each), each kept by its text: a version that appends a function to the
# last one parses its last block only, and no parse holds the tree of a whole large library (many times the text's
# size). The trees are not kept: only what the readers use, the names defined, the lines of `from __future__` imports
# and the summaries made (a summary parses again the few first blocks it shows); and only for the last few versions of
# texts large enough to be worth it (the small code of one save_code is cheap to parse, and kept it would push a large
# library out).
_VIEWS_KEPT = 4
_VIEW_MIN_CHARS = 1 << 14
_BLOCK_CHARS = 1 << 15
_BLOCKS_KEPT = 2048  # blocks of the versions kept (a 5 MB library has about 160)
_NO_SUMMARY = object()
# The sizes summaries were asked for lately (`max_library_chars`: one value in a run): a library parsed for another
# reason (save_code's check of the names) gets those summaries made from the same parse, for the next read.
_summary_sizes: "OrderedDict[Optional[int], None]" = OrderedDict()
# Where a block may start: a line at the first column that starts a statement (not a comment, a closing bracket, or
# the else/elif/except/finally of a statement above). A block cut inside a string, brackets or a decorated definition
# does not parse alone: it is joined to the next one.
_STATEMENT_START = re.compile(r"^(?![\s#)\]}]|(?:else|elif|except|finally)\b)", re.M)


class _Block:
    """What one block of top-level statements holds (lines counted from the block's first line)."""

    def __init__(self, tree: ast.Module, lines: int):
        self.lines = lines
        self.spans = tuple(
            (n.name, min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno)
            for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        )
        self.futures = tuple(
            (n.lineno, n.end_lineno) for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"
        )


class _LibraryView:
    """What one version of a library's text holds, from one parse (of its blocks)."""

    def __init__(self, blocks: List[Tuple[int, int, int, _Block]], error: Optional[tuple]):
        self.error = error  # the SyntaxError's args when the text does not parse
        self.blocks = [(start, end) for start, end, _, _ in blocks]  # where each block's text is
        # (name, first line, last line), 1-based, decorators included, of each top-level function and class
        self.spans = tuple(
            (name, first + line, last + line) for _, _, line, block in blocks for name, first, last in block.spans
        )
        self.names = "\n".join(name for name, _, _ in self.spans)
        self.futures = tuple(
            (first + line, last + line) for _, _, line, block in blocks for first, last in block.futures
        )
        self.summaries: Dict[Optional[int], str] = {}

    def check(self) -> None:
        if self.error is not None:
            raise SyntaxError(*self.error)

    def nodes(self, source: str, trees: Dict[int, ast.Module]) -> Iterator[ast.stmt]:
        """The top-level statements of ``source`` (the text of this view): its blocks' trees in ``trees`` (by where
        the block starts), the others parsed again as they are asked for, and added to ``trees``."""
        if self.error is not None:
            return
        for start, end in self.blocks:
            if start not in trees:
                trees[start] = _parse(source[start:end])
            yield from trees[start].body


_views: "OrderedDict[Tuple[int, int], _LibraryView]" = OrderedDict()
_blocks: "OrderedDict[Tuple[int, int], _Block]" = OrderedDict()
_views_lock = threading.Lock()


def _parse(source: str) -> ast.Module:
    """``ast.parse`` of a library's block or of code for it (one place: a test counts the parses)."""
    return ast.parse(source)


def _digest(text: str) -> Tuple[int, int]:
    """The key of a text in the caches: its length and hash (a digest of megabytes at every read took longer)."""
    return len(text), hash(text)


def block_end(source: str, start: int, size: int) -> int:
    """Where the block starting at ``start`` ends: at the first statement start ``size`` characters on, or at the
    text's end."""
    position = start + size
    found = _STATEMENT_START.search(source, position) if position < len(source) else None
    return len(source) if found is None else found.start()


def _read_blocks(
    source: str, trees: Dict[int, ast.Module]
) -> Tuple[List[Tuple[int, int, int, _Block]], Optional[tuple]]:
    """``([(start, end, line before it, block)], None)``, or ``([], the SyntaxError's args)`` if ``source`` does not
    parse. Blocks seen lately (by the digest of their text) are not parsed again; the trees of the first blocks
    parsed (those a summary shows) are put in ``trees``, by where the block starts."""
    blocks: List[Tuple[int, int, int, _Block]] = []
    start, line, size = 0, 0, _BLOCK_CHARS
    while start < len(source):
        end = block_end(source, start, size)
        text = source[start:end]
        key = _digest(text) if len(source) >= _VIEW_MIN_CHARS else None
        with _views_lock:
            block = _blocks.get(key) if key else None
            if block is not None:
                _blocks.move_to_end(key)
        if block is None:
            try:
                tree = _parse(text)
                block = _Block(tree, text.count("\n"))
                if start < 2 * _BLOCK_CHARS:
                    trees[start] = tree
            except (SyntaxError, ValueError):
                if end < len(source):
                    size *= 2  # cut inside a statement: the block is tried again twice as long (a string of
                    continue  # megabytes is not parsed again at every block it spans)
                return [], whole_error(source)
            if key:
                with _views_lock:
                    _blocks[key] = block
                    while len(_blocks) > _BLOCKS_KEPT:
                        _blocks.popitem(last=False)
        blocks.append((start, end, line, block))
        start, line, size = end, line + block.lines, _BLOCK_CHARS
    return blocks, None


def whole_error(source: str) -> tuple:
    """The args of the SyntaxError of ``source`` as a whole (its line numbers are the file's)."""
    try:
        _parse(source)
    except SyntaxError as problem:
        return problem.args
    except ValueError as problem:  # NUL characters (Python 3.11 says so with a ValueError)
        return (str(problem),)
    return ("the code does not parse in parts",)  # pragma: no cover - a block that parses nowhere else


def _library_view(source: str, summary_chars: Any = _NO_SUMMARY) -> _LibraryView:
    """The view of ``source``, parsed only when this text was not seen lately (or its summary for ``summary_chars``
    was not made yet)."""
    key = _digest(source) if len(source) >= _VIEW_MIN_CHARS else None
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
    trees: Dict[int, ast.Module] = {}  # the first blocks' trees, for the summaries made now
    if view is None:
        view = _LibraryView(*_read_blocks(source, trees))
    for size in sizes:  # the size asked for, and the bounded ones asked lately (cheap: rendering stops at the size)
        if size is not _NO_SUMMARY and size not in view.summaries and (size or size == summary_chars):
            view.summaries[size] = _summary_of(view, source, size, trees)
    if key:
        with _views_lock:
            _views[key] = view
            _views.move_to_end(key)
            while len(_views) > _VIEWS_KEPT:
                _views.popitem(last=False)
    return view


def signature_text(node: ast.AST) -> str:
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


def _summary_of(view: _LibraryView, source: str, max_chars: Optional[int], trees: Dict[int, ast.Module]) -> str:
    error = view.error
    if error is not None:
        message = error[0] if error else "?"
        line = error[1][1] if error and len(error) > 1 and error[1] else None
        return (
            f"(the code library does not parse: line {line}: {message})"
            if line
            else f"(the code library does not parse: {message})"
        )
    full = _library_blocks(view.nodes(source, trees), "full", max_chars)
    if full is not None:
        return full
    for detail in ("first_line", "signatures"):
        shorter = _library_blocks(view.nodes(source, trees), detail, max_chars)
        if shorter is not None:
            return (
                f"(the library is large: {'first docstring lines' if detail == 'first_line' else 'signatures'} "
                f"only)\n{shorter}"
            )
    names = [name for name, _, _ in view.spans]
    return shorten(f"(the library is large: names only) {', '.join(names)}", max_chars)


def _library_blocks(nodes: Iterator[ast.stmt], detail: str, limit: Optional[int] = None) -> Optional[str]:
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
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            blocks.append("\n".join([signature_text(node)] + doc(node, "    ")))
        elif isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            lines = [f"class {node.name}({bases}):" if bases else f"class {node.name}:"]
            lines += doc(node, "    ")
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    not item.name.startswith("_") or item.name == "__init__"
                ):
                    lines.append("    " + signature_text(item))
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
        futures.insert(0, "\n".join(lines[first - 1 : last]).strip())
        del lines[first - 1 : last]
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
