"""Memory files: plans, logs and the code library, read and written in one place.

* Plans and the library are replaced atomically (a temporary file in the same folder, then a rename), so a crash never
  leaves half a file and never loses what was there.
* Logs only grow: one entry per executed command, appended with a single write; earlier entries are never rewritten.
  Reading the logs for a prompt reads only the last entries (from the end of the file), so the cost of a round does
  not grow with the length of the log. An entry cut by a kill (the file does not end with a newline) is closed with a
  line saying so before the next entry is appended, so the next one starts on its own header line.
* Symbolic links are never followed: a memory folder may come from elsewhere (a cloned repository), and a link named
  like a memory file must not make Jarvis overwrite, append to or read (into a prompt) a file outside it. A file
  replaced atomically replaces the link itself; reading or appending to a link is refused with a MemoryFileError.
* Temporary files left by writes that were killed are swept when a run starts (``sweep_temporary_files``).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .errors import ConfigurationError, MemoryFileError
from .run_context import current_run

# An entry header on its own line; or glued after the text of an entry cut by a kill (a log written before cut
# entries were repaired): then only in the exact form `format_log_entry` writes, with its time stamp. Headers are
# looked for where "--- [" occurs (str.find), not by a regular expression tried at every position of a long log.
_LOG_HEADER = re.compile(r"--- \[(\d+)\] [^\n]* ---$", re.M)
_GLUED_HEADER = re.compile(r"--- \[(\d+)\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ ---$", re.M)
_LOG_HEADER_BYTES = re.compile(_LOG_HEADER.pattern.encode(), re.M)
_GLUED_HEADER_BYTES = re.compile(_GLUED_HEADER.pattern.encode(), re.M)
# The start of a header cut by a kill on the last line of a log (its number is taken, so that none repeats).
_CUT_HEADER = re.compile(r"--- \[(\d+)\]")
CUT_ENTRY_MARKER = "[the entry above was cut off: Jarvis was stopped while writing it]"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# `atomic_write`'s temporary files: `.<name>.<12 hex digits>.tmp` beside the file they replace.
_TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")


def _open_no_link(path: str, flags: int, mode: int = 0o666) -> int:
    """``os.open`` that refuses a symbolic link as the last part of ``path`` (MemoryFileError saying what to do)."""
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as error:
        if os.path.islink(path):
            raise MemoryFileError(
                f"{path} is a symbolic link (to {os.readlink(path)}). Jarvis does not follow links in its memory "
                "folder, so that a folder from elsewhere cannot make it read or overwrite other files: replace the "
                "link with a copy of the file (cp --remove-destination \"$(readlink -f LINK)\" LINK) or remove it."
            ) from error
        raise


def read_text(path: str) -> str:
    """The file's text, or '' if it does not exist. A UTF-8 byte-order mark at its start is dropped (Python and
    editors read the file the same without it; a file written back is written without it). A symbolic link is refused
    (MemoryFileError): what is read goes into prompts, and a link could bring any file of the user's into one."""
    try:
        fd = _open_no_link(path, os.O_RDONLY)
        try:  # read raw: a text file object costs five more system calls, and a prompt reads memory every round
            size = os.fstat(fd).st_size
            chunks = [os.read(fd, size + 1)]
            while chunks[-1]:  # the file grew since, or it reports no size (/proc)
                chunks.append(os.read(fd, max(size, 1 << 16)))
        finally:
            os.close(fd)
        text = b"".join(chunks).decode("utf-8-sig")
        return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text  # as text mode reads
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as error:
        raise MemoryFileError(f"Cannot read memory file {path}: {error}") from error


def _create_exclusive(prefix: str, suffix: str) -> Tuple[int, str]:
    """A new file ``<prefix><random><suffix>`` opened for writing, mode 0666 minus the umask."""
    while True:
        path = f"{prefix}{os.urandom(6).hex()}{suffix}"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), path
        except FileExistsError:
            continue


