"""The logs: one entry per executed command, appended with a single write; earlier entries are never rewritten.

Reading the logs for a prompt reads only the last entries (from the end of the file, then only what was appended
since), so the cost of a round does not grow with the length of the log. An entry cut by a kill (the file does not end
with a newline) is closed with a line saying so before the next entry is appended, so the next one starts on its own
header line.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import OrderedDict
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ..errors import MemoryFileError
from ..run.redaction import redact
from ..text import shorten
from .files import append_text, open_regular, read_text

# An entry header on its own line; or glued after the text of an entry cut by a kill (a log whose cut entries were
# never repaired): then only in the exact form `format_log_entry` writes, with its time stamp. Headers are looked for
# where "--- [" occurs (str.find), not by a regular expression tried at every position of a long log.
_LOG_HEADER = re.compile(r"--- \[(\d+)\] [^\n]* ---$", re.M)
_GLUED_HEADER = re.compile(r"--- \[(\d+)\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ ---$", re.M)
_LOG_HEADER_BYTES = re.compile(_LOG_HEADER.pattern.encode(), re.M)
_GLUED_HEADER_BYTES = re.compile(_GLUED_HEADER.pattern.encode(), re.M)
# The start of a header cut by a kill on the last line of a log (its number is taken, so that none repeats).
_CUT_HEADER = re.compile(r"--- \[(\d+)\]")
CUT_ENTRY_MARKER = "[the entry above was cut off: Jarvis was stopped while writing it]"


def summarize_arguments(command_args: Optional[Dict[str, Any]], limit_per_value: int = 300) -> str:
    if not command_args:
        return "(none)"
    parts = []
    for name, value in command_args.items():
        rendered = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        parts.append(
            f"{name} = {shorten(rendered, limit_per_value)!r}"
            if isinstance(value, str)
            else f"{name} = {shorten(rendered, limit_per_value)}"
        )
    return "; ".join(parts)


def format_log_entry(
    number: int,
    command: str,
    command_args: Optional[Dict[str, Any]],
    result: Any,
    result_limit: int = 1500,
    when: Optional[float] = None,
) -> str:
    """One readable log entry: a header line, the arguments, the result (both shortened)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when if when is not None else time.time()))
    result_text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    result_text = shorten(result_text.strip(), result_limit).replace("\n", "\n    ")
    return (
        f"--- [{number}] {stamp} {command} ---\narguments: {summarize_arguments(command_args)}\nresult: {result_text}\n"
    )


def _read_tail(path: str, min_headers: int, max_bytes: Optional[int] = None, block: int = 1 << 13) -> Tuple[str, bool]:
    """The end of the file, at least ``min_headers`` entry headers long (or the whole file, or its last ``max_bytes``
    bytes when that comes first); and whether it is whole. Blocks read back from the end double in size, so a file
    with few headers costs a few reads of its length, not one per block."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return "", True
    except OSError as error:
        raise MemoryFileError(f"Cannot read memory file {path}: {error}") from error
    with os.fdopen(fd, "rb") as f:
        return _read_tail_of(f, os.fstat(f.fileno()).st_size, min_headers, max_bytes, block)


def _read_tail_of(
    f, size: int, min_headers: int, max_bytes: Optional[int] = None, block: int = 1 << 13
) -> Tuple[str, bool]:
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
        after_text = at > 0 and text[at - 1 : at] != newline
        match = (glued if after_text else own_line).match(text, at)
        if match:
            found.append((int(match.group(1)), at, after_text))
        at = text.find(mark, at + 1)
    return found


def _ends_cut(path: str) -> bool:
    """Whether the file is not empty and does not end with a newline (its last write was cut)."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise MemoryFileError(f"Cannot read memory file {path}: {error}") from error
    try:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    finally:
        os.close(fd)


