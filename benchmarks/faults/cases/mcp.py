"""MCP servers as users meet them: missing (`npx` not installed), crashing or hanging at start, printing to stdout,
leaving a process behind, a result of 10 MB, a tool that never answers under --max-time, a configuration that
cannot be used, a secret in `env`. run_autogpt.py (and run_jarvis.py, through Coder) runs in a child process
against the loopback server, with tests/mcp_stdio_server.py as the server, started in the case's folder (so a
server left running is a process working there)."""

from __future__ import annotations

import json
import os

from ..harness import ROOT, case
from ..support import (
    PLAN,
    PYTHON,
    LoopbackLLMServer,
    Run,
    command,
    handled_exit,
    memory_whole,
    no_processes_left,
    read,
)

RUN_AUTOGPT = os.path.join(ROOT, "run_autogpt.py")
SERVER = os.path.join(ROOT, "tests", "mcp_stdio_server.py")
GOAL = "Add 2 and 3 with the tools you have."


def config(ctx, **servers) -> str:
    """An mcpServers file in the case's folder; returns its path."""
    path = ctx.path("mcp.json")
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return str(path)


def server(*flags: str, **settings) -> dict:
    return {"command": PYTHON, "args": [SERVER, *flags], "needs_approval": False, **settings}


def autogpt(ctx, llm: LoopbackLLMServer, mcp: str, *args: str, timeout: float = 150):
    argv = [
        PYTHON,
        RUN_AUTOGPT,
        "--api-base",
        llm.url,
        "--yes",
        "--store",
        "faiss",
        "--memory-dir",
        str(ctx.path("memory")),
        "--mcp-config",
        mcp,
        *args,
    ]
    return Run(ctx, argv=argv).start().finish(timeout)


def _left_out(flags, says, name, handled, slow=True):
    @case("mcp", name, slow=slow, handled=handled, lost="the run file for --resume is missing")
    def check(ctx):
        mcp = config(
            ctx, broken=server(*flags, timeout=2) if flags else {"command": "npx-not-installed-here"}, works=server()
        )
        with LoopbackLLMServer(replies=[command("works__add", a=2, b=3), command("finish", answer="5")]) as llm:
            done = autogpt(ctx, llm, mcp, GOAL)
            offered = "works__add" in (llm.requests[0]["messages"][0]["content"] if llm.requests else "")
        handled_exit(
            ctx, done, [0], says=["MCP server broken is left out", *says, "The run goes on without its tools."]
        )
        ctx.expect(offered, "the server that works was not offered to the controller")
        ctx.expect(done.text.count("MCP server broken is left out") == 1, "the server was not said in one line")
        no_processes_left(ctx, ctx.folder, "the MCP servers")
        ctx.keep(ctx.path("memory", "autogpt_run.json").is_file(), "autogpt_run.json is missing")

    return check


_left_out(
    (),
    ["`npx-not-installed-here` was not found on PATH", "give its full path as `command`"],
    "server_not_installed",
    "a server whose program is not installed: exit 0, one line naming it and the "
    "program, the other server's tools used",
)
_left_out(
    ("--crash-at-start",),
    ["exited (exit code 3)", "cannot open the database", "mcp_logs/broken.log"],
    "server_crashes_at_start",
    "a server that exits at start: exit 0, one line with its exit code, the end of its log and where the log is",
    slow=False,
)
_left_out(
    ("--hang",),
    ["did not answer `initialize` within 2 s", "longer `timeout`"],
    "server_hangs_at_start",
    "a server that never answers initialize (timeout 2 s): exit 0, one line saying "
    "so and what to check, the server ended",
)
_left_out(
    ("--garbage",),
    ["not JSON-RPC on its stdout: 'Server listening on stdio'"],
    "server_prints_to_stdout",
    "a server that prints a banner on its stdout: exit 0, one line quoting it and saying stdout is the protocol's",
)


@case(
    "mcp",
    "sigterm_during_a_call_of_a_server_with_a_grandchild",
    slow=True,
    handled="SIGTERM while a tool runs, the server "
    "having started a process of its own: exit 143, 'Terminated.', the server and its grandchild ended",
    lost="the run file for --resume is missing",
)
def sigterm_with_grandchild(ctx):
    calls, grandchild = ctx.path("calls.jsonl"), ctx.path("grandchild.pid")
    mcp = config(ctx, t=server("--calls", str(calls), "--grandchild", str(grandchild)))
    with LoopbackLLMServer(replies=[command("t__sleep", seconds=600)]) as llm:
        argv = [
            PYTHON,
            RUN_AUTOGPT,
            "--api-base",
            llm.url,
            "--yes",
            "--store",
            "faiss",
            "--memory-dir",
            str(ctx.path("memory")),
            "--mcp-config",
            mcp,
            GOAL,
        ]
        run = Run(ctx, argv=argv).start()
        if not ctx.expect(run.wait_until(lambda: calls.exists() and "sleep" in read(calls)), "the call never started"):
            return
        pid = int(read(grandchild))
        run.send(15)
        done = run.finish(60)
    handled_exit(ctx, done, [143], says=["Terminated."])
    ctx.expect(
        not os.path.exists(f"/proc/{pid}") or "Z" == read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[0],
        "the server's grandchild outlived the run",
    )
    no_processes_left(ctx, ctx.folder, "the MCP server")
    ctx.keep(ctx.path("memory", "autogpt_run.json").is_file(), "autogpt_run.json is missing")


