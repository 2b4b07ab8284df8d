"""The code interpreter behind ``InterpreterAtomicFlow``: one engine per kind of code, behind one interface.

No aiflows import here, so the interpreter can be used, tested and benchmarked on its own. This file picks the
engine for a run and adds what every run gets: the files it changed and the figures it saved, said after its
output. Closing (``close()``, also at exit) ends every process the code started and removes the private temporary
folder; an interpreter dropped without ``close()`` has its processes killed by a finalizer.

The parts: ``executor`` (the engines' interface and what they share), ``kernel`` (Python), ``shell`` (``bash``),
``sandbox`` (bubblewrap), ``output`` (the result, the bounded output), ``workspace`` (which files a run changed),
``environment`` (what the code may see of the environment), ``processes`` (finding and ending what the code
started), ``launcher`` (the process between the interpreter and its kernel), ``kernel_setup`` (what the kernel runs
when it starts).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import threading
import time
import weakref
from typing import Any, Dict, Iterable, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import redact, remember_secrets, start_thread

from .environment import (
    DEFAULT_ENV_SCRUB,
    LLM_PROVIDERS,
    LLM_SETTINGS,
    is_secret_value,
    scrub_matcher,
    scrubbed_secrets,
)
from .executor import PYTHON_LANGUAGES, SHELL_LANGUAGES, SUPPORTED_LANGUAGES, EngineContext, Executor, positive_or_none
from .kernel import KernelExecutor
from .output import RunResult
from .processes import command_line, end_processes, kill_group, marked_processes, start_time
from .sandbox import Sandbox
from .shell import ShellExecutor
from .workspace import ChangeTracker

__all__ = [
    "CodeInterpreter",
    "Executor",
    "RunResult",
    "positive_or_none",
    "survivors_note",
    "PYTHON_LANGUAGES",
    "SHELL_LANGUAGES",
    "SUPPORTED_LANGUAGES",
]

log = logging.getLogger(__name__)

# ~~~ Live interpreters are closed at exit; one dropped without close() has its processes killed ~~~
_LIVE: "weakref.WeakSet[CodeInterpreter]" = weakref.WeakSet()


def _release(resources: Dict[str, Any]) -> None:
    """End what an interpreter that was garbage-collected without ``close()`` left: its kernel (and all below its
    launcher), its shell commands' leftovers, its cgroups; remove its temporary folder, stop watching files."""
    if resources.get("kernel_pgid"):
        kill_group(resources["kernel_pgid"])
    for pgid in resources.get("shell_groups") or ():  # a SIGTERM: their launchers end what left the group too
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGTERM)
    if resources.get("marker"):
        end_processes(lambda: marked_processes(resources["marker"]) + list(resources.get("seen") or ()))
    for cgroup in list(resources.get("cgroups") or ()):
        cgroup.kill()
        cgroup.remove()
    if resources.get("tracker") is not None:
        resources["tracker"].close()
    if resources.get("scratch"):
        shutil.rmtree(resources["scratch"], ignore_errors=True)


def survivors_note(survivors: List[Tuple[int, str]]) -> str:
    """The line that says which processes started by the code could not be ended ("" when none)."""
    if not survivors:
        return ""
    count = len(survivors)
    listed = "; ".join(f"{pid}, {command or '?'}" for pid, command in survivors)
    verb = "is" if count == 1 else "are"
    return (
        f"{count} process{'es' if count > 1 else ''} started by the code {verb} still running: {listed} "
        f"(end {'it' if count == 1 else 'them'} with kill PID)."
    )


def _close_all() -> None:
    for interpreter in list(_LIVE):
        try:
            interpreter.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass


atexit.register(_close_all)


def secrets_to_redact(
    patterns: Iterable[str] = DEFAULT_ENV_SCRUB, base: Optional[Dict[str, str]] = None
) -> Dict[str, str]:
    """``{name: value}`` of the variables kept from the code whose values a run redacts from what it writes and
    sends (``CoreFlowModule.redaction``): ``scrubbed_secrets`` but the LLM providers' endpoints, API versions and
    organizations, unless their value holds a credential. They say which account a run uses, yet are no secret:
    a goal or code may well name the server.

    :param patterns: shell-style name patterns (``DEFAULT_ENV_SCRUB``, or the configuration's ``env_scrub``).
    :param base: the environment to look at (default ``os.environ``)."""
    endpoints = scrub_matcher(
        ("*_API_BASE", "AZURE_API_VERSION", "AZURE_API_TYPE")
        + tuple(f"{provider}_*{setting}" for provider in LLM_PROVIDERS for setting in LLM_SETTINGS)
    )
    return {
        name: value
        for name, value in scrubbed_secrets(patterns, base).items()
        if not endpoints.match(name.upper()) or is_secret_value(value)
    }


