"""Locks on memory files and on the memory folder, so that two processes never lose each other's work.

* ``file_lock(path)``: an exclusive lock held while a file is read, changed and written back (``save_code`` holds it
  on the code library, so two processes saving functions into one ``library.py`` never lose one).
* ``RunLock(memory_dir)``: an exclusive lock on a memory folder for a whole Jarvis run; a second run on the same
  folder is refused at start, with the PID of the first.

Both are ``fcntl.flock`` locks on a sidecar file, not on the file itself: memory files are replaced by a rename
(``files.atomic_write``), and a lock on the replaced file's inode would not exclude a process that opened the file
after the rename. The sidecar is never deleted (deleting a lock file lets a process that opened it just before hold
a lock on a file nobody else sees). flock locks are released by the kernel when their process ends, however it ends
(``kill -9`` included): a lock is never left held by a dead process. The sidecar also holds who took the lock (PID,
host, start time), for the message of the process that cannot take it; it is emptied when the lock is released, so
a sidecar that still names a holder when the lock is free was left by a process that did not end cleanly.

Advisory locks exclude only processes that take them too (Jarvis, ``save_code`` used as a library); on a network
file system without flock support they may not exclude anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from typing import Any, Dict, Iterator, Optional

from ..errors import MemoryFileError, MemoryInUseError

RUN_LOCK_NAME = ".jarvis.lock"


def lock_path_of(path: str) -> str:
    """The sidecar that ``file_lock(path)`` locks: ``.<name>.lock`` beside the file (hidden: the user's memory folder
    does not fill with lock files)."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.lock")


def _open_sidecar(path: str) -> int:
    # O_NOFOLLOW: a symlink planted in the memory folder must not make us truncate its target.
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)


def _holder_record() -> Dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}


def _write_holder(fd: int, record: Dict[str, Any]) -> None:
    data = (json.dumps(record) + "\n").encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _read_holder(fd: int) -> Optional[Dict[str, Any]]:
    """The holder recorded in a sidecar, or None (empty: released cleanly; unreadable: a holder writing it now)."""
    try:
        data = os.pread(fd, 4096, 0)
        record = json.loads(data.decode("utf-8")) if data.strip() else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def _describe_holder(record: Optional[Dict[str, Any]]) -> str:
    if not record:
        return "another process"
    started = record.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    host = record.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"process {record['pid']}{where} (since {when})"


def process_is_alive(pid: int) -> bool:
    """Whether a process with this PID exists on this host (one we may not signal exists too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def file_lock(path: str, timeout: float = 30.0, poll: float = 0.02) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (its sidecar ``.<name>.lock``) for the ``with`` block.

    Waits up to ``timeout`` seconds for another holder (a save takes milliseconds; a longer wait means a process is
    stuck holding it), then raises MemoryFileError naming the holder. Threads of one process exclude each other too
    (each call opens the sidecar anew). Not reentrant: a nested ``file_lock`` on the same path waits for itself.
    """
    lock_path = lock_path_of(path)
    try:
        os.makedirs(os.path.dirname(lock_path), exist_ok=True)
        fd = _open_sidecar(lock_path)
    except OSError as error:
        raise MemoryFileError(f"Cannot lock {path} (lock file {lock_path}): {error}") from error
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise MemoryFileError(
                        f"{path} is locked by {_describe_holder(_read_holder(fd))}, which did not release it within "
                        f"{timeout:g} s. If no process is using it any more, try again; the lock file is "
                        f"{lock_path}."
                    ) from None
                time.sleep(poll)
            except OSError as error:
                raise MemoryFileError(f"Cannot lock {path} (lock file {lock_path}): {error}") from error
        try:
            _write_holder(fd, _holder_record())
        except OSError:
            pass  # the record is only for messages (a full disk must not stop a save that fits in place)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class RunLock:
    """An exclusive lock on a memory folder for a whole run: ``<memory_dir>/.jarvis.lock``.

    ``acquire()`` takes it or raises MemoryInUseError naming the PID of the run that holds it and what to do; it
    takes nothing else, so it is called before anything in the folder is archived or written. A lock file left
    naming a process by a run that did not end cleanly (killed, power cut) is taken over: ``taken_over`` then says
    whose it was (the caller shows it). ``release()`` (idempotent) empties the file and unlocks; a process that ends
    without calling it releases the lock anyway (flock), leaving only the stale record.
    """

    def __init__(self, memory_dir: str):
        self.memory_dir = os.path.abspath(memory_dir)
        self.path = os.path.join(self.memory_dir, RUN_LOCK_NAME)
        self.taken_over: Optional[str] = None
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            return self
        try:
            os.makedirs(self.memory_dir, exist_ok=True)
            fd = _open_sidecar(self.path)
        except OSError as error:
            raise MemoryFileError(
                f"Cannot use the memory folder {self.memory_dir}: cannot create its lock file "
                f"{self.path}: {error.strerror or error}"
            ) from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            stop = f"stop it (kill {holder['pid']})" if holder else "stop it"
            raise MemoryInUseError(
                f"Another run, {_describe_holder(holder)}, is using the memory folder {self.memory_dir} (it "
                f"holds {RUN_LOCK_NAME} there). Two runs on one folder would archive and mix each other's plans and "
                f"logs. Wait for that run to end, or {stop} and run again, or give this run its own folder with "
                "--memory-dir.",
                holder_pid=holder["pid"] if holder else None,
            ) from None
        except OSError as error:
            os.close(fd)
            raise MemoryFileError(f"Cannot lock the memory folder {self.memory_dir} ({self.path}): {error}") from error
        previous = _read_holder(fd)
        if previous and previous["pid"] != os.getpid():
            state = "no longer running" if not process_is_alive(previous["pid"]) else "no longer holding it"
            self.taken_over = (
                f"The memory folder's lock was left by {_describe_holder(previous)}, which is {state} "
                "(it did not end cleanly): taken over."
            )
        try:
            _write_holder(fd, _holder_record())
        except OSError as error:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise MemoryFileError(f"Cannot write the memory folder's lock file {self.path}: {error}") from error
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc_info: Any) -> None:
        self.release()
