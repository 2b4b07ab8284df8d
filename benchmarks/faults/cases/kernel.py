"""The interpreter's kernel and shell: secrets (by name, in URLs, through /proc), children that leave its process
group, memory and CPU limits, floods of output, a kernel killed from outside."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import time

from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter  # noqa: E402

from ..harness import ROOT, case
from ..support import (
    GOAL,
    LoopbackLLMServer,
    Run,
    Slow,
    alive,
    coder_run,
    handled_exit,
    jarvis,
    memory_whole,
    no_processes_left,
    python_child,
    read,
)

SECRETS = {
    "DB_PASS": "faults-pass-1",
    "SMTP_PASSWORD": "faults-pass-2",
    "MYSQL_PWD": "faults-pass-3",
    "AWS_CREDENTIALS": "faults-pass-4",
    "SERVICE_CREDENTIALS": "faults-pass-5",
    "DATABASE_URL": "postgres://jarvis:faults-pass-6@db.example:5432/sales",
    "REDIS_URL": "redis://:faults-pass-7@cache.example:6379/0",
    "OPENAI_API_KEY": "sk-faults-pass-8",
}
SHOW_ENVIRONMENT = "import os\nprint(sorted(os.environ.items()))"
# Every ancestor's initial environment the kernel's code can read (its parent, the parent's parent, ...).
READ_ANCESTORS = textwrap.dedent("""
    import os
    pid, seen = os.getppid(), []
    while pid > 1:
        try:
            seen.append(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace"))
        except OSError:
            pass
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    print("ANCESTORS", len(seen), "|".join(seen))
""")


def _leaked(text: str) -> list:
    return sorted(name for name, value in SECRETS.items() if value in text)


@case(
    "kernel",
    "secrets_by_pattern",
    handled="none of *_PASS, *_PASSWORD, *_PWD, *_CREDENTIALS, credential URLs "
    "(DATABASE_URL=postgres://u:p@h) nor the API key is in the kernel's or the shell's environment",
    lost="none (nothing is written)",
)
def secrets_by_pattern(ctx):
    _secrets_not_seen(ctx, SECRETS)


def _secrets_not_seen(ctx, secrets: dict) -> None:
    """With ``secrets`` in this process's environment, neither the kernel nor the shell sees any of their values."""
    os.environ.update(secrets)
    with CodeInterpreter(str(ctx.folder)) as interpreter:
        python = interpreter.run(SHOW_ENVIRONMENT).output
        shell = interpreter.run("env", "bash").output
    for where, text in (("the kernel", python), ("the shell", shell)):
        seen = sorted(name for name, value in secrets.items() if value in text)
        ctx.expect(not seen, f"{where} sees {', '.join(seen)}")
    ctx.expect("PATH" in python, "the kernel's environment was not shown at all")


# Secrets whose names do not say so: their values have the shape of credentials.
SHAPED_SECRETS = {
    "JDBC_URL": "jdbc:postgresql://db.example:5432/sales?user=jarvis&password=faults-shape-1",
    "DB_CONN": "Server=db.example;Database=sales;User Id=jarvis;Password=faults-shape-2;",
    "AUTH_HEADER": "Bearer faults-shape-3-abcdefghij",
    "NPM_CONFIG__AUTH": "faults-shape-4",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/faults-shape-5",
}


@case(
    "kernel",
    "secrets_by_shape",
    handled="none of JDBC_URL=...?password=, DB_CONN=...;Password=...;, "
    "AUTH_HEADER=Bearer ..., NPM_CONFIG__AUTH, SLACK_WEBHOOK_URL is in the kernel's or the shell's environment",
    lost="none (nothing is written)",
)
def secrets_by_shape(ctx):
    _secrets_not_seen(ctx, SHAPED_SECRETS)


PARENT_HOST = """
import json, sys
sys.path.insert(0, sys.argv[2])
from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter
with CodeInterpreter(sys.argv[1]) as interpreter:
    print(json.dumps({"python": interpreter.run(sys.argv[3]).output,
                      "shell": interpreter.run("cat /proc/$PPID/environ | tr '\\\\0' '\\\\n'", "bash").output}))
"""


@case(
    "kernel",
    "secrets_through_proc_environ",
    handled="the kernel's code reads /proc/<pid>/environ of every "
    "ancestor it can (the process that started the kernel was started with the API key and passwords in its "
    "environment): no secret is there",
    lost="none (nothing is written)",
)
def secrets_through_proc_environ(ctx):
    host = python_child(ctx, PARENT_HOST, str(ctx.folder), ROOT, READ_ANCESTORS, env=SECRETS)
    out, err = host.communicate(timeout=120)
    if not ctx.expect(host.returncode == 0, f"the host process failed: {err.strip().splitlines()[-1:]}"):
        return
    seen = json.loads(out.strip().splitlines()[-1])
    ctx.expect("ANCESTORS" in seen["python"], f"the ancestors were not read: {seen['python'][:200]}")
    for where, text in seen.items():
        ctx.expect(not _leaked(text), f"{where}: an ancestor's environment shows {', '.join(_leaked(text))}")


def _sleepers_end_at_close(ctx, code: str, language: str, expected: int, what: str) -> None:
    """Run ``code``, which starts ``expected`` sleepers and prints ``SLEEPER <pid>`` for each, then close(): none
    may outlive it."""
    interpreter = CodeInterpreter(str(ctx.folder))
    out = interpreter.run(code, language).output
    interpreter.close()
    pids = [int(w) for line in out.splitlines() if line.startswith("SLEEPER") for w in line.split()[1:]]
    ctx.expect(len(pids) == expected, f"the sleepers did not start: {out[:200]}")
    ctx.expect(not [p for p in pids if alive(p)], f"{what} outlived close()")


@case(
    "kernel",
    "setsid_child_outlives_close",
    handled="a process the kernel's code started in a session of its own (start_new_session) is ended by close()",
    lost="none (nothing is written)",
)
def setsid_child_outlives_close(ctx):
    _sleepers_end_at_close(
        ctx,
        "import subprocess\np = subprocess.Popen(['sleep', '300'], start_new_session=True)\nprint('SLEEPER', p.pid)",
        "python",
        1,
        "the setsid child",
    )


@case(
    "kernel",
    "double_fork_outlives_close",
    handled="a process double-forked (and setsid) by the kernel's code, no longer its descendant, is ended by close()",
    lost="none (nothing is written)",
)
def double_fork_outlives_close(ctx):
    _sleepers_end_at_close(
        ctx,
        "import subprocess\nout = subprocess.run(['bash', '-c', 'setsid sleep 300 >/dev/null "
        "2>&1 </dev/null & echo $!'], capture_output=True, text=True).stdout\n"
        "print('SLEEPER', out.strip())",
        "python",
        1,
        "the double-forked child",
    )


@case(
    "kernel",
    "shell_background_outlives_close",
    handled="`setsid sleep &` and `nohup sleep &` in shell code are ended by close()",
    lost="none (nothing is written)",
)
def shell_background_outlives_close(ctx):
    _sleepers_end_at_close(
        ctx,
        "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo SLEEPER $!\n"
        "nohup sleep 301 >/dev/null 2>&1 < /dev/null & echo SLEEPER $!",
        "bash",
        2,
        "a background process",
    )


@case(
    "kernel",
    "kernel_killed_from_outside",
    slow=True,
    handled="a kernel killed by kill -9 during a run: the run fails saying "
    "the state was lost (restarted), and the next run works",
    lost="none (nothing is written)",
)
def kernel_killed_from_outside(ctx):
    with CodeInterpreter(str(ctx.folder)) as interpreter:
        interpreter.run("x = 41")
        killed = interpreter.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        after = interpreter.run("x = 1\nprint(x + 41)")
    ctx.expect(killed.failed and killed.restarted, f"failed {killed.failed}, restarted {killed.restarted}")
    ctx.expect("42" in after.output and not after.failed, f"the next run: {after.output[:200]}")
    no_processes_left(ctx, ctx.folder, "the kernel")


@case(
    "kernel",
    "shell_output_flood",
    slow=True,
    handled="50 MB printed by shell code comes back bounded (head and tail, the cut said)",
    lost="none (nothing is written)",
)
def shell_output_flood(ctx):
    with CodeInterpreter(str(ctx.folder), max_output_chars=20000) as interpreter:
        result = interpreter.run("head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo THE END", "bash")
    ctx.expect(result.truncated and len(result.output) < 30000, f"{len(result.output)} characters came back")
    ctx.expect("THE END" in result.output, "the tail was not kept")


@case(
    "kernel",
    "output_of_200_mb_in_one_write",
    slow=True,
    exclusive=True,
    timeout=300,
    handled="200 MB printed in one write come back as a head and a tail with the cut said, not '(no output)'",
    lost="none (nothing is written)",
)
def output_of_200_mb(ctx):
    with CodeInterpreter(str(ctx.folder), timeout=200) as interpreter:
        result = interpreter.run("import sys\nsys.stdout.write('x' * 200_000_000 + '\\nTHE END\\n')")
    ctx.expect("(no output)" not in result.output, "the output says '(no output)'")
    ctx.expect(result.truncated and "xxxx" in result.output, f"output: {result.output[:200]!r}")
    ctx.figure("characters back", len(result.output))


def _limited_flow(ctx, **limits):
    from aiflows_jarvis.InterpreterFlowModule import InterpreterAtomicFlow

    flow = InterpreterAtomicFlow.instantiate_from_default_config(**{"workspace": str(ctx.folder), **limits})
    ctx.on_exit(flow.close)
    return flow


@case(
    "kernel",
    "memory_limit",
    slow=True,
    exclusive=True,
    timeout=240,
    handled="with memory_limit_mb: 256 in the "
    "interpreter's YAML, code allocating 1 GiB fails (MemoryError or the kernel restarted), it is not allocated",
    lost="none (nothing is written)",
)
def memory_limit(ctx):
    flow = _limited_flow(ctx, memory_limit_mb=256, timeout=120)
    out = flow.run({"code": "b = bytearray(1 << 30)\nprint('ALLOCATED', len(b))", "language": "python"})
    # (the traceback of a MemoryError quotes the print line: the number printed is what says it was allocated)
    ctx.expect(f"ALLOCATED {1 << 30}" not in out["interpreter_output"], "1 GiB was allocated under a 256 MB limit")
    ctx.expect(out["failed"], "the run did not fail")


@case(
    "kernel",
    "memory_default_limit",
    handled="with the interpreter's default configuration, code asking for 3/4 "
    "of the RAM at once fails with a MemoryError that says the limit (memory_limit_mb: auto, half of the RAM)",
    lost="none (nothing is written)",
)
def memory_default_limit(ctx):
    flow = _limited_flow(ctx)
    # bytes(n) asks for zeroed pages it does not touch: without a limit it is granted and costs nothing
    code = "import os\nb = bytes(os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') * 3 // 4)\nprint('GRANTED')"
    out = flow.run({"code": code, "language": "python"})
    ctx.expect(
        "GRANTED" not in out["interpreter_output"].replace("print('GRANTED')", ""),
        "3/4 of the RAM was granted: no default memory limit",
    )
    ctx.expect("memory limit of" in out["interpreter_output"], f"the limit was not said: {out['interpreter_output']}")


@case(
    "kernel",
    "cpu_time_limit",
    slow=True,
    timeout=240,
    handled="with cpu_time_s: 3 in the interpreter's YAML, an "
    "endless loop is stopped by the CPU limit (failed, not by the 40 s timeout)",
    lost="none (nothing is written)",
)
def cpu_time_limit(ctx):
    flow = _limited_flow(ctx, cpu_time_s=3, timeout=40)
    out = flow.run({"code": "while True:\n    pass", "language": "python"})
    ctx.expect(
        out["failed"] and not out["timed_out"],
        f"failed {out['failed']}, timed out {out['timed_out']}: the CPU limit did not stop it",
    )


@case(
    "kernel",
    "bubblewrap_sandbox",
    slow=True,
    handled="with sandbox: bwrap, code cannot write outside the workspace",
    lost="a file outside the workspace is written",
)
def bubblewrap_sandbox(ctx):
    if not shutil.which("bwrap"):
        ctx.skip("bubblewrap (bwrap) is not installed")
    outside = ctx.path("outside.txt")
    outside.write_text("the user's file\n")
    workspace = ctx.path("workspace")
    workspace.mkdir()
    flow = _limited_flow(ctx, sandbox="bwrap", workspace=str(workspace))
    out = flow.run({"code": f"open({str(outside)!r}, 'w').write('overwritten')", "language": "python"})
    # The case's folder is under /tmp, which is the sandbox's own (an empty tmpfs): the write either fails or lands
    # there and is gone with the sandbox; the user's file must be as it was.
    ctx.expect(outside.read_text() == "the user's file\n", "the write outside the workspace reached the file")
    ctx.note("the write " + ("failed" if out["failed"] else "went to the sandbox's private /tmp"))
    ctx.keep(outside.read_text() == "the user's file\n", "the file outside the workspace was written")


# ~~~ Through run_jarvis.py ~~~
@case(
    "kernel",
    "cli_secrets_in_generated_code",
    slow=True,
    handled="exit 0: code run through Coder prints its "
    "environment and its ancestors' /proc environ; no secret of run_jarvis.py's environment (API key, passwords, "
    "credential URLs) reaches the logs, the terminal or the LLM",
    lost="jarvis_run.json or a log is corrupted",
)
def cli_secrets_in_generated_code(ctx):
    with LoopbackLLMServer(replies=coder_run(SHOW_ENVIRONMENT + "\n" + READ_ANCESTORS)) as server:
        done = jarvis(ctx, GOAL, server=server, env=SECRETS)
        sent = json.dumps([r["messages"] for r in server.requests])
    handled_exit(ctx, done, [0])
    memory = ctx.path("memory")
    logs = read(memory / "logs_coder.txt")
    ctx.expect("ANCESTORS" in logs, "the code did not run")
    for where, text in (("logs_coder.txt", logs), ("the terminal", done.text), ("the LLM's requests", sent)):
        ctx.expect(not _leaked(text), f"{where} shows {', '.join(_leaked(text))}")
    memory_whole(ctx, memory, goal=GOAL, run_file=True)


SLEEPERS = textwrap.dedent("""
    import subprocess
    a = subprocess.Popen(['sleep', '300'], start_new_session=True).pid
    b = subprocess.run(['bash', '-c', 'setsid sleep 301 >/dev/null 2>&1 </dev/null & echo $!'],
                       capture_output=True, text=True).stdout.strip()
    open('sleepers.txt', 'w').write(f'{a} {b}')
    print('started')
""")


@case(
    "kernel",
    "cli_children_outlive_jarvis",
    slow=True,
    handled="exit 0, and the processes generated code started "
    "in sessions of their own (setsid, double fork) are gone when Jarvis exits",
    lost="jarvis_run.json or a log is corrupted",
)
def cli_children_outlive_jarvis(ctx):
    with LoopbackLLMServer(replies=coder_run(SLEEPERS)) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    memory = ctx.path("memory")
    listed = ctx.folder / "sleepers.txt"  # written by the code, in the working folder (where Jarvis was started)
    pids = [int(p) for p in read(listed).split()] if listed.exists() else []
    ctx.expect(len(pids) == 2, "the sleepers did not start")
    ctx.expect(not [p for p in pids if alive(p)], f"{len([p for p in pids if alive(p)])} of them outlived Jarvis")
    no_processes_left(ctx, memory)
    memory_whole(ctx, memory, goal=GOAL, run_file=True)


# Shell code that leaves a daemon: double-forked, in a session of its own, with a cleared environment (no mark).
CLEAN_DAEMON = (
    "( setsid env -i bash -c 'echo $$ > daemon.txt; exec sleep 303' </dev/null >/dev/null 2>&1 & ); "
    "until [ -s daemon.txt ]; do sleep 0.01; done; echo started"
)


@case(
    "kernel",
    "cli_clean_daemon_outlives_a_killed_jarvis",
    slow=True,
    handled="shell code leaves a daemon "
    "(double fork, setsid, env -i: no mark), then Jarvis is killed with SIGKILL: the daemon is gone soon after",
    lost="none (the kill is the case)",
)
def cli_clean_daemon_outlives_a_killed_jarvis(ctx):
    replies = coder_run(CLEAN_DAEMON, language="bash")
    replies[-1] = Slow(60, replies[-1])  # Jarvis's next command (Coder finished by itself) comes after the kill
    pid_file = ctx.folder / "daemon.txt"
    with LoopbackLLMServer(replies=replies) as server:
        run = Run(ctx, GOAL, server=server).start()
        started = run.wait_until(lambda: pid_file.exists() and read(pid_file).strip().isdigit(), timeout=120)
        run.send(9)
        run.finish(timeout=30)
    if not ctx.expect(started, "the daemon did not start"):
        return
    pid = int(read(pid_file))

    def kill_it():
        if alive(pid):
            os.kill(pid, 9)

    ctx.on_exit(kill_it)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.expect(not alive(pid), "the daemon outlived the killed Jarvis")
