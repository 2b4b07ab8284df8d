"""The code library as a package: `library/` in the memory folder, one module per topic, and a names index.

A single `library.py` of thousands of functions made every save read, parse and rewrite the whole file, and every
prompt parse it again. The package keeps each module small, and its index (`library/_index/`) says what each module
defines: ``names.json`` (which module defines each name, each module's one line and the file's size and time when
indexed) and ``<module>.json`` (each definition's kind, signature and docstring). A module whose file does not match
what the index recorded (edited by hand, or a save killed between the module and its index) is indexed again; the
others are never parsed to list or summarise the library. The index is a cache: a file of it that cannot be used is
built again from the modules, and said.

This module reads the package's files and index: where it is (``package_dir``), what each module defines
(``load_index``, ``module_entries``). Saving and migration are in ``save``; what callers read (the package made or
migrated first: its entries, structure and the summary prompts show) in ``summary``. Everything here takes the
configured `code_library` path: the package itself (`.../library`) or a legacy single file (`.../library.py`, migrated
into the package beside it on first use).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import threading
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, TypeVar

from aiflows_jarvis.CoreFlowModule import MemoryFileError, atomic_write, file_lock, read_text, say_rebuilt, shorten

from .source import signature_text

PACKAGE = "library"
INDEX_FOLDER = "_index"
INDEX_VERSION = 1
_INIT_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "library_init.py")
# (package dir) -> (key of what was read, the index); (module index path) -> (its stat, its entries)
_indexes: Dict[str, Tuple[Any, Dict[str, Any]]] = {}
_module_entries: Dict[str, Tuple[Any, List[Dict[str, Any]]]] = {}
_cache_lock = threading.Lock()
T = TypeVar("T")


def package_dir(code_library: str) -> str:
    """The package folder for a configured `code_library`: `x/library.py` -> `x/library`, a folder as it is."""
    path = os.path.abspath(os.path.expanduser(str(code_library)))
    return path[:-3] if path.endswith(".py") else path


def legacy_file(code_library: str) -> str:
    """The single-file library the package replaces (`x/library.py`), migrated when it exists."""
    return package_dir(code_library) + ".py"


def module_path(package: str, module: str) -> str:
    return os.path.join(package, module + ".py")


def _index_path(package: str, module: Optional[str] = None) -> str:
    return os.path.join(package, INDEX_FOLDER, (module or "names") + ".json")


def stat_of(path: str) -> Optional[List[int]]:
    """``[mtime_ns, size]`` of a file, or None: what tells the index that a module changed."""
    try:
        found = os.stat(path)
        return [found.st_mtime_ns, found.st_size]
    except OSError:
        return None


def module_names(package: str) -> List[str]:
    """The modules of the package, sorted (files `<identifier>.py`, not starting with `_`)."""
    try:
        return sorted(
            entry[:-3]
            for entry in os.listdir(package)
            if entry.endswith(".py") and not entry.startswith("_") and entry[:-3].isidentifier()
        )
    except OSError:
        return []


def init_text() -> str:
    """The text of the package's ``__init__.py`` (lazy: it imports a module when one of its names is asked for)."""
    with open(_INIT_TEMPLATE, "r", encoding="utf-8") as f:
        return f.read()


# ~~~ What one module defines ~~~
def _docstring(node: ast.AST) -> str:
    return ast.get_docstring(node) or ""


