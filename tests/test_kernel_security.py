"""The interpreter's kernel against careless and hostile code (issue 11, item 5): secrets, processes that try to
outlive it, limits, the sandbox, SIGHUP.

Every process a test makes carries a tag of this test run in its command line (``exec -a``); after each test none
may be left, and any that is left is killed before the next test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
from waiting import HANG_GUARD, eventually

from aiflows_jarvis.InterpreterFlowModule import InterpreterAtomicFlow
from aiflows_jarvis.InterpreterFlowModule import interpreter as interpreter_module
from aiflows_jarvis.InterpreterFlowModule import sandbox as sandbox_module
from aiflows_jarvis.InterpreterFlowModule import shell as shell_module
from aiflows_jarvis.InterpreterFlowModule.environment import scrubbed_environment, scrubbed_secrets
from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter, survivors_note
from aiflows_jarvis.InterpreterFlowModule.processes import Cgroup, start_time
from aiflows_jarvis.InterpreterFlowModule.sandbox import SandboxUnavailable, bwrap_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_KEY = "sk-test-" + "x" * 40
BWRAP = shutil.which("bwrap")


def tagged(tag: str):
    """``{pid: command line}`` of the live processes whose name (``argv[0]``, set by ``exec -a``) starts with
    ``tag``."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                args = f.read().decode("utf-8", errors="replace").replace("\0", " ")
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if args.startswith(tag) and stat[stat.rindex(b")") + 2 :].split()[0] != b"Z":
            found[int(name)] = args
    return found


def wait_until_gone(tag: str, wait: float = HANG_GUARD):
    """The processes tagged ``tag`` still alive after ``wait`` seconds (none, as soon as all have ended)."""
    eventually(lambda: not tagged(tag), wait, poll=0.05)
    return tagged(tag)


@pytest.fixture
def tag():
    """A tag for this test's processes; whatever still carries it at the end is killed (and fails the test)."""
    value = f"jvtag{uuid.uuid4().hex[:10]}"
    yield value
    left = wait_until_gone(value)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"processes left behind: {left}"


def python_spawns(tag: str) -> str:
    """Kernel code that starts three `sleep`s: in its group, in a session of its own, and double-forked."""
    return textwrap.dedent(f"""
        import os, subprocess
        subprocess.Popen(['bash', '-c', 'exec -a {tag}-grouped sleep 1000'])
        subprocess.Popen(['bash', '-c', 'exec -a {tag}-setsid sleep 1000'], start_new_session=True)
        if os.fork() == 0:
            try:
                os.setsid()
                if os.fork() == 0:
                    os.execvp('sleep', ['{tag}-double', '1000'])
            finally:
                os._exit(0)
        os.wait()
        print('started')
    """)


def shell_spawns(tag: str) -> str:
    """Shell code that starts the same three, and ends."""
    return (
        f"(exec -a {tag}-sh-grouped sleep 1000) >/dev/null 2>&1 & "
        f"setsid bash -c 'exec -a {tag}-sh-setsid sleep 1000' >/dev/null 2>&1 & "
        f"( (exec -a {tag}-sh-double sleep 1000) >/dev/null 2>&1 & ); echo started"
    )


