"""The code interpreter behind ``InterpreterAtomicFlow``: one Jupyter kernel for Python, ``bash`` for shell code.

No aiflows import here: the engine can be used, tested and benchmarked on its own. The module's other files hold
its parts: ``output`` (the result, the bounded output), ``workspace`` (which files a run changed), ``environment``
(what the code may see of the environment), ``processes`` (finding and ending what the code started),
``launcher`` (the process between the interpreter and its kernel), ``sandbox`` (bubblewrap), ``kernel_setup`` (what
the kernel runs when it starts).

* Python runs in ONE ipykernel process (started on the first Python run, or in the background by ``prestart()``,
  for the current interpreter, with the workspace as its working directory and first on ``sys.path``), over IPC
  sockets kept in a private temporary folder. Variables persist between runs. Before each run the code library
  (``library.py`` by default) is reloaded if it was imported and its file changed, and the names imported from it
  are rebound to the new definitions.
* The kernel is started by a launcher (``launcher.py``) that holds no secrets, tracks every process below it, and
  ends them all when the kernel ends or when this process dies.
* Every run has a timeout. Python: the kernel is interrupted and the session kept; if it does not respond to the
  interrupt it is restarted (state lost). Shell: the command's whole process group is killed.
* A dead kernel is seen at once (not at the timeout), restarted, and the loss of state (and its cause, when it is
  a limit) is said.
* Output (stdout, stderr, results, tracebacks) is stripped of ANSI escapes and control characters and bounded while
  it streams, in the kernel already: a head and a tail are kept, and a line says how many characters were cut.
* matplotlib figures left open by a run, and ``image/png`` outputs, are saved as PNG files in ``<workspace>/figures``.
* The kernel and the shell get an environment without secrets (by name and by value, see ``environment``) and
  without the LLM providers' endpoints; the kernel's Python comes first on the shell's PATH.
* Optional limits (``memory_limit_mb``, ``cpu_time_s``) and sandbox (``sandbox="bwrap"``).
* Stopping the kernel (``close()``, at exit too) ends every process its code started (its process tree, the processes
  that carry its mark in their environment, its cgroup where one could be made), and removes the temporary folder.
  The connection file (with the HMAC key) is removed once connected.
"""
from __future__ import annotations

import atexit
import base64
import contextlib
import logging
import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from typing import Any, Dict, Iterable, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule.terminal import clean_text

from .environment import DEFAULT_ENV_SCRUB, code_environment, hide_secrets_from_proc, scrubbed_environment
from .output import BoundedText, RunResult, SKIP_MARK, Utf8Decoder
from .processes import MARKER_VARIABLE, Cgroup, descendants, end_processes, group_alive, kill_group, marked_processes
from .sandbox import SandboxUnavailable, SettingError, bwrap_command, sandbox_program
from .workspace import FIGURE_DIR, MAX_FILES, ChangeTracker, exclusive_png

__all__ = ["CodeInterpreter", "RunResult", "BoundedText", "scrubbed_environment", "DEFAULT_ENV_SCRUB",
           "SandboxUnavailable", "SettingError", "FIGURE_DIR", "MAX_FILES", "PYTHON_LANGUAGES", "SHELL_LANGUAGES",
           "SUPPORTED_LANGUAGES"]

log = logging.getLogger(__name__)

PYTHON_LANGUAGES = ("python", "py", "python3")
SHELL_LANGUAGES = ("shell", "bash", "sh")
SUPPORTED_LANGUAGES = PYTHON_LANGUAGES + SHELL_LANGUAGES

_HERE = os.path.dirname(os.path.abspath(__file__))
_LAUNCHER = os.path.join(_HERE, "launcher.py")
_KERNEL_SETUP = os.path.join(_HERE, "kernel_setup.py")
_FIGURES_MIME = "application/vnd.jarvis.figures+json"
_POLL = 0.2  # seconds between two liveness checks while the kernel is quiet
# A shutdown request lets the kernel run its exit handlers and flush open files; kernel_setup then ends it at once
# (some 30 ms). One that has not ended after this long is killed.
_SHUTDOWN_GRACE = 2.0


# ~~~ Live interpreters are closed at exit; one dropped without close() has its processes killed ~~~
_LIVE: "weakref.WeakSet[CodeInterpreter]" = weakref.WeakSet()


