"""What the cases share: run_jarvis.py in a child process, scripted LLM replies, and the checks of "handled" and
"nothing lost". The loopback server, the network guard and the character sets come from tests/ (imported, not
copied)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import yaml
from fakes import command  # noqa: E402  (tests/ is on sys.path: see harness)
from helpers import CONTROLS, DEMO, KEYS, RUN_JARVIS  # noqa: E402
from loopback_llm import Cut, HTTPError, LoopbackLLMServer, Malformed, Slow  # noqa: E402,F401
from subprocess_guard import guarded_environment  # noqa: E402

import aiflows_jarvis  # noqa: E402,F401  (the offline tokenizer before anything imports litellm)
from aiflows_jarvis.ChatFlowModule import Transcript  # noqa: E402
from aiflows_jarvis.CoreFlowModule import split_log_entries  # noqa: E402

from .harness import ROOT, Ctx

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
CONFIG = os.path.join(ROOT, "configs", "jarvis.yaml")
PYTHON = sys.executable

# ~~~ Scripted LLM replies ~~~
GOAL = "What is six times seven?"
PLAN = "1. Work out six times seven and give the answer."
ANSWER = "Six times seven is 42."


def short_run(answer: str = ANSWER, plan: str = PLAN) -> List[Any]:
    """The replies of the shortest whole run: Jarvis's plan, its final answer (accepted, it ends the run)."""
    return [plan, command("final_answer", answer=answer)]


CODER_GOAL = "Run the code the user asked for and report what it printed."
CODER_PLAN = "1. Run the code with run_code and report its output."


def coder_run(code: str, language: str = "python", answer: str = "The code ran.") -> List[Any]:
    """A run through Coder: Jarvis's plan, Coder with a goal (its plan), run_code completing it, Jarvis's final
    answer (the code is run in the interpreter, in the memory folder). Code that fails does not complete Coder's
    step: its controller is asked again and finishes; so the two last replies answer whoever asks."""

    def then(request: Dict[str, Any]) -> str:
        if str(request["messages"][0]["content"]).startswith("You are Coder"):
            return command("finish", summary="The code ran.")
        return command("final_answer", answer=answer)

    return [
        PLAN,
        command("Coder", goal=CODER_GOAL, completes_step=1),
        command("run_code", language=language, code=code, completes_step=1),
        then,
        then,
    ]


def demo() -> Transcript:
    """The recorded demo (29 replies through every layer: Jarvis, Coder, ExtendLibrary, save_code, run_code)."""
    return Transcript.load(DEMO)


def fast_retry_config(ctx: Ctx, request_timeout: float = 60, call_deadline: float = 60, **retry: Any) -> str:
    """configs/jarvis.yaml with quick retries for every chat (waits of 0.05 s, 4 attempts unless said), written in
    the case's folder; returns its path (for --config)."""
    with open(CONFIG, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    policy = {
        "max_attempts": 4,
        "initial_delay": 0.05,
        "max_delay": 0.1,
        "backoff": 1.0,
        "jitter": 0.0,
        "max_retry_after": 2.0,
        "call_deadline": call_deadline,
        **retry,
    }

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("backend"), dict):
                node["retry"] = dict(policy)
                node["backend"]["request_timeout"] = request_timeout
            for value in node.values():
                walk(value)

    walk(config["flow"])
    path = ctx.path("fast_retry.yaml")
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return str(path)


# ~~~ A run of run_jarvis.py ~~~
_PROBLEM = re.compile(r"error|failed|cannot|not |stopped|terminated|refused|unreadable|no space", re.I)


class Done:
    """How a run ended: ``code``, ``out`` and ``err`` (decoded, undecodable bytes shown as \\x..), ``raw`` bytes."""

    def __init__(self, code: Optional[int], out: bytes, err: bytes, seconds: float, attempts: str):
        self.code = code
        self.raw_out, self.raw_err = out, err
        self.out = out.decode("utf-8", errors="backslashreplace")
        self.err = err.decode("utf-8", errors="backslashreplace")
        self.seconds = seconds
        self.attempts = attempts

    @property
    def text(self) -> str:
        return self.out + self.err

    def tail(self, limit: int = 300) -> str:
        """What the run said last: its last line naming a problem (an error, a failure, a stop), else its last
        lines (the usage table ends every run)."""
        lines = [line.strip() for line in self.out.strip().splitlines() + self.err.strip().splitlines()]
        said = [line for line in lines if _PROBLEM.search(line)]
        return (said[-1] if said else " | ".join(lines[-3:]))[:limit]


