"""LLM outages (5xx, timeouts, bodies that are not JSON or not UTF-8, refused connections, 401/429) and replies that
are not what a controller should write (prose, unknown commands, 100 KB names, plans replaced by "ok")."""

from __future__ import annotations

import json
import socket

from ..harness import case
from ..support import (
    ANSWER,
    BEL,
    ESC,
    GOAL,
    PLAN,
    Cut,
    HTTPError,
    LoopbackLLMServer,
    Malformed,
    Slow,
    command,
    demo,
    fast_retry_config,
    handled_exit,
    jarvis,
    memory_whole,
    no_processes_left,
    plan_kept,
    previous_run,
    previous_run_kept,
    read,
    short_run,
)


def _outage(ctx, failures, codes, says=(), then=(), **retry):
    """A short run whose first LLM call meets ``failures`` (then ``then``), with quick retries."""
    config = fast_retry_config(ctx, **retry)
    files = previous_run(ctx.path("memory"))
    with LoopbackLLMServer(replies=list(failures) + list(then)) as server:
        done = jarvis(ctx, "--config", config, GOAL, server=server)
    handled_exit(ctx, done, codes, says=says)
    previous_run_kept(ctx, ctx.path("memory"), files)
    return done, server


# ~~~ Outages ~~~
@case(
    "llm_outage",
    "5xx_then_a_reply",
    handled="exit 0 after two 5xx (one with escapes in its message), each retried with a line saying so, cleaned",
    lost="an earlier run's files or this run's run file are lost",
)
def server_errors_then_a_reply(ctx):
    _outage(
        ctx,
        [HTTPError(503, f"overloaded{ESC}]0;t{BEL}{ESC}[2K, later"), HTTPError(502)],
        [0],
        says=["overloaded, later", "retrying", "final answer"],
        then=short_run(),
    )


@case(
    "llm_outage",
    "5xx_for_good",
    handled="exit 1 after the retries, saying how many times the call failed and that --resume continues; no traceback",
    lost="an earlier run's files or this run's run file are lost",
)
def server_errors_for_good(ctx):
    _outage(ctx, [HTTPError(500)] * 4, [1], says=["failed 4 times", "--resume"])


@case(
    "llm_outage",
    "invalid_utf8_body",
    handled="exit 0: a 200 body that is not UTF-8 is retried like a malformed body, and the next reply is used",
    lost="an earlier run's files or this run's run file are lost",
)
def invalid_utf8_body(ctx):
    _outage(
        ctx,
        [Malformed(b'{"choices": [{"message": {"content": "\xff\xfe\xfd"}}]}\xff')],
        [0],
        says=["final answer"],
        then=short_run(),
    )


@case(
    "llm_outage",
    "malformed_json_body",
    slow=True,
    handled="exit 0: a 200 body that is not JSON is retried",
    lost="an earlier run's files or this run's run file are lost",
)
def malformed_json_body(ctx):
    _outage(ctx, [Malformed(b"{not json")], [0], says=["final answer"], then=short_run())


@case(
    "llm_outage",
    "html_error_page",
    slow=True,
    handled="exit 0: a proxy's 502 HTML page is retried",
    lost="an earlier run's files or this run's run file are lost",
)
def html_error_page(ctx):
    page = Malformed(
        b"<html><body><h1>502 Bad Gateway</h1>\x1b]0;t\x07</body></html>", status=502, content_type="text/html"
    )
    _outage(ctx, [page], [0], says=["final answer"], then=short_run())


@case(
    "llm_outage",
    "timeout_then_a_reply",
    slow=True,
    handled="exit 0: a reply slower than request_timeout (1 s) is given up and retried",
    lost="an earlier run's files or this run's run file are lost",
)
def timeout_then_a_reply(ctx):
    _outage(ctx, [Slow(8, PLAN)], [0], says=["final answer"], then=short_run(), request_timeout=1)


