"""Which files a run created or modified, without scanning the workspace at every run; where figures are saved.

``ChangeTracker`` scans the workspace once (bounded: ``_MAX_SCAN_DEPTH`` levels, ``_MAX_SCAN_ENTRIES`` entries) and
then watches the folders it saw with inotify (Linux, through ctypes): a run that changed nothing costs one empty
read, whatever the number of files; a run that wrote files costs a ``stat`` of each. Where inotify is missing, its
queue overflowed, or its watches ran out, the workspace is scanned before and after the run, as a fallback.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import stat as stat_module
import struct
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

FIGURE_DIR = "figures"
MAX_FILES = 50
# The scan is bounded, so that a big workspace does not make the first run (or a fallback scan) slow; files past the
# bound are not reported. Top levels come first: those are the files a controller cares about.
_MAX_SCAN_ENTRIES = 5000
_MAX_SCAN_DEPTH = 3  # folders scanned: the workspace and three levels below (a/b/c/file.txt is seen)
_MTIME_SLACK_NS = 50_000_000  # file times can be a clock tick (up to 10 ms) behind time.time_ns()
# not scanned (besides hidden folders and virtual environments): caches, installed packages, and the memory folder's
# own bookkeeping (archived plans and logs, the scripts run_code wrote), which would make every run's scan grow
_SKIPPED_DIRS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "venv", "archive", "code_runs"}

Stamp = Tuple[int, int]  # (mtime_ns, size)
Snapshot = Tuple[Dict[str, Stamp], bool]


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED_DIRS


def _snapshot(
    root: str, on_dir: Optional[Callable[[str, str], None]] = None, start: str = "", budget: Optional[int] = None
) -> Snapshot:
    """``{relative path: (mtime_ns, size)}`` of the visible files under ``root`` (or its folder ``start``), breadth
    first, and whether the scan saw everything (``False``: it stopped at ``_MAX_SCAN_ENTRIES`` entries or
    ``_MAX_SCAN_DEPTH`` levels). ``on_dir(relative path, path)`` is called for each folder before it is listed."""
    found: Dict[str, Stamp] = {}
    first_depth = start.count("/") + 1 if start else 0
    level = [(start, os.path.join(root, start) if start else root)]
    count = 0
    limit = _MAX_SCAN_ENTRIES if budget is None else budget
    complete = True
    for depth in range(first_depth, _MAX_SCAN_DEPTH + 1):
        below: List[Tuple[str, str]] = []
        for rel_dir, path in level:
            if on_dir is not None:
                on_dir(rel_dir, path)
            try:
                entries = os.scandir(path)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    name = entry.name
                    if _skipped(name):
                        continue
                    count += 1
                    if count > limit:
                        return found, False
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if depth == _MAX_SCAN_DEPTH:
                                complete = False
                            elif not os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                                below.append((rel, entry.path))
                        elif entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            found[rel] = (st.st_mtime_ns, st.st_size)
                    except OSError:
                        continue
        if not below:
            break
        level = below
    return found, complete


def _changed_files(
    before: Snapshot, root: str, since_ns: int, ignore: Iterable[str] = ()
) -> Tuple[List[str], int, bool]:
    """Paths created or modified since ``before`` (at most MAX_FILES), how many there were in all, and whether both
    scans saw the whole workspace (if not, a change past the scans' bounds is not seen)."""
    old, complete_before = before
    new, complete_after = _snapshot(root)
    changed = []
    for rel, stamp in new.items():
        previous = old.get(rel)
        if previous is None:
            # a file the first scan did not reach (it stopped early) is new only if it was written during the run
            # (give or take the file system's clock, which can lag the real one by a tick)
            if complete_before or stamp[0] >= since_ns - _MTIME_SLACK_NS:
                changed.append(rel)
        elif previous != stamp:
            changed.append(rel)
    return _listed(changed, ignore) + (complete_before and complete_after,)


def _listed(changed: Iterable[str], ignore: Iterable[str]) -> Tuple[List[str], int]:
    ignored = set(ignore)
    paths = sorted(p for p in changed if p not in ignored)
    return paths[:MAX_FILES], len(paths)


# ~~~ inotify, through ctypes ~~~
_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED, _IN_ISDIR = 0x4000, 0x8000, 0x40000000
_IN_ONLYDIR, _IN_DONTFOLLOW, _IN_EXCL_UNLINK = 0x1000000, 0x2000000, 0x4000000
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_WATCH_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONTFOLLOW
    | _IN_EXCL_UNLINK
)
_EVENT = struct.Struct("iIII")


def _libc() -> Optional[ctypes.CDLL]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch  # noqa: B018  (present?)
        return libc
    except (OSError, AttributeError):
        return None


class _Rescan(Exception):
    """The watches cannot say what changed (queue overflow, the workspace moved, no watch left): scan."""