def _release(resources: Dict[str, Any]) -> None:
    """End what an interpreter that was garbage-collected without ``close()`` left: its kernel (and all below its
    launcher), its shell commands' leftovers, its cgroups; remove its temporary folder, stop watching files."""
    for pgid in [resources.get("kernel_pgid")] + list(resources.get("shell_groups") or []):
        if pgid:
            kill_group(pgid)
    if resources.get("marker"):
        end_processes(lambda: marked_processes(resources["marker"]))
    for cgroup in list(resources.get("cgroups") or ()):
        cgroup.kill()
        cgroup.remove()
    if resources.get("tracker") is not None:
        resources["tracker"].close()
    if resources.get("scratch"):
        shutil.rmtree(resources["scratch"], ignore_errors=True)


def _close_all() -> None:
    for interpreter in list(_LIVE):
        try:
            interpreter.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass


atexit.register(_close_all)


def kernel_alive(km: Any) -> bool:
    """``km.is_alive()`` without its asyncio loop (a tenth of a millisecond, on every run): the local provisioner's
    process is polled directly; any other provisioner is asked as jupyter_client asks it."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if process is not None and callable(getattr(process, "poll", None)):
        return process.poll() is None
    return km.is_alive()


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


class CodeInterpreter:
    """Runs Python in one persistent Jupyter kernel and shell code in ``bash``, both in ``workspace``.

    ``run(code, language)`` never raises for a problem of the code (it returns a failed ``RunResult``); a
    KeyboardInterrupt during a run interrupts the kernel (or kills the shell command) and is re-raised.

    ``memory_limit_mb``: address space the kernel may take beyond its own at start (each shell command's process:
    this much in all); ``cpu_time_s``: CPU seconds one Python run may use (each shell command's process: this much).
    ``sandbox="bwrap"`` runs the kernel and the shell commands in bubblewrap (see ``sandbox.py``), with no network
    unless ``sandbox_network``; a ``SandboxUnavailable`` error at once when it is not installed.
    """

    def __init__(self, workspace: str, timeout: float = 60.0, max_output_chars: int = 20000,
                 reload_library: Optional[str] = "library", env_scrub: Iterable[str] = DEFAULT_ENV_SCRUB,
                 interrupt_grace: float = 5.0, startup_timeout: float = 60.0, memory_limit_mb: Optional[float] = None,
                 cpu_time_s: Optional[float] = None, sandbox: Optional[str] = None, sandbox_network: bool = False,
                 library_dir: Optional[str] = None):
        self.workspace = os.path.abspath(os.path.expanduser(str(workspace)))
        # where the code library is when it is not in the workspace: on the kernel's path after the workspace
        self.library_dir = os.path.abspath(os.path.expanduser(str(library_dir))) if library_dir else None
        self.timeout = float(timeout)
        self.max_output_chars = int(max_output_chars)
        self.reload_library = reload_library or ""
        self.env_scrub = tuple(env_scrub)
        self.interrupt_grace = float(interrupt_grace)
        self.startup_timeout = float(startup_timeout)
        self.memory_limit_mb = positive_or_none("memory_limit_mb", memory_limit_mb)
        self.cpu_time_s = positive_or_none("cpu_time_s", cpu_time_s)
        self.sandbox = str(sandbox).strip().lower() if sandbox else None
        self.sandbox_network = bool(sandbox_network)
        self._sandbox_program = sandbox_program(self.sandbox)
        self.figure_dir = os.path.join(self.workspace, FIGURE_DIR)
        self.id = uuid.uuid4().hex[:16]
        self._lock = threading.Lock()
        self._km = None
        self._kc = None
        self._starts = 0
        self._figure_counter = 0
        self._replies: Dict[str, Dict[str, Any]] = {}
        self._kernel_cgroup: Optional[Cgroup] = None
        self._shell_cgroup: Optional[Cgroup] = None
        self._prestart: Optional[threading.Thread] = None
        self._prestart_lock = threading.Lock()
        self._tracker = ChangeTracker(self.workspace)
        # what must not outlive the interpreter, kept where the finalizer can reach it without the object
        self._resources: Dict[str, Any] = {"kernel_pgid": None, "scratch": None, "shell_groups": [],
                                           "marker": f"{self.id}/", "cgroups": [], "tracker": self._tracker}
        finalizer = weakref.finalize(self, _release, self._resources)
        finalizer.atexit = False  # at exit, _close_all shuts kernels down gracefully
        _LIVE.add(self)

    @property
    def _kernel_pgid(self) -> Optional[int]:
        return self._resources["kernel_pgid"]

    @_kernel_pgid.setter
    def _kernel_pgid(self, value: Optional[int]) -> None:
        self._resources["kernel_pgid"] = value

    @property
    def _scratch(self) -> Optional[str]:
        return self._resources["scratch"]

    @_scratch.setter
    def _scratch(self, value: Optional[str]) -> None:
        self._resources["scratch"] = value

    @property
    def _shell_groups(self) -> List[int]:
        return self._resources["shell_groups"]

    def _keep_shell_group(self, pgid: int) -> None:
        """Remember a shell command's process group that outlived the command, to kill it at close()."""
        self._resources["shell_groups"] = [g for g in self._shell_groups if group_alive(g)] + [pgid]

    def _marker(self, kind: str) -> str:
        """The value of ``MARKER_VARIABLE`` for the processes of ``kind`` (``kernel<n>`` or ``shell``)."""
        return f"{self.id}/{kind}/"

    def _cgroup(self, kind: str) -> Optional[Cgroup]:
        cgroup = Cgroup.create(f"{os.getpid()}-{self.id}-{kind}")
        if cgroup is not None:
            self._resources["cgroups"].append(cgroup)
        return cgroup

    def _drop_cgroup(self, cgroup: Optional[Cgroup]) -> None:
        if cgroup is None:
            return
        cgroup.kill()
        cgroup.remove()
        with contextlib.suppress(ValueError):
            self._resources["cgroups"].remove(cgroup)

    # ~~~ Public ~~~
    def run(self, code: str, language: str = "python", timeout: Optional[float] = None) -> RunResult:
        lang = str(language or "python").strip().lower()
        timeout = self.timeout if timeout is None else float(timeout)
        if lang not in SUPPORTED_LANGUAGES:
            return RunResult(
                output=(f"Unsupported language {language!r}: nothing was run. Supported languages: python "
                        f"({', '.join(PYTHON_LANGUAGES)}) and shell ({', '.join(SHELL_LANGUAGES)})."),
                failed=True, language=lang)
        if not isinstance(code, str):
            return RunResult(output=f"No code to run (got {type(code).__name__}).", failed=True, language=lang)
        with self._lock:
            os.makedirs(self.workspace, exist_ok=True)
            started = time.monotonic()
            since_ns = time.time_ns()
            self._tracker.begin()
            if lang in PYTHON_LANGUAGES:
                result = self._run_python(code, timeout)
            else:
                result = self._run_shell(code, timeout)
            result.language = lang
            files, total, complete = self._tracker.end(since_ns, ignore=self._relative(result.figures))
            result.files = files
            result.duration = time.monotonic() - started
            result.output = self._finish_output(result, total, complete)
            return result

    def prestart(self) -> threading.Thread:
        """Start the kernel in a background thread, so that the first Python run does not wait for it (about a
        second). Returns at once; a run waits for the start to finish. A start that fails is tried again, and its
        error said, by the first Python run. Idempotent while the kernel runs."""
        with self._prestart_lock:  # not the run lock: a run going on must not hold this call up
            if self._prestart is not None and self._prestart.is_alive():
                return self._prestart
            thread = threading.Thread(target=self._start_in_background, name="jarvis-kernel-prestart", daemon=True)
            self._prestart = thread
            thread.start()
            return thread

    def _start_in_background(self) -> None:
        with self._lock:
            if self._km is not None and kernel_alive(self._km):
                return
            try:
                os.makedirs(self.workspace, exist_ok=True)
                self._start_kernel()
            except Exception as error:  # the first run tries again and says why it failed
                log.debug("kernel prestart failed: %s", error)

    @property
    def kernel_running(self) -> bool:
        return self._km is not None and kernel_alive(self._km)

    def close(self) -> None:
        """Shut the kernel down, end every process the code started, remove the private temporary folder."""
        starting = self._prestart
        if starting is not None:
            starting.join(self.startup_timeout + 10)
        acquired = self._lock.acquire(timeout=10)
        try:
            self._stop_kernel(graceful=True)
            for pgid in self._shell_groups:
                kill_group(pgid, grace=0.5)
            self._shell_groups.clear()
            self._drop_cgroup(self._shell_cgroup)
            self._shell_cgroup = None
            # everything started by this interpreter's code, wherever it went (setsid, double fork)
            end_processes(lambda: marked_processes(self._resources["marker"]))
            self._tracker.close()
            if self._scratch:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None
        finally:
            if acquired:
                self._lock.release()

    def __enter__(self) -> "CodeInterpreter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ~~~ Helpers ~~~
    def _relative(self, paths: Iterable[str]) -> List[str]:
        out = []
        for p in paths:
            rel = os.path.relpath(p, self.workspace)
            out.append(rel.replace(os.sep, "/"))
        return out

    def _scratch_dir(self) -> str:
        if self._scratch is None or not os.path.isdir(self._scratch):
            base = tempfile.gettempdir()
            if len(base) > 60:  # IPC socket paths must stay short (108 bytes)
                base = "/tmp"
            self._scratch = tempfile.mkdtemp(prefix="jarvis-interp-", dir=base)
        return self._scratch

    def _environment(self) -> Dict[str, str]:
        return code_environment(self.workspace, self.env_scrub)

    def _sandboxed(self, command: List[str], kernel: bool) -> List[str]:
        if self._sandbox_program is None:
            return command
        writable = [self._scratch_dir()]
        # ipykernel ends itself when its parent changes; in the sandbox its parent is the sandbox's init, pid 1
        env = {"JPY_PARENT_PID": "1"} if kernel else {}
        return bwrap_command(self._sandbox_program, self.workspace, writable, network=self.sandbox_network,
                             die_with_parent=kernel, env=env) + command

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

    def _limit_notes(self, out: BoundedText, text: str) -> None:
        if self.memory_limit_mb and "MemoryError" in text:
            out.note(f"[The code reached the memory limit of {self.memory_limit_mb:g} MB (memory_limit_mb): use less "
                     "memory (smaller pieces, generators), or raise the limit in the configuration.]")

    # ~~~ Python: the kernel ~~~
    def _kernel_command(self, status_path: str, cgroup: Optional[Cgroup]) -> List[str]:
        """The launcher, (bubblewrap,) the kernel; ``{connection_file}`` is filled in by jupyter_client."""
        command = [sys.executable, "-I", "-S", _LAUNCHER, "--status", status_path]
        if cgroup is not None:
            command += ["--cgroup", cgroup.path]
        kernel = [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}",
                  "--HistoryManager.enabled=False"]
        return command + ["--"] + self._sandboxed(kernel, kernel=True)

    def _spec_manager(self, argv: List[str]):
        """A kernel spec manager whose only kernel is ``argv`` (the launcher and an ipykernel for the current
        interpreter, ``sys.executable``), whatever kernel specs are installed."""
        from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

        class SpecManager(KernelSpecManager):
            def get_kernel_spec(self, kernel_name):
                return KernelSpec(argv=list(argv), display_name="Python (Jarvis interpreter)", language="python",
                                  resource_dir="", metadata={})

        return SpecManager()

    def _setup_code(self) -> str:
        with open(_KERNEL_SETUP, encoding="utf-8") as f:
            source = f.read()
        arguments = dict(workspace=self.workspace, library=self.reload_library, figure_dir=self.figure_dir,
                         mime=_FIGURES_MIME, max_output=self.max_output_chars, memory_limit_mb=self.memory_limit_mb,
                         cpu_time_s=self.cpu_time_s, skip_mark=SKIP_MARK)
        call = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
        return f"{source}\n__jarvis_install({call})\ndel __jarvis_install\n"

    def _start_kernel(self) -> None:
        from jupyter_client import KernelManager

        scratch = self._scratch_dir()
        self._starts += 1
        n = self._starts
        self._kernel_cgroup = self._cgroup(f"k{n}")
        argv = self._kernel_command(self._status_path(n), self._kernel_cgroup)
        km = KernelManager(
            kernel_name="jarvis-python",
            kernel_spec_manager=self._spec_manager(argv),
            transport="ipc",
            connection_file=os.path.join(scratch, f"kernel-{n}.json"),
            ip=os.path.join(scratch, f"k{n}"),
        )
        env = self._environment()
        # the code can read /proc/<pid>/environ of this process too (its grandparent): the secrets are blanked there
        hide_secrets_from_proc(self.env_scrub)
        # the workspace is first on the kernel's sys.path anyway; on PYTHONPATH, Python programs the kernel's code
        # starts (from another folder too) find the library as well
        user_path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        first = [self.workspace] + ([self.library_dir] if self.library_dir and self.library_dir != self.workspace
                                    else [])
        env["PYTHONPATH"] = os.pathsep.join(first + user_path)
        env["IPYTHONDIR"] = os.path.join(scratch, "ipython")
        # ipykernel does not read what is written to the file descriptors (subprocesses, C code) under pytest; the
        # code run here is not under pytest, even when this process is
        env.pop("PYTEST_CURRENT_TEST", None)
        env[MARKER_VARIABLE] = self._marker(f"kernel{n}")
        kernel_log = open(os.path.join(scratch, f"kernel-{n}.log"), "ab")
        try:
            km.start_kernel(env=env, cwd=self.workspace, stdout=kernel_log, stderr=kernel_log)
        except BaseException:
            self._drop_cgroup(self._kernel_cgroup)
            self._kernel_cgroup = None
            raise
        finally:
            kernel_log.close()
        self._km = km
        # jupyter_client starts the launcher in a session of its own (start_new_session): its process group holds
        # the launcher, the kernel and what the kernel's code starts, and is killed whole when the kernel is stopped
        try:
            self._kernel_pgid = km.provisioner.pgid if km.provisioner is not None else None
        except Exception:
            self._kernel_pgid = None
        if self._kernel_pgid == os.getpgrp():  # never our own group
            self._kernel_pgid = None
        kc = km.client()
        kc.start_channels()
        self._kc = kc
        try:
            try:
                kc.wait_for_ready(timeout=self.startup_timeout)
            except RuntimeError as error:  # the kernel died while starting: say what it said
                tail = self._kernel_log_tail(800)
                raise RuntimeError(f"{error}{' Its log: ' + tail if tail else ''}") from None
            # The kernel has read its connection file and the client holds the same in memory: removed now, the
            # HMAC key is not left on disk if this process dies without cleaning up.
            with contextlib.suppress(OSError):
                os.remove(km.connection_file)
            reply = kc.execute_interactive(self._setup_code(), silent=True, store_history=False, allow_stdin=False,
                                           timeout=self.startup_timeout, output_hook=lambda msg: None)
            if reply["content"].get("status") != "ok":
                raise RuntimeError(f"kernel setup failed: {reply['content'].get('ename')}: "
                                   f"{reply['content'].get('evalue')}")
        except BaseException:
            self._stop_kernel(graceful=False)
            raise

    def _status_path(self, n: int) -> str:
        return os.path.join(self._scratch_dir(), f"kernel-{n}.status")

    def _stop_kernel(self, graceful: bool) -> None:
        kc, km, pgid = self._kc, self._km, self._kernel_pgid
        cgroup, self._kernel_cgroup = self._kernel_cgroup, None
        self._kc = self._km = self._kernel_pgid = None
        if kc is not None:
            with contextlib.suppress(Exception):
                kc.stop_channels()
        strays: List[Tuple[int, int]] = []
        if km is not None:
            # everything below the launcher, which is a subreaper: what the code started, in sessions of its own
            # (setsid) or orphaned (double fork) too; found now, while the launcher is alive, and killed with it
            with contextlib.suppress(Exception):
                if kernel_alive(km) and km.provisioner is not None and km.provisioner.pid:
                    strays = [(pid, start) for pid, _group, start in descendants(km.provisioner.pid)]
            try:
                if graceful and kernel_alive(km):
                    # A shutdown request lets the kernel run its exit handlers and flush open files; the exit
                    # handler kernel_setup installed then ends it at once.
                    km.request_shutdown()
                    end = time.monotonic() + _SHUTDOWN_GRACE
                    while time.monotonic() < end and kernel_alive(km):
                        time.sleep(0.005)
                km.shutdown_kernel(now=True)
            except Exception as error:  # pragma: no cover - best effort
                log.debug("kernel shutdown: %s", error)
                with contextlib.suppress(Exception):
                    km.shutdown_kernel(now=True)
            with contextlib.suppress(Exception):
                km.cleanup_resources()
        if pgid:
            kill_group(pgid)  # whatever the kernel's code started and left behind
        marker = self._marker(f"kernel{self._starts}")
        end_processes(lambda: strays + marked_processes(marker))
        self._drop_cgroup(cgroup)

    def _kernel_log_tail(self, limit: int = 1500) -> str:
        if not self._scratch:
            return ""
        path = os.path.join(self._scratch, f"kernel-{self._starts}.log")
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - limit))
                return f.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""

    def _kernel_end_signal(self) -> Optional[int]:
        """The signal that ended the last kernel, as its launcher wrote it (None: it exited, or is not known)."""
        try:
            with open(self._status_path(self._starts), encoding="utf-8") as f:
                kind, _, value = f.read().partition(" ")
            number = int(value)
        except (OSError, ValueError):
            return None
        if kind == "signal":
            return number
        if kind == "exit" and self._sandbox_program is not None and number > 128:
            return number - 128  # bubblewrap exits with 128 + the signal that ended the kernel
        return None

    def _death_note(self) -> str:
        """Why the kernel died, when it can be told: a limit, or what its log says."""
        signum = self._kernel_end_signal()
        if signum == signal.SIGXCPU and self.cpu_time_s:
            return (f"[The kernel was stopped: CPU time limit of {self.cpu_time_s:g} s (cpu_time_s) reached by this run. "
                    "A new kernel was started: all variables, imports and definitions were lost.]")
        note = ("[The Python kernel died while running this code (for example os._exit, a crash or running "
                "out of memory). It was restarted: all variables, imports and definitions were lost.]")
        tail = self._kernel_log_tail()
        if tail and ("Fatal" in tail or "Segmentation" in tail or "Error" in tail):
            note += "\n[kernel log: " + tail[-600:] + "]"
        return note

    def _run_python(self, code: str, timeout: float) -> RunResult:
        out = BoundedText(self.max_output_chars)
        result = RunResult(output="", language="python")
        if self._km is None or not kernel_alive(self._km):
            was_running = self._km is not None
            if was_running:
                self._stop_kernel(graceful=False)
            try:
                self._start_kernel()
            except Exception as error:
                result.failed = True
                result.output = f"Could not start the Python kernel: {type(error).__name__}: {error}"
                return result
            if was_running:
                result.restarted = True
                out.note("[The Python kernel had stopped; a new one was started: all variables were lost.]")
        kc = self._kc
        msg_id = kc.execute(code, silent=False, store_history=True, allow_stdin=False, stop_on_error=True)
        deadline = time.monotonic() + timeout
        status = None
        try:
            done = self._collect(msg_id, out, result, deadline)
            if done == "idle":
                reply = self._reply(msg_id)
                status = reply.get("status")
                if any(p.get("source") == "ask_exit" and not p.get("keepkernel") for p in reply.get("payload") or []):
                    # exit()/quit(): ipykernel stops its event loop and the process ends soon after.
                    result.restarted = True
                    self._stop_kernel(graceful=False)
                    out.note("[exit()/quit() ended the Python session: a new kernel was started, all variables, imports "
                             "and definitions were lost.]")
                    self._restart_quietly(out)
            elif done == "dead":
                result.failed = result.restarted = True
                note = self._death_note()
                self._stop_kernel(graceful=False)
                out.note(note)
                self._restart_quietly(out)
            else:  # timeout
                result.failed = result.timed_out = True
                with contextlib.suppress(Exception):
                    self._km.interrupt_kernel()
                back = self._collect(msg_id, out, result, time.monotonic() + self.interrupt_grace)
                if back == "idle":
                    self._reply(msg_id)
                    out.note(f"[Timed out: the run was interrupted after {timeout:g} s. The session is kept: "
                            "variables defined before (and by the statements that completed) are still there.]")
                else:
                    result.restarted = True
                    self._stop_kernel(graceful=False)
                    died = " (the kernel died)" if back == "dead" else ""
                    out.note(f"[Timed out after {timeout:g} s; the kernel did not respond to the interrupt{died}, so "
                            "it was restarted: all variables, imports and definitions were lost.]")
                    self._restart_quietly(out)
        except KeyboardInterrupt:
            self._interrupt_after_keyboard(msg_id)
            raise
        if status in ("error", "aborted"):
            result.failed = True
            if status == "aborted" and not out.total:
                out.note("[The run was aborted by the kernel.]")
            self._limit_notes(out, reply.get("ename") or "")
        result.truncated = out.truncated
        result.output = out.render()
        return result

    def _restart_quietly(self, out: BoundedText) -> None:
        try:
            self._start_kernel()
        except Exception as error:
            out.note(f"[A new kernel could not be started yet ({type(error).__name__}: {error}); "
                     "the next Python run will try again.]")

    def _interrupt_after_keyboard(self, msg_id: str) -> None:
        """Ctrl-C during a run: interrupt the kernel and wait a little for it; restart it if it does not stop."""
        try:
            if self._km is None:
                return
            self._km.interrupt_kernel()
            sink = BoundedText(1000)
            back = self._collect(msg_id, sink, RunResult(output=""), time.monotonic() + self.interrupt_grace)
            if back != "idle":
                self._stop_kernel(graceful=False)
        except BaseException:
            with contextlib.suppress(BaseException):
                self._stop_kernel(graceful=False)

    def _collect(self, msg_id: str, out: BoundedText, result: RunResult, deadline: float) -> str:
        """Read the kernel's output for ``msg_id`` until it is idle ('idle'), dies ('dead') or ``deadline`` ('timeout')."""
        # The channel is read directly: the blocking client's get_iopub_msg runs an asyncio loop around this same
        # call for every message (four a run), a third of a warm round trip's own time.
        kc, km, iopub = self._kc, self._km, self._kc.iopub_channel
        quiet_since = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                msg = iopub.get_msg(timeout=min(_POLL, remaining))
            except queue.Empty:
                if not kernel_alive(km):
                    return "dead"
                # The idle status can be lost if the kernel floods IOPub past its high-water mark: the execute
                # reply (on the shell channel) followed by a quiet second says the run is over all the same.
                if msg_id in self._replies or self._reply(msg_id, wait=0):
                    if time.monotonic() - quiet_since > 1.0:
                        return "idle"
                continue
            quiet_since = time.monotonic()
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            content = msg["content"]
            if kind == "status":
                if content.get("execution_state") == "idle":
                    return "idle"
            elif kind == "stream":
                out.add(content.get("text", ""))
            elif kind in ("execute_result", "display_data", "update_display_data"):
                self._add_display(content.get("data", {}), out, result)
            elif kind == "error":
                result.failed = True
                trace = content.get("traceback") or [f"{content.get('ename')}: {content.get('evalue')}"]
                out.note(clean_text("\n".join(trace), keep_carriage_returns=True))

    def _add_display(self, data: Dict[str, Any], out: BoundedText, result: RunResult) -> None:
        if _FIGURES_MIME in data:
            paths = (data[_FIGURES_MIME] or {}).get("paths", [])
            result.figures.extend(p for p in paths if isinstance(p, str))
            return
        png = data.get("image/png")
        if png:
            try:
                raw = base64.b64decode(png if isinstance(png, str) else "".join(png))
                stamp = time.strftime("%Y%m%d-%H%M%S")
                path, fd, n = exclusive_png(self.figure_dir, stamp, self._figure_counter + 1)
                self._figure_counter = n
                with os.fdopen(fd, "wb") as f:
                    f.write(raw)
                result.figures.append(path)
                return
            except Exception as error:
                out.note(f"[an image could not be saved: {type(error).__name__}: {error}]")
        text = data.get("text/plain")
        if text is None:
            kinds = ", ".join(sorted(data)) or "nothing"
            text = f"[display output of type {kinds} not shown]"
        text = text if isinstance(text, str) else "".join(text)
        out.add(text if text.endswith("\n") else text + "\n")

    def _reply(self, msg_id: str, wait: float = 2.0) -> Dict[str, Any]:
        """The content of the execute_reply for ``msg_id`` (status 'ok', 'error' or 'aborted'; {} if none came in
        ``wait`` seconds). Replies to other requests (stale ones, after an interrupt) are dropped."""
        if msg_id in self._replies:
            return self._replies[msg_id]
        deadline = time.monotonic() + wait
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                msg = self._kc.shell_channel.get_msg(timeout=remaining)  # as iopub in _collect
            except queue.Empty:
                return {}
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                self._replies = {msg_id: msg.get("content") or {}}
                return self._replies[msg_id]

    # ~~~ Shell ~~~
    def _run_shell(self, code: str, timeout: float) -> RunResult:
        out = BoundedText(self.max_output_chars)
        result = RunResult(output="", language="shell")
        if len(code.encode("utf-8", errors="replace")) < 100_000:
            argv = ["bash", "-c", code]
        else:  # too long for one argument: run it from a file
            script = os.path.join(self._scratch_dir(), "command.sh")
            with open(script, "w", encoding="utf-8") as f:
                f.write(code)
            argv = ["bash", script]
        env = self._environment()
        env[MARKER_VARIABLE] = marker = self._marker(f"shell-{uuid.uuid4().hex[:8]}")  # this command's own
        try:
            proc = subprocess.Popen(self._sandboxed(self._shell_command(argv), kernel=False), cwd=self.workspace,
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            result.failed = True
            result.output = f"Could not start bash: {error}"
            return result
        except BaseException:  # an exit or Ctrl+C while Popen waited: the command may run already, unseen
            end_processes(lambda: marked_processes(marker))
            raise
        pgid, sel = proc.pid, selectors.DefaultSelector()
        try:  # from here on, an exit (SIGTERM) or Ctrl+C at any point ends the command too
            if self._shell_cgroup is None:
                self._shell_cgroup = self._cgroup("shell")
            if self._shell_cgroup is not None:
                self._shell_cgroup.add(proc.pid)  # bash is still starting: what it starts will be in it too
            deadline = time.monotonic() + timeout
            decoder = Utf8Decoder()
            fd = proc.stdout.fileno()
            sel.register(fd, selectors.EVENT_READ)
            eof = False
            exited_at: Optional[float] = None
            while not eof:
                now = time.monotonic()
                if now >= deadline:
                    break
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > 1.0:
                    break  # background processes still hold the output; stop reading
                wait = min(deadline - now, 0.25 if exited_at is None else 0.1)
                for _key, _ in sel.select(wait):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        eof = True
                        break
                    out.add(decoder.decode(chunk))
            if not eof and proc.poll() is None:  # timeout
                result.failed = result.timed_out = True
                kill_group(pgid)
                proc.wait()
                out.add(decoder.decode(b"", final=True))
                out.note(f"[Timed out: the command was killed after {timeout:g} s.]")
            else:
                returncode = proc.wait()
                out.add(decoder.decode(b"", final=True))
                if not eof:
                    self._keep_shell_group(pgid)
                    out.note("[The command left background processes running; their later output is not shown.]")
                elif group_alive(pgid):
                    self._keep_shell_group(pgid)
                if returncode != 0:
                    result.failed = True
                    if returncode < 0:
                        try:
                            name = signal.Signals(-returncode).name
                        except ValueError:
                            name = str(-returncode)
                        limit = ""
                        if -returncode == signal.SIGXCPU and self.cpu_time_s:
                            limit = f": it reached the CPU time limit of {self.cpu_time_s:g} s (cpu_time_s)"
                        out.note(f"[The command was killed by signal {name}{limit}.]")
                    else:
                        out.note(f"[exit code {returncode}]")
        except BaseException:  # Ctrl+C, SIGTERM (an exit) or an error: the command must not outlive the run
            kill_group(pgid)
            with contextlib.suppress(Exception):
                proc.wait(timeout=2)
            raise
        finally:
            sel.close()
            proc.stdout.close()
        if result.failed:
            self._limit_notes(out, "".join(out.head) + out.tail)
        result.truncated = out.truncated
        result.output = out.render()
        return result

    def _shell_command(self, argv: List[str]) -> List[str]:
        """``argv`` run as the child of a shell (``sh``: the smallest there is) started with the scrubbed
        environment: the command's parent in ``/proc`` holds no secret (this process's initial environment holds the
        API keys). That shell first sets the limits (each process of the command gets them: one that cannot be set,
        because a lower one is in force, is left as it is), and ends as its child did: killed by the same signal (an
        ``exit 130`` of the command's own reads as a SIGINT: the shell says both with the status 130), or with its
        exit code."""
        steps = []
        if self.memory_limit_mb:
            steps.append(f"ulimit -v {int(self.memory_limit_mb * 1024)} 2>/dev/null")
        if self.cpu_time_s:
            seconds = max(1, int(round(self.cpu_time_s)))  # SIGXCPU at the soft limit, SIGKILL at the hard one
            steps.append(f"ulimit -H -t {seconds + 1} 2>/dev/null; ulimit -S -t {seconds} 2>/dev/null")
        steps.append('"$@"; status=$?; if [ "$status" -gt 128 ]; then kill -$((status - 128)) $$ 2>/dev/null; fi; '
                     'exit "$status"')
        return ["sh", "-c", "; ".join(steps), "sh"] + argv