@case(
    "llm_outage",
    "no_reply_within_the_deadline",
    slow=True,
    handled="exit 1 when no reply comes within the call's deadline (3 s, retries included), saying so; no traceback",
    lost="an earlier run's files or this run's run file are lost",
)
def no_reply_within_the_deadline(ctx):
    _outage(ctx, [Slow(20, PLAN)] * 6, [1], says=["--resume"], request_timeout=1, call_deadline=3)


@case(
    "llm_outage",
    "connection_refused",
    handled="exit 1 when nothing listens at --api-base, saying it cannot connect; no traceback",
    lost="an earlier run's files or this run's run file are lost",
)
def connection_refused(ctx):
    config = fast_retry_config(ctx)
    files = previous_run(ctx.path("memory"))
    with socket.socket() as placeholder:  # a port nothing listens on
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    done = jarvis(ctx, "--config", config, "--api-base", f"http://127.0.0.1:{port}/v1", "--yes", GOAL)
    handled_exit(ctx, done, [1], says=["cannot connect"])
    previous_run_kept(ctx, ctx.path("memory"), files)


@case(
    "llm_outage",
    "connection_refused_is_not_retried",
    handled="exit 1 within 20 s with the default retry "
    "policy (a refused connection is not transient: it waited 66 s over 6 attempts), naming the URL",
    lost="an earlier run's files or this run's run file are lost",
)
def connection_refused_is_not_retried(ctx):
    files = previous_run(ctx.path("memory"))
    with socket.socket() as placeholder:  # a port nothing listens on
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    done = jarvis(ctx, "--api-base", url, "--yes", GOAL)
    ctx.figure("seconds", round(done.seconds, 1))
    handled_exit(ctx, done, [1], says=[f"nothing is listening at {url} (connection refused)"], not_says=["retrying"])
    ctx.expect(done.seconds < 20, f"the run took {done.seconds:.0f} s")
    previous_run_kept(ctx, ctx.path("memory"), files)


@case(
    "llm_outage",
    "redirect_is_not_followed",
    handled="exit 1 after one request: a 301 to https names the status, "
    "the Location and the --api-base to use, never as 'APIStatusError'",
    lost="an earlier run's files or this run's run file are lost",
)
def redirect_is_not_followed(ctx):
    moved = HTTPError(301, "moved", headers={"Location": "https://llm.example/v1/chat/completions"})
    done, server = _outage(
        ctx,
        [moved],
        [1],
        says=[
            "HTTP 301 Moved Permanently",
            "https://llm.example/v1/chat/completions",
            "--api-base https://llm.example/v1",
        ],
    )
    ctx.expect("APIStatusError" not in done.text, "the output says APIStatusError")
    ctx.expect(len(server.requests) == 1, f"{len(server.requests)} requests: the redirect was retried or followed")


@case(
    "llm_outage",
    "deeply_nested_body",
    handled="exit 1 after the retries: a body of 100,000 nested arrays is an "
    "invalid reply, said so, with no RecursionError on screen",
    lost="an earlier run's files or this run's run file are lost",
)
def deeply_nested_body(ctx):
    nested = Malformed(b"[" * 100_000 + b"]" * 100_000)
    done, server = _outage(ctx, [nested] * 4, [1], says=["failed 4 times", "nested too deeply"])
    ctx.expect("RecursionError" not in done.text and "recursion" not in done.text, "Python's RecursionError shows")


@case(
    "llm_outage",
    "401_is_not_retried",
    slow=True,
    handled="exit 1 or 2 after one request, naming the key problem",
    lost="an earlier run's files or this run's run file are lost",
)
def unauthorized(ctx):
    done, server = _outage(ctx, [HTTPError(401)], [1, 2], says=["API key"])
    ctx.expect(len(server.requests) == 1, f"{len(server.requests)} requests: a 401 was retried")