def entries_of_source(source: str) -> Tuple[str, List[Dict[str, Any]]]:
    """``(the module's docstring, its entries)``: each top-level function, class and constant, with ``name``,
    ``kind`` (function, class, constant), ``signature``, ``doc`` (the docstring), ``line`` and, for a class, its
    public ``methods`` as ``[signature, doc]``. SyntaxError if the source does not parse."""
    tree = ast.parse(source)
    lines = source.split("\n")

    def digest(node: ast.AST) -> str:  # of the definition's text: tells a resumed task what was saved since
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        return hashlib.sha256("\n".join(lines[first - 1 : node.end_lineno]).encode("utf-8")).hexdigest()[:16]

    entries: List[Dict[str, Any]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            entries.append(
                {
                    "name": node.name,
                    "kind": "function",
                    "signature": signature_text(node),
                    "doc": _docstring(node),
                    "line": node.lineno,
                    "digest": digest(node),
                }
            )
        elif isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            methods = [
                [signature_text(item), _docstring(item)]
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (not item.name.startswith("_") or item.name == "__init__")
            ]
            entries.append(
                {
                    "name": node.name,
                    "kind": "class",
                    "doc": _docstring(node),
                    "line": node.lineno,
                    "signature": f"class {node.name}({bases}):" if bases else f"class {node.name}:",
                    "methods": methods,
                    "digest": digest(node),
                }
            )
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and not target.id.startswith("_"):
                    entries.append(
                        {
                            "name": target.id,
                            "kind": "constant",
                            "doc": "",
                            "line": node.lineno,
                            "signature": shorten(_segment(lines, node) or target.id, 100),
                        }
                    )
    return (ast.get_docstring(tree) or "").strip().split("\n")[0], entries


def _segment(lines: List[str], node: ast.AST) -> str:
    """``ast.get_source_segment`` of a top-level statement, from its source's lines (that function splits the whole
    source again at each call: a module of thousands of constants took minutes)."""
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first].encode("utf-8")[node.col_offset : node.end_col_offset].decode("utf-8", "replace")
    head = lines[first].encode("utf-8")[node.col_offset :].decode("utf-8", "replace")
    tail = lines[last].encode("utf-8")[: node.end_col_offset].decode("utf-8", "replace")
    return "\n".join([head, *lines[first + 1 : last], tail])


def _module_record(package: str, module: str) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """``(names.json's record of a module, its entries)`` from its file (parsed); a module that does not parse, or
    does not read (not UTF-8: edited by hand in another encoding), is recorded with why and no entries: it is
    skipped, and said (a module edited by hand must not stop every run)."""
    path = module_path(package, module)
    stat = stat_of(path)
    try:
        doc, entries = entries_of_source(read_text(path))
        return {"stat": stat, "doc": doc}, entries
    except SyntaxError as error:
        why = f"line {error.lineno}: {error.msg}" if error.lineno else error.msg
    except (ValueError, RecursionError, MemoryError) as error:  # a NUL byte (Python 3.11), code nested too deep
        why = str(error) or type(error).__name__
    except MemoryFileError as error:
        why = error.reason.removeprefix("it is ")
    return {"stat": stat, "doc": "", "error": why}, []


# ~~~ The index ~~~
# The index is a cache of what the modules define: a file of it that does not read (not UTF-8, not JSON, not of its
# shape, empty), or a module's that is not what names.json recorded of it (its size and CRC), is built again from
# the modules, and the run says so in one line (a file silently wrong would hide functions from prompts and search
# for good).
_KINDS = ("function", "class", "constant")


def _read_json(path: str) -> Tuple[Any, str, List[int]]:
    """``(the JSON value of an index file, "", its fingerprint)``, or ``(None, why it does not read, [])`` (why: ""
    when it is missing). The fingerprint, ``[size, CRC-32]`` of its bytes, tells a file changed at the same size."""
    try:
        text = read_text(path)
    except MemoryFileError as error:
        return None, error.reason, []
    if not text.strip():
        return None, "it is empty" if os.path.lexists(path) else "", []
    try:
        value = json.loads(text)
    except ValueError:
        return None, "it is not JSON", []
    return value, "", _fingerprint(text.encode("utf-8"))


def _fingerprint(data: bytes) -> List[int]:
    return [len(data), zlib.crc32(data)]


def _read_index(path: str) -> Tuple[Optional[Dict[str, Any]], str]:
    """``(names.json's index, "")``, or ``(None, why it does not read)``: "" when it is missing or of another
    version (an index made by another Jarvis is built again without a word)."""
    value, why, _ = _read_json(path)
    if isinstance(value, dict) and value.get("version") != INDEX_VERSION:
        return None, ""
    modules, names = (value.get("modules"), value.get("names")) if isinstance(value, dict) else (None, None)
    if value is not None and not (
        isinstance(modules, dict)
        and all(type(r) is dict for r in modules.values())
        and isinstance(names, dict)
        and all(type(m) is str for m in names.values())
    ):
        return None, "it is not an index of the library"
    return value, why


