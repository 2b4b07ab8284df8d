"""The code library as the memory index sees it: its functions and classes, each keyed ``module.name``, and a
fingerprint of what the package holds.

The library package (CodeLibraryFlowModule's ``package``) already keeps what every module defines, in
``library/_index/``: a module is parsed again only when its file changed. This adapter reads that index, through the
package's API, so the memory index never parses the library; the entries' text is the package's rendering
(``render_entry``), the one prompts show.
A large library's search index is kept in the package's index folder between runs (``search_cache_path``): a cache,
caught up with the package by each entry's digest.
"""

from __future__ import annotations

import json
import os
import zlib
from itertools import islice
from typing import Any, Container, Dict, List, Tuple

from aiflows_jarvis.CodeLibraryFlowModule import (
    INDEX_FOLDER,
    INDEX_VERSION,
    ensure_library,
    entries_of_source,
    load_index,
    once_per_version,
    package_dir,
    render_entry,
)
from aiflows_jarvis.CodeLibraryFlowModule import (
    library_entries as package_entries,
)

_INDEXED_KINDS = ("function", "class")


def entry_key(module: str, name: str) -> str:
    """The index's key of a definition: ``module.name`` (a name could be defined in two modules edited by hand)."""
    return f"{module}.{name}"


def key_pair(key: str) -> Tuple[str, str]:
    """``(module, name)`` of an index key, as ``package_summary`` takes the entries it shows."""
    module, _, name = key.partition(".")
    return module, name


def entry_text(record: Dict[str, Any]) -> str:
    """An entry as a prompt shows it, and as it is indexed: its signature and its docstring (no body)."""
    return render_entry(record)


_keyed: Dict[str, Tuple[Any, Dict[str, Tuple[str, Dict[str, Any]]]]] = {}  # (package dir) -> (its entries, keyed)


def library_entries(code_library: str) -> Dict[str, Tuple[str, Dict[str, Any]]]:
    """``{key: (digest, record)}`` of every function and class of the library, module by module, in the package's
    order: the digest of the definition's source (the entry changed when it changed) and the package's record (kind,
    signature, doc, methods, ...). A name defined twice in a module: its last definition, as Python has it. The same
    dict while nothing changed on disk (do not change it). A `library.py` is migrated into the package first:
    MemoryFileError when it does not compile."""
    entries = package_entries(code_library)
    return once_per_version(
        _keyed,
        package_dir(code_library),
        entries,
        lambda: {
            entry_key(e["module"], e["name"]): (e.get("digest", ""), e)
            for e in entries
            if e.get("kind") in _INDEXED_KINDS
        },
    )


def library_fingerprint(code_library: str) -> str:
    """What the package's modules are, in a few characters: each module's file size and time as its index recorded
    them (the package re-indexes a module whose file no longer matches). Another fingerprint: the entries changed."""
    index = load_index(ensure_library(code_library))
    modules = sorted(
        (module, record.get("stat"), record.get("error", "")) for module, record in index["modules"].items()
    )
    data = json.dumps(modules).encode("utf-8")
    return f"{len(modules)}:{zlib.crc32(data):08x}"


def library_key(code_library: str) -> str:
    """One name for the library however it is configured (`x/library.py` and `x/library` are the same package)."""
    return package_dir(code_library)


def rendering_id() -> str:
    """What the entries' texts are made by, in a few characters: the package index's version and a sample module
    as ``entries_of_source`` reads it and ``entry_text`` renders it (a search index kept from a Jarvis that read or
    rendered the library otherwise holds other texts, under the same digests)."""
    source = (
        'def f(x: int = 1, *args, **kw) -> int:\n    """One.\n\n    Two."""\n    return x\n\n\n'
        'class C(B):\n    """C."""\n    def __init__(self, y):\n        pass\n\n    def m(self) -> str:\n'
        '        """M."""\n        return ""\n'
    )
    texts = "\n".join(entry_text(entry) for entry in entries_of_source(source)[1])
    return f"{INDEX_VERSION}:{zlib.crc32(texts.encode('utf-8')):08x}"


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
