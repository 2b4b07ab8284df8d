"""The code library as a list of entries (module, name, signature, docstring): what the memory index holds of it.

This is the one place that knows how the library is laid out on disk; the index and the prompts read entries only.
Today the library is one file, ``library.py``, whose module is ``library``.
"""
from __future__ import annotations

import ast
import zlib
from typing import Iterator, List, NamedTuple, Optional

from .code_library import _BLOCK_CHARS, _block_end, _parse, _signature
from .file_io import read_text

LIBRARY_MODULE = "library"


class LibraryEntry(NamedTuple):
    """One top-level function or class of the library."""

    module: str
    name: str
    signature: str
    docstring: str

    def text(self) -> str:
        """The entry as a prompt shows it: its signature and its docstring (no body)."""
        doc = self.docstring or "(no docstring)"
        lines = doc.split("\n")
        if len(lines) == 1:
            return f'{self.signature}\n    """{doc}"""'
        body = "\n".join(f"    {line}" if line else "" for line in lines[1:])
        return f'{self.signature}\n    """{lines[0]}\n{body}\n    """'


def _entry_of(node: ast.stmt, module: str) -> LibraryEntry:
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        signature = f"class {node.name}({bases}):" if bases else f"class {node.name}:"
        methods = [f"    {_signature(item)}" for item in node.body
                   if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and (not item.name.startswith("_") or item.name == "__init__")]
        doc = ast.get_docstring(node) or ""
        return LibraryEntry(module, node.name, "\n".join([signature] + methods), doc)
    return LibraryEntry(module, node.name, _signature(node), ast.get_docstring(node) or "")


def code_entries(code: str, module: str = LIBRARY_MODULE) -> List[LibraryEntry]:
    """The entries ``code`` defines (SyntaxError if it does not parse), parsed block by block: a large text is never
    held as one tree."""
    entries: List[LibraryEntry] = []
    start = 0
    size = _BLOCK_CHARS
    while start < len(code):
        end = _block_end(code, start, size)
        try:
            tree = _parse(code[start:end])
        except SyntaxError:
            if end < len(code):
                size *= 2  # cut inside a statement: tried again longer
                continue
            raise
        entries += [_entry_of(node, module) for node in tree.body
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        start, size = end, _BLOCK_CHARS
    return entries


def library_entries(library_path: str) -> Iterator[LibraryEntry]:
    """Every entry of the library at ``library_path`` (none if it is missing or does not parse: a library that does
    not parse is reported by its summary, not by the index)."""
    try:
        return iter(code_entries(read_text(library_path), LIBRARY_MODULE))
    except (SyntaxError, ValueError):
        return iter(())


def library_fingerprint(library_path: str, text: Optional[str] = None) -> str:
    """What the library's files hold, in a few characters: the index built from another fingerprint is stale.
    ``text``: the library's text when the caller has read it already."""
    data = (read_text(library_path) if text is None else text).encode("utf-8")
    return f"{len(data)}:{zlib.crc32(data):08x}"
