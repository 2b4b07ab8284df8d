"""Changing the library package: saving code into one module, and migrating a single-file `library.py`.

A save reads and writes one module (two when a replaced definition moves), that module's index file and the names
index: it never reads the other modules, and checks what the change can break: a name defined in another module
(``from library import f`` must find one), a module name equal to a definition's, the module's `from __future__`
imports. Names the code uses from other modules are imported at the end of the module, after its own definitions,
so that two modules using each other's functions import each other without a cycle failing.

Every file is replaced atomically, under the library's lock, the module first and its index after: a save killed
between the two leaves a module the index does not match, indexed again on the next read.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import keyword
import os
import re
import shutil
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from aiflows_jarvis.CoreFlowModule import MemoryFileError, archive_copy, atomic_write, file_lock, read_text

from .package import (
    INDEX_VERSION,
    entries_of_source,
    init_text,
    load_index,
    module_entries,
    module_names,
    module_path,
    stat_of,
    write_index,
)
from .source import split_future_imports, whole_error

MAX_MODULE_ENTRIES = 200  # a topic's module is continued in `<topic>_2` past this many definitions
DEFAULT_MODULE = "general"
# Topics a function is put in by default: (module, its one line, words of names and docstrings that point to it).
TOPICS: Tuple[Tuple[str, str, frozenset], ...] = tuple(
    (name, line, frozenset(words.split()))
    for name, line, words in (
        (
            "text",
            "Text: strings, words, formatting and parsing.",
            "text texts string strings str word words format slug slugify regex sentence sentences char chars "
            "characters title upper lower split tokens token markdown",
        ),
        (
            "files",
            "Files and paths: reading and writing files and folders.",
            "file files path paths folder folders directory directories dir csv json yaml read write load save",
        ),
        (
            "data",
            "Data: tables, records, series and statistics.",
            "data table tables row rows record records stats statistics statistic mean average median growth rate "
            "rates series sales percent percentage total totals sum count counts column columns dataframe",
        ),
        (
            "maths",
            "Numbers and maths.",
            "math maths number numbers prime primes factor factors sqrt matrix vector integer integers fibonacci gcd "
            "factorial divisible round",
        ),
        (
            "dates",
            "Dates and times.",
            "date dates time times day days month months year years week weeks calendar timestamp duration hour hours",
        ),
        (
            "charts",
            "Charts and images: SVG, plots, colours.",
            "chart charts plot plots svg bar bars graph graphs image images draw drawing color colour colors colours "
            "figure pie histogram",
        ),
        ("web", "Web: URLs, HTTP and HTML.", "url urls http https html web request requests download fetch api page"),
        (
            "collections",
            "Lists, dictionaries and other collections.",
            "list lists dict dicts dictionary items sort sorted unique flatten chunk chunks group merge filter pairs",
        ),
    )
)
_LINES = {DEFAULT_MODULE: "Functions of no particular topic.", **{name: line for name, line, _ in TOPICS}}
_WORD = re.compile(r"[a-z]+")
_MODULE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def topic_of(name: str, doc: str = "") -> str:
    """The topic module a definition goes in by default: the topic whose words its name (counted twice) and its
    docstring's first line use most; `general` when none."""
    words = _WORD.findall(name.lower().replace("_", " ")) * 2 + _WORD.findall((doc or "").split("\n")[0].lower())
    best, score = DEFAULT_MODULE, 0
    for topic, _, vocabulary in TOPICS:
        found = sum(1 for word in words if word in vocabulary or word.rstrip("s") in vocabulary)
        if found > score:
            best, score = topic, found
    return best


def check_module_name(
    module: str, defined: Iterable[str] = (), new: Iterable[str] = (), modules: Iterable[str] = ()
) -> str:
    """ "" if ``module`` can name a module of the library and the definitions ``new`` can be saved into it, else a
    sentence saying why not (and what to do). A name is a module's or a definition's, never both: `from library
    import data` gives the module `data` once it was imported, the function `data` before.

    - ``defined``: the names the library defines, ``new`` included;
    - ``new``: the names of the code being saved;
    - ``modules``: the library's modules."""
    if not _MODULE_NAME.match(module) or keyword.iskeyword(module):
        return (
            f"`{module}` cannot name a library module: use lowercase letters, digits and underscores, starting "
            "with a letter (e.g. `text`, `charts`)"
        )
    if module in set(defined):
        return f"`{module}` is the name of a function or class of the library, so it cannot also name a module"
    modules = set(modules)
    named = [name for name in new if name in modules]
    if named:
        taken = set(defined) | modules | {module}
        return (
            f"`{named[0]}` is the name of the library module library/{named[0]}.py, so it cannot also name a "
            f"function or class (`from library import {named[0]}` would give the module or the function, "
            f"depending on what was imported first). Rename it (e.g. `{_other_name(named[0], module, taken)}`) "
            "with write_code, then call save_code again"
        )
    return ""


