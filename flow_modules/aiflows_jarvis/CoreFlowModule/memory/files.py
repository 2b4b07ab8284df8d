"""Memory files on disk: read whole, replaced atomically, appended with one write, never through a symbolic link;
the temporary files a killed write leaves, swept; a file's previous text archived.

* Plans and the library are replaced atomically (a temporary file in the same folder, then a rename), so a crash never
  leaves half a file and never loses what was there.
* Symbolic links are never followed: a memory folder may come from elsewhere (a cloned repository), and a link named
  like a memory file must not make Jarvis overwrite, append to or read (into a prompt) a file outside it. A file
  replaced atomically replaces the link itself; reading or appending to a link is refused with a MemoryFileError.
* Only regular files are read or appended to, opened so that nothing blocks: a FIFO named like a memory file would
  hang the run at its open, waiting for a writer (``open_regular``).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from typing import List, Tuple, Union

from ..errors import MemoryFileError, NotRegularFileError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# `atomic_write`'s temporary files: `.<name>.<12 hex digits>.tmp` beside the file they replace.
_TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")


def open_no_link(path: str, flags: int, mode: int = 0o666) -> int:
    """``os.open`` that refuses a symbolic link as the last part of ``path`` (MemoryFileError saying what to do)."""
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as error:
        if os.path.islink(path):
            raise MemoryFileError(
                f"{path} is a symbolic link (to {os.readlink(path)}). Jarvis does not follow links in its memory "
                "folder, so that a folder from elsewhere cannot make it read or overwrite other files: replace the "
                'link with a copy of the file (cp --remove-destination "$(readlink -f LINK)" LINK) or remove it.'
            ) from error
        raise


# What a path may be instead of a regular file, as a message names it.
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def open_regular(path: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """``open_no_link`` of a regular file only. It opens without blocking (a FIFO's open waits for its other end,
    for ever when there is none) and refuses what is not a regular file with a NotRegularFileError saying what it is
    and what to do; a caller that keeps a cache there builds it again instead. (O_NONBLOCK changes nothing for a
    regular file: its reads and writes never wait.)"""
    try:
        fd = open_no_link(path, flags | os.O_NONBLOCK, mode)
    except OSError as error:
        if error.errno in (errno.ENXIO, errno.EISDIR, errno.EOPNOTSUPP):  # a FIFO with no reader, a folder, a socket
            _refuse_special(path, os.lstat(path).st_mode if os.path.lexists(path) else None, error)
        raise
    try:
        _refuse_special(path, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_special(path: str, mode, cause: BaseException = None) -> None:
    if mode is None or stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    reason = f"it is {kind}, not a regular file"
    raise NotRegularFileError(
        f"{path} is {kind}, not a regular file: Jarvis reads and writes only regular files in its memory folder (a "
        f"FIFO or a device would block the run or feed it another program's bytes). Remove it (or move it away), "
        "then run again.",
        reason,
    ) from cause


def say_rebuilt(what: str, why: str, source: str) -> None:
    """Say in one line on the console that a cache file (an index) that cannot be used is built again from
    ``source``: a file silently replaced would hide what damages it."""
    from ..console.interaction import get_console  # (here: the console is the run's)

    get_console().line("warning", f"{what} cannot be used ({why}): it is a cache, built again from {source}.")


def read_text(path: str) -> str:
    """The file's text, or '' if it does not exist. A UTF-8 byte-order mark at its start is dropped (Python and
    editors read the file the same without it; a file written back is written without it). A symbolic link is refused
    (MemoryFileError): what is read goes into prompts, and a link could bring any file of the user's into one. Text
    that is not UTF-8, and what is not a regular file (a FIFO, a folder), are refused (MemoryFileError saying what
    and where)."""
    try:
        fd = open_regular(path)
        try:  # read raw: a text file object costs more system calls, and a prompt reads memory every round
            size = os.fstat(fd).st_size
            chunks = [os.read(fd, size + 1)]
            while chunks[-1]:  # the file grew since, or it reports no size (/proc)
                chunks.append(os.read(fd, max(size, 1 << 16)))
        finally:
            os.close(fd)
    except FileNotFoundError:
        return ""
    except OSError as error:
        raise MemoryFileError(f"Cannot read memory file {path}: {error}", error.strerror or str(error)) from error
    data = b"".join(chunks)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        reason = f"it is not UTF-8 text ({undecodable(error)})"
        raise MemoryFileError(f"Cannot read memory file {path}: {reason}", reason) from error
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text  # as text mode reads


def undecodable(error: UnicodeDecodeError) -> str:
    """Where the bytes decoded stop being UTF-8, for a person to find it: ``byte 0xe9 at line 3, column 7``."""
    data, at = bytes(error.object), error.start
    line = data.count(b"\n", 0, at) + 1
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    return f"byte 0x{data[at]:02x} at line {line}, column {column}" if at < len(data) else f"at byte {at}"


def _create_exclusive(prefix: str, suffix: str) -> Tuple[int, str]:
    """A new file ``<prefix><random><suffix>`` opened for writing, mode 0666 minus the umask."""
    while True:
        path = f"{prefix}{os.urandom(6).hex()}{suffix}"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), path
        except FileExistsError:
            continue


def atomic_write(path: str, text: Union[str, bytes]) -> None:
    """Replace ``path`` with ``text`` (UTF-8 text, or bytes as they are) atomically (temporary file in the same
    folder, fsync, rename).

    A symbolic link at ``path`` is replaced by the file (the rename replaces the link itself): what it pointed to is
    never written. A regular file replaced keeps its mode; a new file gets 0666 minus the umask.
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        # Created 0666 minus the umask, as any new file of the user's (mkstemp would make it 0600).
        fd, tmp = _create_exclusive(os.path.join(folder, f".{os.path.basename(path)}."), ".tmp")
        try:
            with os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8") as f:
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
    link at ``path`` is refused (MemoryFileError): appending through it would write to a file outside the memory; so
    is what is not a regular file."""
    try:
        data = text.encode("utf-8")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = open_regular(path, flags, 0o644)
        except FileNotFoundError:  # its folder is not there (yet): made, then opened again
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            fd = open_regular(path, flags, 0o644)
        try:
            while data:
                written = os.write(fd, data)
                data = data[written:]
        finally:
            os.close(fd)
    except OSError as error:
        raise MemoryFileError(f"Cannot append to memory file {path}: {error}") from error


def sweep_temporary_files(folder: str, older_than: float = 600.0) -> List[str]:
    """Remove the temporary files ``atomic_write`` left in ``folder`` (and its ``archive/``, ``.index/`` (the logs'
    search indexes), and the library package's ``library/`` and ``library/_index/``) when it was killed.

    Only files named as it names them (``.<name>.<12 hex digits>.tmp``), only regular files (never what a link points
    to), and only those not modified for ``older_than`` seconds: a write takes milliseconds, so a younger one may be
    another live process's write in progress. Returns the paths removed; what cannot be removed is left.
    """
    removed = []
    now = time.time()
    for where in (
        folder,
        os.path.join(folder, "archive"),
        os.path.join(folder, ".index"),
        os.path.join(folder, "library"),
        os.path.join(folder, "library", "_index"),
    ):
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