def _read_entries(path: str) -> Tuple[Optional[List[Dict[str, Any]]], str, List[int]]:
    """``(the entries of a module's index file, "", its fingerprint)``, or ``(None, why they do not read, [])``."""
    value, why, fingerprint = _read_json(path)
    entries = value.get("entries") if isinstance(value, dict) else None
    if value is not None and not (
        isinstance(entries, list)
        and all(
            type(e) is dict
            and type(e.get("name")) is str
            and e.get("kind") in _KINDS
            and type(e.get("signature")) is str
            and type(e.get("line")) is int
            for e in entries
        )
    ):
        return None, "it is not an index of the module", []
    return entries, why or ("" if value is not None else "it is missing"), fingerprint


def _stale_modules(package: str, index: Optional[Dict[str, Any]]) -> Tuple[List[str], List[str], List[str]]:
    """``(modules to index again, modules gone, modules whose index file is not the size recorded)`` against what
    ``index`` recorded (a stat of each file: its CRC is checked when it is read)."""
    known = (index or {}).get("modules") or {}
    modules = module_names(package)
    stale, damaged = [], []
    for module in modules:
        record = known.get(module) or {}
        found = stat_of(_index_path(package, module))
        if record.get("stat") != stat_of(module_path(package, module)) or found is None:
            stale.append(module)
        elif "index" in record and (not isinstance(record["index"], list) or record["index"][:1] != found[1:]):
            stale.append(module)
            damaged.append(module)
    return stale, [m for m in known if m not in modules], damaged


def write_index(package: str, index: Dict[str, Any], modules: Dict[str, List[Dict[str, Any]]]) -> None:
    """Write the entries of ``modules`` (``{module: entries}``), then ``names.json``, which records each index
    file's fingerprint (size and CRC): a save killed in between leaves a module newer than names.json records, which
    is indexed again on the next read. Called under the lock."""
    os.makedirs(os.path.join(package, INDEX_FOLDER), exist_ok=True)
    for module, entries in modules.items():
        data = json.dumps({"entries": entries}, ensure_ascii=False).encode("utf-8")
        path = _index_path(package, module)
        atomic_write(path, data)
        index["modules"][module]["index"] = _fingerprint(data)
        with _cache_lock:  # (what module_entries would read back)
            _module_entries[path] = (stat_of(path), entries)
    atomic_write(_index_path(package), json.dumps(index, ensure_ascii=False))


def _reindex(package: str, index: Optional[Dict[str, Any]], stale: List[str], gone: List[str]) -> Dict[str, Any]:
    """The index with ``stale`` modules parsed again and ``gone`` ones dropped; written to the package."""
    index = {
        "version": INDEX_VERSION,
        "modules": dict((index or {}).get("modules") or {}),
        "names": dict((index or {}).get("names") or {}),
    }
    redone: Dict[str, List[Dict[str, Any]]] = {}
    changed = set(stale) | set(gone)
    index["names"] = {n: m for n, m in index["names"].items() if m not in changed}
    for module in gone:
        index["modules"].pop(module, None)
        try:
            os.remove(_index_path(package, module))
        except OSError:
            pass
    for module in stale:
        record, entries = _module_record(package, module)
        index["modules"][module] = record
        redone[module] = entries
        for entry in entries:
            index["names"].setdefault(entry["name"], module)
    write_index(package, index, redone)
    return index


def _rebuilt(package: str, suspects: Iterable[str] = ()) -> Dict[str, Any]:
    """The index caught up with the modules; each index file that cannot be used (names.json; a module's, among
    those not the size names.json recorded and ``suspects``) is said in one line and built again. Called under the
    lock: what a save of another process was writing is whole by then, and not taken for damage."""
    names_path = _index_path(package)
    index, why = _read_index(names_path)
    stale, gone, damaged = _stale_modules(package, index)
    if index is None:
        stale = module_names(package)
        if why:
            say_rebuilt(f"The code library's index {names_path}", why, f"the library's {len(stale)} module(s)")
        return _reindex(package, index, stale, gone)
    for module in dict.fromkeys([*damaged, *suspects]):
        path = _index_path(package, module)
        why = _damage(path, index["modules"].get(module) or {})
        if why and os.path.isfile(module_path(package, module)):
            say_rebuilt(f"The code library's index of library/{module}.py ({path})", why, "the module")
            stale += [] if module in stale else [module]
    return _reindex(package, index, stale, gone)


