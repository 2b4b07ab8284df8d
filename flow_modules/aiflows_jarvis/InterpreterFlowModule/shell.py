"""The shell engine: each command in ``bash``, in a process group of its own, behind the ``Executor`` interface.

At the timeout (or a Ctrl+C, or an exit) the command's whole process group is killed. Processes a command leaves
running are remembered and ended at ``close()`` (those that left its group, by their mark or cgroup). The limits
(``memory_limit_mb``, ``cpu_time_s``) apply to each process of a command.
"""
from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from typing import List, Optional

from .executor import SHELL_LANGUAGES, EngineContext, Executor
from .output import BoundedText, RunResult, Utf8Decoder
from .processes import MARKER_VARIABLE, Cgroup, group_alive, kill_group


class ShellExecutor(Executor):
    """Runs shell code in ``bash`` in the context's workspace.

    :param ctx: what the interpreter's engines share (workspace, limits, sandbox, private folder).
    """

    languages = SHELL_LANGUAGES

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx
        self._shell_cgroup: Optional[Cgroup] = None

    def close(self) -> None:
        for pgid in self.ctx.resources["shell_groups"]:
            kill_group(pgid, grace=0.5)
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
        env = self.ctx.environment()
        env[MARKER_VARIABLE] = self.ctx.marker("shell")
        try:
            proc = subprocess.Popen(self.ctx.sandboxed(self._shell_command(argv), kernel=False), cwd=self.ctx.workspace,
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            result.failed = True
            result.output = f"Could not start bash: {error}"
            return result
        if self._shell_cgroup is None:
            self._shell_cgroup = self.ctx.cgroup("shell")
        if self._shell_cgroup is not None:
            self._shell_cgroup.add(proc.pid)  # bash is still starting: what it starts will be in it too
        pgid = proc.pid
        deadline = time.monotonic() + timeout
        decoder = Utf8Decoder()
        fd = proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        eof = False
        exited_at: Optional[float] = None
        try:
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
                    self.ctx.keep_group(pgid)
                    out.note("[The command left background processes running; their later output is not shown.]")
                elif group_alive(pgid):
                    self.ctx.keep_group(pgid)
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
            kill_group(pgid)
            with contextlib.suppress(Exception):
                proc.wait(timeout=2)
            raise
        finally:
            sel.close()
            proc.stdout.close()
        if result.failed:
            self.ctx.limit_notes(out, "".join(out.head) + out.tail)
        result.truncated = out.truncated
        result.output = out.render()
        return result

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
        steps.append('"$@"; status=$?; if [ "$status" -gt 128 ]; then kill -$((status - 128)) $$ 2>/dev/null; fi; '
                     'exit "$status"')
        return ["sh", "-c", "; ".join(steps), "sh"] + argv
