"""Builders and probes that several test files use, in one place (no tests here; fixtures several files use are in
conftest.py, fakes in fakes.py).

- The repository's paths and the demo: ``ROOT``, ``RUN_JARVIS``, ``DEMO``, ``DEMO_CALLS``, ``KEYS``.
- run_jarvis.py in a guarded child: ``child_environment``, ``run_jarvis``, ``run_until``, ``transcript_answering``,
  ``commands``, ``NO_SERVER`` and ``assert_refused_at_start``.
- Flows built the way several files build them: ``make_chat``, ``make_boss``, ``word_count_loop``, ``controller``
  and ``goal_input`` (with ``long_logs``), ``run_code``; ``use_server`` points every chat at a loopback server.
- Processes and files: ``kernels_in``, ``pid_gone``, ``dead_pid``, ``left_running``, ``stdio`` (an MCP server
  entry), ``not_blocked``, ``files_holding``, ``pip``, ``SAVER`` (a process saving functions into a library);
  ``publish`` is scripts/publish.py loaded as a module; ``CONTROLS``, what a terminal acts on.

The fault suite (benchmarks/faults) imports some of them too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from aiflows.backends.api_info import ApiInfo
from subprocess_guard import guarded_environment, network_guarded
from waiting import HANG_GUARD, eventually, wait_until

from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, Transcript, with_api_infos
from aiflows_jarvis.CoreFlowModule import current_run, format_log_entry, read_text, split_log_entries, start_thread

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_JARVIS = os.path.join(ROOT, "run_jarvis.py")
DEMO = os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "JarvisFlowModule", "demo", "demo_transcript.jsonl")
DEMO_CALLS = len(Transcript.load(DEMO).records)  # the LLM calls of the demo run
# The variables that would give a child process an LLM: a test's child has none unless the test gives it one.
KEYS = ("OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_API_BASE", "OPENAI_API_BASE")
# Every character a terminal may act on: C0 but tab and line feed, DEL, C1 (U+009B is the 8-bit CSI).
CONTROLS = {chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]} - {"\t", "\n"}
NO_SERVER = ("--api-base", "http://127.0.0.1:9/v1")  # nothing listens there: a run that got as far as an LLM call fails
MCP_STDIO_SERVER = os.path.join(ROOT, "tests", "mcp_stdio_server.py")


# ~~~ run_jarvis.py in a child process ~~~
def child_environment(**extra):
    """This process's environment without API keys and the fake editor's settings, with no colours; ``extra``
    added."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith("FAKE_EDITOR")}
    env.update(NO_COLOR="1", **extra)
    return env


