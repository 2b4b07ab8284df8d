"""The interface every engine of the interpreter has, and what the engines of one interpreter share.

An engine (``Executor``) runs code of its languages in the workspace and returns a ``RunResult``: the Jupyter kernel
for Python (``kernel.KernelExecutor``), ``bash`` for shell code (``shell.ShellExecutor``). Where their processes run
(as they are, or in bubblewrap) is the ``Sandbox`` they are given. ``CodeInterpreter`` (``interpreter``) holds one of
each, picks the engine by language, and adds what every run gets (the files it changed, the figures it saved).

No aiflows import here, nor in the engines: they can be used, tested and benchmarked on their own.
"""

from __future__ import annotations

import abc
import contextlib
import os
import tempfile
import uuid
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .environment import DEFAULT_ENV_SCRUB, code_environment
from .output import BoundedText, RunResult
from .processes import Cgroup, descendants
from .sandbox import Sandbox, SettingError
from .workspace import FIGURE_DIR

PYTHON_LANGUAGES = ("python", "py", "python3")
SHELL_LANGUAGES = ("shell", "bash", "sh")
SUPPORTED_LANGUAGES = PYTHON_LANGUAGES + SHELL_LANGUAGES


_LIBRARY_LOADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "library_loader.py")


def library_loader_code(module: str) -> str:
    """Python that makes ``import <module>`` compile the code library block by block, each block's bytecode cached
    (``library_loader.py``: its text, its call, and the name deleted); "" for no module."""
    if not module:
        return ""
    with open(_LIBRARY_LOADER, encoding="utf-8") as f:
        source = f.read()
    return f"{source}\n__jarvis_library_loader({module!r})\ndel __jarvis_library_loader\n"


def positive_or_none(name: str, value: Any) -> Optional[float]:
    """``value`` as a positive number, None for null; a clear error otherwise."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = 0.0
    if not number > 0 or isinstance(value, bool):
        raise SettingError(f"{name}: {value!r} is not a positive number: give one, or null for no limit.")
    return number


#: The share of the machine's RAM generated code may use when ``memory_limit_mb`` is ``auto`` (the default).
DEFAULT_MEMORY_SHARE = 0.5


def physical_memory_mb() -> Optional[float]:
    """The machine's RAM in MB, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20 or None
    except (ValueError, OSError, AttributeError):
        return None


def memory_limit(value: Any) -> Optional[float]:
    """The ``memory_limit_mb`` setting in MB: a number; ``auto`` (``DEFAULT_MEMORY_SHARE`` of the RAM) or a share
    such as ``25%``; null for none. A clear error for anything else."""
    if isinstance(value, str) and (value.strip().lower() == "auto" or value.strip().endswith("%")):
        text = value.strip().lower()
        try:
            share = DEFAULT_MEMORY_SHARE if text == "auto" else float(text[:-1]) / 100
        except ValueError:
            share = 0.0
        if not 0 < share <= 1:
            raise SettingError(
                f"memory_limit_mb: {value!r} is not a share of the RAM between 1% and 100%: give "
                "one (e.g. 50%), a number of MB, auto, or null for no limit."
            )
        ram = physical_memory_mb()
        return round(ram * share) if ram else None
    return positive_or_none("memory_limit_mb", value)


def describe_memory_limit(value: Any) -> str:
    """One line for the start of a run: how much memory generated code may use, and where to change it."""
    limit = memory_limit(value)
    if limit is None:
        return "Generated code has no memory limit (memory_limit_mb: null in the configuration)."
    ram = physical_memory_mb()
    share = f", {limit / ram:.0%} of the RAM" if ram else ""
    size = f"{limit / 1024:.1f} GB" if limit >= 1024 else f"{limit:g} MB"
    return f"Generated code may use {size} of memory{share} (memory_limit_mb in the configuration changes it)."


class Executor(abc.ABC):
    """An engine that runs code of ``languages`` in the workspace.

    ``run`` never raises for a problem of the code: a failed ``RunResult`` says it. A KeyboardInterrupt during a run
    stops what the run started and is re-raised. Runs come one at a time (the interpreter holds a lock).
    """

    languages: Tuple[str, ...] = ()

    @abc.abstractmethod
    def run(self, code: str, timeout: float) -> RunResult:
        """Run ``code``, stopping it after ``timeout`` seconds."""

    def prestart(self) -> None:
        """Get ready for the first run ahead of it (raises what went wrong; the first run tries again)."""

    @abc.abstractmethod
    def close(self) -> None:
        """End everything this engine started (idempotent). A later run starts again."""


