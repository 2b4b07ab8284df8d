"""Secrets: what code prints of a key it read from a file, and the password of an --api-base, reach no file and no
prompt; the review shows what is invisible."""

from __future__ import annotations

import json

from helpers import files_holding  # noqa: E402  (tests/ is on the path, as for support)

from ..harness import case
from ..support import (
    GOAL,
    HTTPError,
    LoopbackLLMServer,
    coder_run,
    fast_retry_config,
    handled_exit,
    jarvis,
    memory_whole,
    read,
)

KEY = "sk-proj-Fault7Suite3Key9Zq8XbW3nK2"
PASSWORD = "pw-Fault7Suite3Pass"


@case(
    "kernel",
    "code_prints_the_key_from_a_file",
    handled="exit 0; the OpenAI key, printed by code that read it "
    "from a file, is shown and sent as [redacted: OPENAI_API_KEY]: it is in no prompt, log, report, --trace or "
    "--record file",
    lost="a memory file is missing or corrupted",
)
def code_prints_the_key_from_a_file(ctx):
    netrc = ctx.path("home", ".netrc")
    netrc.parent.mkdir()
    netrc.write_text(f"machine api.openai.com login me password {KEY}\n")
    work = ctx.path("work")
    work.mkdir()
    with LoopbackLLMServer(replies=coder_run(f"print(open({str(netrc)!r}).read())")) as server:
        done = jarvis(
            ctx,
            "--trace",
            "trace.jsonl",
            "--record",
            "record.jsonl",
            GOAL,
            server=server,
            cwd=str(work),
            env={"OPENAI_API_KEY": KEY},
        )
        prompts = json.dumps([request["json"] for request in server.requests])
    handled_exit(ctx, done, [0], says=["[redacted: OPENAI_API_KEY]"], not_says=[KEY])
    ctx.expect(KEY not in prompts and "[redacted: OPENAI_API_KEY]" in prompts, "the key was sent in a prompt")
    leaked = files_holding(work, KEY)
    ctx.expect(not leaked, f"the key is written in {', '.join(leaked)}")
    memory_whole(ctx, work / "memory", goal=GOAL, run_file=True)


@case(
    "resume",
    "api_base_with_a_password",
    handled="a run stopped by its budget (exit 3): the password of --api-base "
    "http://user:PASSWORD@host is in no file (the run file keeps the URL without it, the report shows it so); "
    "--resume without it is exit 2 saying JARVIS_API_BASE_PASSWORD",
    lost="a memory file is missing or corrupted",
)
def api_base_with_a_password(ctx):
    with LoopbackLLMServer(replies=coder_run("print('hello')")) as server:
        host = server.url.split("://", 1)[1]
        done = jarvis(
            ctx, "--api-base", f"http://alice:{PASSWORD}@{host}", "--yes", "--max-calls", "2", GOAL, yes=False
        )
    handled_exit(ctx, done, [3], not_says=[PASSWORD])
    leaked = files_holding(ctx.folder, PASSWORD)
    ctx.expect(not leaked, f"the password is written in {', '.join(leaked)}")
    run_file = read(ctx.path("memory", "jarvis_run.json"))
    ctx.expect(
        f"http://alice@{host}" in run_file, f"the run file does not keep the URL without its password: {run_file[:300]}"
    )
    resumed = jarvis(ctx, "--resume", yes=False)
    handled_exit(ctx, resumed, [2], says=["JARVIS_API_BASE_PASSWORD"])
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True)


@case(
    "llm_outage",
    "server_error_holding_the_key",
    handled="exit 1 or 2: a 5xx then a 401 whose messages hold the "
    "OpenAI key are shown (the retry line, the last error) with it as [redacted: OPENAI_API_KEY]; it is in no file",
    lost="a memory file is missing or corrupted",
)
def server_error_holding_the_key(ctx):
    config = fast_retry_config(ctx)
    replies = [HTTPError(503, f"upstream refused the key {KEY}"), HTTPError(401, f"Incorrect API key provided: {KEY}")]
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, "--config", config, GOAL, server=server, env={"OPENAI_API_KEY": KEY})
    handled_exit(ctx, done, [1, 2], says=["retrying", "[redacted: OPENAI_API_KEY]"], not_says=[KEY])
    leaked = files_holding(ctx.folder, KEY)
    ctx.expect(not leaked, f"the key is written in {', '.join(leaked)}")
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True)


@case(
    "resume",
    "goal_with_a_password_in_a_url",
    handled="a run whose goal names https://bob:PASSWORD@host/file, "
    "stopped by its budget (exit 3), says once that the goal holds a password; the LLM is sent it, no file and no "
    "screen holds it (the run file keeps the URL without it); --resume without it is exit 2 saying "
    "JARVIS_GOAL_PASSWORD, with it the LLM gets it again",
    lost="a memory file is missing or corrupted",
)
def goal_with_a_password_in_a_url(ctx):
    url = f"https://bob:{PASSWORD}@example.com/prices.csv"
    goal = f"Read the last price in {url}."
    with LoopbackLLMServer(replies=coder_run("print('hello')")) as server:
        done = jarvis(
            ctx, "--trace", "trace.jsonl", "--record", "record.jsonl", "--max-calls", "2", goal, server=server
        )
        handled_exit(ctx, done, [3], says=["JARVIS_GOAL_PASSWORD"], not_says=[PASSWORD])
        ctx.expect(done.text.count("JARVIS_GOAL_PASSWORD") == 1, "the warning is not said once")
        ctx.expect(url in json.dumps(server.requests[0]["json"]), "the LLM was not sent the goal's URL whole")
        leaked = files_holding(ctx.folder, PASSWORD)
        ctx.expect(not leaked, f"the password is written in {', '.join(leaked)}")
        refused = jarvis(ctx, "--resume", server=server)
        handled_exit(ctx, refused, [2], says=["JARVIS_GOAL_PASSWORD"], not_says=[PASSWORD])
        resumed = jarvis(ctx, "--resume", "--max-calls", "1", server=server, env={"JARVIS_GOAL_PASSWORD": PASSWORD})
        handled_exit(ctx, resumed, [3], not_says=[PASSWORD])
        ctx.expect(
            len(server.requests) == 3 and url in json.dumps(server.requests[-1]["json"]),
            "the resumed run did not send the goal's URL whole",
        )
    leaked = files_holding(ctx.folder, PASSWORD)
    ctx.expect(not leaked, f"the password is written in {', '.join(leaked)}")
    memory_whole(ctx, ctx.path("memory"), goal=goal.replace(url, "https://bob@example.com/prices.csv"), run_file=True)
