"""The code library as its callers read it: the package made, or migrated from a single `library.py`, first
(``ensure_library``); its entries (``library_entries``), its structure (``library_structure``) and the summary prompts
show (``package_summary``), each computed once per version of the package's index."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import atomic_write, file_lock, read_text, shorten, warn_once

from .package import init_text, legacy_file, load_index, module_entries, module_path, once_per_version, package_dir
from .save import migrate_library

_listed: Dict[str, Tuple[Dict[str, Any], List[Dict[str, Any]]]] = {}  # (package dir) -> (the index, its entries)
_structured: Dict[str, Tuple[Dict[str, Any], List[Dict[str, Any]]]] = {}  # (package dir) -> (the index, its modules)
_init_checked: set = set()  # packages whose __init__.py was compared with today's in this process


def ensure_library(code_library: str) -> str:
    """The package for a configured `code_library`, made (empty) or migrated from `library.py` when needed; returns
    its folder. Cheap when there is nothing to do (two stats)."""
    package = package_dir(code_library)
    init = os.path.join(package, "__init__.py")
    if os.path.isfile(init) and not os.path.lexists(legacy_file(code_library)):
        if package not in _init_checked:  # once a process: a package made by an older Jarvis gets today's __init__
            _init_checked.add(package)
            if read_text(init) != init_text():
                with file_lock(package):
                    atomic_write(init, init_text())
        return package
    migrate_library(package)
    return package


def library_entries(code_library: str) -> List[Dict[str, Any]]:
    """Every entry of the library, module by module (the modules in the index's order, entries in file order):
    dicts with ``module``, ``name``, ``kind``, ``signature``, ``doc`` (the whole docstring), ``line`` and, for a
    class, ``methods``. Cheap on repeated calls: the same list while nothing changed on disk (do not change it), and
    only what changed is read again."""
    package = ensure_library(code_library)
    index = load_index(package)
    return once_per_version(
        _listed,
        package,
        index,
        lambda: [
            {"module": module, **entry} for module in index["modules"] for entry in module_entries(package, module)
        ],
    )


def library_structure(code_library: str) -> List[Dict[str, Any]]:
    """The library's modules, each with ``module``, ``line`` (one line: its docstring's first line and its names),
    ``count`` (definitions) and ``error`` (why it does not parse, or ""). The same list while nothing changed on
    disk (do not change it). A module that does not parse is said on the console, once per run."""
    package = ensure_library(code_library)
    index = load_index(package)
    structure = once_per_version(_structured, package, index, lambda: _structure(package, index))
    for module in structure:
        if module["error"]:  # (once per run: the prompts say it at every round)
            warn_once(
                f"The code library's module library/{module['module']}.py does not compile "
                f"({module['error']}): its functions cannot be imported until it is fixed "
                f"({module_path(package, module['module'])})."
            )
    return structure


def _structure(package: str, index: Dict[str, Any]) -> List[Dict[str, Any]]:
    out = []
    for module, record in index["modules"].items():
        names = [e["name"] for e in module_entries(package, module)]
        doc = record.get("doc") or ""
        listed = ", ".join(names[:6]) + (f", +{len(names) - 6} more" if len(names) > 6 else "")
        line = f"{doc} ({listed})" if doc and names else doc or listed or "(empty)"
        if record.get("error"):
            line = f"(does not parse: {record['error']})"
        out.append(
            {"module": module, "line": shorten(line, 110), "count": len(names), "error": record.get("error", "")}
        )
    return out


def structure_text(structure: List[Dict[str, Any]], max_chars: Optional[int] = None) -> str:
    """The structure as prompt lines (``- module: line``); over ``max_chars``, names and counts only."""
    head = "The library is the package `library` (`from library import name`); its modules:"
    text = "\n".join([head] + [f"- {m['module']}: {m['line']}" for m in structure])
    if max_chars and len(text) > max_chars:
        text = shorten(f"{head} " + ", ".join(f"{m['module']} ({m['count']})" for m in structure), max_chars)
    return text


def render_entry(entry: Dict[str, Any], detail: str = "full") -> str:
    """One entry as the summary (and the memory index) shows it: signature, and its docstring whole, by its first
    line, or not at all."""

    def doc_lines(doc: str, indent: str) -> List[str]:
        if detail == "signatures":
            return []
        lines = (doc or "(no docstring)").split("\n")
        if detail == "first_line" or len(lines) == 1:
            return [f'{indent}"""{lines[0].strip() if detail == "first_line" else lines[0]}"""']
        return [f'{indent}"""{lines[0]}'] + [f"{indent}{line}" if line else "" for line in lines[1:]] + [f'{indent}"""']

    if entry["kind"] == "constant":
        return entry["signature"]
    lines = [entry["signature"]] + doc_lines(entry.get("doc", ""), "    ")
    for signature, doc in entry.get("methods") or []:
        lines += ["    " + signature] + doc_lines(doc, "        ")
    return "\n".join(lines)


def _render_all(entries: List[Dict[str, Any]], detail: str, limit: Optional[int]) -> Optional[str]:
    separator = "\n\n" if detail == "full" else "\n"
    parts: List[str] = []
    size, module = 0, None
    for entry in entries:
        if entry["module"] != module:
            module = entry["module"]
            parts.append(f"# library/{module}.py")
            size += len(parts[-1]) + 1
        parts.append(render_entry(entry, detail))
        size += len(parts[-1]) + len(separator)
        if limit and size > limit:
            return None
    return _join(parts, separator)


def _join(parts: List[str], separator: str) -> str:
    """The parts joined by ``separator``, a module's header line right above its first entry."""
    out = ""
    for part in parts:
        if not out:
            out = part
        elif out.endswith(".py") and out.rsplit("\n", 1)[-1].startswith("# library/"):
            out += "\n" + part
        else:
            out += separator + part
    return out


