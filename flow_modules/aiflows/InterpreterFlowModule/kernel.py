"""The code interpreter behind ``InterpreterAtomicFlow``: one Jupyter kernel for Python, ``bash`` for shell code.

No aiflows import here: the engine can be used, tested and benchmarked on its own.

* Python runs in ONE ipykernel process (started on the first Python run, for the current interpreter, with the
  workspace as its working directory and first on ``sys.path``), over IPC sockets kept in a private temporary folder.
  Variables persist between runs. Before each run the code library (``library.py`` by default) is reloaded if it was
  imported and its file changed, and the names imported from it are rebound to the new definitions.
* Every run has a timeout. Python: the kernel is interrupted and the session kept; if it does not respond to the
  interrupt it is restarted (state lost). Shell: the command's whole process group is killed.
* A dead kernel is seen at once (not at the timeout), restarted, and the loss of state is said.
* Output (stdout, stderr, results, tracebacks) is stripped of ANSI escapes and control characters and bounded while
  it streams: a head and a tail are kept, and a line says how many characters were cut in between.
* matplotlib figures left open by a run, and ``image/png`` outputs, are saved as PNG files in ``<workspace>/figures``.
* The kernel and the shell get an environment without secrets (names with a part KEY, TOKEN, SECRET, PASSWORD,
  CREDENTIAL...) and without the LLM providers' endpoints; the kernel's Python comes first on the shell's PATH.
* Stopping the kernel (``close()``, at exit too) kills its process group and what its code started in sessions of
  its own, and removes the temporary folder. The connection file (with the HMAC key) is removed once connected.
"""
from __future__ import annotations

import atexit
import base64
import contextlib
import dataclasses
import fnmatch
import functools
import logging
import os
import queue
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Any, Dict, Iterable, List, Optional, Tuple

from flow_modules.aiflows.CoreFlowModule.terminal import clean_text

log = logging.getLogger(__name__)

PYTHON_LANGUAGES = ("python", "py", "python3")
SHELL_LANGUAGES = ("shell", "bash", "sh")
SUPPORTED_LANGUAGES = PYTHON_LANGUAGES + SHELL_LANGUAGES

# Names whose parts (split at "_") say they hold a secret: OPENAI_KEY, GITHUB_TOKEN, ANTHROPIC_AUTH_TOKEN, KEY_FILE...
# Whole parts only, so that KEYBOARD_LAYOUT or TOKENIZERS_PARALLELISM are kept.
_SECRET_PARTS = ("KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD",
                 "PASSPHRASE", "CREDENTIAL", "CREDENTIALS")
# Words that say "secret" wherever they are in a name (PGPASSWORD, AWSSECRETKEY): no harmless name contains them.
_SECRET_WORDS = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "APIKEY")
# LLM providers (litellm's names): their endpoints, API versions and organizations say which account a run uses.
# (Azure: only Azure OpenAI's; AZURE_STORAGE_ENDPOINT and the like are other services' and not secrets.)
# (Not HF_: HF_ENDPOINT names a Hub mirror, which downloads from the shell need; HF_TOKEN goes as a token.)
_LLM_PROVIDERS = ("OPENAI", "AZURE_OPENAI", "ANTHROPIC", "COHERE", "MISTRAL", "GROQ", "GEMINI", "VERTEXAI", "HUGGINGFACE",
                  "TOGETHER", "TOGETHERAI", "REPLICATE", "OPENROUTER", "DEEPSEEK", "PERPLEXITY", "PERPLEXITYAI",
                  "FIREWORKS", "FIREWORKS_AI", "XAI", "OLLAMA", "LITELLM", "VOYAGE", "AI21", "NVIDIA_NIM", "CLOUDFLARE")
_LLM_SETTINGS = ("API_BASE", "BASE_URL", "API_URL", "API_VERSION", "ENDPOINT", "ORGANIZATION", "ORG_ID", "PROJECT_ID")

