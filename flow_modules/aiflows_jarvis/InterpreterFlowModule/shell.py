"""The shell engine: each command in ``bash``, in a process group of its own, behind the ``Executor`` interface.

Each command is started by the launcher (``launcher.py --linger``), a child subreaper: what the command starts and
orphans (a double fork, ``setsid``, with its environment cleared) is handed to it, not to init. At the timeout (or a
Ctrl+C, or an exit) the launcher ends the command and all of that. Processes a command leaves running are ended at
``close()``, or by the launcher when this process dies. The limits (``memory_limit_mb``, ``cpu_time_s``) apply to
each process of a command.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import List, Optional

from .executor import SHELL_LANGUAGES, EngineContext, Executor
from .output import BoundedText, RunResult, Utf8Decoder
from .processes import MARKER_VARIABLE, Cgroup, end_processes, kill_group, marked_processes

_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")


class ShellExecutor(Executor):
    """Runs shell code in ``bash`` in the context's workspace.

    :param ctx: what the interpreter's engines share (workspace, limits, sandbox, private folder).
    """

    languages = SHELL_LANGUAGES

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx
        self._shell_cgroup: Optional[Cgroup] = None
        self._commands = 0
        self._launchers: List["subprocess.Popen[bytes]"] = []  # launchers still running (their commands ended)

    def close(self) -> None:
        # the launchers still running (what their commands left runs): a SIGTERM, and each ends all of it
        for launcher in self._launchers:
            with contextlib.suppress(OSError):
                launcher.send_signal(signal.SIGTERM)
        for launcher in self._launchers:  # reaped: a zombie would keep the cgroup busy
            try:
                launcher.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_group(launcher.pid)
                launcher.wait()
        self._launchers.clear()
        self.ctx.resources["shell_groups"].clear()
        self.ctx.drop_cgroup(self._shell_cgroup)
        self._shell_cgroup = None

    def run(self, code: str, timeout: float) -> RunResult:
        out = BoundedText(self.ctx.max_output_chars)
        result = RunResult(output="", language="shell")
        if len(code.encode("utf-8", errors="replace")) < 100_000:
            argv = ["bash", "-c", code]
        else:  # too long for one argument: run it from a file
            script = os.path.join(self.ctx.scratch_dir(), "command.sh")
            with open(script, "w", encoding="utf-8") as f:
                f.write(code)
            argv = ["bash", script]
        self._launchers = [launcher for launcher in self._launchers if launcher.poll() is None]
        self.ctx.resources["shell_groups"] = [launcher.pid for launcher in self._launchers]
        env = self.ctx.environment()
        self._commands += 1
        env[MARKER_VARIABLE] = marker = self.ctx.marker(f"shell{self._commands}")
        status_read, status_write = os.pipe()
        launcher = [sys.executable, "-I", "-S", _LAUNCHER, "--linger", "--status-fd", str(status_write), "--"]
        try:
            proc = subprocess.Popen(
                launcher + self.ctx.sandboxed(self._shell_command(argv), kernel=False),
                cwd=self.ctx.workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(status_write,),
            )
        except OSError as error:
            os.close(status_read)
            result.failed = True
            result.output = f"Could not start bash: {error}"
            return result
        except BaseException:  # an exit or Ctrl+C while Popen waited: the command may run already, unseen
            os.close(status_read)
            end_processes(lambda: marked_processes(marker))
            raise
        finally:
            os.close(status_write)
        pgid, sel = proc.pid, selectors.DefaultSelector()
        eof = False
        status = b""
        exited_at: Optional[float] = None
        try:  # from here on, an exit (SIGTERM) or Ctrl+C at any point ends the command too
            if self._shell_cgroup is None:
                self._shell_cgroup = self.ctx.cgroup("shell")
            if self._shell_cgroup is not None:
                self._shell_cgroup.add(proc.pid)  # bash is still starting: what it starts will be in it too
            deadline = time.monotonic() + timeout
            decoder = Utf8Decoder()
            fd = proc.stdout.fileno()
            sel.register(fd, selectors.EVENT_READ)
            sel.register(status_read, selectors.EVENT_READ)
            while not eof:
                now = time.monotonic()
                if now >= deadline:
                    break
                if exited_at is not None and now - exited_at > 1.0:
                    break  # background processes still hold the output; stop reading
                wait = min(deadline - now, 1.0 if exited_at is None else 0.1)
                for key, _ in sel.select(wait):
                    if key.fd == status_read:  # the command ended (its status), or its launcher did (nothing)
                        chunk = os.read(status_read, 64)
                        status += chunk
                        if not chunk:
                            sel.unregister(status_read)
                            exited_at = time.monotonic()
                        continue
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        eof = True
                        break
                    out.add(decoder.decode(chunk))
            if eof and exited_at is None:  # the output closed first: the status follows at once
                status += self._read_status(status_read, deadline)
            if exited_at is None and not status:  # timeout
                result.failed = result.timed_out = True
                self._stop(proc)
                out.add(decoder.decode(b"", final=True))
                out.note(f"[Timed out: the command was killed after {timeout:g} s.]")
            else:
                returncode = self._returncode(status, proc)
                out.add(decoder.decode(b"", final=True))
                if not eof:
                    out.note("[The command left background processes running; their later output is not shown.]")
                if returncode != 0:
                    result.failed = True
                    if returncode < 0:
                        try:
                            name = signal.Signals(-returncode).name
                        except ValueError:
                            name = str(-returncode)
                        limit = ""
                        if -returncode == signal.SIGXCPU and self.ctx.cpu_time_s:
                            limit = f": it reached the CPU time limit of {self.ctx.cpu_time_s:g} s (cpu_time_s)"
                        out.note(f"[The command was killed by signal {name}{limit}.]")
                    else:
                        out.note(f"[exit code {returncode}]")
        except BaseException:  # Ctrl+C, SIGTERM (an exit) or an error: the command must not outlive the run
            self._stop(proc)
            raise
        finally:
            sel.close()
            proc.stdout.close()
            os.close(status_read)
            if proc.poll() is None:  # it ends once what the command left has ended (or at close())
                self._launchers.append(proc)
                self.ctx.keep_group(pgid)
        if result.failed:
            self.ctx.limit_notes(out, "".join(out.head) + out.tail)
        result.truncated = out.truncated
        result.output = out.render()
        return result

    @staticmethod
    def _read_status(fd: int, deadline: float) -> bytes:
        """The rest of the launcher's status line (it writes it as the command ends), until the deadline."""
        data = b""
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while not data.endswith(b"\n") and time.monotonic() < deadline:
                if sel.select(max(0.0, deadline - time.monotonic())):
                    chunk = os.read(fd, 64)
                    if not chunk:
                        break
                    data += chunk
        finally:
            sel.close()
        return data

    @staticmethod
    def _returncode(status: bytes, proc: "subprocess.Popen[bytes]") -> int:
        """The command's exit code (negative: the signal that killed it), from its launcher's status line; its
        launcher's own when there is none (it was killed)."""
        words = status.decode("ascii", errors="replace").split()
        if len(words) == 2 and words[1].lstrip("-").isdigit():
            return int(words[1]) if words[0] == "exit" else -int(words[1])
        try:
            return proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return -signal.SIGKILL

    @staticmethod
    def _stop(proc: "subprocess.Popen[bytes]") -> None:
        """End the command and all it started: its launcher does (SIGTERM), or, if it does not end at once, the
        process group is killed."""
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            with contextlib.suppress(Exception):
                proc.wait(timeout=2)

    def _shell_command(self, argv: List[str]) -> List[str]:
        """``argv`` run as the child of ``sh`` started with the scrubbed environment, so that the command's parent in
        ``/proc`` holds no secret (this process's initial environment holds the API keys).

        That shell first sets the limits (each process of the command gets them; one that a lower limit in force
        prevents is left as it is), and ends as its child did: killed by the same signal, or with its exit code. (A
        command's own ``exit 130`` therefore reads as a SIGINT: the shell reports both as status 130.)"""
        steps = []
        if self.ctx.memory_limit_mb:
            steps.append(f"ulimit -v {int(self.ctx.memory_limit_mb * 1024)} 2>/dev/null")
        if self.ctx.cpu_time_s:
            seconds = max(1, int(round(self.ctx.cpu_time_s)))  # SIGXCPU at the soft limit, SIGKILL at the hard one
            steps.append(f"ulimit -H -t {seconds + 1} 2>/dev/null; ulimit -S -t {seconds} 2>/dev/null")
        steps.append(
            '"$@"; status=$?; if [ "$status" -gt 128 ]; then kill -$((status - 128)) $$ 2>/dev/null; fi; exit "$status"'
        )
        return ["sh", "-c", "; ".join(steps), "sh"] + argv