def run_jarvis(cwd, *args, timeout=240, text=True, **env):
    """run_jarvis.py in a child process with no API keys, no colours, stdin closed, and the network guarded.

    :param env: more environment variables (``PYTHONIOENCODING="ascii"``).
    :param text: False: stdout and stderr as bytes (to check what an encoding made of them).
    """
    with network_guarded(child_environment(**env)) as guarded:
        return subprocess.run(
            [sys.executable, RUN_JARVIS, *args],
            cwd=cwd,
            env=guarded,
            capture_output=True,
            text=text,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def run_until(server, requests, tmp_path, *args, script=RUN_JARVIS):
    """Start run_jarvis.py (or ``script``, which takes the same options) on the loopback server (network guarded,
    see subprocess_guard); return the process once the server has seen ``requests``, and the guard's log of network
    attempts."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["NO_COLOR"] = "1"
    env, attempts = guarded_environment(str(tmp_path / "guard"), env)
    process = subprocess.Popen(
        [sys.executable, script, "--api-base", server.url, "--yes", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: len(server.requests) >= requests or process.poll() is not None,
            f"request number {requests} to the loopback server",
            poll=0.05,
        )
    except AssertionError:
        process.kill()
        raise
    assert process.poll() is None, "the run ended before it was interrupted: " + process.communicate()[0][-2000:]
    return process, attempts


def transcript_answering(tmp_path, answer: str) -> str:
    """The demo's recording with ``answer`` as Jarvis's final answer (the requests are not compared: the later ones
    quote the answer)."""
    lines = []
    with open(DEMO, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("type") == "llm":
                record.pop("messages", None)
                if '"final_answer"' in record["reply"]:
                    reply = json.loads(record["reply"])
                    reply["command_args"]["answer"] = answer
                    record["reply"] = json.dumps(reply)
            lines.append(json.dumps(record))
    path = tmp_path / "transcript.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def commands(log_path, markers=False):
    """The commands logged, in order (without the `resume` / `new_task` lines a boss writes between tasks)."""
    logged = [entry.split(" ---")[0].split()[-1] for _, entry in split_log_entries(read_text(log_path))]
    return logged if markers else [c for c in logged if c not in ("resume", "new_task")]


def assert_refused_at_start(done, memory, says):
    """A run_jarvis.py that stopped with code 2 before it moved anything: ``memory`` holds the earlier run's plan
    (the ``memory`` fixture of test_bad_input), and the output says ``says``."""
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    assert says in out, out[-3000:]
    assert "Traceback" not in out and "Unexpected error" not in out, out[-3000:]
    assert (memory / "plan_jarvis.txt").read_text() == "1. the earlier run's plan\n", "nothing was archived"
    assert not (memory / "archive").exists(), "nothing was archived"


# ~~~ Flows ~~~
FAST_RETRY = {"max_attempts": 4, "initial_delay": 0.01, "max_delay": 0.05}


def make_chat(**overrides):
    """A chat named Asker that retries fast."""
    cfg = {"name": "Asker", "retry": FAST_RETRY}
    cfg.update(overrides)
    return ChatAtomicFlow.instantiate_from_default_config(**cfg)


def make_boss(memory_dir):
    """A small boss (AbstractBossFlow) whose own command is count_words (it has those of every boss too: ask_user,
    re_plan, update_plan, search_logs); its memory files in ``memory_dir``. Returns the boss and its memory files."""
    from aiflows_jarvis.AbstractBossFlowModule import AbstractBossFlow

    memory_files = {"plan": str(memory_dir / "plan_boss.txt"), "logs": str(memory_dir / "logs_boss.txt")}
    boss = AbstractBossFlow.instantiate_from_default_config(
        name="WordBoss",
        memory_files=memory_files,
        subflows_config={
            "CtrlExMem": {
                "commands": {
                    "count_words": {
                        "description": "Count the words of a text.",
                        "input_args": ["text"],
                        "flow": {"_target_": "flows_for_tests.WordCountFlow.instantiate_from_default_config"},
                    }
                }
            }
        },
    )
    return boss, memory_files


def word_count_loop(max_rounds: int, description: str = "count words"):
    """A CtrlExMemFlow whose one command (but finish) is count_words (flows_for_tests.WordCountFlow): the loop
    alone, the commands every boss has (CtrlExMemFlow.yaml) left out."""
    from aiflows_jarvis.AbstractBossFlowModule import CtrlExMemFlow

    every_boss = {name: None for name in CtrlExMemFlow.get_config()["commands"]}
    return CtrlExMemFlow.instantiate_from_default_config(
        max_rounds=max_rounds,
        commands={
            **every_boss,
            "count_words": {
                "description": description,
                "input_args": ["text"],
                "flow": {"_target_": "flows_for_tests.WordCountFlow.instantiate_from_default_config"},
            },
        },
    )


ASK_AND_FINISH = {
    "ask_user": {"description": "Ask the user.", "input_args": ["question"]},
    "finish": {"description": "End.", "input_args": ["summary"]},
}


def controller(name="Controller", commands=ASK_AND_FINISH, **config):
    """A ControllerAtomicFlow with ``commands`` (by default ask_user and finish)."""
    from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow

    return ControllerAtomicFlow.instantiate_from_default_config(name=name, commands=commands, **config)


def long_logs(entries=40, size=400):
    """A logs memory of ``entries`` run_code entries of about ``size`` characters each."""
    return "\n".join(
        format_log_entry(i, "run_code", {"code": f"step({i})"}, f"result {i} " + "x" * size).rstrip("\n")
        for i in range(1, entries + 1)
    )


def goal_input(**extra):
    """A controller's input: a goal, a plan of one step, no logs (``extra`` replaces or adds keys)."""
    return {"goal": "say hi", "plan": "1. ask", "logs": "", "memory_files": {}, **extra}


def use_server(server, model="openai/local-model", api_base=None):
    """Every chat of the test's run talks to ``server`` (or ``api_base``) as ``model``: an OpenAI-compatible server,
    as run_jarvis.py --api-base does. What the run learns of the server is the test's own (each test has a
    RunContext of its own)."""
    current_run().backend_factory = with_api_infos(
        [ApiInfo(backend_used="openai", api_key="sk-test", api_base=api_base or server.url)], model_name=model
    )


def run_code(folder, code: str, language: str = "python") -> dict:
    """One run_code (RunCodeFlow) with the library ``folder/library.py``; its kernel is shut down afterwards. The
    test sets the input source (the user, or AutoApproveInput)."""
    from aiflows_jarvis.RunCodeFlowModule import RunCodeFlow

    flow = RunCodeFlow.instantiate_from_default_config()
    try:
        return flow.run(
            {"code": code, "language": language, "memory_files": {"code_library": str(folder / "library.py")}}
        )
    finally:
        flow.subflows["Interpreter"].close()


# ~~~ Processes and files ~~~
def kernels_in(folder):
    """PIDs of processes whose working directory is ``folder`` (the interpreter's kernel runs there)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.readlink(f"/proc/{entry}/cwd") == str(folder):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def pid_gone(pid: int, wait: float = HANG_GUARD) -> bool:
    """The process has ended, or ends within ``wait`` s (a zombie waiting for an init that reaps slowly counts as
    ended)."""

    def ended():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/status") as f:
                return any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
        except OSError:
            return False

    return eventually(ended, wait, poll=0.05)


def dead_pid() -> int:
    """The PID of a process that has ended (and was reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def stdio(tmp_path, *flags: str, **settings) -> dict:
    """An MCP server entry starting mcp_stdio_server.py; the test's folder is in its command line
    (``left_running``)."""
    return {"command": sys.executable, "args": [MCP_STDIO_SERVER, "--marker", str(tmp_path), *flags], **settings}


def left_running(marker) -> list:
    """Processes (not zombies) whose command line holds ``marker``: what a test's servers left behind."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(marker) in command and state != b"Z":
            found.append((int(name), command))
    return found


def not_blocked(call, *fifos):
    """``call()``'s result (or raises its error), from a thread; if it blocks on one of ``fifos`` (opening a FIFO
    waits for its other end), that end is opened to release it after the hang guard, and the test fails."""
    box = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as error:  # noqa: BLE001 - raised again in the test's thread
            box["error"] = error

    thread = start_thread(run, "not_blocked")  # (in a copy of the test's context: its run and console)
    if not eventually(lambda: not thread.is_alive()):
        while thread.is_alive():  # the other end, opened and closed (each time it opens one again): it returns
            for fifo in fifos:
                for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                    try:
                        os.close(os.open(fifo, flags))
                    except OSError:
                        pass
            thread.join(0.05)
        raise AssertionError(f"{call} blocked on a FIFO")
    if "error" in box:
        raise box["error"]
    return box["value"]


def files_holding(folder, *secrets):
    """Which files under ``folder`` hold any of ``secrets``."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                data = f.read()
            found += [f"{os.path.relpath(path, folder)} holds {s[:6]}..." for s in secrets if s.encode() in data]
    return found


# A process that saves 20 functions (``<argv[2]>_<i>``) into the library ``argv[1]`` once a line comes on its stdin
# (both savers of a test are ready).
SAVER = """
    import os, sys
    import aiflows_jarvis  # noqa: F401
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput
    from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow

    library, prefix = sys.argv[1], sys.argv[2]
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    print("ready", flush=True)
    sys.stdin.readline()  # both processes start saving when both are ready
    for i in range(20):
        out = save.run({"code": f"def {prefix}_{i}(x):\\n    '''{prefix} {i}.'''\\n    return x + {i}\\n",
                        "memory_files": {"code_library": library}})
        assert out["result"].startswith("Saved"), out
"""


def pip(python, *args):
    """This test environment's pip, run by ``python`` (a linked_venv's: it installs there), offline and guarded."""
    base = dict(os.environ, PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    with network_guarded(base, keep_pythonpath=False) as env:
        done = subprocess.run([python, "-m", "pip", *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def load_script(name: str):
    """``scripts/<name>.py`` loaded as a module (scripts/ is not a package); ``name`` may be a path below scripts/
    (``publishing/dependency_sync``)."""
    spec = importlib.util.spec_from_file_location(os.path.basename(name), os.path.join(ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


publish = load_script("publish")