class ChangeTracker:
    """The files of a workspace that each run creates or modifies.

    ``begin()`` before a run (what changed since the last run is taken in, not reported), ``end(since_ns, ignore)``
    after it: ``(paths, how many in all, whether the whole workspace was looked at)``."""

    def __init__(self, root: str, use_inotify: bool = True):
        self.root = root
        self._libc = _libc() if use_inotify else None
        self._fd: Optional[int] = None
        self._wds: Dict[int, str] = {}  # watch descriptor -> relative folder
        self._files: Dict[str, Stamp] = {}  # what the watched folders hold
        self._complete = True
        self._before: Optional[Snapshot] = None  # scan mode
        self._touched: Set[str] = set()

    @property
    def watching(self) -> bool:
        return self._fd is not None

    def begin(self) -> None:
        if self._fd is None and self._libc is not None:
            self._start_watching()
        if self._fd is None:
            self._before = _snapshot(self.root)
            return
        try:
            self._drain()
            self._refresh(self._touched)
        except _Rescan:
            self._restart()
        self._touched = set()

    def end(self, since_ns: int, ignore: Iterable[str] = ()) -> Tuple[List[str], int, bool]:
        if self._fd is None:
            before, self._before = self._before or ({}, False), None
            return _changed_files(before, self.root, since_ns, ignore)
        try:
            self._drain()
            changed = self._refresh(self._touched)
        except _Rescan:
            old = (dict(self._files), self._complete)
            self._restart()
            new = self._files if self._fd is not None else _snapshot(self.root)[0]
            changed = [
                rel
                for rel, stamp in new.items()
                if old[0].get(rel) != stamp and (old[1] or rel in old[0] or stamp[0] >= since_ns - _MTIME_SLACK_NS)
            ]
        self._touched = set()
        return _listed(changed, ignore) + (self._complete,)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = None
        self._wds.clear()
        self._files.clear()

    # ~~~ watching ~~~
    def _start_watching(self) -> None:
        fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            self._libc = None  # not on this system: scan instead
            return
        self._fd = fd
        try:
            self._files, self._complete = _snapshot(self.root, on_dir=self._watch)
        except _Rescan:  # no watch left (fs.inotify.max_user_watches): scan at every run
            self.close()
            self._libc = None

    def _restart(self) -> None:
        self.close()
        if self._libc is not None:
            self._start_watching()

    def _watch(self, rel_dir: str, path: str) -> None:
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), _WATCH_MASK)
        if wd < 0:
            if ctypes.get_errno() in (errno.ENOSPC, errno.ENOMEM):
                raise _Rescan()
            return  # gone or unreadable: as a scan would, see nothing there
        self._wds[wd] = rel_dir

    def _unwatch_tree(self, rel_dir: str) -> None:
        prefix = rel_dir + "/"
        for wd, rel in list(self._wds.items()):
            if rel == rel_dir or rel.startswith(prefix):
                self._libc.inotify_rm_watch(self._fd, wd)
                del self._wds[wd]
        for rel in [r for r in self._files if r.startswith(prefix)]:
            del self._files[rel]

    def _drain(self) -> None:
        """Read the events queued since the last read; the paths they name go into ``_touched``."""
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            except InterruptedError:
                continue
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = os.fsdecode(data[offset + _EVENT.size : offset + _EVENT.size + length].split(b"\0", 1)[0])
                offset += _EVENT.size + length
                self._event(wd, mask, name)

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & _IN_Q_OVERFLOW:
            raise _Rescan()
        rel_dir = self._wds.get(wd)
        if rel_dir is None:
            return
        if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF) and not rel_dir:
            raise _Rescan()  # the workspace itself was moved or removed
        if mask & _IN_IGNORED:
            self._wds.pop(wd, None)
            return
        if not name or _skipped(name):
            return
        rel = f"{rel_dir}/{name}" if rel_dir else name
        if mask & _IN_ISDIR:
            if mask & (_IN_DELETE | _IN_MOVED_FROM):
                self._unwatch_tree(rel)
            elif mask & (_IN_CREATE | _IN_MOVED_TO):
                self._add_folder(rel)
            return
        if name == "pyvenv.cfg" and rel_dir:  # the folder became a virtual environment: no longer looked into
            self._unwatch_tree(rel_dir)
            return
        if mask & (_IN_DELETE | _IN_MOVED_FROM):
            self._files.pop(rel, None)
            self._touched.discard(rel)
        else:
            self._touched.add(rel)

    def _add_folder(self, rel: str) -> None:
        """A folder appeared (made or moved in): watched, and its files are new."""
        depth = rel.count("/") + 1
        if depth > _MAX_SCAN_DEPTH:
            self._complete = False
            return
        path = os.path.join(self.root, rel)
        if os.path.exists(os.path.join(path, "pyvenv.cfg")):
            return
        budget = max(0, _MAX_SCAN_ENTRIES - len(self._files) - len(self._wds))
        found, complete = _snapshot(self.root, on_dir=self._watch, start=rel, budget=budget)
        self._complete = self._complete and complete
        self._touched.update(found)

    def _refresh(self, paths: Iterable[str]) -> List[str]:
        """Stat ``paths``; those that are new or whose time or size changed are returned (and kept)."""
        changed = []
        for rel in paths:
            try:
                st = os.lstat(os.path.join(self.root, rel))
            except OSError:
                self._files.pop(rel, None)
                continue
            if not stat_module.S_ISREG(st.st_mode):
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            if self._files.get(rel) != stamp:
                self._files[rel] = stamp
                changed.append(rel)
        return changed


def exclusive_png(folder: str, stamp: str, start: int) -> Tuple[str, int, int]:
    """Create a new empty ``figure_<stamp>_<n>.png`` in ``folder``: (path, open fd, n)."""
    os.makedirs(folder, exist_ok=True)
    n = start
    while True:
        path = os.path.join(folder, f"figure_{stamp}_{n}.png")
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), n
        except FileExistsError:
            n += 1