@case(
    "llm_outage",
    "api_base_with_user_and_password",
    handled="--api-base http://alice:PASSWORD@host: every request "
    "carries them as HTTP Basic authentication (the key is not sent), exit 0; a 401 then is not retried and blames "
    "the user name and password, not the API key; the password is never shown",
    lost="an earlier run's files or this run's run file are lost",
)
def api_base_with_user_and_password(ctx):
    import base64

    password = "pw-Fault5Basic9Auth"
    basic = "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
    with LoopbackLLMServer(replies=short_run() + [HTTPError(401, "Unauthorized")]) as server:
        api_base = server.url.replace("http://", f"http://alice:{password}@")
        done = jarvis(ctx, "--api-base", api_base, "--yes", GOAL, env={"OPENAI_API_KEY": "sk-proj-not-for-the-proxy"})
        handled_exit(ctx, done, [0], says=["final answer"], not_says=[password])
        sent = {request["headers"].get("authorization") for request in server.requests}
        ctx.expect(sent == {basic}, f"the requests carried {sorted(map(str, sent))[:3]}, not Basic alice:PASSWORD")
        refused = jarvis(ctx, "--api-base", api_base, "--yes", "Another goal.")
        handled_exit(
            ctx, refused, [1, 2], says=["refused the user name and password"], not_says=[password, "Check the API key"]
        )
        ctx.expect(
            len(server.requests) == len(short_run()) + 1, f"{len(server.requests)} requests: the 401 was retried"
        )
    memory_whole(ctx, ctx.path("memory"), run_file=True)


@case(
    "llm_outage",
    "429_retry_after",
    slow=True,
    handled="exit 0: a 429 with Retry-After: 1 is waited for and retried",
    lost="an earlier run's files or this run's run file are lost",
)
def rate_limited(ctx):
    _outage(ctx, [HTTPError(429, headers={"Retry-After": "1"})], [0], says=["final answer"], then=short_run())


@case(
    "llm_outage",
    "429_quota_used_up",
    slow=True,
    handled="exit 1 after one request: a used-up quota is not retried, and said",
    lost="an earlier run's files or this run's run file are lost",
)
def quota_used_up(ctx):
    quota = HTTPError(
        429, "You exceeded your current quota, please check your plan and billing details.", code="insufficient_quota"
    )
    done, server = _outage(ctx, [quota], [1], says=["quota"])
    ctx.expect(len(server.requests) == 1, f"{len(server.requests)} requests: a used-up quota was retried")


@case(
    "llm_outage",
    "empty_choices",
    slow=True,
    handled="no traceback: a completion without choices is retried "
    "(exit 0) or ends the run with a clear error (exit 1)",
    lost="an earlier run's files or run file are lost",
)
def empty_choices(ctx):
    empty = {"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4", "choices": []}
    _outage(ctx, [empty], [0, 1], then=short_run())


@case(
    "llm_outage",
    "stream_cut_off_mid_reply",
    handled="exit 0: a streamed plan whose connection closes mid-reply "
    "(a plain body, then a chunked one) is no reply: each is asked again with a line saying it was cut off, and "
    "the plan kept is the whole one",
    lost="an earlier run's files or this run's run file are lost",
)
def stream_cut_off_mid_reply(ctx):
    done, server = _outage(
        ctx,
        [Cut(PLAN, after=3), Cut(PLAN, after=5, chunked=True)],
        [0],
        says=["the streamed reply was cut off", "retrying", "final answer"],
        then=short_run(),
    )
    ctx.expect(plan_kept(ctx.path("memory"), PLAN), "the plan kept is not the whole plan")