def _other_name(name: str, module: str, taken: Set[str]) -> str:
    """A name for a definition called like a module: prefixed with the topic it is saved into (`chart_data`), else
    `get_<name>`; numbered when that is taken too."""
    topic = module.rstrip("0123456789").rstrip("_")
    stem = topic[:-1] if topic.endswith("s") and len(topic) > 3 else topic
    candidate = f"{stem}_{name}" if stem and stem != name else f"get_{name}"
    number = 2
    while candidate in taken:
        candidate, number = f"{candidate.rstrip('0123456789').rstrip('_')}_{number}", number + 1
    return candidate


def default_module(package: str, names: List[str], doc: str, index: Dict[str, Any]) -> str:
    """The module for new code: its topic's, or that topic's next module when it is full; never a library name."""
    topic = topic_of(names[0] if names else "", doc)
    counts: Dict[str, int] = {}
    for where in index["names"].values():
        counts[where] = counts.get(where, 0) + 1
    number, module = 1, topic
    while counts.get(module, 0) >= MAX_MODULE_ENTRIES or module in index["names"] or module in names:
        number += 1
        module = f"{topic}_{number}"
    return module


def used_names(tree: ast.AST) -> Set[str]:
    """Names read anywhere in ``tree`` (function bodies included), but builtins."""
    return names_of(tree)[0]


def bound_names(node: ast.stmt) -> Set[str]:
    """Names a top-level statement binds (imports, assignments, definitions, names bound in `if`/`try` blocks)."""
    return names_of(node)[1]


def names_of(node: ast.AST) -> Tuple[Set[str], Set[str]]:
    """``(used_names, bound_names)`` of ``node``, from one walk of its tree (a migration asks both of every
    statement of the library: two walks were most of its time)."""
    used: Set[str] = set()
    bound: Set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            if isinstance(sub.ctx, ast.Load):
                used.add(sub.id)
            elif isinstance(sub.ctx, ast.Store):
                bound.add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in sub.names if a.name != "*")
        elif sub is node and isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(sub.name)
    return {name for name in used if not hasattr(builtins, name)}, bound


def cross_imports(names_by_module: Dict[str, List[str]]) -> str:
    """``from .module import a, b`` lines, one per module."""
    return "\n".join(
        f"from .{module} import {', '.join(sorted(set(names)))}  # defined in library/{module}.py"
        for module, names in sorted(names_by_module.items())
        if names
    )


def module_text(module: str, futures: List[str], body: str) -> str:
    """A module's file: its docstring (one line), its `from __future__` imports, then the body."""
    topic = module.rstrip("0123456789").rstrip("_") if module[-1:].isdigit() else module
    line = _LINES.get(topic, f"Functions on {module.replace('_', ' ')}.")
    head = f'"""{line}"""\n' + ("\n".join(futures) + "\n" if futures else "")
    return head + ("\n\n" + body.strip("\n") + "\n" if body.strip() else "")


def _split_module(text: str) -> Tuple[List[str], str, str]:
    """``(futures, docstring line or "", the rest)`` of a module's text."""
    futures, body = split_future_imports(text) if text.strip() else ([], "")
    tree = ast.parse(body)
    if (
        tree.body
        and isinstance(tree.body[0], ast.Expr)
        and isinstance(tree.body[0].value, ast.Constant)
        and isinstance(tree.body[0].value.value, str)
    ):
        lines = body.split("\n")
        end = tree.body[0].end_lineno
        return futures, "\n".join(lines[:end]), "\n".join(lines[end:]).strip("\n")
    return futures, "", body