class EngineContext:
    """What the engines of one interpreter share: the workspace and its settings, a private temporary folder, the
    environment the code gets, the mark its processes carry, their cgroups, and the sandbox.

    ``resources`` holds what must not outlive the interpreter (process groups, the folder, cgroups), where a finalizer
    can reach it without the interpreter object.

    :param workspace: the folder the code runs in.
    :param library_dir: a folder put on the kernel's path after the workspace (the code library's), or None.
    :param max_output_chars: the bound of a run's output.
    :param env_scrub: name patterns of the variables kept from the code (see ``environment``).
    :param memory_limit_mb: see ``CodeInterpreter``.
    :param cpu_time_s: see ``CodeInterpreter``.
    :param sandbox: where the engines' processes run.
    """

    def __init__(
        self,
        workspace: str,
        library_dir: Optional[str] = None,
        max_output_chars: int = 20000,
        env_scrub: Iterable[str] = DEFAULT_ENV_SCRUB,
        memory_limit_mb: Optional[float] = None,
        cpu_time_s: Optional[float] = None,
        sandbox: Optional[Sandbox] = None,
    ):
        self.workspace = os.path.abspath(os.path.expanduser(str(workspace)))
        self.library_dir = os.path.abspath(os.path.expanduser(str(library_dir))) if library_dir else None
        self.figure_dir = os.path.join(self.workspace, FIGURE_DIR)  # where the PNG files of figures are saved
        self.max_output_chars = int(max_output_chars)
        self.env_scrub = tuple(env_scrub)
        self.memory_limit_mb = memory_limit(memory_limit_mb)
        self.cpu_time_s = positive_or_none("cpu_time_s", cpu_time_s)
        self.sandbox = sandbox if sandbox is not None else Sandbox(None)
        self.id = uuid.uuid4().hex[:16]
        self.resources: Dict[str, Any] = {
            "kernel_pgid": None,
            "scratch": None,
            "shell_groups": [],
            "seen": set(),
            "marker": f"{self.id}/",
            "cgroups": [],
            "tracker": None,
        }

    @property
    def scratch(self) -> Optional[str]:
        """The private temporary folder, if one was made (``scratch_dir`` makes it)."""
        return self.resources["scratch"]

    def scratch_dir(self) -> str:
        if self.scratch is None or not os.path.isdir(self.scratch):
            base = tempfile.gettempdir()
            if len(base) > 60:  # IPC socket paths must stay short (108 bytes)
                base = "/tmp"
            self.resources["scratch"] = tempfile.mkdtemp(prefix="jarvis-interp-", dir=base)
        return self.resources["scratch"]

    def environment(self) -> Dict[str, str]:
        return code_environment(self.workspace, self.env_scrub)

    def marker(self, kind: str) -> str:
        """The value of ``MARKER_VARIABLE`` for the processes of ``kind`` (``kernel<n>`` or ``shell``)."""
        return f"{self.id}/{kind}/"

    def cgroup(self, kind: str) -> Optional[Cgroup]:
        cgroup = Cgroup.create(f"{os.getpid()}-{self.id}-{kind}")
        if cgroup is not None:
            self.resources["cgroups"].append(cgroup)
        return cgroup

    def drop_cgroup(self, cgroup: Optional[Cgroup]) -> None:
        if cgroup is None:
            return
        cgroup.kill()
        cgroup.remove()
        with contextlib.suppress(ValueError):
            self.resources["cgroups"].remove(cgroup)

    def keep_group(self, pgid: int) -> None:
        """Remember the process group of a shell command's launcher that outlived the command (what the command
        left runs), to end it at close() or when the interpreter is dropped, and the processes below the launcher
        now: ended at close() too (should the code have killed the launcher), and said if they cannot be."""
        self.resources["shell_groups"].append(pgid)
        self.resources["seen"].update((pid, start) for pid, _group, start in descendants(pgid))

    def sandboxed(self, command: List[str], kernel: bool) -> List[str]:
        """``command`` run in the sandbox, which writes only the workspace and the private folder."""
        if not self.sandbox.active:
            return command
        return self.sandbox.wrap(command, self.workspace, [self.scratch_dir()], kernel=kernel)

    def limit_notes(self, out: BoundedText, text: str) -> None:
        """Say the memory limit when ``text`` (an error's name, a command's output) shows the code reached it."""
        if self.memory_limit_mb and "MemoryError" in text:
            out.note(
                f"[The code reached the memory limit of {self.memory_limit_mb:g} MB (memory_limit_mb): use less "
                "memory (smaller pieces, generators), or raise the limit in the configuration.]"
            )