def _damage(path: str, record: Dict[str, Any]) -> str:
    """Why the index file of a module (names.json's ``record`` of it) cannot be used, or ""."""
    entries, why, fingerprint = _read_entries(path)
    if entries is not None and "index" in record and fingerprint != record["index"]:
        return "it does not match the module"
    return why


def load_index(package: str, held: bool = False) -> Dict[str, Any]:
    """The names index, indexed again for the modules that changed since (under the library's lock, written back;
    ``held``: the caller holds it); the same object while nothing changed (a stat of the folder's files, no parse)."""
    names_path = _index_path(package)
    key = (repr(stat_of(names_path)), repr([(m, stat_of(module_path(package, m))) for m in module_names(package)]))
    with _cache_lock:
        cached = _indexes.get(package)
    if cached is not None and cached[0] == key:
        return cached[1]
    index, _ = _read_index(names_path)
    stale, gone, _ = _stale_modules(package, index)
    if stale or gone or index is None:
        with contextlib.nullcontext() if held else file_lock(package):
            index = _rebuilt(package)
        key = (repr(stat_of(names_path)), repr([(m, stat_of(module_path(package, m))) for m in module_names(package)]))
    with _cache_lock:
        _indexes[package] = (key, index)
    return index


def module_entries(package: str, module: str, held: bool = False) -> List[Dict[str, Any]]:
    """The entries of one module from its index file (read again only when that file changed); an index file that
    cannot be used (does not read, or is not what names.json recorded) is built again from the module, and said
    (``held``: the caller holds the library's lock)."""
    path = _index_path(package, module)
    stat = stat_of(path)
    with _cache_lock:
        cached = _module_entries.get(path)
        known = _indexes.get(package)
    if cached is not None and cached[0] == stat:
        return cached[1]
    entries, _, fingerprint = _read_entries(path)
    recorded = (known[1]["modules"].get(module) or {}).get("index") if known else None
    if entries is None or (recorded is not None and fingerprint != recorded):
        if not os.path.isfile(module_path(package, module)):
            return []
        with contextlib.nullcontext() if held else file_lock(package):
            _rebuilt(package, suspects=[module])
        with _cache_lock:
            cached = _module_entries.get(path)
        if cached is not None and cached[0] == stat_of(path):
            return cached[1]
        return _read_entries(path)[0] or []  # (whole again: another process's save was writing it)
    with _cache_lock:
        _module_entries[path] = (stat, entries)
    return entries


# ~~~ What callers use ~~~
def once_per_version(table: Dict[str, Tuple[Any, Any]], package: str, version: Any, make: Callable[[], T]) -> T:
    """What ``make()`` gives for ``package``, made once per ``version`` (an object replaced whenever the package
    changed on disk, such as ``load_index``'s): the same value while it is the same object (do not change it)."""
    with _cache_lock:
        cached = table.get(package)
    if cached is not None and cached[0] is version:
        return cached[1]
    value = make()
    with _cache_lock:
        table[package] = (version, value)
    return value


def library_location(code_library: str) -> Optional[str]:
    """Where the library is on disk, for lists of files: the package folder, else a `library.py` not migrated yet,
    else None."""
    package = package_dir(code_library)
    if os.path.isdir(package):
        return package
    return legacy_file(code_library) if os.path.isfile(legacy_file(code_library)) else None


def definition_sources(code_library: str, names: Iterable[str]) -> Dict[str, Tuple[str, str]]:
    """``{name: (module, its source)}`` for the ``names`` the library defines (functions and classes), reading only
    the modules that hold them; nothing is migrated (a report reads an old run's `library.py` as it is)."""
    from .source import definition_spans

    wanted = set(names)
    package = package_dir(code_library)
    if os.path.isfile(os.path.join(package, "__init__.py")):
        where = {n: m for n, m in load_index(package)["names"].items() if n in wanted}
        files = {m: module_path(package, m) for m in set(where.values())}
    else:
        files, where = {"": legacy_file(code_library)}, {n: "" for n in wanted}
    found: Dict[str, Tuple[str, str]] = {}
    for module, path in files.items():
        text = read_text(path)
        try:
            spans = definition_spans(text) if text else []
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        lines = text.split("\n")
        for name, start, end in spans:
            if where.get(name) == module:
                found[name] = (module, "\n".join(lines[start - 1 : end]))
    return found