def _without(text: str, names: Set[str]) -> str:
    """``text`` without its top-level definitions of ``names``."""
    lines = text.split("\n")
    for node in sorted(ast.parse(text).body, key=lambda n: -n.lineno):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            del lines[first - 1 : node.end_lineno]
    return "\n".join(lines)


def _joined(module: str, old_text: str, futures: List[str], body: str) -> str:
    """The module's new text: its old one (or a new module's head) with ``body`` appended, futures first."""
    if not old_text.strip():
        return module_text(module, futures, body)
    old_futures, doc, rest = _split_module(old_text)
    all_futures = list(dict.fromkeys(old_futures + futures))
    head = (doc + "\n" if doc else "") + ("\n".join(all_futures) + "\n" if all_futures else "")
    return head + ("\n\n" + rest.strip("\n") + "\n" if rest.strip() else "") + "\n\n" + body.strip("\n") + "\n"


def update_index(
    package: str, modules: Dict[str, str], index: Dict[str, Any], progress: Optional[Callable[[str], None]] = None
) -> Dict[str, Any]:
    """Index the modules just written (``{module: text}``; an empty text: the module is gone) over ``index`` (as
    read before they were written: read now, it would find them changed and parse them again) and write the index.
    ``progress`` is told how many modules are indexed, after each."""
    found: Dict[str, Optional[Tuple[str, List[Dict[str, Any]]]]] = {}
    for module, text in modules.items():
        found[module] = entries_of_source(text) if text else None
        if progress is not None:
            progress(f"{len(found)} of {len(modules)} modules indexed")
    return _write_modules(package, index, found)


def _write_modules(
    package: str, index: Dict[str, Any], found: Dict[str, Optional[Tuple[str, List[Dict[str, Any]]]]]
) -> Dict[str, Any]:
    """Write the index with the modules of ``found`` (``{module: (docstring, entries)}``, None: gone) as given."""
    index = {"version": INDEX_VERSION, "modules": dict(index["modules"]), "names": dict(index["names"])}
    redone: Dict[str, List[Dict[str, Any]]] = {}
    for module, parsed in found.items():
        index["names"] = {n: m for n, m in index["names"].items() if m != module}
        if parsed is None:
            index["modules"].pop(module, None)
            continue
        doc, entries = parsed
        index["modules"][module] = {"stat": stat_of(module_path(package, module)), "doc": doc}
        redone[module] = entries
        for entry in entries:
            index["names"].setdefault(entry["name"], module)
    write_index(package, index, redone)
    return index


def _index_appended(package: str, index: Dict[str, Any], module: str, appended: str, lines_before: int) -> None:
    """Index ``appended``, just added at the end of ``module`` after ``lines_before`` lines: its entries join the
    module's (as read before the write); nothing else of the module is parsed."""
    _, added = entries_of_source(appended)
    for entry in added:
        entry["line"] += lines_before
    doc = index["modules"][module].get("doc", "")
    _write_modules(package, index, {module: (doc, list(module_entries(package, module, held=True)) + added)})