class CodeInterpreter:
    """Runs Python in one persistent Jupyter kernel and shell code in ``bash``, both in ``workspace``.

    ``run(code, language)`` never raises for a problem of the code (it returns a failed ``RunResult``); a
    KeyboardInterrupt during a run interrupts the kernel (or kills the shell command) and is re-raised. Runs are
    serialised by a lock.

    :param memory_limit_mb: address space the kernel may take beyond its own at start; each shell command's process
        gets this much in all.
    :param cpu_time_s: CPU seconds one Python run may use; each shell command's process gets this much.
    :param sandbox: ``"bwrap"`` runs the kernel and the shell commands in bubblewrap (see ``sandbox.py``), with no
        network unless ``sandbox_network``; ``SandboxUnavailable`` at once when it is not installed.
    :param library_dir: a folder put on the kernel's path after the workspace (the code library's), or None.

    The other parameters are ``InterpreterAtomicFlow``'s settings of the same names; ``env_scrub`` are the name
    patterns of the variables kept from the code (see ``environment``).
    """

    def __init__(
        self,
        workspace: str,
        timeout: float = 60.0,
        max_output_chars: int = 20000,
        reload_library: Optional[str] = "library",
        env_scrub: Iterable[str] = DEFAULT_ENV_SCRUB,
        interrupt_grace: float = 5.0,
        startup_timeout: float = 60.0,
        memory_limit_mb: Optional[float] = None,
        cpu_time_s: Optional[float] = None,
        sandbox: Optional[str] = None,
        sandbox_network: bool = False,
        library_dir: Optional[str] = None,
    ):
        self.timeout = float(timeout)
        self.context = EngineContext(
            workspace,
            library_dir=library_dir,
            max_output_chars=max_output_chars,
            env_scrub=env_scrub,
            memory_limit_mb=memory_limit_mb,
            cpu_time_s=cpu_time_s,
            sandbox=Sandbox(sandbox, network=sandbox_network),
        )
        self.kernel = KernelExecutor(
            self.context,
            reload_library=reload_library,
            interrupt_grace=interrupt_grace,
            startup_timeout=startup_timeout,
        )
        self.shell = ShellExecutor(self.context)
        self.executors: List[Executor] = [self.kernel, self.shell]
        self._lock = threading.Lock()
        #: ``(pid, command line)`` of the processes started by the code that were still running after ``close()``
        self.survivors: List[Tuple[int, str]] = []
        self._prestart: Optional[threading.Thread] = None
        self._prestart_lock = threading.Lock()
        self._tracker = ChangeTracker(self.workspace)
        self._environment_seen: Optional[tuple] = None  # the environment whose secrets redaction knows
        self.context.resources["tracker"] = self._tracker
        finalizer = weakref.finalize(self, _release, self.context.resources)
        finalizer.atexit = False  # at exit, _close_all shuts kernels down gracefully
        _LIVE.add(self)

    # The settings, as the context the engines share holds them
    @property
    def workspace(self) -> str:
        return self.context.workspace

    @property
    def figure_dir(self) -> str:
        return self.context.figure_dir

    @property
    def max_output_chars(self) -> int:
        return self.context.max_output_chars

    @property
    def library_dir(self) -> Optional[str]:
        return self.context.library_dir

    @property
    def memory_limit_mb(self) -> Optional[float]:
        return self.context.memory_limit_mb

    @property
    def cpu_time_s(self) -> Optional[float]:
        return self.context.cpu_time_s

    @property
    def sandbox(self) -> Optional[str]:
        return self.context.sandbox.name

    def executor_for(self, language: str) -> Optional[Executor]:
        """The engine that runs ``language`` (already lower-cased), or None."""
        for executor in self.executors:
            if language in executor.languages:
                return executor
        return None

    # ~~~ Public ~~~
    def _remember_environment_secrets(self) -> None:
        """Make the secrets the code's environment is kept from known to redaction: looked for again only when the
        process's environment changed (a look costs a few tenths of a millisecond; a copy of it, a hundredth)."""
        environment = tuple(os.environ.items())
        if environment != self._environment_seen:
            remember_secrets(secrets_to_redact(self.context.env_scrub))
            self._environment_seen = environment

    def run(self, code: str, language: str = "python", timeout: Optional[float] = None) -> RunResult:
        lang = str(language or "python").strip().lower()
        timeout = self.timeout if timeout is None else float(timeout)
        executor = self.executor_for(lang)
        if executor is None:
            return RunResult(
                output=(
                    f"Unsupported language {language!r}: nothing was run. Supported languages: python "
                    f"({', '.join(PYTHON_LANGUAGES)}) and shell ({', '.join(SHELL_LANGUAGES)})."
                ),
                failed=True,
                language=lang,
            )
        if not isinstance(code, str):
            return RunResult(output=f"No code to run (got {type(code).__name__}).", failed=True, language=lang)
        # what the code cannot see, it may still read from a file and print: the output comes back without it
        self._remember_environment_secrets()
        with self._lock:
            os.makedirs(self.workspace, exist_ok=True)
            started = time.monotonic()
            since_ns = time.time_ns()
            self._tracker.begin()
            result = executor.run(code, timeout)
            result.language = lang
            files, total, complete = self._tracker.end(since_ns, ignore=self._relative(result.figures))
            result.files = files
            result.duration = time.monotonic() - started
            result.output = redact(self._finish_output(result, total, complete))
            return result

    def prestart(self) -> threading.Thread:
        """Start the kernel in a background thread, so that the first Python run does not wait for it.

        Returns at once; a run waits for the start to finish. A start that fails is tried again, and its error said,
        by the first Python run. Idempotent while the kernel runs."""
        with self._prestart_lock:  # not the run lock: a run going on must not hold this call up
            if self._prestart is not None and self._prestart.is_alive():
                return self._prestart
            # in a copy of the run's context: what starting the kernel says goes to the run's console
            self._prestart = start_thread(self._start_in_background, name="jarvis-kernel-prestart")
            return self._prestart

    def _start_in_background(self) -> None:
        with self._lock:
            try:
                os.makedirs(self.workspace, exist_ok=True)
                for executor in self.executors:
                    executor.prestart()
            except Exception as error:  # the first run tries again and says why it failed
                log.debug("prestart failed: %s", error)

    @property
    def kernel_running(self) -> bool:
        return self.kernel.running

    def close(self) -> None:
        """Shut the kernel down, end every process the code started, remove the private temporary folder."""
        starting = self._prestart
        if starting is not None:
            starting.join(self.kernel.startup_timeout + 10)
        acquired = self._lock.acquire(timeout=10)
        try:
            for executor in self.executors:
                executor.close()
            # everything started by this interpreter's code, wherever it went (setsid, double fork), and what was
            # seen below a shell command's launcher (should the code have killed the launcher)
            seen = self.context.resources["seen"]
            end_processes(lambda: marked_processes(self.context.resources["marker"]) + list(seen))
            self.survivors = [(pid, command_line(pid)) for pid, start in sorted(seen) if start_time(pid) == start]
            seen.clear()
            self._tracker.close()
            if self.context.scratch:
                shutil.rmtree(self.context.scratch, ignore_errors=True)
                self.context.resources["scratch"] = None
        finally:
            if acquired:
                self._lock.release()

    def __enter__(self) -> "CodeInterpreter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ~~~ Helpers ~~~
    def _relative(self, paths: Iterable[str]) -> List[str]:
        return [os.path.relpath(p, self.workspace).replace(os.sep, "/") for p in paths]

    def _finish_output(self, result: RunResult, files_total: int, files_complete: bool = True) -> str:
        """The output with notes on the figures saved and the files written; "(no output)" if it was empty.
        A workspace too big to scan whole is said only when files are listed (the list may then miss some)."""
        text = result.output.rstrip("\n")
        if not text.strip():
            text = "(no output)"
        notes = [f"[figure saved: {p}]" for p in result.figures[:10]]
        if len(result.figures) > 10:
            notes.append(f"[... and {len(result.figures) - 10} more figures in {self.figure_dir}]")
        if result.files:
            shown = result.files[:10]
            rest = files_total - len(shown)
            more = f" (and {rest} more)" if rest > 0 else ""
            partial = "" if files_complete else " (the workspace was checked only to a bounded depth and size)"
            notes.append("[files created or modified: " + ", ".join(shown) + more + partial + "]")
        return "\n".join([text] + notes)
