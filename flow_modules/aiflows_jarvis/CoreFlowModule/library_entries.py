"""The code library as the memory index sees it: its functions and classes, each keyed ``module.name``, and a
fingerprint of what the package holds.

The library package (``library_package``) already keeps what every module defines, in ``library/_index/``: a module
is parsed again only when its file changed. This adapter reads that index, through the package's API, so the memory
index never parses the library; the entries' text is the package's rendering (``render_entry``), the one prompts show.
A large library's search index is kept in the package's index folder between runs (``search_cache_path``): a cache,
caught up with the package by each entry's digest.
"""
from __future__ import annotations

import json
import os
import zlib
from itertools import islice
from typing import Any, Container, Dict, List, NamedTuple, Tuple

from .library_package import INDEX_FOLDER, ensure_library, library_entries as package_entries, load_index, \
    package_dir, render_entry

_INDEXED_KINDS = ("function", "class")


def entry_key(module: str, name: str) -> str:
    """The index's key of a definition: ``module.name`` (a name could be defined in two modules edited by hand)."""
    return f"{module}.{name}"


def key_pair(key: str) -> Tuple[str, str]:
    """``(module, name)`` of an index key, as ``package_summary`` takes the entries it shows."""
    module, _, name = key.partition(".")
    return module, name


class LibraryEntry(NamedTuple):
    """One top-level function or class of the library, as the package's index records it."""

    module: str
    name: str
    digest: str  # of the definition's source: the entry changed when it changed
    record: Dict[str, Any]  # the package's entry (kind, signature, doc, methods, ...)

    @property
    def key(self) -> str:
        return entry_key(self.module, self.name)

    def text(self) -> str:
        """The entry as a prompt shows it: its signature and its docstring (no body)."""
        return render_entry(self.record)


def library_entries(code_library: str) -> List[LibraryEntry]:
    """Every function and class of the library, module by module, in the package's order (a `library.py` is
    migrated into the package first: MemoryFileError when it does not compile)."""
    return [LibraryEntry(e["module"], e["name"], e.get("digest", ""), e)
            for e in package_entries(code_library) if e.get("kind") in _INDEXED_KINDS]


def library_fingerprint(code_library: str) -> str:
    """What the package's modules are, in a few characters: each module's file size and time as its index recorded
    them (the package re-indexes a module whose file no longer matches). Another fingerprint: the entries changed."""
    index = load_index(ensure_library(code_library))
    modules = sorted((module, record.get("stat"), record.get("error", ""))
                     for module, record in index["modules"].items())
    data = json.dumps(modules).encode("utf-8")
    return f"{len(modules)}:{zlib.crc32(data):08x}"


def library_key(code_library: str) -> str:
    """One name for the library however it is configured (`x/library.py` and `x/library` are the same package)."""
    return package_dir(code_library)


def rendering_id() -> str:
    """What the entries' rendering is, in a few characters: a function and a class rendered as ``text`` gives them
    (a search index kept from a Jarvis that rendered them otherwise holds other texts)."""
    function = {"kind": "function", "signature": "def f(x: int) -> int:", "doc": "One.\n\nTwo."}
    cls = {"kind": "class", "signature": "class C(B):", "doc": "C.", "methods": [["def m(self):", ""]]}
    return f"{zlib.crc32((render_entry(function) + render_entry(cls)).encode('utf-8')):08x}"


def search_cache_path(code_library: str) -> str:
    """Where the library's search index is kept between runs: in the package's own index folder, which moves and is
    archived with it (``search.bin``: never the name of a module's index, ``<module>.json``)."""
    return os.path.join(package_dir(code_library), INDEX_FOLDER, "search.bin")


def recent_keys(code_library: str, count: int, indexed: Container[str]) -> List[str]:
    """The keys of the ``count`` functions and classes (of ``indexed``) saved last, latest first: the names index
    lists the names of the module a save wrote last, in its file order, and a save appends the code to the module."""
    names = load_index(ensure_library(code_library))["names"]
    keys = (entry_key(module, name) for name, module in reversed(names.items()))
    return list(islice((key for key in keys if key in indexed), max(count, 0)))