def save_code(package: str, code: str, module: Optional[str], replace: bool) -> Tuple[str, str, List[str]]:
    """Save ``code`` (it parses and runs nothing on import: the caller checked) into ``module`` (None: its topic's).

    Returns ``(why nothing was saved or "", the module saved into, the definitions replaced)``. Called under the
    library's lock (``file_lock(package)``)."""
    index = load_index(package, held=True)
    tree = ast.parse(code)
    doc, entries = entries_of_source(code)
    names = [e["name"] for e in entries]
    where = index["names"]
    clashes = sorted(n for n in names if n in where)
    if clashes and not replace:
        places = ", ".join(f"{n} (in library/{where[n]}.py)" for n in clashes)
        return (
            (
                f"Nothing was saved: the library already defines {places}. To replace the existing definition, call "
                "save_code again with replace_existing: true; to keep both, rename the new function with "
                "write_code."
            ),
            "",
            clashes,
        )
    if not module:
        module = (
            where[clashes[0]]
            if clashes
            else default_module(package, names, entries[0]["doc"] if entries else doc, index)
        )
    why = check_module_name(module, set(where) | set(names), names, index["modules"])
    if why:
        return f"Nothing was saved: {why}.", module, clashes
    modules_written: Dict[str, str] = {}
    for other in sorted({where[n] for n in clashes} - {module}):  # a replaced definition moves to `module`
        old = read_text(module_path(package, other))
        archive_copy(os.path.join(os.path.dirname(package), f"library.{other}.py"), old)
        modules_written[other] = _without(old, {n for n in clashes if where[n] == other})
    path = module_path(package, module)
    try:
        old_text = read_text(path)
    except MemoryFileError as error:  # (not UTF-8: edited by hand in another encoding; skipped by the index)
        return (
            (
                f"Nothing was saved: library/{module}.py cannot be read ({error.reason}), so nothing can be added "
                "to it: save into another module (the `module` argument), or ask the user to fix that file."
            ),
            module,
            clashes,
        )
    kept = _without(old_text, set(clashes)) if clashes and module in {where[n] for n in clashes} else old_text
    futures, body = split_future_imports(code)
    outside: Dict[str, List[str]] = {}
    for name in used_names(tree) - set(names) - bound_names_of(tree):
        if name in where and where[name] not in (module,) and name not in clashes:
            outside.setdefault(where[name], []).append(name)
    imports = cross_imports(outside)
    added = (imports + "\n\n\n" if imports else "") + body
    if not clashes and not futures and kept.strip() and module in index["modules"]:
        # The common save: new names appended to a module that compiles (it is indexed). Appending top-level code
        # that compiles alone keeps it so: only the new code is compiled and indexed, whatever the module's size.
        start = kept.rstrip("\n") + "\n\n\n"
        appended = added.strip("\n") + "\n"
        try:
            compile(appended, path, "exec", dont_inherit=True)
        except SyntaxError as error:
            return (
                (
                    f"Nothing was saved: library/{module}.py would not compile with the code (line "
                    f"{(error.lineno or 0) + start.count(chr(10))}: {error.msg})."
                ),
                module,
                clashes,
            )
        atomic_write(path, start + appended)
        _index_appended(package, index, module, appended, start.count("\n"))
        return "", module, clashes
    new_text = _joined(module, kept, futures, added)
    try:
        compile(new_text, path, "exec", dont_inherit=True)
    except SyntaxError as error:
        return (
            (
                f"Nothing was saved: library/{module}.py would not compile with the code (line {error.lineno}: "
                f"{error.msg})."
            ),
            module,
            clashes,
        )
    if clashes and module in {where[n] for n in clashes}:
        archive_copy(os.path.join(os.path.dirname(package), f"library.{module}.py"), old_text)
    modules_written[module] = new_text
    for name, text in modules_written.items():
        atomic_write(module_path(package, name), text)
    update_index(package, modules_written, index)
    return "", module, clashes


def bound_names_of(tree: ast.Module) -> Set[str]:
    found: Set[str] = set()
    for node in tree.body:
        found |= bound_names(node)
    return found


# ~~~ Migration of a single-file library ~~~
class _Segment:
    """What migration needs of one top-level statement: its text (comments above included), the name it defines
    (a function or class) or None, its docstring, the names it uses and binds. No tree is kept."""

    __slots__ = ("text", "name", "doc", "used", "bound")

    def __init__(self, node: ast.stmt, text: str):
        definition = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        self.text, self.name = text, node.name if definition else None
        self.doc = (ast.get_docstring(node) or "") if definition else ""
        self.used, self.bound = names_of(node)


def _segments(
    text: str, block_chars: int = 1 << 15, progress: Optional[Callable[[str], None]] = None
) -> Tuple[List[str], List[_Segment]]:
    """``(the `from __future__` imports, the other top-level statements)`` of ``text`` (its docstring apart), parsed
    in blocks of about ``block_chars`` (a tree of a whole large library is many times its size); ``progress`` is
    told how much was read after each block."""
    from .source import block_end

    futures: List[str] = []
    out: List[_Segment] = []
    start, size, first = 0, block_chars, True
    megabytes = len(text.encode("utf-8")) / 1e6 if progress is not None else 0.0
    while start < len(text):
        end = block_end(text, start, size)
        chunk = text[start:end]
        try:
            body = ast.parse(chunk).body
        except SyntaxError:
            if end < len(text):
                size *= 2  # cut inside a statement: tried again twice as long
                continue
            raise
        lines, previous = chunk.split("\n"), 0
        if first and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            previous, body = body[0].end_lineno, body[1:]
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                futures.append("\n".join(lines[node.lineno - 1 : node.end_lineno]).strip())
            else:
                out.append(_Segment(node, "\n".join(lines[previous : node.end_lineno]).strip("\n")))
            previous = node.end_lineno
        start, size, first = end, block_chars, False
        if progress is not None:
            progress(f"{megabytes * start / len(text):.1f} of {megabytes:.1f} MB read")
    return futures, out