def child_environment(ctx: Ctx, **extra: str) -> Tuple[Dict[str, str], str]:
    """This environment without LLM keys, editors or a trace, no colours, with ``extra``; the network guard of
    tests/ installed. Returns it and the file where the guard logs network attempts."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in KEYS and not k.startswith("FAKE_EDITOR") and k not in ("VISUAL", "EDITOR", "JARVIS_TRACE")
    }
    env["NO_COLOR"] = "1"
    env, attempts = guarded_environment(str(ctx.path(f".guard-{time.monotonic_ns()}")), env)
    env.update(extra)
    return env, attempts


class Run:
    """run_jarvis.py in a child process (in the case's session), its output read as it comes."""

    def __init__(
        self,
        ctx: Ctx,
        *args: str,
        server: Optional[LoopbackLLMServer] = None,
        yes: bool = True,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        stdin: Optional[str] = None,
        keep_stdin_open: bool = False,
        argv: Optional[List[Any]] = None,
    ):
        self.ctx = ctx
        prefix = (["--api-base", server.url] if server is not None else []) + (["--yes"] if yes else [])
        self.argv = argv if argv is not None else [PYTHON, RUN_JARVIS, *prefix, *args]
        self.cwd = str(cwd or ctx.folder)
        self.env, self.attempts = child_environment(ctx, **(env or {}))
        self.stdin_text = stdin
        self.keep_stdin_open = keep_stdin_open
        self.out, self.err = bytearray(), bytearray()
        self.process: Optional[subprocess.Popen] = None
        self.started = 0.0

    def start(self) -> "Run":
        piped = self.stdin_text is not None or self.keep_stdin_open
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.PIPE if piped else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.ctx.on_exit(self.kill)
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.process.stdout, self.out), (self.process.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()
        if self.stdin_text:
            self.type(self.stdin_text)
        if piped and not self.keep_stdin_open:
            self.close_stdin()
        return self

    @staticmethod
    def _read(stream, into: bytearray) -> None:
        for chunk in iter(lambda: stream.read1(1 << 16), b""):
            into.extend(chunk)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def type(self, text: str) -> None:
        try:
            self.process.stdin.write(text.encode())
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def close_stdin(self) -> None:
        try:
            self.process.stdin.close()
        except (BrokenPipeError, ValueError, AttributeError):
            pass

    def wait_until(self, condition: Callable[[], Any], timeout: float = 90, what: str = "") -> bool:
        """Poll ``condition`` until it holds, the run ends or ``timeout`` passes; whether it holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            if not self.running():
                return bool(condition())
            time.sleep(0.05)
        return bool(condition())

    def wait_for_requests(self, server: LoopbackLLMServer, count: int, timeout: float = 90) -> bool:
        return self.wait_until(lambda: len(server.requests) >= count, timeout)

    def wait_for_output(self, text: str, timeout: float = 90) -> bool:
        needle = text.encode()
        return self.wait_until(lambda: needle in self.out or needle in self.err, timeout)

    def send(self, number: int) -> None:
        try:
            os.kill(self.process.pid, number)
        except ProcessLookupError:
            pass

    def finish(self, timeout: float = 150) -> Done:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.ctx.failures.append(f"run_jarvis.py did not end within {timeout:.0f} s: killed")
            self.process.kill()
            self.process.wait()
            code = None
        for reader in self._readers:
            reader.join(timeout=10)
        done = Done(code, bytes(self.out), bytes(self.err), time.monotonic() - self.started, self.attempts)
        # the case's log (its stdout), read with --keep
        print(
            f"=== {' '.join(map(str, self.argv[1:]))[:300]}\n--- exit {code}, stdout:\n{done.out[-20000:]}\n"
            f"--- stderr:\n{done.err[-5000:]}",
            flush=True,
        )
        return done

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def jarvis(ctx: Ctx, *args: str, timeout: float = 150, **options: Any) -> Done:
    """run_jarvis.py with ``args`` (``server=``: --api-base and --yes unless ``yes=False``), to its end."""
    return Run(ctx, *args, **options).start().finish(timeout)


# ~~~ Checks of "handled" ~~~
def raw_controls(text: str) -> List[str]:
    """The characters a terminal acts on that are in ``text`` (C0 but tab and newline, DEL, C1)."""
    return sorted({repr(c) for c in text if c in CONTROLS})


def handled_exit(
    ctx: Ctx, done: Done, codes: Sequence[Optional[int]], says: Iterable[str] = (), not_says: Iterable[str] = ()
) -> bool:
    """The run ended with one of ``codes``, its output says each of ``says`` and none of ``not_says``, with no
    traceback, no "Unexpected error", no raw control character, and nothing tried the network."""
    ok = ctx.expect(
        done.code in codes, f"exit code {done.code}, expected {' or '.join(map(str, codes))}: {done.tail()}"
    )
    for text in says:
        ok &= ctx.expect(text in done.text, f"the output does not say {text!r}: {done.tail()}")
    for text in not_says:
        ok &= ctx.expect(text not in done.text, f"the output says {text!r}")
    ok &= ctx.expect(not _TRACEBACK.search(done.text), "a traceback: " + _traceback_end(done.text))
    ok &= ctx.expect(
        "Unexpected error" not in done.out, "an 'Unexpected error': " + done.out.split("Unexpected error")[-1][:200]
    )
    controls = raw_controls(done.out + done.err)
    ok &= ctx.expect(not controls, f"raw control characters reached the terminal: {', '.join(controls[:6])}")
    ok &= ctx.expect(os.path.exists(done.attempts + ".armed"), "the network guard did not load in run_jarvis.py")
    if os.path.exists(done.attempts):
        ok &= ctx.expect(False, "the run tried the network: " + open(done.attempts).read()[:200])
    return ok


# Python's own, at the start of a line (the output of generated code, shown indented, may hold IPython's)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\)", re.M)


def _traceback_end(text: str) -> str:
    lines = (
        text[[m.start() for m in _TRACEBACK.finditer(text)][-1] :].strip().splitlines()
        if _TRACEBACK.search(text)
        else []
    )
    return lines[-1] if lines else ""


def processes_in(folder: str) -> List[int]:
    """PIDs of processes working in ``folder`` or below (the interpreter's kernel runs in the memory folder)."""
    found = []
    folder = os.path.realpath(str(folder))
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if cwd == folder or cwd.startswith(folder + os.sep):
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def no_processes_left(ctx: Ctx, folder, what: str = "the interpreter's processes", grace: float = 10) -> bool:
    """No process works in ``folder`` any more (``grace`` seconds to end are given)."""
    deadline = time.monotonic() + grace
    while True:
        left = [p for p in processes_in(str(folder)) if alive(p) and p != os.getpid()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return ctx.expect(not left, f"{what} outlived the run: {len(left)} process(es) still work in {folder}")


# ~~~ Checks of "nothing lost" ~~~
_HEADER = re.compile(r"--- \[(\d+)\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ ---")
_SAVED = re.compile(r"(?:Saved|Replaced) ([\w, ]+?) in the code library")


def read(path) -> str:
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def saved_functions(memory) -> List[str]:
    """The functions ExtendLibrary's log says save_code saved (what the user was told is in the library)."""
    path = os.path.join(str(memory), "logs_extlib.txt")
    if not os.path.isfile(path) or os.path.islink(path):
        return []
    names = []
    for match in _SAVED.finditer(read(path)):
        names += [n.strip() for n in match.group(1).split(",") if n.strip()]
    return names


def library_modules(memory) -> List[str]:
    """The files of the code library in a memory folder: the package's modules (`library/*.py`), and a `library.py`
    not migrated yet (links are left out: they are not followed)."""
    package = os.path.join(str(memory), "library")
    found = (
        [os.path.join(package, n) for n in sorted(os.listdir(package)) if n.endswith(".py")]
        if os.path.isdir(package) and not os.path.islink(package)
        else []
    )
    legacy = os.path.join(str(memory), "library.py")
    return found + ([legacy] if os.path.isfile(legacy) and not os.path.islink(legacy) else [])


def library_names(memory) -> Optional[List[str]]:
    """The functions and classes the code library defines, module by module (None when there is no library);
    SyntaxError when a module does not parse."""
    files = library_modules(memory)
    return [name for path in files for name in defined(read(path))] if files else None


def library_source(memory) -> str:
    """The text of every file of the code library, joined (to look for a function's name or body)."""
    return "\n".join(read(path) for path in library_modules(memory))


def defined(source: str) -> List[str]:
    tree = ast.parse(source)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def memory_whole(
    ctx: Ctx,
    memory,
    *,
    goal: Optional[str] = None,
    run_file: bool = False,
    plan: Optional[str] = None,
    saved: Iterable[str] = (),
    logs_end_whole: bool = False,
) -> bool:
    """Nothing of the memory folder is lost or corrupted: ``jarvis_run.json`` (required with ``run_file``) is JSON
    with a goal (``goal`` if given); every log's entries are numbered in order, none glued to a cut one (and, with
    ``logs_end_whole``, no log ends cut without its marker); ``library.py`` compiles and defines every function the
    log says was saved, and ``saved``; ``plan`` (the approved plan) is in plan_jarvis.txt or in the archive."""
    memory = str(memory)
    ok = True
    run_path = os.path.join(memory, "jarvis_run.json")
    if os.path.lexists(run_path) and not os.path.islink(run_path):
        try:
            recorded = json.loads(read(run_path))
            ok &= ctx.keep(isinstance(recorded, dict) and "goal" in recorded, "jarvis_run.json has no goal")
            if goal is not None:
                ok &= ctx.keep(recorded.get("goal") == goal, f"jarvis_run.json holds the goal {recorded.get('goal')!r}")
        except ValueError as error:
            ok &= ctx.keep(False, f"jarvis_run.json is corrupted ({error}): {read(run_path)[:80]!r}")
    elif run_file:
        ok &= ctx.keep(False, "jarvis_run.json is missing")
    for name in sorted(os.listdir(memory)) if os.path.isdir(memory) else []:
        path = os.path.join(memory, name)
        if not (name.startswith("logs_") and name.endswith(".txt")) or os.path.islink(path):
            continue
        text = read(path)
        numbers = [n for n, _ in split_log_entries(text)]
        ok &= ctx.keep(numbers == sorted(set(numbers)), f"{name}: entry numbers out of order or repeated: {numbers}")
        for match in _HEADER.finditer(text):
            if match.start() and text[match.start() - 1] != "\n":
                ok &= ctx.keep(False, f"{name}: entry [{match.group(1)}] is glued to the end of a cut entry")
        if logs_end_whole and text:
            ok &= ctx.keep(text.endswith("\n"), f"{name} ends with a cut entry")
    names = set(saved) | set(saved_functions(memory))
    try:
        present = library_names(memory)
        missing = sorted(names - set(present)) if present is not None else sorted(names)
        ok &= ctx.keep(not missing, f"the library lacks saved function(s): {', '.join(missing)}")
    except SyntaxError as error:
        ok &= ctx.keep(False, f"the library is corrupted: {error}")
    if plan is not None:
        ok &= ctx.keep(plan_kept(memory, plan), "the approved plan is neither in plan_jarvis.txt nor in the archive")
    return ok


def plan_kept(memory: str, plan: str, name: str = "plan_jarvis") -> bool:
    """Whether the steps of ``plan`` (done marks aside) are in the plan file or a copy of it in the archive."""

    def steps(text: str) -> List[str]:
        return [re.sub(r"\s*(\[done\]|\(done\))\s*$", "", line).strip() for line in text.splitlines() if line.strip()]

    wanted = steps(plan)
    candidates = [os.path.join(memory, f"{name}.txt")]
    for root, _, files in os.walk(os.path.join(memory, "archive")):
        candidates += [os.path.join(root, f) for f in files if f.startswith(name)]
    for path in candidates:
        if os.path.isfile(path) and not os.path.islink(path):
            have = set(steps(read(path)))  # a set: a plan may have 130,000 steps
            if all(step in have for step in wanted):
                return True
    return False


def file_kept(ctx: Ctx, path, content: bytes, what: str = "the user's file") -> bool:
    """``path`` still holds exactly ``content``."""
    try:
        with open(path, "rb") as f:
            now = f.read()
    except OSError as error:
        return ctx.keep(False, f"{what} {path} is gone: {error}")
    return ctx.keep(now == content, f"{what} {path} was changed: {now[:80]!r}")


def stopped_run(ctx: Ctx, goal: str = GOAL, plan: Optional[str] = PLAN + "\n", run_file: Optional[bytes] = None):
    """``memory/`` as a run stopped after its plan was approved left it, ready for --resume: jarvis_run.json
    (``run_file``, else one naming ``goal``) and plan_jarvis.txt (none if ``plan`` is None). Returns the folder."""
    memory = ctx.path("memory")
    memory.mkdir(exist_ok=True)
    (memory / "jarvis_run.json").write_bytes(run_file if run_file is not None else json.dumps({"goal": goal}).encode())
    if plan is not None:
        (memory / "plan_jarvis.txt").write_text(plan)
    return memory


def previous_run(memory, goal: str = "an earlier goal", plan: str = "1. An earlier step.\n") -> Dict[str, bytes]:
    """A memory folder as a finished earlier run left it; returns the files and their bytes."""
    from aiflows_jarvis.CoreFlowModule import format_log_entry

    os.makedirs(str(memory), exist_ok=True)
    files = {
        "plan_jarvis.txt": plan.encode(),
        "logs_jarvis.txt": (format_log_entry(1, "final_answer", {"answer": "an earlier answer"}, "") + "\n").encode(),
        "jarvis_run.json": json.dumps({"goal": goal, "model": None, "api_base": None}).encode(),
        "library.py": b"def earlier(x):\n    '''An earlier function.'''\n    return x\n",
    }
    for name, data in files.items():
        with open(os.path.join(str(memory), name), "wb") as f:
            f.write(data)
    return files


def previous_run_kept(ctx: Ctx, memory, files: Dict[str, bytes]) -> bool:
    """Nothing of ``previous_run`` is lost: each file (its jarvis_run.json aside) is where it was or in the archive,
    unchanged; jarvis_run.json is whole (a new run replaces it with its own)."""
    ok = memory_whole(ctx, memory, run_file=True)
    for name, data in files.items():
        if name == "jarvis_run.json":
            continue
        places = [os.path.join(str(memory), name)]
        for root, _, names in os.walk(os.path.join(str(memory), "archive")):
            places += [os.path.join(root, n) for n in names if n == name]
        ok &= ctx.keep(
            any(os.path.isfile(p) and open(p, "rb").read() == data for p in places),
            f"the earlier run's {name} is lost or changed",
        )
    return ok


def previous_run_untouched(ctx: Ctx, memory, files: Dict[str, bytes]) -> bool:
    """A run refused at its start left ``previous_run`` as it was: nothing archived, jarvis_run.json unchanged (a
    condition of "handled"; what is lost is checked by ``previous_run_kept``)."""
    ok = ctx.expect(not os.path.exists(os.path.join(str(memory), "archive")), "the earlier run was archived")
    for name, data in files.items():
        path = os.path.join(str(memory), name)
        ok &= ctx.expect(
            os.path.isfile(path) and open(path, "rb").read() == data, f"the earlier run's {name} was moved or changed"
        )
    return ok & previous_run_kept(ctx, memory, files)


def python_child(ctx: Ctx, script: str, *args: str, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """A Python process running ``script`` with the project importable (killed when the case ends)."""
    process = subprocess.Popen(
        [PYTHON, "-c", script, *args],
        cwd=str(ctx.folder),
        env={**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1", **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def stop():
        if process.poll() is None:
            process.kill()
            process.wait()

    ctx.on_exit(stop)
    return process
