"""Secrets the process knows never leave it: what code prints of them is redacted by value from the prompts, the logs,
the report, the trace and the recording; a password in --api-base is kept in no file, and --resume takes it from the
environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import DEMO, RUN_JARVIS, files_holding
from loopback_llm import LoopbackLLMServer
from subprocess_guard import network_guarded

from aiflows_jarvis.ChatFlowModule import Transcript
from aiflows_jarvis.CoreFlowModule import (
    get_console,
    redact,
    redact_data,
    remember_secret,
    with_credentials,
    without_credentials,
)
from aiflows_jarvis.CoreFlowModule.run.redaction import known_secret_names
from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter, secrets_to_redact

KEY = "sk-proj-Zq8XbW3nK2LmP0tRv7YsA1cD"
PASSWORD = "pw-Hj4kL9mN2bV8"


# ~~~ The registry ~~~
def test_a_remembered_value_is_redacted_by_name_wherever_it_is():
    remember_secret("OPENAI_API_KEY", KEY)
    assert redact(f"export OPENAI_API_KEY={KEY}\n") == "export OPENAI_API_KEY=[redacted: OPENAI_API_KEY]\n"
    assert redact_data({"messages": [{"content": f"key: {KEY}"}]}) == {
        "messages": [{"content": "key: [redacted: OPENAI_API_KEY]"}]
    }
    assert known_secret_names() == ["OPENAI_API_KEY"], "names only, never values"


def test_text_without_a_secret_is_the_same_string_and_short_values_are_not_remembered():
    text = "nothing secret here, 12345"
    assert redact(text) is text, "nothing remembered: nothing done"
    remember_secret("DB_PASS", "1")
    remember_secret("OPENAI_API_KEY", KEY)
    assert redact(text) is text, "a value too short to be told from ordinary text is not redacted"


def test_a_secret_with_quotes_is_redacted_inside_json_too():
    remember_secret("WEIRD_TOKEN", 'ab"cd\\ef-0123456')
    line = json.dumps({"output": 'token ab"cd\\ef-0123456'})
    assert "[redacted: WEIRD_TOKEN]" in redact(line) and "0123456" not in redact(line)


def test_a_url_with_a_password_is_redacted_whole_and_its_password_alone():
    remember_secret("DATABASE_URL", f"postgres://app:{PASSWORD}@db.local/sales")
    assert (
        redact(f"url postgres://app:{PASSWORD}@db.local/sales, password {PASSWORD}")
        == "url [redacted: DATABASE_URL], password [redacted: DATABASE_URL]"
    )


def test_credentials_come_out_of_a_url_and_go_back_in():
    assert without_credentials(f"http://alice:{PASSWORD}@h:8000/v1") == ("http://alice@h:8000/v1", PASSWORD)
    assert without_credentials("https://ghp_abcdefghijklmnopqrstuv@git.example/x") == (
        "https://git.example/x",
        "ghp_abcdefghijklmnopqrstuv",
    )
    assert without_credentials("http://localhost:8000/v1") == ("http://localhost:8000/v1", None)
    assert with_credentials("http://alice@h:8000/v1", "p@ss") == "http://alice:p%40ss@h:8000/v1"
    assert with_credentials("https://git.example/x", "tok") == "https://tok@git.example/x"
    assert without_credentials("http://alice@h/v1") == ("http://alice@h/v1", None), "a user name is no token"


def test_the_interpreter_says_which_secrets_it_keeps_from_the_code_but_not_endpoints():
    env = {
        "OPENAI_API_KEY": KEY,
        "OPENAI_API_BASE": "https://api.openai.com/v1",
        "AZURE_API_VERSION": "2023-07-01",
        "DATABASE_URL": f"postgres://app:{PASSWORD}@db/sales",
        "HOME": "/home/u",
    }
    assert secrets_to_redact(base=env) == {"OPENAI_API_KEY": KEY, "DATABASE_URL": env["DATABASE_URL"]}


# ~~~ The interpreter: what code prints of a secret it read from a file comes back redacted ~~~
def test_code_that_prints_the_key_from_a_file_gets_it_back_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (tmp_path / ".bashrc").write_text(f"export OPENAI_API_KEY={KEY}\n")
    with CodeInterpreter(str(tmp_path), timeout=30) as interpreter:
        result = interpreter.run("cat .bashrc; echo done", "shell")
    assert KEY not in result.output and "OPENAI_API_KEY=[redacted: OPENAI_API_KEY]" in result.output, result.output


def test_the_environments_secrets_are_looked_for_again_only_when_it_changed(tmp_path, monkeypatch):
    """Looking through the environment costs more than a warm run itself: it is done again only when the
    environment changed, and a secret set between two runs is still redacted from the second."""
    from aiflows_jarvis.InterpreterFlowModule import interpreter as interpreter_module

    looks = []
    monkeypatch.setattr(
        interpreter_module, "secrets_to_redact", lambda *args: looks.append(1) or secrets_to_redact(*args)
    )
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (tmp_path / "later.txt").write_text("sk-later-0123456789abcdef0123")
    with CodeInterpreter(str(tmp_path), timeout=30) as interpreter:
        interpreter.run("true", "shell")
        interpreter.run("true", "shell")
        assert len(looks) == 1, "the environment did not change: not looked through again"
        monkeypatch.setenv("LATER_TOKEN", "sk-later-0123456789abcdef0123")
        result = interpreter.run("cat later.txt", "shell")
    assert len(looks) == 2 and "[redacted: LATER_TOKEN]" in result.output, result.output


# ~~~ The command line: nothing written or sent holds the key or the --api-base password ~~~
def _jarvis(cwd, *args, env_extra=None, timeout=240):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_", "FAKE_EDITOR"))}
    env.update({"NO_COLOR": "1", "OPENAI_API_KEY": KEY, **(env_extra or {})})
    with network_guarded(env) as guarded:
        return subprocess.run(
            [sys.executable, RUN_JARVIS, *args],
            cwd=cwd,
            env=guarded,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def test_a_key_printed_by_code_and_the_api_base_password_reach_no_file_and_no_prompt(tmp_path):
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.parent.mkdir()
    bashrc.write_text(f"export OPENAI_API_KEY={KEY}\n")
    replies = Transcript.load(DEMO).replies()
    at = next(i for i, reply in enumerate(replies) if '"run_code"' in reply)  # the demo's first run_code
    run_code = json.loads(replies[at])
    run_code["command_args"]["code"] = f"print(open({str(bashrc)!r}).read())\n" + run_code["command_args"]["code"]
    replies[at] = json.dumps(run_code)
    work = tmp_path / "work"
    work.mkdir()
    calls = at + 2  # the run_code's result goes to Coder's next prompt, then the budget stops the run
    with LoopbackLLMServer(replies=replies[: calls + 1]) as server:
        host = server.url.split("://", 1)[1]
        done = _jarvis(
            work,
            "--api-base",
            f"http://alice:{PASSWORD}@{host}",
            "--yes",
            "--max-calls",
            str(calls),
            "--trace",
            "trace.jsonl",
            "--record",
            "record.jsonl",
            Transcript.load(DEMO).header["goal"],
        )
        assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-2000:]
        prompts = json.dumps([request["json"] for request in server.requests])  # not the headers: the key is sent
        assert KEY not in prompts and "[redacted: OPENAI_API_KEY]" in prompts, "the next prompts say it was redacted"
        assert files_holding(work, KEY, PASSWORD) == [], "neither the key nor the password is in any file"
        memory = work / "memory"
        assert "[redacted: OPENAI_API_KEY]" in (memory / "logs_coder.txt").read_text()
        assert "[redacted: OPENAI_API_KEY]" in (work / "trace.jsonl").read_text()
        assert "[redacted: OPENAI_API_KEY]" in (work / "record.jsonl").read_text()
        run_file = json.loads((memory / "jarvis_run.json").read_text())
        assert run_file["api_base"] == f"http://alice@{host}" and run_file["api_base_password"] is True
        assert f"at http://alice@{host}" in (memory / "report.html").read_text(), "the server, without its password"

        # --resume: the URL comes from the run file, its password from the environment, else the user is told how
        refused = _jarvis(work, "--resume")
        assert refused.returncode == 2 and "JARVIS_API_BASE_PASSWORD" in refused.stdout + refused.stderr, (
            refused.stdout[-2000:] + refused.stderr[-2000:]
        )
        resumed = _jarvis(work, "--resume", "--max-calls", "1", env_extra={"JARVIS_API_BASE_PASSWORD": PASSWORD})
        assert len(server.requests) == calls + 1, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert resumed.returncode == 3, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert files_holding(work, KEY, PASSWORD) == []


def test_each_file_a_run_writes_redacts_what_reached_it_another_way(tmp_path):
    """The sinks redact on their own: a secret that did not come through the interpreter (an LLM reply, a tool)
    is caught as it is written."""
    from aiflows.messages import Message

    from aiflows_jarvis.app.report_html import esc
    from aiflows_jarvis.ChatFlowModule.transcripts import TranscriptRecorder
    from aiflows_jarvis.CoreFlowModule import append_log_entry
    from aiflows_jarvis.CoreFlowModule.flows.lean import RunTrace

    remember_secret("OPENAI_API_KEY", KEY)
    append_log_entry(str(tmp_path / "logs.txt"), "run_code", {"code": f"print('{KEY}')"}, f"key={KEY}")
    trace = RunTrace(str(tmp_path / "trace.jsonl"))
    trace.write("Jarvis", Message(data={"reply": f"the key is {KEY}"}, created_by="test"))
    trace.close()
    recorder = TranscriptRecorder(str(tmp_path / "record.jsonl"), goal=f"use {KEY}")
    recorder.record("Jarvis", [{"role": "user", "content": KEY}], f"ok {KEY}")
    recorder.close()
    assert files_holding(tmp_path, KEY) == []
    assert all(
        "[redacted: OPENAI_API_KEY]" in (tmp_path / name).read_text()
        for name in ("logs.txt", "trace.jsonl", "record.jsonl")
    )
    assert esc(f"<{KEY}>") == "&lt;[redacted: OPENAI_API_KEY]&gt;"


# ~~~ The console ~~~
def test_what_the_console_shows_is_redacted_however_it_is_cut_into_lines():
    import io

    from aiflows_jarvis.CoreFlowModule import Console

    remember_secret("OPENAI_API_KEY", KEY)
    out = io.StringIO()
    console = Console(stream=out, color=False, width=30)  # lines cut at 30 columns: the key would be cut in two
    console.line("warning", f"Asker: Incorrect API key provided: {KEY}; retrying")
    console.show("error", f"The server said: {KEY}", f"body: {KEY}")
    console.step("Jarvis", "run_code", {"code": f"print('{KEY}')"})
    console.write(f"\x1b[1m{KEY[:10]}\x1b[0m{KEY[10:]}")  # joined again once its escape sequences are gone
    shown = "".join(out.getvalue().split())  # the lines joined again
    assert KEY not in shown and KEY[:10] not in shown
    assert shown.count("[redacted:OPENAI_API_KEY]") == 5, out.getvalue()


def test_a_server_error_holding_the_key_is_shown_redacted(quiet_console, run_context):
    from aiflows.backends.api_info import ApiInfo
    from loopback_llm import HTTPError

    from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, with_api_infos
    from aiflows_jarvis.CoreFlowModule import LLMCallError

    with LoopbackLLMServer(
        [HTTPError(500, f"bad request with key {KEY}"), HTTPError(401, f"Incorrect API key provided: {KEY}")]
    ) as server:
        run_context.backend_factory = with_api_infos([ApiInfo(backend_used="openai", api_key=KEY, api_base=server.url)])
        chat = ChatAtomicFlow.instantiate_from_default_config(name="Asker", retry={"initial_delay": 0.01})
        with pytest.raises(LLMCallError) as caught:
            chat.call({"query": "hi"})
    get_console().line("error", str(caught.value))  # as the command line ends a run
    assert "retrying" in quiet_console.text and "[redacted: OPENAI_API_KEY]" in quiet_console.text
    assert KEY not in quiet_console.text


# ~~~ A password in a URL of the goal ~~~
GOAL_URL = "https://bob:s3cret@example.com/data.csv"
GOAL_WITH_PASSWORD = f"Download the prices from {GOAL_URL} and say the last one."


def test_a_password_in_a_url_of_the_goal_reaches_the_llm_but_no_file_and_resume_takes_it_from_the_environment(tmp_path):
    from fakes import command

    work = tmp_path / "work"
    work.mkdir()
    replies = ["1. Download the file and read its last price.", command("final_answer", answer="42")]
    with LoopbackLLMServer(replies=replies) as server:
        done = _jarvis(
            work,
            "--api-base",
            server.url,
            "--yes",
            "--max-calls",
            "1",
            "--trace",
            "trace.jsonl",
            "--record",
            "record.jsonl",
            GOAL_WITH_PASSWORD,
        )
        assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-2000:]
        assert GOAL_URL in json.dumps(server.requests[0]["json"]), "the LLM needs it"
        warnings = [line for line in done.stdout.splitlines() if "JARVIS_GOAL_PASSWORD" in line]
        assert len(warnings) == 1 and "https://bob@example.com/data.csv" in warnings[0], done.stdout[:3000]
        assert "s3cret" not in done.stdout + done.stderr, "the console shows it redacted"
        assert files_holding(work, "bob:s3cret") == []
        assert "[redacted: password in the goal]" in (work / "trace.jsonl").read_text()
        assert "[redacted: password in the goal]" in (work / "record.jsonl").read_text()
        run_file = json.loads((work / "memory" / "jarvis_run.json").read_text())
        assert run_file["goal"] == GOAL_WITH_PASSWORD.replace(GOAL_URL, "https://bob@example.com/data.csv")
        assert run_file["goal_passwords"] == ["https://bob@example.com/data.csv"]

        refused = _jarvis(work, "--api-base", server.url, "--resume")
        assert refused.returncode == 2 and "JARVIS_GOAL_PASSWORD" in refused.stdout + refused.stderr, (
            refused.stdout[-2000:] + refused.stderr[-2000:]
        )
        assert len(server.requests) == 1
        resumed = _jarvis(
            work, "--api-base", server.url, "--resume", "--max-calls", "1", env_extra={"JARVIS_GOAL_PASSWORD": "s3cret"}
        )
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]  # answer accepted: the end
        assert len(server.requests) == 2 and GOAL_URL in json.dumps(server.requests[1]["json"])
        assert "was stopped during this task and is resumed" in json.dumps(server.requests[1]["json"]), (
            "the same task, resumed"
        )
    assert files_holding(work, "bob:s3cret") == []


def test_the_goal_given_again_with_its_password_resumes_the_run():
    from types import SimpleNamespace

    from aiflows_jarvis.app.jarvis import JARVIS
    from aiflows_jarvis.app.resume import RESUMED, apply_previous

    previous = {
        "goal": GOAL_WITH_PASSWORD.replace(GOAL_URL, "https://bob@example.com/data.csv"),
        "goal_passwords": ["https://bob@example.com/data.csv"],
    }
    args = SimpleNamespace(goal=GOAL_WITH_PASSWORD, yes=None, **{name: None for name in RESUMED + JARVIS.resumed})
    apply_previous(JARVIS, args, previous, "memory")
    assert args.goal == GOAL_WITH_PASSWORD


def test_a_password_of_the_goal_is_shown_redacted_in_its_url_but_sent_to_the_llm():
    from aiflows_jarvis.app.launcher import remember_goal_passwords

    token = "ghp_0123456789abcdefghij0123"
    goal = f"{GOAL_WITH_PASSWORD} Then push to https://{token}@github.com/bob/prices.git."
    assert remember_goal_passwords(goal) == ["https://bob@example.com/data.csv", "https://github.com/bob/prices.git"]
    assert redact(goal) == (
        "Download the prices from https://bob:[redacted: password in the goal]@example.com/data.csv"
        " and say the last one. Then push to https://[redacted: password in the goal]@github.com/"
        "bob/prices.git."
    )
    assert redact(goal, outgoing=True) is goal and redact_data([{"content": goal}], outgoing=True)[0]["content"] == goal
    assert json.dumps(goal)[1:-1] not in redact(json.dumps({"goal": goal})) and "s3cret" not in redact(json.dumps(goal))
    assert remember_goal_passwords("x" * 1_000_000 + "://" + "y" * 1_000_000 + "@") == [], "linear in a long goal"
    remember_secret("JARVIS_GOAL_PASSWORD", PASSWORD)  # as the environment of --resume makes it known first
    resumed = f"Read https://bob:{PASSWORD}@example.com/x.csv"
    remember_goal_passwords(resumed)
    assert redact(resumed, outgoing=True) == resumed and PASSWORD not in redact(resumed)