def atomic_write(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (temporary file in the same folder, fsync, rename).

    A symbolic link at ``path`` is replaced by the file (the rename replaces the link itself): what it pointed to is
    never written. A regular file replaced keeps its mode; a new file gets 0666 minus the umask.
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        # Created 0666 minus the umask, as any new file of the user's (mkstemp would make it 0600).
        fd, tmp = _create_exclusive(os.path.join(folder, f".{os.path.basename(path)}."), ".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            try:
                existing = os.lstat(path)
            except FileNotFoundError:
                existing = None
            if existing is not None and stat.S_ISREG(existing.st_mode):  # not a link's target's mode
                os.chmod(tmp, existing.st_mode & 0o777)
            os.replace(tmp, path)
        except BaseException:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
    except OSError as error:
        raise MemoryFileError(f"Cannot write memory file {path}: {error}") from error


def append_text(path: str, text: str) -> None:
    """Append ``text`` with one write on an O_APPEND descriptor: what was in the file is never touched. A symbolic
    link at ``path`` is refused (MemoryFileError): appending through it would write to a file outside the memory."""
    try:
        data = text.encode("utf-8")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = _open_no_link(path, flags, 0o644)
        except FileNotFoundError:  # its folder is not there (yet): made, then opened again
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            fd = _open_no_link(path, flags, 0o644)
        try:
            while data:
                written = os.write(fd, data)
                data = data[written:]
        finally:
            os.close(fd)
    except OSError as error:
        raise MemoryFileError(f"Cannot append to memory file {path}: {error}") from error


def _ends_cut(path: str) -> bool:
    """Whether the file is not empty and does not end with a newline (its last write was cut)."""
    try:
        fd = _open_no_link(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise MemoryFileError(f"Cannot read memory file {path}: {error}") from error
    try:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    finally:
        os.close(fd)


def sweep_temporary_files(folder: str, older_than: float = 600.0) -> List[str]:
    """Remove the temporary files ``atomic_write`` left in ``folder`` (and its ``archive/``) when it was killed.

    Only files named as it names them (``.<name>.<12 hex digits>.tmp``), only regular files (never what a link points
    to), and only those not modified for ``older_than`` seconds: a write takes milliseconds, so a younger one may be
    another live process's write in progress. Returns the paths removed; what cannot be removed is left.
    """
    removed = []
    now = time.time()
    for where in (folder, os.path.join(folder, "archive")):
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            if not _TEMPORARY.match(name):
                continue
            path = os.path.join(where, name)
            try:
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode) and now - info.st_mtime > older_than:
                    os.unlink(path)
                    removed.append(path)
            except OSError:
                continue
    return removed


def archive_copy(path: str, text: str) -> str:
    """Keep ``text`` (what ``path`` held) in ``<folder of path>/archive/<name>-<time>-<n>``; returns the copy's path."""
    folder = os.path.join(os.path.dirname(os.path.abspath(path)), "archive")
    os.makedirs(folder, exist_ok=True)
    stem, suffix = os.path.splitext(os.path.basename(path))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    number = 1
    while os.path.exists(os.path.join(folder, f"{stem}-{stamp}-{number}{suffix}")):
        number += 1
    copy_path = os.path.join(folder, f"{stem}-{stamp}-{number}{suffix}")
    atomic_write(copy_path, text)
    return copy_path


# ~~~ Logs ~~~
def shorten(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping head and tail, saying how much was cut."""
    text = str(text)
    if limit <= 0 or len(text) <= limit:
        return text
    head = int(limit * 0.7)
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[len(text) - tail:] if tail else ''}"


def summarize_arguments(command_args: Optional[Dict[str, Any]], limit_per_value: int = 300) -> str:
    if not command_args:
        return "(none)"
    parts = []
    for name, value in command_args.items():
        rendered = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        parts.append(f"{name} = {shorten(rendered, limit_per_value)!r}" if isinstance(value, str)
                     else f"{name} = {shorten(rendered, limit_per_value)}")
    return "; ".join(parts)


def format_log_entry(number: int, command: str, command_args: Optional[Dict[str, Any]], result: Any,
                     result_limit: int = 1500, when: Optional[float] = None) -> str:
    """One readable log entry: a header line, the arguments, the result (both shortened)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when if when is not None else time.time()))
    result_text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    result_text = shorten(result_text.strip(), result_limit).replace("\n", "\n    ")
    return (
        f"--- [{number}] {stamp} {command} ---\n"
        f"arguments: {summarize_arguments(command_args)}\n"
        f"result: {result_text}\n"
    )


def _read_tail(path: str, min_headers: int, max_bytes: Optional[int] = None,
               block: int = 1 << 13) -> Tuple[str, bool]:
    """The end of the file, at least ``min_headers`` entry headers long (or the whole file, or its last ``max_bytes``
    bytes when that comes first); and whether it is whole. Blocks read back from the end double in size, so a file
    with few headers costs a few reads of its length, not one per block."""
    try:
        fd = _open_no_link(path, os.O_RDONLY)
    except FileNotFoundError:
        return "", True
    except OSError as error:
        raise MemoryFileError(f"Cannot read memory file {path}: {error}") from error
    with os.fdopen(fd, "rb") as f:
        return _read_tail_of(f, os.fstat(f.fileno()).st_size, min_headers, max_bytes, block)


def _read_tail_of(f, size: int, min_headers: int, max_bytes: Optional[int] = None,
                  block: int = 1 << 13) -> Tuple[str, bool]:
    """``_read_tail`` of an open file of ``size`` bytes."""
    start, chunk = size, b""
    while start > 0:
        start = max(0, size - block, size - max_bytes if max_bytes else 0)
        f.seek(start)
        chunk = f.read(size - start)
        found = len(_headers(chunk, (_LOG_HEADER_BYTES, _GLUED_HEADER_BYTES)))
        if found >= min_headers or (max_bytes and size - start >= max_bytes):
            break
        block *= 2
    return chunk.decode("utf-8", errors="replace"), start == 0


def _headers(text, patterns=(_LOG_HEADER, _GLUED_HEADER)) -> List[Tuple[int, int, bool]]:
    """``[(number, start, glued)]`` of the entry headers in ``text`` (str, or bytes with the bytes patterns)."""
    own_line, glued = patterns
    mark, newline = ("--- [", "\n") if isinstance(text, str) else (b"--- [", b"\n")
    found = []
    at = text.find(mark)
    while at != -1:
        after_text = at > 0 and text[at - 1:at] != newline
        match = (glued if after_text else own_line).match(text, at)
        if match:
            found.append((int(match.group(1)), at, after_text))
        at = text.find(mark, at + 1)
    return found


# The tail of a log as a reader last saw it, per file: the next read takes in only what was appended since (a round
# appends one entry), instead of reading and parsing the last entries again. Checked at every use against the file
# (the same file, not shorter, the bytes before the end the view knows unchanged); a log replaced, cut short or
# rewritten is read again from its end.
_VIEW_MAX_ENTRIES = 1000  # a tail of more entries is read as before (a view is for prompts' tails)
_VIEW_CHECK_BYTES = 64
_VIEWS_OF_LOGS = 16


class _LogView:
    """The last entries of one log: ``text`` (the file from some entry header, or from its start, to ``end``),
    ``headers`` (``[(number, position in text)]``, as ``split_log_entries`` keeps them) and ``whole`` (``text``
    starts at the file's start)."""

    __slots__ = ("ident", "end", "mtime_ns", "check", "text", "headers", "whole", "keep", "max_bytes")

    def __init__(self, ident, end, mtime_ns, check, text, whole, keep, max_bytes):
        self.ident, self.end, self.mtime_ns, self.check = ident, end, mtime_ns, check
        self.text, self.whole, self.keep, self.max_bytes = text, whole, keep, max_bytes
        self.headers: List[Tuple[int, int]] = []
        self._add_headers(text, 0)

    def _add_headers(self, text: str, offset: int) -> None:
        for number, start, glued in _headers(text):
            if glued and self.headers and number < self.headers[-1][0]:
                continue  # text that quotes a header, not one cut off
            self.headers.append((number, offset + start))

    def extend(self, added: str) -> None:
        """Take in text appended to the file (the view's text ends with a newline: a header at its start is on its
        own line), then drop entries beyond the ``keep`` last."""
        offset = len(self.text)
        self.text += added
        self._add_headers(added, offset)
        if len(self.headers) > self.keep:
            cut = self.headers[-self.keep][1]
            self.text = self.text[cut:]
            self.headers = [(number, start - cut) for number, start in self.headers[-self.keep:]]
            self.whole = False

    def snapshot(self) -> "_LogTail":
        return _LogTail(self.text, self.whole, tuple(self.headers))


class _LogTail(NamedTuple):
    """A view's content at one moment (what readers use, outside the lock)."""

    text: str
    whole: bool
    headers: Tuple[Tuple[int, int], ...]

    def entries(self, count: int) -> List[Tuple[int, str]]:
        """``[(number, entry text)]`` of the last ``count`` entries (``split_log_entries`` of the text, cut)."""
        headers, text = self.headers, self.text
        first = max(0, len(headers) - count)
        return [(number, text[start:headers[i + 1][1] if i + 1 < len(headers) else len(text)].rstrip("\n"))
                for i, (number, start) in enumerate(headers[first:], first)]


_log_views: "OrderedDict[str, _LogView]" = OrderedDict()
_log_views_lock = threading.Lock()


def _log_view(path: str, keep: Optional[int] = None, max_bytes: Optional[int] = None) -> Optional[_LogTail]:
    """The view of the log ``path`` brought up to date with the file. With ``keep`` (entries wanted, at least), one
    is made when there is none fit for it (the file read from its end, as ``_read_tail`` does); without, the view a
    reader made, or None."""
    key = os.path.abspath(path)
    with _log_views_lock:
        view = _log_views.get(key)
        if view is not None and keep is not None and (view.keep < keep or view.max_bytes != max_bytes):
            view = None
        if view is None and keep is None:
            return None
        try:
            fd = _open_no_link(path, os.O_RDONLY)
        except FileNotFoundError:
            _log_views.pop(key, None)
            if keep is None:
                return None
            return _LogTail("", True, ())
        except OSError as error:
            raise MemoryFileError(f"Cannot read memory file {path}: {error}") from error
        try:
            info = os.fstat(fd)
            ident, size = (info.st_dev, info.st_ino), info.st_size
            if view is not None and not _view_holds(view, fd, ident, size, info.st_mtime_ns):
                view = None
            check = None  # the file's last bytes, when what was just read gives them
            if view is None:
                if keep is None:
                    _log_views.pop(key, None)
                    return None
                view = _read_view(fd, size, keep, max_bytes)
            elif size == view.end:
                check = view.check
            else:
                added = os.pread(fd, size - view.end, view.end)
                if len(added) == size - view.end:  # the bytes checked, then these: the file's end
                    check = (view.check + added)[-_VIEW_CHECK_BYTES:]
                    view.extend(added.decode("utf-8", errors="replace"))
                    if max_bytes and len(view.text) * 4 > max_bytes and len(view.text.encode()) > max_bytes:
                        view = _read_view(fd, size, view.keep, max_bytes)  # bounded as a read from the end is
                else:  # cut short since the fstat: read again
                    view = _read_view(fd, size, view.keep, max_bytes)
            view.ident, view.end, view.mtime_ns = ident, size, info.st_mtime_ns
            view.check = check if check is not None else \
                os.pread(fd, min(size, _VIEW_CHECK_BYTES), size - min(size, _VIEW_CHECK_BYTES))
        finally:
            os.close(fd)
        _log_views[key] = view
        _log_views.move_to_end(key)
        while len(_log_views) > _VIEWS_OF_LOGS:
            _log_views.popitem(last=False)
        return view.snapshot()


def _view_holds(view: _LogView, fd: int, ident: tuple, size: int, mtime_ns: int) -> bool:
    """Whether ``view`` still describes the open file: the same file, not shorter, unchanged up to the view's end (its
    last bytes compared), the view's text ending with a newline when something was appended (else the appended
    text may continue a cut line)."""
    if view.ident != ident or size < view.end or (size == view.end and mtime_ns != view.mtime_ns):
        return False
    if size > view.end and view.text and not view.text.endswith("\n"):
        return False
    return os.pread(fd, len(view.check), view.end - len(view.check)) == view.check


def _read_view(fd: int, size: int, keep: int, max_bytes: Optional[int]) -> _LogView:
    """A view of an open log made by reading it from its end (``_read_tail``'s reading)."""
    with os.fdopen(os.dup(fd), "rb") as f:
        text, whole = _read_tail_of(f, size, keep, max_bytes)
    view = _LogView(None, size, 0, b"", "", True, keep, max_bytes)
    view.whole = whole
    view.extend(text)
    view.whole = view.whole and whole
    return view


def split_log_entries(text: str) -> List[Tuple[int, str]]:
    """``[(number, entry text)]`` for the entries in ``text``. A header glued to the end of a cut entry (a log from
    before cut entries were repaired) starts an entry too, when its number does not go back."""
    headers: List[Tuple[int, int]] = []
    for number, start, glued in _headers(text):
        if glued and headers and number < headers[-1][0]:
            continue  # text that quotes a header, not one cut off
        headers.append((number, start))
    entries = []
    for i, (number, start) in enumerate(headers):
        end = headers[i + 1][1] if i + 1 < len(headers) else len(text)
        entries.append((number, text[start:end].rstrip("\n")))
    return entries


def last_log_number(path: str) -> int:
    """The number of the last entry of a log (0 if none), a header cut by a kill on its last line included."""
    return _log_end(path)[0]


def _log_end(path: str) -> Tuple[int, bool]:
    """``last_log_number`` of the log, and whether its last write was cut (it does not end with a newline)."""
    view = _log_view(path)
    if view is not None:  # what a reader of this log read lately, brought up to date
        text, numbers = view.text, [number for number, _ in view.headers]
        ends_cut = bool(text) and not text.endswith("\n")
    else:
        text, _ = _read_tail(path, 1)
        numbers = [number for number, _ in split_log_entries(text)]
        ends_cut = _ends_cut(path)
    cut = _CUT_HEADER.match(text[text.rfind("\n") + 1:])
    if cut:
        numbers.append(int(cut.group(1)))
    return max(numbers, default=0), ends_cut


def append_log_entry(path: str, command: str, command_args: Optional[Dict[str, Any]], result: Any,
                     result_limit: int = 1500) -> int:
    """Append one entry to the log file ``path``; returns its number. When the last entry was cut (a kill during
    its write), a line says so first, so that the new entry starts on its own header line."""
    last, cut = _log_end(path)
    number = last + 1
    repair = f"\n{CUT_ENTRY_MARKER}\n\n" if cut else ""
    append_text(path, repair + format_log_entry(number, command, command_args, result, result_limit) + "\n")
    return number


def read_log_tail(path: str, max_entries: Optional[int], max_chars: Optional[int] = None) -> str:
    """The last entries of a log: at most ``max_entries`` (all if None) and at most ``max_chars`` characters (but at
    least one entry), with a line saying how many earlier ones are left out."""
    if not max_entries or max_entries <= 0:
        if not max_chars:
            return read_text(path).rstrip("\n")
        max_entries = 10 ** 9
    # With a character limit, what is read is bounded too (UTF-8 takes at most 4 bytes a character; the slack is
    # for the one entry shown even when it is longer): a file without headers is not read whole for nothing.
    max_bytes = 4 * max_chars + (1 << 16) if max_chars else None
    if max_entries <= _VIEW_MAX_ENTRIES:  # a prompt's tail: from the view kept of this log, updated by what was added
        view = _log_view(path, max_entries + 1, max_bytes)
        text, whole, entries = view.text, view.whole, view.entries(max_entries)
    else:
        text, whole = _read_tail(path, min(max_entries, 10 ** 6) + 1, max_bytes)
        entries = split_log_entries(text)
    if not entries:  # not a log Jarvis wrote (or one huge entry): its end, as text, saying so
        text = text.strip()
        if max_chars and len(text) > max_chars:
            text, whole = text[-max_chars:], False
        return text if whole else f"[the end of {os.path.basename(path)}, which has no entry headers there]\n{text}"
    shown = entries[-max_entries:]
    if max_chars:
        total, keep = 0, 0
        for _, entry in reversed(shown):
            total += len(entry) + 1
            if keep and total > max_chars:
                break
            keep += 1
        shown = shown[-keep:]
    first_shown = shown[0][0]
    body = "\n".join(entry for _, entry in shown)
    if first_shown > 1:
        return f"[{first_shown - 1} earlier entries are in {os.path.basename(path)}; the last {len(shown)} follow]\n{body}"
    return body


# ~~~ Code library ~~~
# What is read from a library is kept per version of its text (a digest of it): MemoryReading reads the library
# every round and save_code reads it again, and parsing a 5 MB library takes seconds (a run went from 5 s to over
# 2 minutes). The tree itself is not kept (it takes about 100 times the text's size): only what the readers use, the
# names defined, the lines of `from __future__` imports and the summaries made; and only for the last few versions
# of texts large enough to be worth it (the code of one save_code is parsed in milliseconds, and kept it would push a
# large library out).
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


# ~~~ Which file holds a memory ~~~
def memory_files_of(flow: Any, input_data: Dict[str, Any]) -> Dict[str, str]:
    """`memory_files` from a flow's input, else from its config; a clear error if neither is set."""
    memory_files = input_data.get("memory_files") or flow.flow_config.get("memory_files")
    if not isinstance(memory_files, dict) or not memory_files or memory_files == "???":
        raise ConfigurationError(
            f"{flow.flow_config['name']}: `memory_files` is not set. Call set_memory_files(flow, \"memory\") (from "
            "aiflows_jarvis.CoreFlowModule.memory) on the flow you instantiated, before calling it: it gives every "
            "boss of its tree its plan, logs and code library files in that folder"
        )
    return memory_files


def memory_path(flow: Any, input_data: Dict[str, Any], key: str) -> str:
    """The file of memory ``key`` for a flow (see ``memory_files_of``); a clear error if it is not configured."""
    memory_files = memory_files_of(flow, input_data)
    if key not in memory_files:
        raise ConfigurationError(
            f"{flow.flow_config['name']}: memory_files has no '{key}' (it has {sorted(memory_files)})"
        )
    return memory_files[key]


def with_memory_files(flow: Any, input_data: Dict[str, Any]) -> Dict[str, Any]:
    """``input_data`` with the flow's configured ``memory_files`` added when the input has none."""
    if not input_data.get("memory_files") and isinstance(flow.flow_config.get("memory_files"), dict):
        return {**input_data, "memory_files": flow.flow_config["memory_files"]}
    return input_data


def set_memory_files(flow: Any, memory_dir: Optional[str] = None,
                     workdir: Optional[str] = None) -> Dict[str, Dict[str, str]]:
    """Give every flow of a tree that declares ``memory_file_names`` its ``memory_files`` in ``memory_dir`` (default:
    the current run's, ``RunContext(memory_dir=...)``).

    One call configures a whole hierarchy (Jarvis -> Coder -> ExtendLibrary, ...): each boss names its own files
    (``plan_coder.txt``, ...) in its YAML, and code runners without a ``workspace`` get ``workdir`` (default
    ``memory_dir``), with ``memory_dir`` as their ``library_dir`` (so ``import library`` works there). ``flow`` is a
    flow, or a configuration dict (``{_target_: ..., subflows_config: ...}``) before it is instantiated: there every
    ``memory_files: ???`` is filled (hydra refuses to build a config that still has one). Returns
    ``{path: memory_files}`` for what was set.
    """
    memory_dir = memory_dir or current_run().memory_dir
    if not memory_dir:
        raise ConfigurationError("set_memory_files: no memory folder: pass one (set_memory_files(flow, \"memory\")) "
                                 "or call it inside `with RunContext(memory_dir=...)`")
    memory_dir = os.path.abspath(memory_dir)
    os.makedirs(memory_dir, exist_ok=True)
    if isinstance(flow, dict):
        return _set_memory_files_in_config(flow, memory_dir)
    done: Dict[str, Dict[str, str]] = {}

    def visit(node: Any, path: str) -> None:
        config = node.flow_config
        names = config.get("memory_file_names")
        if isinstance(names, dict) and names:
            config["memory_files"] = {key: os.path.join(memory_dir, name) for key, name in names.items()}
            done[path] = config["memory_files"]
        if "workspace" in config and not config["workspace"]:
            config["workspace"] = os.path.abspath(workdir) if workdir else memory_dir
            if "library_dir" in config and not config["library_dir"]:
                config["library_dir"] = memory_dir
        for name, sub in getattr(node, "subflows", {}).items():
            visit(sub, f"{path}/{name}")

    visit(flow, flow.flow_config.get("name", "flow"))
    return done


def _set_memory_files_in_config(config: Dict[str, Any], memory_dir: str) -> Dict[str, Dict[str, str]]:
    """Fill every ``memory_files: ???`` of a configuration from the ``memory_file_names`` its flows declare."""
    from .config_tree import fill

    def files_for(node: Dict[str, Any], effective: Dict[str, Any]):
        names = node.get("memory_file_names") or effective.get("memory_file_names")
        if node.get("memory_files", effective.get("memory_files")) == "???" and isinstance(names, dict):
            return {"memory_files": {key: os.path.join(memory_dir, name) for key, name in names.items()}}
        return None

    return {path: updates["memory_files"] for path, updates in fill(config, files_for).items()}