# The tail of a log as a reader last saw it, per file: the next read takes in only what was appended since (a round
# appends one entry), instead of reading and parsing the last entries again. Checked at every use against the file
# (the same file, not shorter, its last bytes unchanged): a log replaced, cut short or rewritten is read again from
# its end.
_VIEW_MAX_ENTRIES = 1000  # a tail of more entries is read from the file's end each time (a view is for prompts' tails)
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
            self.headers = [(number, start - cut) for number, start in self.headers[-self.keep :]]
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
        return [
            (number, text[start : headers[i + 1][1] if i + 1 < len(headers) else len(text)].rstrip("\n"))
            for i, (number, start) in enumerate(headers[first:], first)
        ]


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
            fd = open_regular(path)
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
            view.check = (
                check
                if check is not None
                else os.pread(fd, min(size, _VIEW_CHECK_BYTES), size - min(size, _VIEW_CHECK_BYTES))
            )
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
    """``[(number, entry text)]`` for the entries in ``text``. A header glued to the end of a cut entry (a cut entry
    never repaired) starts an entry too, when its number does not go back."""
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
    cut = _CUT_HEADER.match(text[text.rfind("\n") + 1 :])
    if cut:
        numbers.append(int(cut.group(1)))
    return max(numbers, default=0), ends_cut


def append_log_entry(
    path: str, command: str, command_args: Optional[Dict[str, Any]], result: Any, result_limit: int = 1500
) -> int:
    """Append one entry to the log file ``path``; returns its number. When the last entry was cut (a kill during
    its write), a line says so first, so that the new entry starts on its own header line."""
    last, cut = _log_end(path)
    number = last + 1
    repair = f"\n{CUT_ENTRY_MARKER}\n\n" if cut else ""
    append_text(path, repair + redact(format_log_entry(number, command, command_args, result, result_limit)) + "\n")
    return number


def last_within(entries: List[Tuple[int, str]], max_chars: Optional[int]) -> List[Tuple[int, str]]:
    """The last of ``entries`` that fit ``max_chars`` together (a line break each), at least one; all without a
    limit."""
    if not max_chars:
        return entries
    total, keep = 0, 0
    for _, entry in reversed(entries):
        total += len(entry) + 1
        if keep and total > max_chars:
            break
        keep += 1
    return entries[len(entries) - keep :]


def read_log_tail(path: str, max_entries: Optional[int], max_chars: Optional[int] = None) -> str:
    """The last entries of a log: at most ``max_entries`` (all if None) and at most ``max_chars`` characters (but at
    least one entry), with a line saying how many earlier ones are left out."""
    if not max_entries or max_entries <= 0:
        if not max_chars:
            return read_text(path).rstrip("\n")
        max_entries = 10**9
    # With a character limit, what is read is bounded too (UTF-8 takes at most 4 bytes a character; the slack is
    # for the one entry shown even when it is longer): a file without headers is not read whole for nothing.
    max_bytes = 4 * max_chars + (1 << 16) if max_chars else None
    if max_entries <= _VIEW_MAX_ENTRIES:  # a prompt's tail: from the view kept of this log, updated by what was added
        view = _log_view(path, max_entries + 1, max_bytes)
        text, whole, entries = view.text, view.whole, view.entries(max_entries)
    else:
        text, whole = _read_tail(path, min(max_entries, 10**6) + 1, max_bytes)
        entries = split_log_entries(text)
    if not entries:  # not a log Jarvis wrote (or one huge entry): its end, as text, saying so
        text = text.strip()
        if max_chars and len(text) > max_chars:
            text, whole = text[-max_chars:], False
        return text if whole else f"[the end of {os.path.basename(path)}, which has no entry headers there]\n{text}"
    shown = last_within(entries[-max_entries:], max_chars)
    first_shown = shown[0][0]
    body = "\n".join(entry for _, entry in shown)
    if first_shown > 1:
        return (
            f"[{first_shown - 1} earlier entries are in {os.path.basename(path)}; the last {len(shown)} follow]\n{body}"
        )
    return body