def plan_migration(
    text: str, taken: Dict[str, str], progress: Optional[Callable[[str], None]] = None
) -> Tuple[Dict[str, str], List[str], int]:
    """``({module: text}, names skipped, definitions placed)`` for a single-file library: each definition in its
    topic's module, each other statement (imports, constants) in every module that uses what it binds (in `general`
    when none does), functions of other modules imported at each module's end. ``taken``: names the package already
    has (those definitions are skipped: the archived file keeps them). ``progress``: told how much was read."""
    futures, segments = _segments(text, progress=progress)
    skipped = [seg.name for seg in segments if seg.name in taken]
    all_names = {seg.name for seg in segments if seg.name} | set(taken)
    counts: Dict[str, int] = {}
    next_number: Dict[str, int] = {}
    home: Dict[str, str] = {}
    for seg in segments:
        if not seg.name or seg.name in taken or seg.name in home:
            continue
        topic = topic_of(seg.name, seg.doc)
        number = next_number.get(topic, 1)
        module = topic if number == 1 else f"{topic}_{number}"
        while counts.get(module, 0) >= MAX_MODULE_ENTRIES or module in all_names:
            number += 1
            module = f"{topic}_{number}"
        next_number[topic] = number
        counts[module] = counts.get(module, 0) + 1
        home[seg.name] = module
    members: Dict[str, Set[int]] = {}
    uses: Dict[str, Set[str]] = {}
    for position, seg in enumerate(segments):
        if seg.name in home and seg.name not in taken:
            members.setdefault(home[seg.name], set()).add(position)
            uses.setdefault(home[seg.name], set()).update(seg.used)
    others = [i for i, seg in enumerate(segments) if not seg.name]
    binders: Dict[str, List[int]] = {}  # name -> the statements (not definitions) that bind it
    for i in others:
        for name in segments[i].bound:
            binders.setdefault(name, []).append(i)
    placed: Set[int] = set()
    # A statement goes where what it binds is used (a constant using an import brings it too). Each name a module
    # uses is followed once, to the statements binding it: linear in what the statements use (matching every
    # statement with every module until nothing changed grew as the square of the library).
    pending = [(module, name) for module, used in uses.items() for name in used if name in binders]
    while pending:
        module, name = pending.pop()
        for i in binders[name]:
            if i not in members[module]:
                members[module].add(i)
                placed.add(i)
                for more in segments[i].used - uses[module]:
                    uses[module].add(more)
                    if more in binders:
                        pending.append((module, more))
    rest = [i for i in others if i not in placed]
    if rest:
        members.setdefault(DEFAULT_MODULE, set()).update(rest)
        uses.setdefault(DEFAULT_MODULE, set()).update(*(segments[i].used for i in rest))
    result: Dict[str, str] = {}
    for module, positions in members.items():
        local = {segments[i].name for i in positions} | {n for i in positions for n in segments[i].bound}
        outside: Dict[str, List[str]] = {}
        for name in uses.get(module, set()) - local:
            if name in home and home[name] != module:
                outside.setdefault(home[name], []).append(name)
        body = "\n\n\n".join(segments[i].text for i in sorted(positions))
        footer = cross_imports(outside)
        result[module] = module_text(module, futures, body + ("\n\n\n" + footer if footer else ""))
    return result, skipped, len(home)