def host_process(script: str) -> "subprocess.Popen[str]":
    """``script`` run by Python in a child process that imports the package (its stdin, stdout and stderr piped):
    the process that hosts an interpreter, as Jarvis does."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.PIPE,
    )


def end_host(process: "subprocess.Popen[str]", how: str) -> None:
    """End a ``host_process``: ``exit`` (a line on its stdin, after which it exits), or the signal named ``how``."""
    if how == "exit":
        process.stdin.write("\n")
    else:
        process.send_signal(getattr(signal, how))
    process.stdin.close()
    process.wait(timeout=60)


def until(condition, wait: float = HANG_GUARD) -> bool:
    """True as soon as ``condition()`` is; False if it is still false after ``wait`` s."""
    return eventually(condition, wait, poll=0.05)


# ~~~ Secrets ~~~
def test_the_scrub_drops_passwords_credentials_and_urls_with_credentials():
    secrets = {
        "DB_PASS": "hunter2",
        "SMTP_PASS": "x",
        "REDIS_PASSWORD": "x",
        "MYSQL_ROOT_PWD": "x",
        "LDAP_PASSWD": "x",
        "AWS_CREDENTIALS": "x",
        "GCP_CREDS": "x",
        "SERVICE_TOKEN": "x",
        "APP_SECRET": "x",
        "STRIPE_KEY": "x",
        "PASS": "x",
        "DATABASE_URL": "postgres://user:p4ss@db.example.com:5432/app",
        "CACHE": "redis://:onlypassword@cache:6379/0",
        "PIP_INDEX_URL": "https://me:tok3n@pypi.example.com/simple",
        "HTTPS_PROXY": "http://proxyuser:proxypass@proxy:3128",
        "REPO": "https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/me/repo.git",
        "SOME_SETTING": FAKE_KEY,
        "OTHER": "ghp_" + "a" * 36,
    }
    ordinary = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "PWD": "/w",
        "OLDPWD": "/",
        "PASSENGER_COUNT": "3",
        "BYPASS_CACHE": "1",
        "SSH_ASKPASS": "/usr/bin/ssh-askpass",
        "KEYBOARD_LAYOUT": "us",
        "TOKENIZERS_PARALLELISM": "false",
        "HOMEPAGE": "https://example.com/a@b",
        "GIT_URL": "ssh://git@github.com/me/repo.git",
        "MIRROR": "https://mirror.example.com/simple",
        "MAILTO": "me@example.com",
        "SK": "sk-short",
    }
    kept = scrubbed_environment(base={**secrets, **ordinary})
    assert sorted(kept) == sorted(ordinary), "secrets by name and by value go; ordinary variables stay"


# Secrets whose names do not say so: found by the shape of their values (or by the name's AUTH, WEBHOOK)
SHAPED_SECRETS = {
    "JDBC_URL": "jdbc:postgresql://db.example.com:5432/app?user=me&password=hunter2",
    "DB_CONN": "Server=db;Database=app;User Id=me;Password=hunter2;",
    "AUTH_HEADER": "Bearer abcdefghijklmnop0123",
    "NPM_CONFIG__AUTH": "bWU6aHVudGVyMg==",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
    "NOTIFY": "https://discord.com/api/webhooks/123/abc",
    "HDR": "Authorization: Basic bWU6aHVudGVy",
    "SIGNED": "https://bucket.example.com/f?X-Amz-Signature=abc",
    "AZ": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;",
    "JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
}


def test_the_scrub_drops_secrets_by_the_shape_of_their_values_and_says_which():
    ordinary = {
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
        "GIT_AUTHOR_NAME": "me",
        "HOOKS_DIR": "/etc/hooks",
        "SEARCH": "https://example.com/search?q=x&page=2",
        "MONKEY_URL": "https://example.com/?monkey=1",
        "LS_COLORS": "rs=0:di=01;34:ln=01;36",
        "BEARER": "none",
        "PWD": "/w",
    }
    kept = scrubbed_environment(base={**SHAPED_SECRETS, **ordinary})
    assert sorted(kept) == sorted(ordinary)
    assert scrubbed_secrets(base={**SHAPED_SECRETS, **ordinary}) == SHAPED_SECRETS, "names and values, for redaction"


def test_secrets_of_other_shapes_are_not_visible_to_python_nor_bash(make_interpreter, monkeypatch):
    for name, value in SHAPED_SECRETS.items():
        monkeypatch.setenv(name, value)
    interpreter = make_interpreter()
    names = sorted(SHAPED_SECRETS)
    python = interpreter.run(f"import os; print(sorted(set(os.environ) & set({names!r})))")
    assert python.output == "[]", python.output
    shell = interpreter.run("env | grep -c -e hunter2 -e hooks.slack -e Bearer -e bWU6 -e AccountKey || true", "bash")
    assert shell.output == "0", shell.output


def test_the_kernels_parent_does_not_hold_the_api_key(tmp_path):
    """The interpreter's process was started with an API key (as Jarvis is); code in the kernel reads its parent's
    initial environment in /proc and finds no key: the parent is the launcher, started with the scrubbed one."""
    script = textwrap.dedent(f"""
        from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter
        interpreter = CodeInterpreter({str(tmp_path / "ws")!r})
        try:
            code = ("import os\\n"
                    "parent = open(f'/proc/{{os.getppid()}}/environ', 'rb').read()\\n"
                    "print('KEY-IN-PARENT' if b'sk-test-' in parent else 'clean', len(parent) > 0)")
            print(interpreter.run(code).output)
            shell = "cat /proc/$PPID/environ | tr '\\\\0' '\\\\n' | grep -c sk-test- || true"
            print(interpreter.run(shell, "bash").output)
        finally:
            interpreter.close()
    """)
    env = dict(
        os.environ,
        OPENAI_API_KEY=FAKE_KEY,
        DATABASE_URL="postgres://u:p@h/db",
        PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr[-3000:]
    kernel_line, shell_count = done.stdout.strip().splitlines()[-2:]
    assert kernel_line == "clean True", "the kernel's parent's environment holds no key (and was read)"
    assert shell_count == "0", "nor does a shell command's"


def test_no_ancestor_of_the_kernel_shows_a_secret_and_the_host_still_has_its_variables(tmp_path):
    """The process that starts the kernel (Jarvis, or a user's script) was started with secrets: the kernel's code
    walks up every ancestor's /proc/<pid>/environ and finds none, while that process's os.environ, getenv and its
    own child processes still see them (only /proc's copy is blanked)."""
    script = textwrap.dedent(f"""
        import ctypes, os, subprocess
        from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter
        interpreter = CodeInterpreter({str(tmp_path / "ws")!r})
        try:
            code = ("import os\\n"
                    "pid, seen = os.getppid(), b''\\n"
                    "while pid > 1:\\n"
                    "    seen += open(f'/proc/{{pid}}/environ', 'rb').read()\\n"
                    "    pid = int(open(f'/proc/{{pid}}/stat').read().rsplit(')', 1)[1].split()[1])\\n"
                    "print('LEAK' if b'sk-test-' in seen or b'hunter2' in seen else 'clean')")
            print(interpreter.run(code).output)
        finally:
            interpreter.close()
        own = open('/proc/self/environ', 'rb').read()
        print('blanked' if b'sk-test-' not in own and b'OPENAI_API_KEY=' in own else 'not blanked')
        getenv = ctypes.CDLL(None).getenv
        getenv.restype = ctypes.c_char_p
        print(os.environ['OPENAI_API_KEY'] == {FAKE_KEY!r}, getenv(b'DB_PASSWORD') == b'hunter2',
              subprocess.run(['sh', '-c', 'echo $OPENAI_API_KEY'], capture_output=True, text=True).stdout.strip()
              == {FAKE_KEY!r})
    """)
    env = dict(
        os.environ,
        OPENAI_API_KEY=FAKE_KEY,
        DB_PASSWORD="hunter2",
        PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr[-3000:]
    kernel_line, own_line, host_line = done.stdout.strip().splitlines()[-3:]
    assert kernel_line == "clean", "no ancestor of the kernel shows a secret"
    assert own_line == "blanked", "the host's /proc environ keeps the names, not the values"
    assert host_line == "True True True", "os.environ, getenv and child processes still see the variables"


# ~~~ Processes that try to outlive the kernel ~~~
def test_processes_that_leave_the_kernels_group_end_with_close(make_interpreter, tag):
    interpreter = make_interpreter()
    assert interpreter.run(python_spawns(tag)).output == "started"
    assert until(lambda: len(tagged(tag)) == 3), tagged(tag)
    interpreter.close()
    assert not wait_until_gone(tag), "a sleep started by the kernel survived close()"


def test_processes_that_leave_a_shell_commands_group_end_with_close(make_interpreter, tag):
    interpreter = make_interpreter()
    result = interpreter.run(shell_spawns(tag), "bash")
    assert result.output == "started" and not result.failed
    assert until(lambda: len(tagged(tag)) == 3), tagged(tag)
    interpreter.close()
    assert not wait_until_gone(tag), "a sleep started by a shell command survived close()"


def test_a_kernel_restart_ends_what_the_old_kernel_started(make_interpreter, tag):
    interpreter = make_interpreter()
    interpreter.run(python_spawns(tag))
    assert until(lambda: len(tagged(tag)) == 3)
    result = interpreter.run("import os; os._exit(3)")
    assert result.restarted
    assert not wait_until_gone(tag), "the dead kernel's processes outlived it"


@pytest.mark.parametrize("how", ["exit", "SIGKILL"])
def test_nothing_the_code_started_outlives_the_interpreters_process(tmp_path, tag, how):
    """At exit (atexit closes the interpreter) and even when its process is killed (the kernel's launcher sees its
    parent go and ends everything below it, and what carries the interpreter's mark): the kernel, its orphans, and
    the shell commands' too."""
    script = textwrap.dedent(f"""
        import sys
        from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter
        interpreter = CodeInterpreter({str(tmp_path / "ws")!r})
        print(interpreter.run({python_spawns(tag)!r}).output,
              interpreter.run("import os; print(os.getpid())").output,
              interpreter.run({shell_spawns(tag)!r}, "bash").output, flush=True)
        sys.stdin.readline()  # then exit, unless killed before
    """)
    process = host_process(script)
    try:
        words = process.stdout.readline().split()
        assert words[0] == "started" and words[2] == "started", process.stderr.read() if not words else words
        kernel = int(words[1])
        assert until(lambda: len(tagged(tag)) == 6), tagged(tag)
        end_host(process, how)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if how == "exit":
        assert process.returncode == 0
    assert until(
        lambda: (
            not os.path.exists(f"/proc/{kernel}") or open(f"/proc/{kernel}/stat").read().split(") ")[1].startswith("Z")
        )
    ), "the kernel survived"
    left = wait_until_gone(tag)
    assert not left, f"survived the interpreter's process: {left}"


def clean_daemon(tag: str) -> str:
    """Shell code that double-forks a `sleep` into a session of its own with a cleared environment (so without the
    interpreter's mark), and ends."""
    return f"( setsid env -i bash -c 'exec -a {tag}-clean sleep 1000' </dev/null >/dev/null 2>&1 & ); echo started"


@pytest.mark.parametrize("how", ["exit", "SIGTERM", "SIGKILL"])
def test_a_daemon_with_a_cleared_environment_does_not_outlive_the_interpreter_without_a_cgroup(tmp_path, tag, how):
    """No cgroup can be made (as on most desktops): the daemon is found by the shell command's launcher, a subreaper
    it is handed to, which stays while it runs and ends it with the run, at a SIGTERM, and when its parent is
    killed."""
    script = textwrap.dedent(f"""
        import signal, sys
        from aiflows_jarvis.InterpreterFlowModule import processes
        from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter
        processes.Cgroup.create = classmethod(lambda cls, name: None)
        signal.signal(signal.SIGTERM, lambda *args: sys.exit(143))  # as Jarvis does: the run ends, then the process
        interpreter = CodeInterpreter({str(tmp_path / "ws")!r})
        print(interpreter.run({clean_daemon(tag)!r}, "bash").output, flush=True)
        sys.stdin.readline()  # then exit, unless signalled before
    """)
    process = host_process(script)
    try:
        line = process.stdout.readline().strip()
        assert line == "started", process.stderr.read() if not line else line
        assert until(lambda: len(tagged(tag)) == 1), tagged(tag)
        end_host(process, how)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    left = wait_until_gone(tag)
    assert not left, f"survived the interpreter's process ({how}): {left}"


def test_a_process_the_code_started_that_cannot_be_ended_is_named_after_close(make_interpreter, tag, monkeypatch):
    monkeypatch.setattr(Cgroup, "create", classmethod(lambda cls, name: None))
    interpreter = make_interpreter()
    started = interpreter.run(f"(exec -a {tag}-stays sleep 1000) </dev/null >/dev/null 2>&1 & echo started", "bash")
    assert started.output == "started" and until(lambda: len(tagged(tag)) == 1), tagged(tag)
    [launcher] = interpreter.context.resources["shell_groups"]
    # as where no signal reaches it (another user's process, a sandbox in the way): nothing is ended
    monkeypatch.setattr(shell_module.ShellExecutor, "close", lambda self: None)
    monkeypatch.setattr(interpreter_module, "end_processes", lambda *args, **kwargs: None)
    interpreter.close()
    try:
        [(pid, command)] = interpreter.survivors
        assert command == f"{tag}-stays 1000"
        assert survivors_note(interpreter.survivors) == (
            f"1 process started by the code is still running: {pid}, {tag}-stays 1000 (end it with kill PID)."
        )
    finally:
        for pid in tagged(tag):
            os.kill(pid, signal.SIGKILL)
        assert until(lambda: start_time(launcher) is None), "the launcher ends with what it waited for"


# ~~~ Limits ~~~
def test_a_memory_limit_gives_a_memory_error_that_says_the_limit(make_interpreter):
    interpreter = make_interpreter(memory_limit_mb=100)
    assert not interpreter.run("small = bytearray(10 * 2**20)").failed
    big = interpreter.run("big = bytearray(1024 * 2**20)")
    assert big.failed and not big.restarted and "MemoryError" in big.output
    assert "memory limit of 100 MB (memory_limit_mb)" in big.output
    assert interpreter.run("print(len(small))").output == str(10 * 2**20), "the session goes on"
    shell = interpreter.run(f"{sys.executable} -c 'bytearray(1024 * 2**20)'", "bash")
    assert shell.failed and "MemoryError" in shell.output and "memory_limit_mb" in shell.output


def test_a_cpu_limit_stops_the_run_says_so_and_the_next_run_has_a_new_kernel(make_interpreter):
    interpreter = make_interpreter(cpu_time_s=1, timeout=120)
    interpreter.run("kept = 1")
    spin = interpreter.run("while True:\n    pass")
    assert spin.failed and spin.restarted and not spin.timed_out, spin.output
    assert "The kernel was stopped: CPU time limit of 1 s (cpu_time_s)" in spin.output
    after = interpreter.run("print('back')")
    assert after.output == "back" and not after.failed
    assert "NameError" in interpreter.run("kept").output
    # the allowance is per run: runs that each use less do not add up to it
    for _ in range(3):
        assert not interpreter.run(
            "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end:\n    pass"
        ).failed
    shell = interpreter.run("while :; do :; done", "bash")
    assert shell.failed and "SIGXCPU" in shell.output and "CPU time limit of 1 s" in shell.output


def test_limits_that_are_not_positive_numbers_are_refused_when_the_flow_is_built():
    with pytest.raises(ValueError, match="memory_limit_mb: 'lots' is not a positive number"):
        InterpreterAtomicFlow.instantiate_from_default_config(memory_limit_mb="lots")
    with pytest.raises(ValueError, match="cpu_time_s: -1 is not a positive number"):
        CodeInterpreter("/tmp", cpu_time_s=-1)


def test_the_flow_passes_its_limits_and_sandbox_settings_to_the_interpreter(tmp_path):
    flow = InterpreterAtomicFlow.instantiate_from_default_config(
        workspace=str(tmp_path), memory_limit_mb=512, cpu_time_s=30
    )
    try:
        assert flow.flow_config["sandbox"] is None and flow.flow_config["sandbox_network"] is False
        engine = flow.engine
        assert (engine.memory_limit_mb, engine.cpu_time_s, engine.sandbox) == (512, 30, None)
    finally:
        flow.close()


def test_generated_code_has_a_memory_limit_by_default_a_share_of_the_ram(tmp_path):
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    flow = InterpreterAtomicFlow.instantiate_from_default_config(workspace=str(tmp_path))
    try:
        assert flow.engine.memory_limit_mb == round(ram / 2), "auto: half of the RAM"
        assert flow.limits_note().startswith("Generated code may use ") and "50% of the RAM" in flow.limits_note()
    finally:
        flow.close()
    quarter = CodeInterpreter(str(tmp_path), memory_limit_mb="25%")
    assert quarter.memory_limit_mb == round(ram / 4), "a share of the RAM"
    quarter.close()
    with pytest.raises(ValueError, match="memory_limit_mb: '150%' is not a share of the RAM"):
        InterpreterAtomicFlow.instantiate_from_default_config(memory_limit_mb="150%")
    none = InterpreterAtomicFlow.instantiate_from_default_config(memory_limit_mb=None)
    assert none.limits_note().startswith("Generated code has no memory limit")


# ~~~ The sandbox ~~~
def test_the_bubblewrap_command_line():
    command = bwrap_command(
        "/usr/bin/bwrap",
        "/work/ws",
        ["/tmp/jarvis-interp-x"],
        network=False,
        die_with_parent=True,
        env={"JPY_PARENT_PID": "1"},
    )
    assert command[0] == "/usr/bin/bwrap" and command[-1] == "--"
    text = " ".join(command)
    for part in (
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--ro-bind / /",
        "--proc /proc",
        "--dev /dev",
        "--tmpfs /tmp",
        "--bind /work/ws /work/ws",
        "--bind /tmp/jarvis-interp-x /tmp/jarvis-interp-x",
        "--setenv JPY_PARENT_PID 1",
        "--setenv TMPDIR /tmp",
        "--chdir /work/ws",
    ):
        assert part in text, part
    # mounts apply in order: the workspace and the private folder after the read-only root and the fresh /tmp
    assert text.index("--ro-bind / /") < text.index("--tmpfs /tmp") < text.index("--bind /work/ws")
    networked = bwrap_command("/usr/bin/bwrap", "/w", network=True)
    assert "--unshare-net" not in networked and "--die-with-parent" not in networked


def test_a_python_installed_under_tmp_is_bound_back_read_only_in_the_sandbox(monkeypatch, tmp_path):
    # CI makes its virtual environment in a clone under /tmp, which the sandbox replaces by an empty tmpfs: the
    # kernel's Python would not start ("execvp .../.venv/bin/python: No such file or directory")
    venv = tmp_path / "clone" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    monkeypatch.setattr(sandbox_module.sys, "prefix", str(venv))
    monkeypatch.setattr(sandbox_module.sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(sandbox_module.sys, "path", [str(venv / "lib"), str(tmp_path / "clone"), "/usr/lib", ""])
    assert sandbox_module.hidden_by_private_tmp(["/tmp", "/usr", str(tmp_path / "gone")]) == []
    command = " ".join(bwrap_command("/usr/bin/bwrap", str(tmp_path / "ws"), network=False))
    clone = str(tmp_path / "clone")
    if clone.startswith("/tmp/"):
        # the outermost folder once (the clone holds the environment), read-only, after the fresh /tmp
        assert command.count("--ro-bind " + clone + " " + clone) == 1 and str(venv / "lib") not in command
        assert command.index("--tmpfs /tmp") < command.index("--ro-bind " + clone)
    # a workspace under one of them stays writable: it is bound after (over) them
    inside = bwrap_command("/usr/bin/bwrap", clone, network=False)
    assert "--ro-bind " + clone not in " ".join(inside) and "--bind " + clone + " " + clone in " ".join(inside)


def test_a_sandbox_that_is_not_installed_is_a_clear_error_at_start(monkeypatch, tmp_path):
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        InterpreterAtomicFlow.instantiate_from_default_config(sandbox="bwrap")
    with pytest.raises(SandboxUnavailable, match="sandbox: null"):
        CodeInterpreter(str(tmp_path), sandbox="bwrap")
    with pytest.raises(ValueError, match="'docker' is not a sandbox"):
        CodeInterpreter(str(tmp_path), sandbox="docker")


def sandbox_works() -> bool:
    """bubblewrap is installed and may make namespaces here (some systems forbid it to users)."""
    if BWRAP is None:
        return False
    return (
        subprocess.run(
            [BWRAP, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--", "true"],
            capture_output=True,
            timeout=30,
        ).returncode
        == 0
    )


@pytest.mark.skipif(not sandbox_works(), reason="bubblewrap is not installed (or cannot make namespaces) here")
def test_sandboxed_code_writes_only_the_workspace_sees_only_its_processes_and_has_no_network(
    make_interpreter, tmp_path, tag
):
    outside = tmp_path / "outside"
    outside.mkdir()
    interpreter = make_interpreter(sandbox="bwrap", timeout=20)
    code = textwrap.dedent(f"""
        import os, socket
        open('inside.txt', 'w').write('ok')
        for path in ({str(outside / "x.txt")!r}, '/etc/jarvis-sandbox-test'):
            try:
                open(path, 'w').write('x')
                print('WROTE', path)
            except OSError as error:
                print('refused', error.errno)
        print('processes', sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:2], os.getppid())
        try:
            socket.create_connection(('192.0.2.1', 80), timeout=2)
        except OSError as error:
            print('network', error.errno)
    """)
    result = interpreter.run(code)
    lines = result.output.splitlines()
    # a folder outside the workspace: not there (under /tmp, which is the sandbox's own) or read-only (EROFS, 30)
    assert lines[0] in ("refused 2", "refused 30") and lines[1] == "refused 30", result.output
    assert lines[2] == "processes [1, 2] 1", "a process namespace of its own: the kernel's parent is its init"
    assert lines[3] == "network 101", "ENETUNREACH: no network"
    assert result.files == ["inside.txt"] and not (outside / "x.txt").exists()
    shell = interpreter.run(
        "touch /etc/jarvis-sandbox-test 2>&1; echo more >> inside.txt; " + shell_spawns(tag), "bash"
    )
    assert "Read-only file system" in shell.output and shell.files == ["inside.txt"]
    interrupted = interpreter.run("import time\ntime.sleep(60)", timeout=2)
    assert interrupted.timed_out and not interrupted.restarted, "an interrupt reaches the sandboxed kernel"
    interpreter.run(python_spawns(tag))
    assert until(lambda: len(tagged(tag)) == 6), tagged(tag)
    interpreter.close()
    assert not wait_until_gone(tag)


# ~~~ SIGHUP: the terminal closed ~~~
def test_sighup_stops_a_run_like_sigterm_and_ends_the_kernel_and_its_processes(tmp_path, tag):
    from helpers import DEMO, kernels_in, run_until
    from loopback_llm import LoopbackLLMServer, Slow
    from subprocess_guard import check_guarded_run

    from aiflows_jarvis.ChatFlowModule import Transcript

    demo = Transcript.load(DEMO)
    replies = demo.replies()
    run_code = json.dumps({"command": "run_code", "command_args": {"language": "python", "code": python_spawns(tag)}})
    # Jarvis plans and hands the goal to Coder (whose plan is that goal); Coder runs the code, and its next call
    # hangs: SIGHUP then.
    script = replies[:2] + [run_code, Slow(None, replies[3])]
    with LoopbackLLMServer(replies=script) as server:
        work = tmp_path / "work"
        work.mkdir()
        process, attempts = run_until(server, 4, tmp_path, "--workdir", str(work), demo.header["goal"])
        memory = tmp_path / "memory"
        try:
            assert until(lambda: len(tagged(tag)) == 3), tagged(tag)
            assert kernels_in(work), "the interpreter's kernel runs, in the working folder"
            process.send_signal(signal.SIGHUP)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 129, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err and f"Plans, logs and the library are in {memory}" in out
    assert not wait_until_gone(tag), "a process the code started survived the hang-up"
    assert until(lambda: not kernels_in(work)), "the kernel was shut down"
    check_guarded_run(attempts)