#: Variables never passed to the kernel or the shell (shell-style patterns, matched on the upper-cased name):
#: secrets by name, and the LLM providers' endpoints (``OPENAI_API_BASE``, ``AZURE_OPENAI_API_VERSION``, ...).
DEFAULT_ENV_SCRUB: Tuple[str, ...] = (
    tuple(p for part in _SECRET_PARTS for p in (part, f"{part}_*", f"*_{part}", f"*_{part}_*"))
    + tuple(f"*{word}*" for word in _SECRET_WORDS)
    + ("*_PWD", "*_API_BASE", "AZURE_API_VERSION", "AZURE_API_TYPE")  # litellm's names for Azure OpenAI
    + tuple(f"{provider}_*{setting}" for provider in _LLM_PROVIDERS for setting in _LLM_SETTINGS)
)

FIGURE_DIR = "figures"
MAX_FILES = 50
# The workspace is scanned before and after every run to say which files the run made. The scan is bounded, so that
# a big workspace does not make every run slow (15,000 files: 200 ms a run unbounded); files past the bound are not
# reported. Top levels come first: those are the files a controller cares about.
_MAX_SCAN_ENTRIES = 5000
_MAX_SCAN_DEPTH = 3  # folders scanned: the workspace and three levels below (a/b/c/file.txt is seen)
_MTIME_SLACK_NS = 50_000_000  # file times can be a clock tick (up to 10 ms) behind time.time_ns()
# not scanned (besides hidden folders and virtual environments): caches, installed packages, and the memory folder's
# own bookkeeping (archived plans and logs, the scripts run_code wrote), which would make every run's scan grow
_SKIPPED_DIRS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "venv", "archive", "code_runs"}
_FIGURES_MIME = "application/vnd.jarvis.figures+json"
_POLL = 0.2  # seconds between two liveness checks while the kernel is quiet

@functools.lru_cache(maxsize=8)
def _scrub_matcher(patterns: Tuple[str, ...]) -> "re.Pattern[str]":
    """One regular expression for all the patterns (a few hundred fnmatch calls per variable would cost ms)."""
    return re.compile("|".join(fnmatch.translate(p.upper()) for p in patterns) or r"(?!)")


