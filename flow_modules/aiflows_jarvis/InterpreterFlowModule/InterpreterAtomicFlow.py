from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow

from .executor import describe_memory_limit, memory_limit, positive_or_none
from .interpreter import CodeInterpreter
from .output import RunResult
from .sandbox import sandbox_program


class InterpreterAtomicFlow(LeanAtomicFlow):
    """Runs code for the controller: Python in one persistent Jupyter kernel, shell code in `bash`.

    Python runs in an ipykernel started on the first Python run, in the workspace (its working directory, first on
    `sys.path`, so `import library` finds `<workspace>/library.py`). Variables persist from one run to the next;
    before each run the code library is reloaded if it was imported and changed, and names imported from it
    (`from library import f`) are rebound to the new definitions. Shell code runs in `bash` in the workspace.

    Every run has a timeout: Python is interrupted and the session kept (restarted, with the loss said, if the
    interrupt does not work); a shell command's process group is killed. A dead kernel is restarted and the loss of
    state is said. Output is stripped of ANSI escapes and cut to `max_output_chars` (head and tail kept, the cut
    said). matplotlib figures left open and `image/png` outputs are saved as PNG files in `<workspace>/figures`, and
    their paths are given.

    The kernel and the shell do not get secrets: variables whose name has a part `KEY`, `TOKEN`, `SECRET`, `PASS`,
    `PASSWORD`, `PASSWD`, `PWD` or `AUTH` (at the end), `CREDENTIAL(S)`, `CREDS` or `WEBHOOK` (`OPENAI_API_KEY`,
    `DB_PASS`, `NPM_CONFIG__AUTH`, ...), variables whose value has the shape of a credential (a URL with a password or
    a secret query parameter, a webhook URL, a `Password=` pair, `Bearer ...`, a key of a well-known format such as
    `sk-...`): such a variable is dropped, not rewritten, so that code that needs it fails at once and names it; nor
    the LLM providers' endpoints (`OPENAI_API_BASE`, `AZURE_API_VERSION`, ...). The kernel is started by a launcher
    that holds only that environment, so the kernel's parent in `/proc/<pid>/environ` shows no secret either. This
    guards against accidental leaks (code that prints `os.environ`, programs that pass their environment on), not
    against hostile code, which can read the environment of any process of the same user in `/proc` (the sandbox hides
    them). In shell code, `python` and `pip` are the kernel's Python (its folder comes first on `PATH`), so `pip
    install` installs where the kernel imports from.

    Every process the code starts is ended with the kernel (a restart, `close()`, the exit of this process, even a
    kill of it): those that left the kernel's process group (`setsid`, a double fork) too. They are found in the
    process tree of the launcher that starts the kernel or a shell command (a subreaper: orphans come to it, and it
    ends them when this process dies, even killed), by a mark in their environment (`JARVIS_KERNEL_ID`), and in a
    cgroup v2 where the user may make one. A process that cannot be ended is named (`survivors`; Jarvis says it at the
    end of a run). Without `/proc` (off Linux) only the process groups are ended.

    Limits: `memory_limit_mb` (by default `auto`: half of the RAM, said at the start of a run) bounds the address
    space the kernel may take beyond its own at start (about 0.8 GB, mostly reserved and unused), and that of each
    process a shell command starts; past it allocations fail (`MemoryError`, said with the limit). Programs that
    reserve much address space (a JVM, some runtimes) may need a higher limit or null. `cpu_time_s` (none by default)
    bounds the CPU time of one Python run (past it the kernel is stopped and restarted, and the limit said) and of
    each process of a shell command. They guard against runaway code, not hostile code (which can raise its own
    limits).

    `sandbox: bwrap` runs the kernel and the shell commands in bubblewrap (not installed: an error at once, saying
    how to install it): the file system is read-only but for the workspace and a private `/tmp`, the code sees only
    its own processes, and it has no network unless `sandbox_network: true`. It does not hide files (what the user
    may read, the code may read: SSH keys, `~/.netrc`, cloud credentials), keep the code from damaging the workspace
    (the memory folder and `library.py` are in it), or stop a kernel exploit; `pip install` fails in it (install
    packages first).

    The kernel belongs to the flow object, not to `flow_state`: `reset(full_reset=True)` keeps it. `prestart()`
    starts it in the background (the first Python run then does not wait for it); `close()` shuts it down, with the
    processes its code started (it is also shut down at process exit).

    *Configuration Parameters*:
    - `workspace` (str or null): the folder code runs in; null: the current working directory at first use; a
      relative path is resolved against the current working directory. Created if missing.
    - `library_dir` (str or null): a folder put on the kernel's `sys.path` (and PYTHONPATH) right after the
      workspace, so that `import library` finds the code library when the code runs in another folder (Jarvis:
      the memory folder, while the code runs in the user's working folder); null: none.
    - `timeout` (float): seconds a run may take (default 60).
    - `max_output_chars` (int): the bound of `interpreter_output` (default 20000).
    - `reload_library` (str or null): the module reloaded before each Python run if imported (default `library`).
    - `interrupt_grace` (float, optional): seconds to wait for an interrupted kernel before restarting it (default 5).
    - `memory_limit_mb` (number, `auto`, a share such as `25%`, or null): see Limits above (default `auto`: half of
      the RAM; null: none).
    - `cpu_time_s` (number or null): see Limits above (default null: none).
    - `sandbox` (str or null): `bwrap` to run the code in bubblewrap (default null: none).
    - `sandbox_network` (bool): whether sandboxed code may use the network (default false).

    *Input Interface*:
    - `code` (str): the code to run.
    - `language` (str): `python` (also `py`, `python3`) or `shell` (also `bash`, `sh`); default `python`.

    *Output Interface*:
    - `interpreter_output` (str): what the code printed, its results and tracebacks, and notes (timeout, restart,
      exit code, saved figures, files created); "(no output)" if there was none.
    - `failed` (bool): an exception, a non-zero exit code, a timeout, a dead kernel or an unsupported language.
    - `timed_out` (bool): the run hit the timeout.
    - `restarted` (bool): the kernel was restarted during the run: Python variables were lost.
    - `figures` (list of str): absolute paths of the PNG files saved.
    - `files` (list of str): workspace-relative paths created or modified by the run (at most 50; hidden folders,
      virtual environments, `node_modules` and the like are not looked at, nor more than 3 folder levels down or
      5,000 entries in all).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._engine: Optional[CodeInterpreter] = None
        self.survivors: List[Tuple[int, str]] = []  # processes of the code still running after close(): pid, command
        self._engine_lock = threading.Lock()
        # a limit or sandbox that cannot be used is said when the flow is built, before anything runs
        memory_limit(self.flow_config.get("memory_limit_mb"))
        positive_or_none("cpu_time_s", self.flow_config.get("cpu_time_s"))
        sandbox_program(self.flow_config.get("sandbox"))

    # The engine is an attribute of the flow, not part of flow_state: a full reset does not touch it.
    @property
    def workspace(self) -> str:
        configured = self.flow_config.get("workspace")
        if not configured:
            return os.getcwd()
        return os.path.abspath(os.path.expanduser(str(configured)))

    @property
    def engine(self) -> CodeInterpreter:
        with self._engine_lock:
            if self._engine is None:
                cfg = self.flow_config
                self._engine = CodeInterpreter(
                    workspace=self.workspace,
                    library_dir=cfg.get("library_dir") or None,
                    timeout=float(cfg.get("timeout") or 60),
                    max_output_chars=int(cfg.get("max_output_chars") or 20000),
                    reload_library=cfg.get("reload_library") or "",
                    interrupt_grace=float(cfg.get("interrupt_grace") or 5.0),
                    memory_limit_mb=cfg.get("memory_limit_mb"),
                    cpu_time_s=cfg.get("cpu_time_s"),
                    sandbox=cfg.get("sandbox"),
                    sandbox_network=bool(cfg.get("sandbox_network")),
                )
            return self._engine

    def limits_note(self) -> str:
        """One line saying the memory generated code may use (said at the start of a run)."""
        return describe_memory_limit(self.flow_config.get("memory_limit_mb"))

    def prestart(self, workspace: Optional[str] = None) -> None:
        """Start the kernel in the background, so that the first Python run does not wait for it (about a second:
        call it while the user reads the plan). ``workspace``: the folder to run in when the configuration names none
        (RunCodeFlow would set the code library's folder at its first run). Returns at once; idempotent."""
        if workspace and not self.flow_config.get("workspace"):
            self.flow_config["workspace"] = workspace
        self.engine.prestart()

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        code = input_data.get("code")
        language = input_data.get("language") or "python"
        result: RunResult = self.engine.run(code, str(language))
        return {
            "interpreter_output": result.output,
            "failed": result.failed,
            "timed_out": result.timed_out,
            "restarted": result.restarted,
            "figures": list(result.figures),
            "files": list(result.files),
        }

    def close(self) -> None:
        """Shut the kernel down (idempotent). A later run starts a new one."""
        with self._engine_lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
            self.survivors = list(engine.survivors)