@case(
    "mcp",
    "tool_result_of_10_mb",
    slow=True,
    handled="a tool that returns 10 MB of text: exit 0, the controller reads 2,500 "
    "characters naming the file with the whole, which holds all of it; the whole run within 60 s",
    lost="the 10 MB result is not kept whole",
)
def result_of_10_mb(ctx):
    mcp = config(ctx, t=server())
    with LoopbackLLMServer(replies=[command("t__huge", chars=10_000_000), command("finish", answer="read")]) as llm:
        done = autogpt(ctx, llm, mcp, GOAL)
        # the observation, before the memories AutoGPT's message adds after it
        observed = (
            llm.requests[1]["messages"][-1]["content"].split("\n\nYour memories")[0] if len(llm.requests) > 1 else ""
        )
    handled_exit(ctx, done, [0])
    ctx.figure("seconds", round(done.seconds, 1))
    ctx.expect(
        "the result is 10,000,000 characters long: cut here" in observed,
        "the controller did not read the cut result naming its file",
    )
    ctx.expect(len(observed) < 4000, f"the controller read {len(observed):,} characters")
    saved = list(ctx.path("mcp_files").glob("*t__huge*.txt")) if ctx.path("mcp_files").is_dir() else []
    ctx.keep(len(saved) == 1 and saved[0].stat().st_size == 10_000_000, "the whole result is not in mcp_files/")
    ctx.expect(done.seconds < 60, f"the run took {done.seconds:.0f} s")


@case(
    "mcp",
    "tool_that_never_answers_under_max_time",
    slow=True,
    handled="a tool call that never ends (its timeout 600 s) "
    "under --max-time 8: exit 3 saying the budget was reached during the MCP tool, the server ended",
    lost="the run file for --resume is missing",
)
def tool_under_max_time(ctx):
    mcp = config(ctx, t=server(timeout=600))
    with LoopbackLLMServer(replies=[command("t__sleep", seconds=600)]) as llm:
        done = autogpt(ctx, llm, mcp, "--max-time", "8", GOAL, timeout=120)
    handled_exit(ctx, done, [3], says=["The run reached its budget during the MCP tool t__sleep", "--resume"])
    ctx.figure("seconds", round(done.seconds, 1))
    no_processes_left(ctx, ctx.folder, "the MCP server")
    ctx.keep(ctx.path("memory", "autogpt_run.json").is_file(), "autogpt_run.json is missing")


@case(
    "mcp",
    "configuration_with_an_unset_variable",
    handled="an mcpServers file using ${VAR} of a variable that is "
    "not set: exit 2 naming the key and the variable, before any LLM call and before the memory folder is touched",
    lost="the memory folder was changed",
)
def unset_variable(ctx):
    mcp = config(ctx, gh={"url": "https://example.invalid/mcp", "headers": {"Authorization": "Bearer ${NO_SUCH_VAR}"}})
    with LoopbackLLMServer(replies=[]) as llm:
        done = autogpt(ctx, llm, mcp, GOAL)
        ctx.expect(not llm.requests, "the LLM was called")
    handled_exit(
        ctx, done, [2], says=["mcpServers.gh.headers.Authorization: the environment variable NO_SUCH_VAR is not set"]
    )
    ctx.keep(not ctx.path("memory", "autogpt_run.json").exists(), "the refused run wrote its run file")


@case(
    "mcp",
    "secret_in_env_through_coder",
    slow=True,
    handled="a tool of Coder that prints the secret its server got in `env`: "
    "exit 0, the secret in no log, report, recording or output (redacted by name)",
    lost="the secret reached a file or the screen",
)
def secret_in_env(ctx):
    secret = "mcp-vault-secret-5150"
    mcp = config(ctx, t=server(env={"VAULT": secret}))
    replies = [
        PLAN,
        command("Coder", goal="Read the vault value.", completes_step=1),
        command("t__env", name="VAULT", completes_step=1),
        command("final_answer", answer="Read."),
    ]
    with LoopbackLLMServer(replies=replies) as llm:
        done = (
            Run(ctx, "--mcp-config", mcp, "--record", str(ctx.path("run.jsonl")), "Read the vault value.", server=llm)
            .start()
            .finish(150)
        )
        prompts = json.dumps([r["messages"] for r in llm.requests])
    handled_exit(ctx, done, [0])
    memory = ctx.path("memory")
    ctx.expect(
        "[redacted: MCP server t: env VAULT]" in read(memory / "logs_coder.txt"),
        "Coder's log does not show the redacted value",
    )
    for name in ("logs_coder.txt", "report.html"):
        ctx.keep(secret not in read(memory / name), f"the secret is in {name}")
    ctx.keep(secret not in read(ctx.path("run.jsonl")), "the secret is in the recording")
    ctx.keep(secret not in done.text, "the secret was shown")
    ctx.keep(secret not in prompts, "the secret was sent to the LLM")
    memory_whole(ctx, memory, run_file=True)