def scrubbed_environment(patterns: Iterable[str] = DEFAULT_ENV_SCRUB, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without the variables matching ``patterns``."""
    matcher = _scrub_matcher(tuple(patterns))
    env = dict(os.environ if base is None else base)
    for name in list(env):
        if matcher.match(name.upper()):
            del env[name]
    return env


@dataclasses.dataclass
class RunResult:
    """What one run gives back.

    ``output`` is the text a controller reads (stdout/stderr/results/tracebacks and notes, ANSI-free, bounded);
    ``failed``: exception, non-zero shell exit, timeout, kernel death or unsupported language; ``timed_out``;
    ``restarted``: the kernel died or had to be restarted, so the Python state was lost; ``truncated``: output was cut;
    ``figures``: absolute paths of the PNG files saved; ``files``: workspace-relative paths created or modified
    (at most 50; hidden entries, ``__pycache__`` and the saved figures are left out); ``duration`` in seconds.
    """

    output: str
    failed: bool = False
    timed_out: bool = False
    restarted: bool = False
    truncated: bool = False
    figures: List[str] = dataclasses.field(default_factory=list)
    files: List[str] = dataclasses.field(default_factory=list)
    duration: float = 0.0
    language: str = "python"

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


class BoundedText:
    """Text accumulated chunk by chunk, keeping at most ``limit`` characters: a head, a tail, and a count of the cut."""

    def __init__(self, limit: int):
        self.limit = max(0, int(limit))
        self.head_limit = int(self.limit * 0.6)
        self.tail_limit = self.limit - self.head_limit
        self.head: List[str] = []
        self.head_len = 0
        self.tail = ""
        self.cut = 0
        self.total = 0

    def add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        room = self.head_limit - self.head_len
        if room > 0:
            piece = text[:room]
            self.head.append(piece)
            self.head_len += len(piece)
            text = text[room:]
            if not text:
                return
        if len(text) >= self.tail_limit:
            self.cut += len(self.tail) + len(text) - self.tail_limit
            self.tail = text[len(text) - self.tail_limit:] if self.tail_limit else ""
        else:
            self.tail += text
            excess = len(self.tail) - self.tail_limit
            if excess > 0:
                self.cut += excess
                self.tail = self.tail[excess:]

    def note(self, text: str) -> None:
        """Add ``text`` as a line of its own."""
        self.add(("\n" if self.total and self.last_char != "\n" else "") + text.strip("\n") + "\n")

    @property
    def last_char(self) -> str:
        if self.tail:
            return self.tail[-1]
        return self.head[-1][-1] if self.head else ""

    @property
    def truncated(self) -> bool:
        return self.cut > 0

    def render(self) -> str:
        head = "".join(self.head)
        if not self.cut:
            return _clean(head + self.tail)
        return f"{_clean(head)}\n[... {self.cut:,} characters cut ...]\n{_clean(self.tail)}"


def _clean(text: str) -> str:
    """Escape sequences and control characters but tabs and line breaks removed (``clean_text``: a NUL or a bell
    means nothing to the controller reading the text); for each line, only what the last carriage return left
    (progress bars)."""
    text = clean_text(text, keep_carriage_returns=True)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        text = "\n".join(line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
                         for line in text.split("\n"))
    return text


# ~~~ Workspace snapshots (which files a run created or modified) ~~~
def _snapshot(root: str) -> Tuple[Dict[str, Tuple[int, int]], bool]:
    """``{relative path: (mtime_ns, size)}`` of the visible files under ``root``, breadth first, and whether the scan
    saw everything (``False``: it stopped at ``_MAX_SCAN_ENTRIES`` entries or ``_MAX_SCAN_DEPTH`` levels)."""
    found: Dict[str, Tuple[int, int]] = {}
    level = [("", root)]
    count = 0
    complete = True
    for depth in range(_MAX_SCAN_DEPTH + 1):
        below: List[Tuple[str, str]] = []
        for rel_dir, path in level:
            try:
                entries = os.scandir(path)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith(".") or name in _SKIPPED_DIRS:
                        continue
                    count += 1
                    if count > _MAX_SCAN_ENTRIES:
                        return found, False
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if depth == _MAX_SCAN_DEPTH:
                                complete = False
                            elif not os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                                below.append((rel, entry.path))
                        elif entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            found[rel] = (st.st_mtime_ns, st.st_size)
                    except OSError:
                        continue
        if not below:
            break
        level = below
    return found, complete


def _changed_files(before: Tuple[Dict[str, Tuple[int, int]], bool], root: str, since_ns: int,
                   ignore: Iterable[str] = ()) -> Tuple[List[str], int, bool]:
    """Paths created or modified since ``before`` (at most MAX_FILES), how many there were in all, and whether both
    scans saw the whole workspace (if not, a change past the scans' bounds is not seen)."""
    old, complete_before = before
    new, complete_after = _snapshot(root)
    ignored = set(ignore)
    changed = []
    for rel, stamp in new.items():
        if rel in ignored:
            continue
        previous = old.get(rel)
        if previous is None:
            # a file the first scan did not reach (it stopped early) is new only if it was written during the run
            # (give or take the file system's clock, which can lag the real one by a tick)
            if complete_before or stamp[0] >= since_ns - _MTIME_SLACK_NS:
                changed.append(rel)
        elif previous != stamp:
            changed.append(rel)
    changed.sort()
    return changed[:MAX_FILES], len(changed), complete_before and complete_after


def _exclusive_png(folder: str, stamp: str, start: int) -> Tuple[str, int, int]:
    """Create a new empty ``figure_<stamp>_<n>.png`` in ``folder``: (path, open fd, n)."""
    os.makedirs(folder, exist_ok=True)
    n = start
    while True:
        path = os.path.join(folder, f"figure_{stamp}_{n}.png")
        try:
            return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), n
        except FileExistsError:
            n += 1


# ~~~ What the kernel runs once, silently, after it starts ~~~
_KERNEL_SETUP = r'''
def __jarvis_install(workspace, library, figure_dir, mime):
    import contextlib, hashlib, importlib, io, os, sys, time, warnings
    ip = get_ipython()
    if workspace in sys.path:
        sys.path.remove(workspace)
    sys.path.insert(0, workspace)
    warnings.filterwarnings("ignore", message=r".*is non-interactive, and thus cannot be shown")
    # the library module last seen, the digest of its file then, and a copy of its namespace then
    state = {"module": None, "digest": None, "snapshot": {}, "figures": 0}

    def digest_of(module):
        path = getattr(module, "__file__", None)
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return hashlib.sha1(f.read()).hexdigest()
        except OSError:
            return None

    def record(module, digest):
        state["module"], state["digest"] = module, digest
        state["snapshot"] = dict(vars(module)) if module is not None else {}

    def rebind(module):
        """Point the user's names that held the library's old objects to the new ones of the same name."""
        old = state["snapshot"]
        ids = {}
        for attr, value in old.items():
            if not attr.startswith("__"):
                ids.setdefault(id(value), attr)
        fresh = vars(module)
        ns = ip.user_ns
        for name, value in list(ns.items()):
            attr = ids.get(id(value))
            if attr is None or value is module or value is state["module"] or old.get(attr) is not value:
                continue
            if (name == attr or getattr(value, "__module__", None) == library) and attr in fresh:
                ns[name] = fresh[attr]

    def reload_library(*args):
        if not library:
            return
        try:
            module = sys.modules.get(library)
            if module is None:
                module = state["module"]
                if module is None:
                    return
                # it failed to reload before (and was taken out of sys.modules): try again once its file changes
                digest = digest_of(module)
                if digest is None or digest == state["digest"]:
                    return
                sys.modules[library] = module
            elif module is not state["module"]:
                after_import(module)
                return
            else:
                digest = digest_of(module)
                if digest is None or digest == state["digest"]:
                    return
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    importlib.reload(module)
            except BaseException as error:
                # leave it out of sys.modules, so that the user's own `import library` shows the error
                sys.modules.pop(library, None)
                state["digest"] = digest
                print("[%s.py changed since the last run and could not be reloaded: %s: %s]"
                      % (library, type(error).__name__, error))
                return
            rebind(module)
            record(module, digest)
            # said, as the original's RunCode said it by adding `importlib.reload(library)` to the code run
            print("[%s.py changed since the last run: reloaded, its new functions can be imported]" % library)
        except BaseException:
            pass

    def after_import(module):
        if state["module"] is not None:
            rebind(module)
        record(module, digest_of(module))

    def after_run(*args):
        try:
            module = sys.modules.get(library) if library else None
            if module is not None and module is not state["module"]:
                after_import(module)
        except BaseException:
            pass
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            numbers = list(plt.get_fignums())
        except BaseException:
            return
        if not numbers:
            return
        paths = []
        stamp = time.strftime("%Y%m%d-%H%M%S")

        def unsaved(number, error, left):
            # an interrupt (at the run's timeout) has an empty message: say what it was
            text = str(error)
            what = "%s: %s" % (type(error).__name__, text) if text else type(error).__name__
            if isinstance(error, KeyboardInterrupt):
                what += " (the run was interrupted while the figure was saved"
                what += "; %d more figure(s) not saved)" % left if left else ")"
            print("[figure %s could not be saved: %s]" % (number, what), file=sys.stderr)

        for index, number in enumerate(numbers):
            try:
                figure = plt.figure(number)
                os.makedirs(figure_dir, exist_ok=True)
                while True:
                    state["figures"] += 1
                    path = os.path.join(figure_dir, "figure_%s_%d.png" % (stamp, state["figures"]))
                    try:
                        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        break
                    except FileExistsError:
                        continue
                try:
                    with os.fdopen(fd, "wb") as f:
                        figure.savefig(f, format="png")
                    paths.append(path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                    raise
            except BaseException as error:
                unsaved(number, error, len(numbers) - index - 1)
                if isinstance(error, KeyboardInterrupt):
                    break  # the time is up: do not start on the next figures
        try:
            plt.close("all")
        except BaseException:
            pass
        if paths:
            from IPython.display import publish_display_data
            publish_display_data({mime: {"paths": paths}})

    for event, callback in (("pre_run_cell", reload_library), ("post_run_cell", after_run)):
        for old in [c for c in ip.events.callbacks[event] if getattr(c, "__name__", "") == callback.__name__]:
            ip.events.unregister(event, old)
        ip.events.register(event, callback)


__jarvis_install(__WORKSPACE__, __LIBRARY__, __FIGURE_DIR__, __MIME__)
del __jarvis_install
'''


# Folders a system Python lives in: not moved to the front of the shell's PATH (that would put /usr/bin before
# /usr/local/bin and ~/.local/bin for every command); their pip is found there anyway.
_SYSTEM_BIN_DIRS = {"/usr/bin", "/bin", "/usr/local/bin"}


def _spec_manager():
    """A kernel spec manager whose only kernel is an ipykernel for the current interpreter (``sys.executable``),
    whatever kernel specs are installed."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class SpecManager(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(
                argv=[sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher",
                      "-f", "{connection_file}", "--HistoryManager.enabled=False"],
                display_name="Python (Jarvis interpreter)",
                language="python",
                resource_dir="",
                metadata={},
            )

    return SpecManager()


# ~~~ Live interpreters are closed at exit; one dropped without close() has its processes killed ~~~
_LIVE: "weakref.WeakSet[CodeInterpreter]" = weakref.WeakSet()


def _release(resources: Dict[str, Any]) -> None:
    """Kill what an interpreter that was garbage-collected without ``close()`` left: its kernel's process group,
    its shell commands' leftover process groups; remove its temporary folder."""
    for pgid in [resources.get("kernel_pgid")] + list(resources.get("shell_groups") or []):
        if pgid:
            _kill_group(pgid)
    if resources.get("scratch"):
        shutil.rmtree(resources["scratch"], ignore_errors=True)


def _close_all() -> None:
    for interpreter in list(_LIVE):
        try:
            interpreter.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass


atexit.register(_close_all)


class CodeInterpreter:
    """Runs Python in one persistent Jupyter kernel and shell code in ``bash``, both in ``workspace``.

    ``run(code, language)`` never raises for a problem of the code (it returns a failed ``RunResult``); a
    KeyboardInterrupt during a run interrupts the kernel (or kills the shell command) and is re-raised.
    """

    def __init__(self, workspace: str, timeout: float = 60.0, max_output_chars: int = 20000,
                 reload_library: Optional[str] = "library", env_scrub: Iterable[str] = DEFAULT_ENV_SCRUB,
                 interrupt_grace: float = 5.0, startup_timeout: float = 60.0):
        self.workspace = os.path.abspath(os.path.expanduser(str(workspace)))
        self.timeout = float(timeout)
        self.max_output_chars = int(max_output_chars)
        self.reload_library = reload_library or ""
        self.env_scrub = tuple(env_scrub)
        self.interrupt_grace = float(interrupt_grace)
        self.startup_timeout = float(startup_timeout)
        self.figure_dir = os.path.join(self.workspace, FIGURE_DIR)
        self._lock = threading.Lock()
        self._km = None
        self._kc = None
        self._starts = 0
        self._figure_counter = 0
        self._replies: Dict[str, Dict[str, Any]] = {}
        # what must not outlive the interpreter, kept where the finalizer can reach it without the object
        self._resources: Dict[str, Any] = {"kernel_pgid": None, "scratch": None, "shell_groups": []}
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
        self._resources["shell_groups"] = [g for g in self._shell_groups if _group_alive(g)] + [pgid]

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
            before = _snapshot(self.workspace)
            if lang in PYTHON_LANGUAGES:
                result = self._run_python(code, timeout)
            else:
                result = self._run_shell(code, timeout)
            result.language = lang
            files, total, complete = _changed_files(before, self.workspace, since_ns,
                                                    ignore=self._relative(result.figures))
            result.files = files
            result.duration = time.monotonic() - started
            result.output = self._finish_output(result, total, complete)
            return result

    @property
    def kernel_running(self) -> bool:
        return self._km is not None and self._km.is_alive()

    def close(self) -> None:
        """Shut the kernel down, kill leftover shell process groups, remove the private temporary folder."""
        acquired = self._lock.acquire(timeout=10)
        try:
            self._stop_kernel(graceful=True)
            for pgid in self._shell_groups:
                _kill_group(pgid, grace=0.5)
            self._shell_groups.clear()
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
        """The shell's environment (the kernel's adds the workspace to PYTHONPATH): no secrets, and the kernel's
        Python first on PATH, so that `pip install` and `python` in shell code use the kernel's interpreter.

        The workspace is not put on the shell's PYTHONPATH: a workspace file named like a standard module (`csv.py`)
        would shadow it for pip and every Python program run from bash. `python script.py` and `python -c` run in
        the workspace find its modules without it."""
        env = scrubbed_environment(self.env_scrub)
        env["MPLBACKEND"] = "Agg"
        env["PWD"] = self.workspace
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        env.pop("JPY_PARENT_PID", None)
        bin_dir = os.path.dirname(sys.executable)
        if sys.executable and bin_dir not in _SYSTEM_BIN_DIRS:  # moving /usr/bin first would reorder everything
            env["PATH"] = os.pathsep.join([bin_dir] + [p for p in env.get("PATH", os.defpath).split(os.pathsep)
                                                       if p != bin_dir])
        if sys.executable:
            if sys.prefix != sys.base_prefix:  # a virtual environment: say so, as its `activate` script would
                env["VIRTUAL_ENV"] = sys.prefix
            else:  # one the user activated is not the kernel's
                env.pop("VIRTUAL_ENV", None)
        return env

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

    # ~~~ Python: the kernel ~~~
    def _start_kernel(self) -> None:
        from jupyter_client import KernelManager

        scratch = self._scratch_dir()
        self._starts += 1
        n = self._starts
        km = KernelManager(
            kernel_name="jarvis-python",
            kernel_spec_manager=_spec_manager(),
            transport="ipc",
            connection_file=os.path.join(scratch, f"kernel-{n}.json"),
            ip=os.path.join(scratch, f"k{n}"),
        )
        env = self._environment()
        # the workspace is first on the kernel's sys.path anyway; on PYTHONPATH, Python programs the kernel's code
        # starts (from another folder too) find the library as well
        user_path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([self.workspace] + user_path)
        env["IPYTHONDIR"] = os.path.join(scratch, "ipython")
        kernel_log = open(os.path.join(scratch, f"kernel-{n}.log"), "ab")
        try:
            km.start_kernel(env=env, cwd=self.workspace, stdout=kernel_log, stderr=kernel_log)
        finally:
            kernel_log.close()
        self._km = km
        # jupyter_client starts the kernel in a session of its own (start_new_session): its process group holds the
        # kernel and what its code starts, and is killed whole when the kernel is stopped
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
            kc.wait_for_ready(timeout=self.startup_timeout)
            # The kernel has read its connection file and the client holds the same in memory: removed now, the
            # HMAC key is not left on disk if this process dies without cleaning up.
            with contextlib.suppress(OSError):
                os.remove(km.connection_file)
            setup = (_KERNEL_SETUP.replace("__WORKSPACE__", repr(self.workspace))
                     .replace("__LIBRARY__", repr(self.reload_library))
                     .replace("__FIGURE_DIR__", repr(self.figure_dir))
                     .replace("__MIME__", repr(_FIGURES_MIME)))
            reply = kc.execute_interactive(setup, silent=True, store_history=False, allow_stdin=False,
                                           timeout=self.startup_timeout, output_hook=lambda msg: None)
            if reply["content"].get("status") != "ok":
                raise RuntimeError(f"kernel setup failed: {reply['content'].get('evalue')}")
        except BaseException:
            self._stop_kernel(graceful=False)
            raise

    def _stop_kernel(self, graceful: bool) -> None:
        kc, km, pgid = self._kc, self._km, self._kernel_pgid
        self._kc = self._km = self._kernel_pgid = None
        if kc is not None:
            with contextlib.suppress(Exception):
                kc.stop_channels()
        strays: List[Tuple[int, int]] = []
        if km is not None:
            # processes the kernel's code started in sessions of their own (start_new_session=True, setsid) are not
            # in its group: found now, while the kernel is their ancestor, and killed with it
            with contextlib.suppress(Exception):
                if km.is_alive() and km.provisioner is not None and km.provisioner.pid:
                    strays = [(pid, start) for pid, group, start in _descendants(km.provisioner.pid) if group != pgid]
            try:
                if graceful and km.is_alive():
                    # A shutdown request lets the kernel run its atexit handlers and flush open files (about 0.1 s).
                    # ipykernel 7 then sometimes hangs for seconds joining its own threads (after that cleanup), and
                    # jupyter_client's graceful shutdown waits 1.5 s or more: wait 0.5 s at most, then kill.
                    km.request_shutdown()
                    end = time.monotonic() + 0.5
                    while time.monotonic() < end and km.is_alive():
                        time.sleep(0.02)
                km.shutdown_kernel(now=True)
            except Exception as error:  # pragma: no cover - best effort
                log.debug("kernel shutdown: %s", error)
                with contextlib.suppress(Exception):
                    km.shutdown_kernel(now=True)
            with contextlib.suppress(Exception):
                km.cleanup_resources()
        if pgid:
            _kill_group(pgid)  # whatever the kernel's code started and left behind
        for pid, start in strays:
            _kill_process(pid, start)

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

    def _run_python(self, code: str, timeout: float) -> RunResult:
        out = BoundedText(self.max_output_chars)
        result = RunResult(output="", language="python")
        if self._km is None or not self._km.is_alive():
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
                tail = self._kernel_log_tail()
                self._stop_kernel(graceful=False)
                note = ("[The Python kernel died while running this code (for example os._exit, a crash or running "
                        "out of memory). It was restarted: all variables, imports and definitions were lost.]")
                if tail and ("Fatal" in tail or "Segmentation" in tail or "Error" in tail):
                    note += "\n[kernel log: " + tail[-600:] + "]"
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
        kc, km = self._kc, self._km
        quiet_since = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                msg = kc.get_iopub_msg(timeout=min(_POLL, remaining))
            except queue.Empty:
                if not km.is_alive():
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
                path, fd, n = _exclusive_png(self.figure_dir, stamp, self._figure_counter + 1)
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
                msg = self._kc.get_shell_msg(timeout=remaining)
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
        try:
            proc = subprocess.Popen(argv, cwd=self.workspace, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            result.failed = True
            result.output = f"Could not start bash: {error}"
            return result
        pgid = proc.pid
        deadline = time.monotonic() + timeout
        decoder = _Utf8Decoder()
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
                _kill_group(pgid)
                proc.wait()
                out.add(decoder.decode(b"", final=True))
                out.note(f"[Timed out: the command was killed after {timeout:g} s.]")
            else:
                returncode = proc.wait()
                out.add(decoder.decode(b"", final=True))
                if not eof:
                    self._keep_shell_group(pgid)
                    out.note("[The command left background processes running; their later output is not shown.]")
                elif _group_alive(pgid):
                    self._keep_shell_group(pgid)
                if returncode != 0:
                    result.failed = True
                    if returncode < 0:
                        try:
                            name = signal.Signals(-returncode).name
                        except ValueError:
                            name = str(-returncode)
                        out.note(f"[The command was killed by signal {name}.]")
                    else:
                        out.note(f"[exit code {returncode}]")
        except BaseException:  # Ctrl+C, SIGTERM (an exit) or an error: the command must not outlive the run
            _kill_group(pgid)
            with contextlib.suppress(Exception):
                proc.wait(timeout=2)
            raise
        finally:
            sel.close()
            proc.stdout.close()
        result.truncated = out.truncated
        result.output = out.render()
        return result


class _Utf8Decoder:
    def __init__(self):
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes, final: bool = False) -> str:
        return self._decoder.decode(data, final)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    except OSError:
        return False


def _process_table() -> Dict[int, Tuple[int, int, int]]:
    """``{pid: (parent pid, process group, start time)}`` of every process, from ``/proc`` (empty without it)."""
    table: Dict[int, Tuple[int, int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            # after "pid (comm) ": state, ppid, pgrp, ..., starttime (the 22nd field of the line)
            fields = data[data.rindex(b")") + 2:].split()
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[19]))
        except (OSError, ValueError, IndexError):
            continue
    return table


def _descendants(pid: int) -> List[Tuple[int, int, int]]:
    """``(pid, process group, start time)`` of every descendant of ``pid`` (Linux; empty elsewhere)."""
    table = _process_table()
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


def _kill_process(pid: int, start: int) -> None:
    """SIGKILL ``pid`` if it is still the process that started at ``start`` (not a new one that got its number)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        if int(data[data.rindex(b")") + 2:].split()[19]) != start:
            return
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


def _kill_group(pgid: int, grace: float = 0.0) -> None:
    """Kill the process group: SIGKILL at once, or SIGTERM first and SIGKILL if some of it is left after ``grace`` s."""
    if grace <= 0:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(pgid, signal.SIGKILL)
        return
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        return
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pgid, signal.SIGKILL)