@case(
    "llm_outage",
    "stream_ends_with_its_finish_reason_but_no_done",
    handled="exit 0 after one request per reply: "
    "replies whose last chunk has finish_reason stop, with no data: [DONE] and the connection held open, are whole",
    lost="an earlier run's files or this run's run file are lost",
)
def stream_ends_with_its_finish_reason_but_no_done(ctx):
    replies = short_run()
    done, server = _outage(
        ctx, [Cut(reply, finish=True, hold=True) for reply in replies], [0], says=["final answer"], request_timeout=30
    )
    ctx.expect("retrying" not in done.text, "a whole reply was asked again")
    ctx.expect(len(server.requests) == len(replies), f"{len(server.requests)} requests for {len(replies)} replies")
    ctx.expect(plan_kept(ctx.path("memory"), PLAN), "the plan kept is not the whole plan")


@case(
    "llm_outage",
    "outage_in_the_middle",
    slow=True,
    timeout=240,
    handled="the server fails for good after "
    "ExtendLibrary saved growth_rates: exit 1 with the --resume hint, no traceback, the kernel gone",
    lost="growth_rates (reported saved) missing from library.py; a log or jarvis_run.json corrupted",
)
def outage_in_the_middle(ctx):
    config = fast_retry_config(ctx)
    tested = next(i for i, reply in enumerate(demo().replies()) if '"test"' in reply)
    replies = demo().replies()[: tested + 1] + [HTTPError(500)] * 4  # saved: Coder's next call fails
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, "--config", config, demo().header["goal"], server=server)
    handled_exit(ctx, done, [1], says=["--resume"])
    no_processes_left(ctx, ctx.path("memory"))
    memory_whole(ctx, ctx.path("memory"), run_file=True, saved=["growth_rates"])


# ~~~ Replies that are not commands ~~~
@case(
    "malformed_reply",
    "prose_for_good",
    handled="exit 1: a controller that never writes a command is corrected, "
    "then stopped ('invalid replies'); no traceback",
    lost="the approved plan or jarvis_run.json is lost",
)
def prose_for_good(ctx):
    _never_a_command(ctx, "I think we are done here, thank you!")


def _never_a_command(ctx, reply: str) -> None:
    """After the plan, the controller answers ``reply`` to every call: it is corrected, then its loop stops."""
    with LoopbackLLMServer(replies=[PLAN] + [reply] * 12) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [1], says=["invalid replies"])
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True, plan=PLAN)


@case(
    "malformed_reply",
    "unknown_command_then_a_good_one",
    slow=True,
    handled="exit 0: an unknown command (with escapes in its name) is corrected and the next reply used",
    lost="the approved plan or the final answer is lost",
)
def unknown_command(ctx):
    replies = [PLAN, command(f"launch_missiles{ESC}]52;c;eA=={BEL}", target="moon")] + short_run()[1:]
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0], says=["final answer"])
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True, plan=PLAN)
    ctx.keep(ANSWER in read(ctx.path("memory", "logs_jarvis.txt")), "the final answer is not in the log")


@case(
    "malformed_reply",
    "command_name_of_100_kb",
    handled="exit 0, and the correction of a 100 KB command name "
    "does not echo it whole into the next request (which stays under 40 KB)",
    lost="the approved plan or the final answer is lost",
)
def command_name_of_100_kb(ctx):
    huge = json.dumps({"command": "x" * 100_000, "command_args": {}})
    with LoopbackLLMServer(replies=[PLAN, huge] + short_run()[1:]) as server:
        done = jarvis(ctx, GOAL, server=server)
        sizes = [sum(len(str(m.get("content") or "")) for m in r["messages"] or []) for r in server.requests]
    handled_exit(ctx, done, [0], says=["final answer"])
    ctx.figure("next request chars", sizes[2] if len(sizes) > 2 else None)
    ctx.expect(
        len(sizes) > 2 and sizes[2] < 40_000,
        f"the request after the 100 KB name holds {sizes[2:3]} characters: the name was echoed whole",
    )
    memory_whole(ctx, ctx.path("memory"), plan=PLAN)


