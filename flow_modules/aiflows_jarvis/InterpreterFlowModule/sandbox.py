"""The optional sandbox of generated code (``sandbox: bwrap``): bubblewrap, with the workspace the only folder written.

What it does: the code (the kernel, and shell commands) sees the file system read-only but the workspace and a
private, empty ``/tmp`` (the Python installation and import path found there are bound back, read-only); it sees
only its own processes (not the interpreter's environment in ``/proc``; all end when the sandbox's first process
does) and, unless ``sandbox_network: true``, has no network.

What it does not: hide files the user may read (SSH keys, ``~/.netrc``, cloud credentials), limit memory or CPU
(``memory_limit_mb`` / ``cpu_time_s`` do), protect the workspace (the memory folder and ``library.py`` are in it),
or contain a kernel exploit. ``pip install`` fails in it (the environment is read-only): install packages first.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Iterable, List, Optional

from aiflows_jarvis.CoreFlowModule import ConfigurationError

SANDBOXES = ("bwrap",)

INSTALL_HINT = (
    "install bubblewrap (Debian, Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install "
    "bubblewrap; Arch: sudo pacman -S bubblewrap) or set `sandbox: null` in the interpreter's "
    "configuration"
)


class SettingError(ConfigurationError, ValueError):
    """A setting of the interpreter (the sandbox, a limit) that cannot be used: the message says which and why."""


class SandboxUnavailable(ConfigurationError, RuntimeError):
    """The configured sandbox cannot be used on this machine (the message says what to do)."""


def sandbox_program(sandbox: Optional[str]) -> Optional[str]:
    """The path of the program of ``sandbox`` (None: no sandbox); a clear error if it is unknown or not installed."""
    if not sandbox:
        return None
    name = str(sandbox).strip().lower()
    if name not in SANDBOXES:
        raise SettingError(
            f"sandbox: {sandbox!r} is not a sandbox this interpreter knows: use "
            f"{' or '.join(SANDBOXES)}, or null for none."
        )
    program = shutil.which("bwrap")
    if program is None:
        raise SandboxUnavailable(
            f"sandbox: bwrap needs bubblewrap (the `bwrap` program), which is not installed or "
            f"not on PATH: {INSTALL_HINT}."
        )
    return program


def hidden_by_private_tmp(paths: Iterable[str]) -> List[str]:
    """Of ``paths``, the folders under ``/tmp`` (which the sandbox replaces by its own, empty one), outermost first
    and without repeats: what the code needs from there is bound back read-only (a virtual environment made in a
    temporary folder, as CI does; an editable install checked out there)."""
    found: List[str] = []
    for path in paths:
        if not path:
            continue
        for candidate in {os.path.abspath(path), os.path.realpath(path)}:
            if candidate != "/tmp" and candidate.startswith("/tmp/") and os.path.isdir(candidate):
                found.append(candidate)
    outermost: List[str] = []
    for folder in sorted(set(found), key=len):
        if not any(folder == kept or folder.startswith(kept + "/") for kept in outermost):
            outermost.append(folder)
    return outermost


def python_folders() -> List[str]:
    """The folders the interpreter's Python needs to start and import: its prefixes, its executable's folder (the
    real one, through links) and the import path."""
    executable = sys.executable or ""
    return [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(executable),
        os.path.dirname(os.path.realpath(executable)),
        *sys.path,
    ]


def bwrap_command(
    program: str,
    workspace: str,
    writable: Iterable[str] = (),
    network: bool = False,
    die_with_parent: bool = False,
    env: Optional[dict] = None,
) -> List[str]:
    """The bubblewrap command line that runs a command (appended after it) in the sandbox.

    ``writable``: more folders written through (the interpreter's private folder: the kernel's sockets). The
    ``env`` items are set inside. ``die_with_parent`` only for a single-threaded parent (the kernel's launcher):
    bubblewrap's parent-death signal comes when the *thread* that started it ends, which would end the sandbox of a
    command started from a thread that finished before it."""
    command = [program, "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        command.append("--unshare-net")
    if die_with_parent:
        command.append("--die-with-parent")
    command += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    writable = [workspace, *writable]
    for folder in hidden_by_private_tmp(python_folders()):
        if not any(folder == w or folder.startswith(w.rstrip("/") + "/") for w in writable):
            command += ["--ro-bind", folder, folder]
    for folder in writable:
        command += ["--bind", folder, folder]
    settings = {"TMPDIR": "/tmp", "XDG_CACHE_HOME": "/tmp/.cache", "MPLCONFIGDIR": "/tmp/.matplotlib"}
    settings.update(env or {})
    for name, value in settings.items():
        command += ["--setenv", name, str(value)]
    command += ["--chdir", workspace, "--"]
    return command


class Sandbox:
    """Where the interpreter's engines run their processes: as they are (``name`` None), or in bubblewrap.

    :param name: ``bwrap``, or None for no sandbox (a ``SettingError`` or ``SandboxUnavailable`` at once otherwise).
    :param network: whether sandboxed code may use the network.
    """

    def __init__(self, name: Optional[str], network: bool = False):
        self.name = str(name).strip().lower() if name else None
        self.program = sandbox_program(self.name)
        self.network = bool(network)

    @property
    def active(self) -> bool:
        return self.program is not None

    def wrap(self, command: List[str], workspace: str, writable: Iterable[str] = (), kernel: bool = False) -> List[str]:
        """``command`` run in the sandbox (unchanged without one). ``kernel``: it is the kernel's launcher, a single
        thread whose end may end the sandbox (see ``bwrap_command``)."""
        if self.program is None:
            return command
        # ipykernel ends itself when its parent changes; in the sandbox its parent is the sandbox's init, pid 1
        env = {"JPY_PARENT_PID": "1"} if kernel else {}
        return (
            bwrap_command(self.program, workspace, writable, network=self.network, die_with_parent=kernel, env=env)
            + command
        )
