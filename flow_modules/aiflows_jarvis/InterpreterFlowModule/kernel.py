"""The Python engine: one persistent Jupyter kernel (ipykernel), behind the ``Executor`` interface.

One kernel per interpreter, so variables persist between runs; it runs in the workspace, over IPC sockets in the
interpreter's private folder, started by ``launcher.py`` (which holds no secrets and ends every process below it).
What it does inside (library reload, bounded output, figures, limits) is ``kernel_setup``. At the timeout the kernel
is interrupted and the session kept, or restarted if the interrupt does not work; a dead kernel is seen at once, not
at the timeout. Every loss of state is said in the run's output. The connection file (with the HMAC key) is removed
once connected.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import queue
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import clean_text

from .environment import hide_secrets_from_proc
from .executor import PYTHON_LANGUAGES, EngineContext, Executor, library_loader_code
from .output import SKIP_MARK, BoundedText, RunResult
from .processes import MARKER_VARIABLE, Cgroup, descendants, end_processes, kill_group, marked_processes
from .workspace import exclusive_png

log = logging.getLogger(__name__)

_HERE = os.path.dirname(os.path.abspath(__file__))
_LAUNCHER = os.path.join(_HERE, "launcher.py")
_KERNEL_SETUP = os.path.join(_HERE, "kernel_setup.py")
_FIGURES_MIME = "application/vnd.jarvis.figures+json"
_POLL = 0.2  # seconds between two liveness checks while the kernel is quiet
# A shutdown request lets the kernel run its exit handlers and flush open files; kernel_setup then ends it at once.
# One that has not ended after this long is killed.
_SHUTDOWN_GRACE = 2.0


def kernel_alive(km: Any) -> bool:
    """``km.is_alive()`` without the asyncio loop it runs per call (this is called on every run): the local
    provisioner's process is polled directly; any other provisioner is asked as jupyter_client asks it."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if process is not None and callable(getattr(process, "poll", None)):
        return process.poll() is None
    return km.is_alive()


# How a kernel is started: this interpreter's ipykernel, no history database (benchmarks/run.py's floor starts the same)
KERNEL_ARGV = (
    sys.executable,
    "-Xfrozen_modules=off",
    "-m",
    "ipykernel_launcher",
    "-f",
    "{connection_file}",
    "--HistoryManager.enabled=False",
)


