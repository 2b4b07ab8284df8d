"""The processes generated code starts: found in ``/proc``, marked, kept in a cgroup where one can be made, ended.

Standard library only and no import from the package: ``launcher.py`` loads this file by its path, in a process that
must start fast. Linux; elsewhere the functions that read ``/proc`` find nothing and the caller falls back on process
groups.

Three ways to find what a kernel or a shell command started, each catching what the one before can miss:

* the process tree (``descendants``): the kernel's launcher is a child subreaper, so a process that double-forks is
  handed to the launcher, not to init, and stays in its tree;
* a marker in the environment (``MARKER_VARIABLE``): every process started by the code inherits it, whatever its
  session, group or parent (``setsid``, double fork); only a program that clears its environment drops it;
* a cgroup v2 (``Cgroup``), where the user may make one: no process leaves it, and ``cgroup.kill`` ends them all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple

#: The variable that marks the processes of one interpreter: ``<interpreter id>/<kernel<n>|shell>/``, so that a
#: prefix match finds one kernel's, or the whole interpreter's.
MARKER_VARIABLE = "JARVIS_KERNEL_ID"


def _stat_fields(pid: int) -> Optional[List[bytes]]:
    """The fields of ``/proc/<pid>/stat`` after ``pid (comm)``: state, ppid, pgrp, ... (starttime is index 19)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 :].split()
    except (OSError, ValueError):
        return None


def start_time(pid: int) -> Optional[int]:
    """When ``pid`` started (clock ticks since boot): with the pid, it names one process, not a later one. None if
    there is no such process, or it has ended (a zombie)."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields and fields[0] != b"Z" else None
    except (ValueError, IndexError):
        return None


def command_line(pid: int) -> str:
    """The command line of ``pid`` (its arguments joined by spaces), or "" when it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", errors="replace")
    except OSError:
        return ""


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def process_table() -> Dict[int, Tuple[int, int, int]]:
    """``{pid: (parent pid, process group, start time)}`` of every live process, from ``/proc`` (empty without it).
    Zombies are left out: they have ended (and have no children)."""
    table: Dict[int, Tuple[int, int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        try:
            if fields and fields[0] != b"Z":
                table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[19]))
        except (ValueError, IndexError):
            continue
    return table


def descendants(pid: int) -> List[Tuple[int, int, int]]:
    """``(pid, process group, start time)`` of every descendant of ``pid`` (Linux; empty elsewhere)."""
    table = process_table()
    children: Dict[int, List[int]] = {}
    for child, (parent, _group, _start) in table.items():
        children.setdefault(parent, []).append(child)
    found: List[Tuple[int, int, int]] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append((child, table[child][1], table[child][2]))
            stack.append(child)
    return found


def signal_process(pid: int, start: Optional[int], signum: int = signal.SIGKILL) -> None:
    """Send ``signum`` to ``pid`` if it is still the process that started at ``start`` (not a new one that got its
    number); ``start=None``: whatever process has it."""
    try:
        if start is not None and start_time(pid) != start:
            return
        os.kill(pid, signum)
    except OSError:
        pass


