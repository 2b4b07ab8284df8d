"""Tools from MCP servers for both agents, through their command lines with the loopback LLM and the small servers
of mcp_stdio_server.py / mcp_http_server.py: listing, calls, the step line, the usage and the report, record and
replay offline, secrets, approval, bad configurations, and SIGTERM or Ctrl+C in the middle of a call with nothing
left running."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys

import pytest
from fakes import command
from helpers import left_running, stdio
from loopback_llm import LoopbackLLMServer
from mcp_http_server import MCPHTTPServer
from subprocess_guard import network_guarded
from waiting import wait_until

from aiflows_jarvis.CoreFlowModule import ScriptedInput

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_autogpt = pytest.mark.skipif(
    not (importlib.util.find_spec("chromadb") and importlib.util.find_spec("langchain_community")),
    reason='AutoGPT needs its extra: pip install -e ".[autogpt]"',
)


def said(quiet_console) -> str:
    return " ".join(quiet_console.text.split())  # (long lines are wrapped on quiet_console)


# ~~~ Through the command lines ~~~
def mcp_config(tmp_path, **servers) -> str:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def answer_tools(reply_after_listing):
    """A scripted reply that checks the prompt offers the MCP tools."""

    def reply(body):
        head = body["messages"][0]["content"]
        assert "t__add: Add two whole numbers. Input arguments: a (integer), b (integer)" in head, head[-2000:]
        return reply_after_listing

    return reply


@needs_autogpt
def test_autogpt_lists_and_calls_mcp_tools_records_them_and_replays_offline(tmp_path, quiet_console, loopback):
    from aiflows_jarvis.app import autogpt

    calls = tmp_path / "calls.jsonl"
    config = mcp_config(tmp_path, t=stdio(tmp_path, "--calls", str(calls), "--grandchild", str(tmp_path / "pid")))
    loopback.add(
        answer_tools(command("t__add", a=2, b=3)),
        command("t__fail", message="the sum is odd"),
        command("finish", answer="2 + 3 = 5"),
    )
    record = tmp_path / "run.jsonl"
    argv = [
        "--api-base",
        loopback.url,
        "--memory-dir",
        str(tmp_path / "m"),
        "--yes",
        "--store",
        "faiss",
        "--mcp-config",
        config,
        "--record",
        str(record),
        "--trace",
        str(tmp_path / "trace.jsonl"),
        "What is 2 + 3?",
    ]
    assert autogpt.main(argv) == 0, quiet_console.text[-3000:]
    text = said(quiet_console)
    assert "MCP server t: 9 tools offered (add, echo, fail," in text
    assert "AutoGPT > t__add (MCP server t) a: 2 b: 3" in text, "the step line names the server and the tool"
    observed = [r["messages"][-1]["content"] for r in loopback.requests if r.get("messages")]
    assert observed[1].startswith("Here is the observation of your previous command:\n5")
    assert "The tool reported an error: the sum is odd" in observed[2], "a tool error is an observation"
    assert "MCP tool calls: t 2 (1 failed," in text, "the usage summary counts calls per server"
    report = (tmp_path / "m" / "autogpt_report.html").read_text()  # AutoGPT's report, beside Jarvis's
    assert "t__add" in report and "<th>MCP server</th>" in report, "a step of the run, and the usage"
    assert len(calls.read_text().splitlines()) == 2
    assert not left_running(tmp_path), "the server stopped with the run, and the process it started"

    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    kept = recorded[0]["mcp_servers"]["t"]
    assert kept["needs_approval"] is True and "command" not in kept and "env" not in kept, "settings, not secrets"
    assert [r["input"] for r in recorded if r["type"] == "tool"][:2] == [
        {"method": "tools/list"},
        {"tool": "add", "arguments": {"a": 2, "b": 3}},
    ]
    quiet_console.text = ""
    replay = ["--replay", str(record), "--memory-dir", str(tmp_path / "replayed"), "--yes", "--store", "faiss"]
    assert autogpt.main(replay) == 0, quiet_console.text[-3000:]
    assert "2 + 3 = 5" in quiet_console.text and "The tool reported an error: the sum is odd" in quiet_console.text
    assert len(calls.read_text().splitlines()) == 2, "the replay called no server: the results are the recording's"
    assert not left_running(tmp_path)


@needs_autogpt
def test_autogpt_uses_a_streamable_http_server_with_a_token_from_the_environment(
    tmp_path, quiet_console, loopback, monkeypatch
):
    from aiflows_jarvis.app import autogpt

    monkeypatch.setenv("NOTES_TOKEN", "notes-token-4242")
    with MCPHTTPServer(sse=True, token="notes-token-4242") as web:
        config = mcp_config(
            tmp_path,
            notes={"url": web.url, "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}, "needs_approval": False},
        )
        loopback.add(command("notes__echo", text="over http"), command("finish", answer="done"))
        argv = [
            "--api-base",
            loopback.url,
            "--memory-dir",
            str(tmp_path / "m"),
            "--yes",
            "--store",
            "faiss",
            "--mcp-config",
            config,
            "Say something over HTTP.",
        ]
        assert autogpt.main(argv) == 0, quiet_console.text[-3000:]
        assert web.deleted, "the session was ended with the run"
    assert "over http" in loopback.requests[1]["messages"][-1]["content"]
    assert "Call the tool" not in quiet_console.text, "needs_approval: false"


@needs_autogpt
def test_without_yes_the_user_approves_each_call_and_a_refusal_is_the_observation(
    tmp_path, quiet_console, loopback, run_context
):
    from aiflows_jarvis.app import autogpt

    calls = tmp_path / "calls.jsonl"
    user = ScriptedInput(["not this one", ""])  # the tool's approval, then AutoGPT's feedback
    run_context.input_source = user
    loopback.add(command("t__add", a=1, b=2), command("finish", answer="not computed"))
    argv = [
        "--api-base",
        loopback.url,
        "--memory-dir",
        str(tmp_path / "m"),
        "--store",
        "faiss",
        "--mcp-config",
        mcp_config(tmp_path, t=stdio(tmp_path, "--calls", str(calls))),
        "What is 1 + 2?",
    ]
    assert autogpt.main(argv) == 0, quiet_console.text[-3000:]
    assert user.asked[0]["kind"] == "approval" and "Call the tool add of the MCP server t" in user.asked[0]["prompt"]
    assert (
        "The user did not let the tool add run. They said: not this one"
        in loopback.requests[1]["messages"][-1]["content"]
    )
    assert not calls.exists(), "the server was not called"
    assert not left_running(tmp_path)


def test_jarvis_offers_mcp_tools_to_coder_keeps_the_env_secret_out_of_files_and_saves_images(
    tmp_path, quiet_console, loopback, monkeypatch
):
    from aiflows_jarvis.app import jarvis

    monkeypatch.chdir(tmp_path)
    secret = "vault-secret-31337"
    config = mcp_config(tmp_path, t=stdio(tmp_path, env={"VAULT": secret}))
    loopback.add(
        "1. Read the vault value and draw the picture with the MCP tools.",
        command("Coder", goal="Read the vault value and draw the picture.", completes_step=1),
        command("t__env", name="VAULT"),
        command("t__image", completes_step=1),
        command("final_answer", answer="Done: the picture is saved."),
    )
    argv = [
        "--api-base",
        loopback.url,
        "--memory-dir",
        str(tmp_path / "m"),
        "--yes",
        "--mcp-config",
        config,
        "--record",
        str(tmp_path / "run.jsonl"),
        "--trace",
        str(tmp_path / "trace.jsonl"),
        "Read the vault value and draw the picture.",
    ]
    assert jarvis.main(argv) == 0, quiet_console.text[-3000:]
    heads = [
        (r["messages"][0]["content"].split("\n")[0], "t__env" in r["messages"][0]["content"]) for r in loopback.requests
    ]
    assert [offered for head, offered in heads if head.startswith("You are Coder")] == [True, True]
    assert not any(offered for head, offered in heads if not head.startswith("You are Coder")), (
        "only Coder's controller is offered the tools"
    )
    log = (tmp_path / "m" / "logs_coder.txt").read_text()
    assert "t__env" in log and "t__image" in log and "[redacted: MCP server t: env VAULT]" in log
    (image,) = (tmp_path / "mcp_files").glob("*.png")
    assert f"saved to mcp_files/{image.name}" in log, "the image went to the working folder, named in the result"
    for written in ("m/logs_coder.txt", "m/report.html", "run.jsonl", "trace.jsonl"):
        assert secret not in (tmp_path / written).read_text(), f"the env secret reached {written}"
    assert secret not in quiet_console.text
    assert secret not in "".join(json.dumps(r["messages"]) for r in loopback.requests), "nor the prompts"
    assert image.name in (tmp_path / "m" / "report.html").read_text(), "the report shows the image the tool made"
    assert not left_running(tmp_path)


def test_a_configuration_that_cannot_be_used_stops_the_run_before_anything_is_touched(
    tmp_path, quiet_console, loopback
):
    from aiflows_jarvis.app import jarvis

    config = mcp_config(tmp_path, t={"command": "x", "env": {"KEY": "${MCP_TEST_UNSET}"}})
    argv = ["--api-base", loopback.url, "--memory-dir", str(tmp_path / "m"), "--mcp-config", config, "a goal"]
    assert jarvis.main(argv) == 2
    assert "mcpServers.t.env.KEY: the environment variable MCP_TEST_UNSET is not set" in said(quiet_console)
    assert not loopback.requests and not (tmp_path / "m" / "jarvis_run.json").exists()


def test_a_replay_answers_from_its_recording_so_mcp_config_does_not_apply(capsys):
    from aiflows_jarvis.app import jarvis

    with pytest.raises(SystemExit) as refused:
        jarvis.parse_args(["--replay", "run.jsonl", "--mcp-config", "mcp.json"])
    assert refused.value.code == 2 and "--mcp-config" in capsys.readouterr().err


@needs_autogpt
@pytest.mark.parametrize("signum, code, says", [(signal.SIGTERM, 143, "Terminated."), (signal.SIGINT, 130, "Stopped.")])
def test_a_signal_during_a_tool_call_ends_the_run_and_every_process_of_the_server(tmp_path, signum, code, says):
    calls, grandchild = tmp_path / "calls.jsonl", tmp_path / "grandchild.pid"
    config = mcp_config(
        tmp_path, t=stdio(tmp_path, "--calls", str(calls), "--grandchild", str(grandchild), needs_approval=False)
    )
    with LoopbackLLMServer(replies=[command("t__sleep", seconds=600)]) as llm:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        with network_guarded(dict(env, NO_COLOR="1")) as guarded:
            run = subprocess.Popen(
                [
                    sys.executable,
                    os.path.join(ROOT, "run_autogpt.py"),
                    "--api-base",
                    llm.url,
                    "--memory-dir",
                    str(tmp_path / "m"),
                    "--yes",
                    "--store",
                    "faiss",
                    "--mcp-config",
                    config,
                    "Wait for a long time.",
                ],
                cwd=tmp_path,
                env=guarded,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            try:
                wait_until(lambda: calls.exists() and "sleep" in calls.read_text(), "the tool call to start")
                assert left_running(tmp_path), "the server (and its grandchild) run"
                run.send_signal(signum)  # (Ctrl+C with --yes: nobody to ask what to do instead, the run stops)
                out, _ = run.communicate(timeout=120)
            finally:
                if run.poll() is None:
                    run.kill()
                    run.wait()
    assert run.returncode == code, out[-2000:]
    assert says in out and "Traceback" not in out
    assert not left_running(tmp_path), "the server and what it started ended with the run"


def test_the_readmes_example_is_a_configuration_both_command_lines_take(tmp_path):
    from aiflows_jarvis.app import autogpt, jarvis
    from aiflows_jarvis.MCPToolFlowModule import load_servers

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("\n## Tools from MCP servers\n", 1)[1].split("\n## ", 1)[0]
    (tmp_path / "mcp.json").write_text(section.split("```json\n", 1)[1].split("```", 1)[0])
    notes, github = load_servers(str(tmp_path / "mcp.json"), environ={"HOME": "/home/ada", "GITHUB_TOKEN": "ghp_1"})
    assert notes.command == "npx" and notes.args[-1] == "/home/ada/notes"
    assert github.headers == {"Authorization": "Bearer ghp_1"} and github.offers("get_issue")
    lines = section.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    for line, app in zip(lines, (jarvis, autogpt)):
        words = line.split(" ", 2)
        assert words[:2] == [".venv/bin/python", f"run_{app.__name__.split('.')[-1]}.py"], line
        args = app.parse_args(words[2].rsplit(' "', 1)[0].split() + [words[2].rsplit(' "', 1)[1].strip('"')])
        assert args.mcp_config == "mcp.json" and args.goal


@needs_autogpt
def test_mcp_config_in_the_configuration_names_a_file_beside_it(tmp_path, quiet_console, loopback):
    import yaml

    from aiflows_jarvis.app import autogpt

    folder = tmp_path / "conf"
    folder.mkdir()
    mcp_config(folder, t=stdio(tmp_path, needs_approval=False))
    with open(os.path.join(ROOT, "configs", "autogpt.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    assert config["mcp_config"] is None, "configs/autogpt.yaml documents the key, and names no server"
    config["mcp_config"] = "mcp.json"  # relative to the configuration's folder, not the working folder
    (folder / "autogpt.yaml").write_text(yaml.safe_dump(config))
    loopback.add(command("t__echo", text="from the YAML"), command("finish", answer="done"))
    argv = [
        "--config",
        str(folder / "autogpt.yaml"),
        "--api-base",
        loopback.url,
        "--memory-dir",
        str(tmp_path / "m"),
        "--yes",
        "--store",
        "faiss",
        "Say something.",
    ]
    assert autogpt.main(argv) == 0, quiet_console.text[-3000:]
    assert f"MCP servers (mcp_config in {folder / 'autogpt.yaml'}): t (python)" in said(quiet_console)
    assert "from the YAML" in loopback.requests[1]["messages"][-1]["content"]
    assert not left_running(tmp_path)