def migrate_library(package: str) -> List[str]:
    """Make the package when it is missing, and move a `library.py` beside it into it (the file is kept in the
    memory folder's `archive/`, then removed). Returns the names that were not moved because the package has them
    (the archived copy keeps them). MemoryFileError if `library.py` does not parse: it stays as it is. A move is said
    on the console: where the file goes, how far it is (a status line, or a line every few seconds), what it made."""
    legacy = package + ".py"
    started = time.monotonic()
    with contextlib.ExitStack() as shown:
        with file_lock(package):
            folder = os.path.dirname(package)
            for entry in os.listdir(folder) if os.path.isdir(folder) else []:
                if entry.startswith(".library-migrating-"):  # a migration killed before its end
                    shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
            has_package = os.path.isfile(os.path.join(package, "__init__.py"))
            text = read_text(legacy) if os.path.lexists(legacy) else None
            status = shown.enter_context(_moving(legacy, package)) if text and text.strip() else None
            progress = status.progress if status is not None else None
            index = load_index(package, held=True) if has_package else {"names": {}}
            try:
                modules, skipped, moved = (
                    plan_migration(text, dict(index["names"]), progress) if text and text.strip() else ({}, [], 0)
                )
            except (SyntaxError, ValueError):
                error = SyntaxError(*whole_error(text))
                raise MemoryFileError(
                    f"{legacy} does not compile (line {error.lineno}: {error.msg}), so it cannot be moved into the "
                    f"library package {package}/: fix it, or move it away, then run again."
                ) from None
            if not has_package:
                staging = os.path.join(folder, f".library-migrating-{os.getpid()}")
                os.makedirs(staging)
                atomic_write(os.path.join(staging, "__init__.py"), init_text())
                for module, body in modules.items():
                    atomic_write(os.path.join(staging, module + ".py"), body)
                if os.path.isdir(package):  # a folder without __init__ (made by hand): its files are kept
                    for entry in os.listdir(package):
                        if not os.path.exists(os.path.join(staging, entry)):
                            shutil.move(os.path.join(package, entry), os.path.join(staging, entry))
                    os.rmdir(package)
                os.rename(staging, package)
                written, index = modules, {"version": INDEX_VERSION, "modules": {}, "names": {}}
            else:
                written = {}
                for module, body in modules.items():
                    old = read_text(module_path(package, module))
                    written[module] = _joined(module, old, [], _split_module(body)[2]) if old.strip() else body
                    atomic_write(module_path(package, module), written[module])
            if written or not has_package:
                update_index(package, written, index, progress)
            copy = ""
            if text is not None:
                if text.strip():
                    copy = archive_copy(legacy, text)
                os.remove(legacy)
            load_index(package, held=True)  # (what the package held besides: a folder made by hand)
    if status is not None:
        from aiflows_jarvis.CoreFlowModule import get_console

        kept = f"; {len(skipped)} not moved, as the package defines them (the copy keeps them)" if skipped else ""
        what = "function or class" if moved == 1 else "functions and classes"
        get_console().line(
            "info",
            f"Moved {moved} {what} of {os.path.basename(legacy)} into {len(modules)} "
            f"module(s) of {package}/ in {time.monotonic() - started:.1f} s{kept}; the file "
            f"itself is kept as {copy}.",
        )
    return skipped


@contextlib.contextmanager
def _moving(legacy: str, package: str) -> Iterator[Any]:
    """Say that ``legacy`` is being moved into ``package`` and where it is kept; yield the console's ``Status``
    (its ``progress`` shows how far the move is)."""
    from aiflows_jarvis.CoreFlowModule import get_console

    console = get_console()
    size = os.lstat(legacy).st_size
    size = f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{max(1, round(size / 1000))} KB"
    console.line(
        "info",
        f"Moving {legacy} ({size}) into the library package {package}/, one module per "
        f"topic; the file itself is kept in {os.path.join(os.path.dirname(legacy), 'archive')}/.",
    )
    with console.working(f"Moving {os.path.basename(legacy)} into {os.path.basename(package)}/") as status:
        yield status


def library_digests(package: str) -> Dict[str, str]:
    """``{name: digest of its definition}`` of every function and class (from the index: no module is parsed)."""
    index = load_index(package)
    return {
        e["name"]: e.get("digest", "")
        for m in index["modules"]
        for e in module_entries(package, m)
        if e["kind"] != "constant"
    }


__all__ = [
    "MAX_MODULE_ENTRIES",
    "DEFAULT_MODULE",
    "TOPICS",
    "topic_of",
    "check_module_name",
    "default_module",
    "save_code",
    "plan_migration",
    "migrate_library",
    "library_digests",
    "module_names",
    "update_index",
]