def kill_group(pgid: int, grace: float = 0.0) -> None:
    """Kill the process group: SIGKILL at once, or SIGTERM first and SIGKILL if some of it is left after ``grace`` s."""
    if grace <= 0:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
        return
    try:
        os.killpg(pgid, signal.SIGTERM)
    except OSError:
        return
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if not group_alive(pgid):
            return
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def marked_processes(prefix: str) -> List[Tuple[int, int]]:
    """``(pid, start time)`` of the processes (this one excepted) whose environment has ``MARKER_VARIABLE`` with a
    value starting with ``prefix``. Reads ``/proc/<pid>/environ``: the environment a process was started with, which
    ``setsid`` and double forks keep; processes of other users are not readable and not looked at."""
    if not prefix:
        return []
    needle = f"{MARKER_VARIABLE}={prefix}".encode()
    own = os.getpid()
    found: List[Tuple[int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == own:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                data = f.read()
        except OSError:
            continue
        if needle in data and any(item.startswith(needle) for item in data.split(b"\0")):
            start = start_time(int(name))
            if start is not None:
                found.append((int(name), start))
    return found


def end_processes(find: Callable[[], Iterable[Tuple[int, Optional[int]]]], rounds: int = 6) -> None:
    """End the processes ``find()`` names, until it names none: each round stops them all (a stopped process cannot
    fork), then kills them. A process that forked before it was stopped is found by the next round."""
    own = os.getpid()
    for _ in range(rounds):
        found = []
        for pid, start in set(find()):
            current = start_time(pid)  # None: gone, or ended and not yet reaped
            if pid != own and current is not None and start in (None, current):
                found.append((pid, start))
        if not found:
            return
        for pid, start in found:
            signal_process(pid, start, signal.SIGSTOP)
        for pid, start in found:
            signal_process(pid, start, signal.SIGKILL)
        time.sleep(0.005)


# ~~~ cgroup v2 ~~~
def _own_cgroup_dir() -> Optional[str]:
    """The folder of this process's cgroup v2, if the unified hierarchy is mounted and can be found."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            path = next((line.strip()[3:] for line in f if line.startswith("0::")), None)
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    if path is None:
        return None
    for fields in mounts:
        try:
            fstype = fields[fields.index("-") + 1]
        except (ValueError, IndexError):
            continue
        if fstype != "cgroup2":
            continue
        root, mountpoint = fields[3], fields[4]
        relative = path[len(root) :] if root != "/" and path.startswith(root) else path
        folder = os.path.join(mountpoint, relative.lstrip("/"))
        if os.path.isfile(os.path.join(folder, "cgroup.procs")):
            return folder
    return None


class Cgroup:
    """A cgroup v2 of this process's own, for the processes of one kernel or of the shell commands.

    ``Cgroup.create(name)`` makes it below this process's cgroup, or returns None when that is not possible (no
    unified hierarchy, or not writable by this user: systemd gives users a writable one only in delegated units).
    Processes join it by writing their pid into ``cgroup.procs`` (the kernel's launcher does it for itself before it
    starts the kernel); no process in it can leave it; ``kill()`` ends them all (``cgroup.kill``, Linux 5.14+, or
    a SIGKILL to each, round after round)."""

    PREFIX = "jarvis-"

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def create(cls, name: str) -> Optional["Cgroup"]:
        parent = _own_cgroup_dir()
        if parent is None or not os.access(parent, os.W_OK):
            return None
        cls._sweep_stale(parent)
        path = os.path.join(parent, cls.PREFIX + name)
        try:
            os.mkdir(path)
        except OSError:
            return None
        group = cls(path)
        if not os.access(os.path.join(path, "cgroup.procs"), os.W_OK):
            group.remove()
            return None
        return group

    @classmethod
    def _sweep_stale(cls, parent: str) -> None:
        """Remove the cgroups left by runs that ended without cleaning up (their name carries their pid), and end
        what that interpreter's code started outside them (its mark is in the name too): a killed interpreter's
        kernel launcher does that when it sees its parent gone, but the sweep may kill the launcher first."""
        try:
            names = [n for n in os.listdir(parent) if n.startswith(cls.PREFIX)]
        except OSError:
            return
        for name in names:
            owner = name[len(cls.PREFIX) :].split("-", 1)[0]
            if not owner.isdigit() or int(owner) == os.getpid():
                continue
            try:
                os.kill(int(owner), 0)
                continue  # its run is alive
            except ProcessLookupError:
                pass
            except OSError:
                continue
            stale = cls(os.path.join(parent, name))
            stale.kill()
            stale.remove()
            parts = name[len(cls.PREFIX) :].split("-")
            if len(parts) == 3 and parts[1].isalnum():  # "<pid>-<interpreter id>-<kind>"
                end_processes(lambda: marked_processes(parts[1] + "/"))

    def add(self, pid: int) -> bool:
        try:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(pid))
            return True
        except OSError:
            return False

    def pids(self) -> List[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(line) for line in f if line.strip()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            with open(os.path.join(self.path, "cgroup.kill"), "w") as f:
                f.write("1")
        end_processes(lambda: [(pid, None) for pid in self.pids()])

    def remove(self, wait: float = 1.0) -> bool:
        """Remove the (empty) cgroup; a killed process leaves it a moment after the kill."""
        end = time.monotonic() + wait
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= end:
                    return False
                time.sleep(0.01)
