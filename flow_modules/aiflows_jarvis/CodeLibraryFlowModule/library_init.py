"""The code library's package: its modules hold the functions, grouped by topic, and `from library import f` finds
`f` in whichever module holds it.

Nothing is imported until it is asked for: the names index (`_index/names.json`, kept by Jarvis's save_code) says
which module defines a name, and only that module is imported. A module whose file changed since the index was
written (edited by hand) is scanned for its top-level names, so its new names are found too.

(This text is written by Jarvis as `library/__init__.py` in the memory folder; edit the modules, not this file.)
"""

import importlib as _importlib
import json as _json
import os as _os
import re as _re
import stat as _stat_kinds

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_INDEX = _os.path.join(_HERE, "_index", "names.json")
_TOP_NAME = _re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)", _re.M)
_state = {"key": None, "names": {}}


def _stat(path):
    try:
        found = _os.stat(path)
        return [found.st_mtime_ns, found.st_size]
    except OSError:
        return None


def _read(path, encoding, errors="strict"):
    """The text of a regular file; OSError for anything else (a FIFO is opened without waiting for a writer)."""
    fd = _os.open(path, _os.O_RDONLY | getattr(_os, "O_NONBLOCK", 0))
    with _os.fdopen(fd, "r", encoding=encoding, errors=errors) as f:
        if not _stat_kinds.S_ISREG(_os.fstat(fd).st_mode):
            raise OSError("%s is not a regular file" % path)
        return f.read()


def _module_files():
    try:
        return sorted(
            entry[:-3]
            for entry in _os.listdir(_HERE)
            if entry.endswith(".py") and not entry.startswith("_") and entry[:-3].isidentifier()
        )
    except OSError:
        return []


def _names():
    """``{name: module}``, read again when the index or a module's file changed."""
    modules = _module_files()
    stats = {module: _stat(_os.path.join(_HERE, module + ".py")) for module in modules}
    key = (repr(_stat(_INDEX)), repr(sorted(stats.items())))
    if key == _state["key"]:
        return _state["names"]
    try:
        index = _json.loads(_read(_INDEX, "utf-8"))
    except (OSError, ValueError):
        index = {}
    index = index if isinstance(index, dict) else {}  # (Jarvis builds an index that does not read again)
    known = index.get("modules") if isinstance(index.get("modules"), dict) else {}
    given = index.get("names") if isinstance(index.get("names"), dict) else {}
    names = {name: module for name, module in given.items() if module in stats}
    for module in modules:
        record = known.get(module)
        if isinstance(record, dict) and record.get("stat") == stats[module] and not record.get("error"):
            continue  # (a module that does not compile is scanned: importing its names says why they fail)
        names = {name: where for name, where in names.items() if where != module}
        try:  # (a byte that is not UTF-8 hides no name: importing the name then says why it fails)
            text = _read(_os.path.join(_HERE, module + ".py"), "utf-8-sig", "replace")
        except OSError:
            continue
        for match in _TOP_NAME.finditer(text):
            name = match.group(1) or match.group(2)
            if not name.startswith("_"):
                names.setdefault(name, module)
    _state["key"], _state["names"] = key, names
    return names


def __getattr__(name):
    if name == "__all__":
        return sorted(_names())
    if name.startswith("__"):
        raise AttributeError(name)
    module = _state["names"].get(name)  # what was read last: a name used in a loop costs no stat
    if module is not None:
        found = getattr(_imported(module, name), name, _state)
        if found is not _state:
            return found
    module = _names().get(name)  # a new name, or one that moved: the index is read again if it changed
    if module is None:
        raise AttributeError("the code library has no %r (its modules: %s)" % (name, ", ".join(_module_files())))
    return getattr(_imported(module, name), name)


def _imported(module, name):
    """The library's ``module``; an ImportError naming the module and the line when it does not compile (rather
    than "cannot import name", which sends one looking for the name)."""
    path = _os.path.join(_HERE, module + ".py")
    try:
        return _importlib.import_module(__name__ + "." + module)
    except (SyntaxError, UnicodeDecodeError) as error:
        why = "line %s: %s" % (error.lineno, error.msg) if getattr(error, "lineno", None) else str(error)
        try:
            with open(path, "rb") as f:
                data = f.read()
            data.decode("utf-8")
        except UnicodeDecodeError as undecodable:  # (import says it in other words, or as a bare decoding error)
            at = undecodable.start
            why = "not UTF-8 text: byte 0x%02x at line %d" % (data[at], data.count(b"\n", 0, at) + 1)
        except OSError:
            pass
    raise ImportError(
        "cannot import name %r from library: library/%s.py, which defines it, does not compile (%s); "
        "fix that module (%s)" % (name, module, why, path),
        name=__name__ + "." + module,
    ) from None


def __dir__():
    return sorted(set(globals()) | set(_names()))