LARGE_LIBRARY = "(the library is large"  # how a summary's entries start when they did not fit whole


def summary_head(
    code_library: str, max_chars: Optional[int] = None, structure: Optional[List[Dict[str, Any]]] = None
) -> str:
    """The start of the library's summary: its structure (modules, one line each) within half of ``max_chars``.
    ``structure``: ``library_structure``'s, when the caller has it."""
    structure = library_structure(code_library) if structure is None else structure
    return structure_text(structure, max_chars // 2 if max_chars else None)


def package_summary(
    code_library: str,
    max_chars: Optional[int] = None,
    chosen: Optional[Iterable[Tuple[str, str]]] = None,
    note: str = "",
    whole_only: bool = False,
) -> Optional[str]:
    """What prompts show of the library: its structure (modules, one line each), then the signatures and docstrings
    of ``chosen`` entries (``(module, name)`` pairs; default every entry, modules in order) under their modules'
    headers, within ``max_chars``: beyond it the docstrings are cut to their first line, then only signatures are
    given, and at the last the names (a line says so). ``note``: a line put before the entries (what was chosen and
    how to see the others). "" for an empty library. ``whole_only``: None instead of a cut summary (a caller that
    then picks the entries itself does not pay for the cut ones)."""
    structure = library_structure(code_library)
    entries = library_entries(code_library)
    if not entries and not any(m["error"] for m in structure):
        return ""
    if chosen is not None:
        wanted = {tuple(pair) for pair in chosen}
        entries = [e for e in entries if (e["module"], e["name"]) in wanted]
    head = summary_head(code_library, max_chars, structure)
    room = max(max_chars - len(head) - 2 - (len(note) + 1 if note else 0), 0) if max_chars else None
    body = _render_all(entries, "full", room)
    if body is None and whole_only:
        return None
    if body is None:
        for detail in ("first_line", "signatures"):
            body = _render_all(entries, detail, room)
            if body is not None:
                what = "first docstring lines" if detail == "first_line" else "signatures"
                body = f"{LARGE_LIBRARY}: {what} only)\n{body}"
                break
    if body is None:
        body = shorten(f"{LARGE_LIBRARY}: names only) " + ", ".join(e["name"] for e in entries), room or 80)
    body = f"{note}\n{body}" if note and body else note or body
    return f"{head}\n\n{body}" if body else head