@case(
    "malformed_reply",
    "nul_and_lone_surrogates",
    slow=True,
    handled="exit 0: a final answer holding NUL, DEL and a lone surrogate is shown (cleaned) and logged; no traceback",
    lost="the final answer is not in the log",
)
def nul_and_lone_surrogates(ctx):
    answer = "Forty\x00two\x7f is the answer \ud800 indeed."
    replies = [
        PLAN,
        json.dumps({"command": "final_answer", "command_args": {"answer": answer}}),
        command("finish", summary="Answered."),
    ]
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0], says=["Forty"])
    ctx.keep("is the answer" in read(ctx.path("memory", "logs_jarvis.txt")), "the final answer is not in the log")


@case(
    "malformed_reply",
    "deeply_nested_arguments",
    slow=True,
    handled="no traceback: a reply nested 100,000 "
    "levels deep is refused or corrected (exit 0 with the next reply, or 1)",
    lost="the approved plan is lost",
)
def deeply_nested_arguments(ctx):
    nested = '{"command": "final_answer", "command_args": {"answer": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    with LoopbackLLMServer(replies=[PLAN, nested] + short_run()[1:]) as server:
        # (the 200 KB reply is counted at gpt-4's price, over $10: the budget is not what this case tries)
        done = jarvis(ctx, GOAL, "--max-cost", "1000", server=server)
    handled_exit(ctx, done, [0, 1])
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True, plan=PLAN)


@case(
    "malformed_reply",
    "empty_replies_for_good",
    slow=True,
    handled="exit 1: empty replies are corrected, then the loop stops ('invalid replies')",
    lost="the approved plan or jarvis_run.json is lost",
)
def empty_replies(ctx):
    _never_a_command(ctx, "")


APPROVED = "1. Load the sales.\n2. Compute the growth.\n3. Plot it.\n4. Give the answer."


@case(
    "malformed_reply",
    "update_plan_ok_replaces_the_plan",
    handled="exit 0, and the controller is told that the steps of the approved plan were dropped",
    lost="the plan the user approved is neither in plan_jarvis.txt nor in memory/archive/",
)
def update_plan_ok(ctx):
    replies = [APPROVED, command("update_plan", updated_plan="ok")] + short_run()[1:]
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, GOAL, server=server)
        told = server.requests[2]["messages"][-1]["content"] if len(server.requests) > 2 else ""
    handled_exit(ctx, done, [0])
    ctx.expect("no longer in it" in told, "the controller was not told the plan lost its steps")
    ctx.keep(plan_kept(str(ctx.path("memory")), APPROVED), "the approved plan is lost")


@case(
    "malformed_reply",
    "re_plan_keeps_the_old_plan",
    slow=True,
    handled="exit 0 after a re_plan (new plan approved with --yes)",
    lost="the first approved plan is neither in plan_jarvis.txt nor in memory/archive/",
)
def re_plan(ctx):
    replies = [
        APPROVED,
        command("re_plan", goal="The data is in another file; plan again."),
        "1. Open the other file.\n2. Give the answer.",
    ] + short_run()[1:]
    with LoopbackLLMServer(replies=replies) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0])
    ctx.keep(plan_kept(str(ctx.path("memory")), APPROVED), "the first approved plan is lost")


@case(
    "malformed_reply",
    "plan_of_a_megabyte",
    slow=True,
    handled="no traceback, exit 0, 1 or 3 (the budget): a 1 "
    "MB plan is sent back to be shortened and never approved as it is; the output stays under 200 KB",
    lost="jarvis_run.json is missing or corrupted",
)
def plan_of_a_megabyte(ctx):
    big = "1. " + "Do everything. " * 70_000
    with LoopbackLLMServer(replies=[big] * 4 + short_run()) as server:
        done = jarvis(ctx, GOAL, server=server)
    handled_exit(ctx, done, [0, 1, 3])
    ctx.expect(len(done.out) < 200_000, f"{len(done.out)} characters printed")
    memory_whole(ctx, ctx.path("memory"), goal=GOAL, run_file=True)