class KernelExecutor(Executor):
    """Runs Python in one persistent Jupyter kernel in the context's workspace.

    :param ctx: what the interpreter's engines share (workspace, limits, sandbox, private folder).
    :param reload_library: the module reloaded before each run if imported ("" for none).
    :param interrupt_grace: seconds to wait for an interrupted kernel before restarting it.
    :param startup_timeout: seconds a kernel may take to start.
    """

    languages = PYTHON_LANGUAGES

    def __init__(
        self,
        ctx: EngineContext,
        reload_library: Optional[str] = "library",
        interrupt_grace: float = 5.0,
        startup_timeout: float = 60.0,
    ):
        self.ctx = ctx
        self.reload_library = reload_library or ""
        self.interrupt_grace = float(interrupt_grace)
        self.startup_timeout = float(startup_timeout)
        self._km = None
        self._kc = None
        self._starts = 0
        self._figure_counter = 0
        self._replies: Dict[str, Dict[str, Any]] = {}
        self._kernel_cgroup: Optional[Cgroup] = None

    @property
    def _kernel_pgid(self) -> Optional[int]:
        return self.ctx.resources["kernel_pgid"]

    @_kernel_pgid.setter
    def _kernel_pgid(self, value: Optional[int]) -> None:
        self.ctx.resources["kernel_pgid"] = value

    @property
    def running(self) -> bool:
        return self._km is not None and kernel_alive(self._km)

    def prestart(self) -> None:
        if not self.running:
            self._start_kernel()

    def close(self) -> None:
        self._stop_kernel(graceful=True)

    def _kernel_command(self, status_path: str, cgroup: Optional[Cgroup]) -> List[str]:
        """The launcher, (bubblewrap,) the kernel; ``{connection_file}`` is filled in by jupyter_client."""
        command = [sys.executable, "-I", "-S", _LAUNCHER, "--status", status_path]
        if cgroup is not None:
            command += ["--cgroup", cgroup.path]
        kernel = list(KERNEL_ARGV)
        return command + ["--"] + self.ctx.sandboxed(kernel, kernel=True)

    def _spec_manager(self, argv: List[str]):
        """A kernel spec manager whose only kernel is ``argv`` (the launcher and an ipykernel for the current
        interpreter, ``sys.executable``), whatever kernel specs are installed."""
        from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

        class SpecManager(KernelSpecManager):
            def get_kernel_spec(self, kernel_name):
                return KernelSpec(
                    argv=list(argv),
                    display_name="Python (Jarvis interpreter)",
                    language="python",
                    resource_dir="",
                    metadata={},
                )

        return SpecManager()

    def _setup_code(self) -> str:
        with open(_KERNEL_SETUP, encoding="utf-8") as f:
            source = f.read()
        ctx = self.ctx
        arguments = dict(
            workspace=ctx.workspace,
            library=self.reload_library,
            figure_dir=ctx.figure_dir,
            mime=_FIGURES_MIME,
            max_output=ctx.max_output_chars,
            memory_limit_mb=ctx.memory_limit_mb,
            cpu_time_s=ctx.cpu_time_s,
            skip_mark=SKIP_MARK,
        )
        call = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
        return f"{source}\n__jarvis_install({call})\ndel __jarvis_install\n{library_loader_code(self.reload_library)}"

    def _start_kernel(self) -> None:
        from jupyter_client import KernelManager

        scratch = self.ctx.scratch_dir()
        self._starts += 1
        n = self._starts
        self._kernel_cgroup = self.ctx.cgroup(f"k{n}")
        argv = self._kernel_command(self._status_path(n), self._kernel_cgroup)
        km = KernelManager(
            kernel_name="jarvis-python",
            kernel_spec_manager=self._spec_manager(argv),
            transport="ipc",
            connection_file=os.path.join(scratch, f"kernel-{n}.json"),
            ip=os.path.join(scratch, f"k{n}"),
        )
        env = self.ctx.environment()
        # the code can read /proc/<pid>/environ of this process too (its grandparent): the secrets are blanked there
        hide_secrets_from_proc(self.ctx.env_scrub)
        # the workspace is first on the kernel's sys.path anyway; on PYTHONPATH, Python programs the kernel's code
        # starts (from another folder too) find the library as well
        user_path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        workspace, library_dir = self.ctx.workspace, self.ctx.library_dir
        first = [workspace] + ([library_dir] if library_dir and library_dir != workspace else [])
        env["PYTHONPATH"] = os.pathsep.join(first + user_path)
        env["IPYTHONDIR"] = os.path.join(scratch, "ipython")
        # ipykernel does not read what is written to the file descriptors (subprocesses, C code) under pytest; the
        # code run here is not under pytest, even when this process is
        env.pop("PYTEST_CURRENT_TEST", None)
        env[MARKER_VARIABLE] = self.ctx.marker(f"kernel{n}")
        kernel_log = open(os.path.join(scratch, f"kernel-{n}.log"), "ab")
        try:
            km.start_kernel(env=env, cwd=self.ctx.workspace, stdout=kernel_log, stderr=kernel_log)
        except BaseException:
            self.ctx.drop_cgroup(self._kernel_cgroup)
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
            reply = kc.execute_interactive(
                self._setup_code(),
                silent=True,
                store_history=False,
                allow_stdin=False,
                timeout=self.startup_timeout,
                output_hook=lambda msg: None,
            )
            if reply["content"].get("status") != "ok":
                raise RuntimeError(
                    f"kernel setup failed: {reply['content'].get('ename')}: {reply['content'].get('evalue')}"
                )
        except BaseException:
            self._stop_kernel(graceful=False)
            raise

    def _status_path(self, n: int) -> str:
        return os.path.join(self.ctx.scratch_dir(), f"kernel-{n}.status")

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
        marker = self.ctx.marker(f"kernel{self._starts}")
        end_processes(lambda: strays + marked_processes(marker))
        self.ctx.drop_cgroup(cgroup)

    def _kernel_log_tail(self, limit: int = 1500) -> str:
        if not self.ctx.scratch:
            return ""
        path = os.path.join(self.ctx.scratch, f"kernel-{self._starts}.log")
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
        if kind == "exit" and self.ctx.sandbox.active and number > 128:
            return number - 128  # bubblewrap exits with 128 + the signal that ended the kernel
        return None

    def _death_note(self) -> str:
        """Why the kernel died, when it can be told: a limit, or what its log says."""
        signum = self._kernel_end_signal()
        if signum == signal.SIGXCPU and self.ctx.cpu_time_s:
            return (
                f"[The kernel was stopped: CPU time limit of {self.ctx.cpu_time_s:g} s (cpu_time_s) reached by "
                "this run. A new kernel was started: all variables, imports and definitions were lost.]"
            )
        note = (
            "[The Python kernel died while running this code (for example os._exit, a crash or running "
            "out of memory). It was restarted: all variables, imports and definitions were lost.]"
        )
        tail = self._kernel_log_tail()
        if tail and ("Fatal" in tail or "Segmentation" in tail or "Error" in tail):
            note += "\n[kernel log: " + tail[-600:] + "]"
        return note

    def run(self, code: str, timeout: float) -> RunResult:
        out = BoundedText(self.ctx.max_output_chars)
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
                    out.note(
                        "[exit()/quit() ended the Python session: a new kernel was started, all variables, "
                        "imports and definitions were lost.]"
                    )
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
                    out.note(
                        f"[Timed out: the run was interrupted after {timeout:g} s. The session is kept: "
                        "variables defined before (and by the statements that completed) are still there.]"
                    )
                else:
                    result.restarted = True
                    self._stop_kernel(graceful=False)
                    died = " (the kernel died)" if back == "dead" else ""
                    out.note(
                        f"[Timed out after {timeout:g} s; the kernel did not respond to the interrupt{died}, so "
                        "it was restarted: all variables, imports and definitions were lost.]"
                    )
                    self._restart_quietly(out)
        except KeyboardInterrupt:
            self._interrupt_after_keyboard(msg_id)
            raise
        if status in ("error", "aborted"):
            result.failed = True
            if status == "aborted" and not out.total:
                out.note("[The run was aborted by the kernel.]")
            self.ctx.limit_notes(out, reply.get("ename") or "")
        result.truncated = out.truncated
        result.output = out.render()
        return result

    def _restart_quietly(self, out: BoundedText) -> None:
        try:
            self._start_kernel()
        except Exception as error:
            out.note(
                f"[A new kernel could not be started yet ({type(error).__name__}: {error}); "
                "the next Python run will try again.]"
            )

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
        """Read the kernel's output for ``msg_id`` until it is idle ('idle'), dies ('dead') or ``deadline``
        ('timeout')."""
        # The channel is read directly: the blocking client's get_iopub_msg runs an asyncio loop around this same
        # call for every message, which is a large part of a warm run's time.
        km, iopub = self._km, self._kc.iopub_channel
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
                path, fd, n = exclusive_png(self.ctx.figure_dir, stamp, self._figure_counter + 1)
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
