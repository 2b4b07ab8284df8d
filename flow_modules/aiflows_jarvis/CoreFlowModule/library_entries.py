"""The code library as the memory index sees it: its functions and classes, each keyed ``module.name``, and a
fingerprint of what the package holds.

The library package (``library_package``) already keeps what every module defines, in ``library/_index/``: a module
is parsed again only when its file changed. This adapter reads that index, through the package's API, so the memory
index never parses the library nor keeps a copy of it on disk; the entries' text is the package's rendering
(``render_entry``), the one prompts show.
"""
from __future__ import annotations

import json
import zlib
from itertools import islice
from typing import Any, Container, Dict, List, NamedTuple, Tuple

from .library_package import ensure_library, library_entries as package_entries, load_index, render_entry

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


def recent_keys(code_library: str, count: int, indexed: Container[str]) -> List[str]:
    """The keys of the ``count`` functions and classes (of ``indexed``) saved last, latest first: the names index
    lists the names of the module a save wrote last, in its file order, and a save appends the code to the module."""
    names = load_index(ensure_library(code_library))["names"]
    keys = (entry_key(module, name) for name, module in reversed(names.items()))
    return list(islice((key for key in keys if key in indexed), max(count, 0)))
