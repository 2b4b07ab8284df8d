from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow, check_time, current_flow_path, tool_timeout

from .executor import describe_memory_limit, memory_limit, positive_or_none
from .interpreter import CodeInterpreter
from .output import RunResult, without_pip_noise
from .sandbox import sandbox_program


class InterpreterAtomicFlow(LeanAtomicFlow):
    """Runs code for the controller: Python in one persistent Jupyter kernel, shell code in `bash`, in a workspace.

    A controller writes code step by step, so Python state (variables, imports) persists from run to run, and the
    code library is reloaded before a run when its file changed (names imported from it are rebound). Every run has
    a timeout and bounded output, and the result says what was lost: a kernel that had to be restarted, a timeout,
    a limit reached. Figures left open are saved as PNG files in `<workspace>/figures`.

    Hazards and guarantees:
    - The code does not get secrets: variables named like keys, tokens, passwords, credentials, auth or webhooks,
      values shaped like credentials (a URL with a password or a secret query parameter, a webhook URL, a
      `Password=` pair, `Bearer ...`, `sk-...`, `ghp_...`) and the LLM providers' endpoints are dropped from its
      environment (not rewritten: code that needs one fails at once and names it), and its parent process holds
      none either. This guards against accidental leaks, not hostile code, which can read other processes of the
      same user in `/proc` (the sandbox hides them).
    - Every process the code starts ends with the kernel (a restart, `close()`, the exit or even a kill of this
      process): found by process tree (the launcher of the kernel and of each shell command is a subreaper, so
      orphans of a double fork come to it), by a mark in its environment and by a cgroup where one can be made. A
      process that cannot be ended is named (`survivors`; the command line says it at the end of a run). Off Linux
      (no `/proc`) only process groups are ended.
    - `memory_limit_mb` and `cpu_time_s` guard against runaway code, not hostile code (which can raise them). The
      memory limit caps address space: programs that reserve much of it (a JVM) may need a higher limit or null.
    - `sandbox: bwrap` makes the file system read-only but for the workspace and a private `/tmp`, hides other
      processes, and cuts the network unless `sandbox_network: true`. It does not hide files the user may read (SSH
      keys, `~/.netrc`), protect the workspace (the memory folder and `library.py` are in it) or stop a kernel
      exploit; `pip install` fails in it. Not installed: an error at once, saying how to install it.
    - In shell code, `python` and `pip` are the kernel's, so `pip install` installs where the kernel imports from.
    - The kernel belongs to the flow object, not to `flow_state`: `reset(full_reset=True)` keeps it; `close()`
      (also run at process exit) shuts it down.

    *Configuration Parameters*:
    - `workspace` (str or null): the folder code runs in; null: the current working directory at first use; a
      relative path is resolved against the current working directory. Created if missing.
    - `library_dir` (str or null): a folder put on the kernel's `sys.path` (and PYTHONPATH) right after the
      workspace, so that `import library` finds the code library when the code runs in another folder (Jarvis:
      the memory folder, while the code runs in the user's working folder); null: none.
    - `timeout` (float): seconds a run may take (default 60), cut to the time the run's budget (`--max-time`) leaves.
      At the timeout Python is interrupted and the session kept (restarted, with the loss said, if the interrupt
      does not work); a shell command's process group is killed. A run the budget cut short stops the whole run.
    - `max_output_chars` (int): the bound of `interpreter_output` (default 20000; head and tail kept, the cut said).
    - `reload_library` (str or null): the module reloaded before each Python run if imported (default `library`).
    - `interrupt_grace` (float, optional): seconds to wait for an interrupted kernel before restarting it (default 5).
    - `memory_limit_mb` (number of MB, `auto`, a share of the RAM such as `25%`, or null): the address space the
      kernel may take beyond its own at start, and each process of a shell command; past it allocations fail with
      `MemoryError`, and the limit is said (default `auto`: half of the RAM, said at the start of a run).
    - `cpu_time_s` (number or null): the CPU time of one Python run (past it the kernel is restarted and the limit
      said) and of each process of a shell command (default null).
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
        """Start the kernel in the background, so that the first Python run does not wait for it: call it while
        the user reads the plan. Returns at once; idempotent.

        :param workspace: the folder to run in when the configuration names none (the folder RunCodeFlow would set
            at its first run).
        """
        if workspace and not self.flow_config.get("workspace"):
            self.flow_config["workspace"] = workspace
        self.engine.prestart()

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        code = input_data.get("code")
        language = input_data.get("language") or "python"
        where = current_flow_path() or self.flow_config["name"]
        timeout = tool_timeout(float(self.flow_config.get("timeout") or 60), where)
        result: RunResult = self.engine.run(code, str(language), timeout=timeout)
        if result.timed_out:
            check_time(where)  # cut short by the run's budget: the budget stops the run
        return {
            "interpreter_output": without_pip_noise(str(code or ""), result.output),
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
