"""MCPToolFlowModule's parts: the configuration users already have, a tool's schema as a command, the client over
stdio and Streamable HTTP against small servers written here (mcp_stdio_server.py, mcp_http_server.py), the servers
that cannot be used, each said in one line with nothing left running, and MCPToolFlow (approval, tool errors,
images, huge results)."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest
from helpers import left_running, stdio
from mcp_http_server import MCPHTTPServer

from aiflows_jarvis.ControllerFlowModule.commands import commands_from_config, read_command, reply_schema
from aiflows_jarvis.CoreFlowModule import BadInputError, ScriptedInput, current_run, redact
from aiflows_jarvis.MCPToolFlowModule import MCPServers, MCPToolFlow, load_servers
from aiflows_jarvis.MCPToolFlowModule.config import read_config_file
from aiflows_jarvis.MCPToolFlowModule.schemas import declaration


# ~~~ The configuration ~~~
def test_claude_desktop_and_vs_code_files_are_read_with_their_variables_expanded(tmp_path):
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME_DIR}"],
                        "env": {"TOKEN": "${GH_TOKEN}", "LEVEL": "${LEVEL:-info}"},
                        "cwd": "servers",
                    },
                    "web": {
                        "url": "https://mcp.example.com/mcp",
                        "headers": {"Authorization": "Bearer ${env:API_TOKEN}"},
                        "allowed_tools": ["fetch"],
                        "timeout": 5,
                        "needs_approval": False,
                    },
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    environ = {"HOME_DIR": "/home/ada", "GH_TOKEN": "ghp_secret", "API_TOKEN": "abc123"}
    files, web = load_servers(str(claude), environ=environ)
    assert (files.command, files.args) == ("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/home/ada"])
    assert files.env == {"TOKEN": "ghp_secret", "LEVEL": "info"}, "${VAR} and ${VAR:-default}"
    assert files.cwd == str(tmp_path / "servers"), "a relative cwd is the file's folder's"
    assert web.transport == "http" and web.headers == {"Authorization": "Bearer abc123"}, "VS Code's ${env:VAR}"
    assert web.offers("fetch") and not web.offers("delete") and web.timeout == 5 and not web.asks_before("fetch")
    assert files.asks_before("anything"), "calls are approved by the user unless the configuration says otherwise"

    vscode = tmp_path / "mcp.json"  # VS Code's: `servers` with `type`, comments and trailing commas
    vscode.write_text(
        '{\n  // my servers\n  "servers": {\n    "gh": {"type": "http", "url": "http://127.0.0.1:1/mcp",'
        '},\n    /* "old": {"type": "stdio"}, */\n    "local": {"type": "stdio", "command": "uvx", '
        '"args": ["mcp-server-time"], "autoApprove": ["get_time"]},\n  },\n}\n'
    )
    gh, local = load_servers(str(vscode), environ={})
    assert gh.url == "http://127.0.0.1:1/mcp" and local.command == "uvx" and not local.asks_before("get_time")


@pytest.mark.parametrize(
    "servers, says",
    [
        (
            {"a": {"command": "x", "env": {"K": "${NOT_SET}"}}},
            "mcpServers.a.env.K: the environment variable NOT_SET is not set",
        ),
        ({"a": {"type": "sse", "url": "http://h/sse"}}, "`type: sse` is the HTTP+SSE transport of 2024-11-05"),
        ({"a": {"args": ["x"]}}, "mcpServers.a: no `command` and no `url`"),
        ({"a": {"command": "x", "timeout": "soon"}}, "mcpServers.a.timeout: must be a number of seconds"),
        ({"a": {"command": "x", "comand": "y"}}, "mcpServers.a: unknown setting(s) comand"),
        ({"a": {"command": "x", "args": "--stdio"}}, "mcpServers.a.args: must be a list of strings"),
        ({"a": {"url": "ftp://h/mcp"}}, "is not an http:// or https:// URL"),
    ],
)
def test_a_configuration_that_cannot_be_used_is_refused_naming_the_key(tmp_path, servers, says):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    with pytest.raises(BadInputError) as refused:
        load_servers(str(path), environ={})
    assert says in str(refused.value) and str(path) in str(refused.value)


def test_a_file_that_is_not_a_configuration_says_so(tmp_path):
    with pytest.raises(BadInputError, match="no such file"):
        load_servers(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(BadInputError, match="is not valid JSON"):
        read_config_file(str(tmp_path / "bad.json"))
    (tmp_path / "other.json").write_text('{"theme": "dark"}')
    with pytest.raises(BadInputError, match="no `mcpServers` object"):
        load_servers(str(tmp_path / "other.json"))


# ~~~ A tool as a command ~~~
SEARCH = {
    "name": "search",
    "description": "Search notes.",
    "inputSchema": {
        "type": "object",
        "$defs": {"Filters": {"type": "object", "properties": {"author": {"type": "string"}}}},
        "properties": {
            "query": {"type": "string", "description": "words to look for"},
            "filters": {"$ref": "#/$defs/Filters"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "blue"]}},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "edits": {"type": "array", "items": {"type": "object", "properties": {"old": {"type": "string"}}}},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 10},
            "mode": {"type": "string", "enum": ["fast", "exact"]},
            "anything": {},
        },
        "required": ["query", "ids"],
    },
}


def test_a_tool_schema_becomes_a_command_whose_reply_schema_both_dialects_carry():
    declared = declaration("notes", SEARCH)
    assert declared["input_args"] == ["query", "ids"], "the required properties"
    assert declared["optional_args"] == ["filters", "tags", "edits", "limit", "mode", "anything"]
    assert declared["arg_types"] == {
        "filters": "object",
        "tags": "array",
        "ids": "array",
        "edits": "array",
        "limit": "integer",
    }, "$ref followed, anyOf with null brought to its one type"
    assert declared["arg_notes"]["filters"] == "{author: string}" and "default: 10" in declared["arg_notes"]["limit"]
    (command,) = commands_from_config({"notes__search": declared}, "test")

    strict = reply_schema([command], "json_schema")["json_schema"]["schema"]["properties"]["command_args"]["anyOf"][0]
    props = strict["properties"]
    assert props["ids"]["items"] == {"type": "integer"} and props["tags"]["items"]["enum"] == ["red", "blue"]
    assert props["mode"]["enum"] == ["fast", "exact", None], "optional in strict mode: null allowed"
    assert props["edits"]["type"] == ["string", "null"] and "JSON array" in props["edits"]["description"], (
        "strict mode cannot carry an array of free-form objects: it comes as JSON text"
    )
    loose = reply_schema([command], "json_object")["schema"]["oneOf"][0]["properties"]["command_args"]
    assert loose["required"] == ["query", "ids"] and loose["properties"]["edits"]["items"] == {"type": "object"}

    reply = json.dumps(
        {
            "command": "notes__search",
            "command_args": {
                "query": "q",
                "ids": [1, 2],
                "edits": '[{"old": "a"}]',
                "filters": '{"author": "Ada"}',
                "mode": None,
            },
        }
    )
    name, args, _ = read_command(reply, [command])
    assert args == {"query": "q", "ids": [1, 2], "edits": [{"old": "a"}], "filters": {"author": "Ada"}}, (
        "JSON text decoded back into what the tool takes; a null optional argument left out"
    )


# ~~~ stdio ~~~
def test_a_stdio_server_lists_its_tools_page_by_page_is_called_and_ends_with_what_it_started(tmp_path, quiet_console):
    grandchild = tmp_path / "grandchild.pid"
    servers = MCPServers(
        load_servers(
            {
                "mcpServers": {
                    "t": stdio(
                        tmp_path, "--page-size", "3", "--grandchild", str(grandchild), env={"GREETING": "hello there"}
                    )
                }
            }
        ),
        log_dir=str(tmp_path / "logs"),
    )
    assert not left_running(tmp_path), "nothing starts before the tools are asked for"
    commands = servers.commands()
    assert list(commands)[:3] == ["t__add", "t__echo", "t__fail"] and "t__search" in commands, (
        "the pages of tools/list were followed"
    )
    assert "t__odd_name_" in commands, "a tool name a command cannot hold is made one"
    assert "the tool not_an_object (its input schema is not an object) is not offered" in " ".join(
        quiet_console.text.split()
    )
    assert servers.call("t__add", {"a": 2, "b": 3})["result"]["structuredContent"] == {"sum": 5}
    assert servers.call("t__env", {"name": "GREETING"})["result"]["content"][0]["text"] == "hello there"
    assert servers.call("t__env", {"name": "PYTHONPATH"})["result"]["content"][0]["text"] == "(unset)", (
        "the server gets the variables its configuration names, PATH and HOME, nothing else"
    )
    assert redact("the value hello there") == "the value [redacted: MCP server t: env GREETING]", (
        "a value of `env` is a secret from the start"
    )
    assert servers.call("t__nope", {})["kind"] == "refused"
    assert isinstance(servers.servers["t"].client.transport.process.stdout, io.BufferedReader), (
        "its stdout is read in blocks: unbuffered, a line was read a byte at a time (10 MB: 9.5 s instead of 0.4 s)"
    )
    assert left_running(tmp_path), "the server and its grandchild run"
    servers.close()
    assert not left_running(tmp_path), "stdin closed, then the process group ended: the grandchild too"
    assert (tmp_path / "logs" / "t.log").read_text().startswith("=== "), "its stderr goes to its log"


def test_servers_that_cannot_be_used_are_left_out_in_one_line_each_and_the_others_work(tmp_path, quiet_console):
    with MCPHTTPServer(token="right-token-123") as web:
        servers = MCPServers(
            load_servers(
                {
                    "mcpServers": {
                        "crashes": stdio(tmp_path, "--crash-at-start"),
                        "hangs": stdio(tmp_path, "--hang", timeout=1),
                        "chatty": stdio(tmp_path, "--garbage"),
                        "missing": {"command": "no-such-mcp-server-here"},
                        "old": stdio(tmp_path, "--version", "2024-11-05"),
                        "locked": {"url": web.url, "headers": {"Authorization": "Bearer wrong"}},
                        "nobody": {"url": "http://127.0.0.1:9/mcp"},
                        "works": stdio(tmp_path),
                    }
                }
            ),
            log_dir=str(tmp_path / "logs"),
        )
        commands = servers.commands()
    text = " ".join(quiet_console.text.split())  # (a long line is wrapped on quiet_console)
    lines = re.findall(r"MCP server \S+ is left out: .*? The run goes on without its tools\.", text)
    said = {line.split()[2]: line for line in lines}
    assert set(said) == {"crashes", "hangs", "chatty", "missing", "old", "locked", "nobody"}, lines
    assert "exited (exit code 3). Its log ends with: cannot open the database /nowhere/db.sqlite." in said["crashes"]
    assert "did not answer `initialize` within 1 s" in said["hangs"] and "longer `timeout`" in said["hangs"]
    assert "not JSON-RPC on its stdout: 'Server listening on stdio'" in said["chatty"]
    assert "`no-such-mcp-server-here` was not found on PATH" in said["missing"]
    assert "speaks MCP protocol 2024-11-05" in said["old"]
    assert "(HTTP 401): check the credentials in its `headers`" in said["locked"]
    assert "connection refused" in said["nobody"]
    assert {name.split("__")[0] for name in commands} == {"works"}, "only the server that works offers tools"
    assert servers.call("works__echo", {"text": "still here"})["result"]["content"][0]["text"] == "still here"
    servers.close()
    assert not left_running(tmp_path), "the servers left out were stopped at once, the others at close()"


def test_a_call_that_outlasts_its_timeout_or_a_server_that_dies_is_a_result_not_a_crash(tmp_path, quiet_console):
    servers = MCPServers(
        load_servers({"mcpServers": {"slow": stdio(tmp_path, timeout=1), "dies": stdio(tmp_path, "--crash-on-call")}}),
        log_dir=str(tmp_path / "logs"),
    )
    servers.commands()
    late = servers.call("slow__sleep", {"seconds": 30})
    assert late["kind"] == "timeout" and "did not answer within" in late["error"]
    died = servers.call("dies__add", {"a": 1, "b": 2})
    assert died["kind"] == "server" and "exited (exit code 5)" in died["error"] and "the tool crashed" in died["error"]
    assert "MCP server dies stopped" in " ".join(quiet_console.text.split())
    assert servers.call("dies__add", {"a": 1, "b": 2})["kind"] == "server", "its tools answer that it stopped"
    servers.close()
    assert not left_running(tmp_path), "the server still sleeping in its tool is ended with its group"


# ~~~ Streamable HTTP ~~~
@pytest.mark.parametrize("kind", ["json", "events", "events cut and resumed"])
def test_an_http_server_answers_with_json_or_events_in_one_session(kind, quiet_console):
    with MCPHTTPServer(sse=kind != "json", token="the-token-123", cut_first_stream="cut" in kind) as web:
        servers = MCPServers(
            load_servers(
                {"mcpServers": {"web": {"url": web.url, "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}}},
                environ={"WEB_TOKEN": "the-token-123"},
            )
        )
        assert "web__add" in servers.commands()
        assert servers.call("web__add", {"a": 20, "b": 22})["result"]["content"][0]["text"] == "42"
        servers.close()
        posts = [headers for method, headers, _ in web.requests if method == "POST"]
        session = posts[0].get("Mcp-Session-Id")
        assert session is None and len({h.get("Mcp-Session-Id") for h in posts[1:]}) == 1, (
            "the session the server gave is sent back on every later request"
        )
        assert all(h.get("MCP-Protocol-Version") == "2025-06-18" for h in posts[1:]), "the version agreed on"
        assert web.deleted == [posts[1]["Mcp-Session-Id"]], "closing ends the session"
        if kind != "json":
            assert web.pings_answered == 2, "the server's own requests in its event streams are answered"
        if "cut" in kind:
            assert [m for m, _, _ in web.requests].count("GET") == 1, "the stream cut before the answer was resumed"


# ~~~ MCPToolFlow ~~~
def tool_flow(tmp_path, **server) -> MCPToolFlow:
    """MCPToolFlow with servers of its own (``mcp_config``), saving files in ``tmp_path``."""
    config = {"mcpServers": {"t": stdio(tmp_path, "--calls", str(tmp_path / "calls.jsonl"), **server)}}
    return MCPToolFlow.instantiate_from_default_config(mcp_config=config, workdir=str(tmp_path))


def test_a_tool_error_an_image_and_a_huge_result_come_back_as_text_and_files(tmp_path, quiet_console):
    flow = tool_flow(tmp_path, needs_approval=False)
    try:
        failed = flow.call({"tool": "t__fail", "arguments": {"message": "no such note"}})
        assert failed == {"result": "The tool reported an error: no such note", "failed": True}
        image = flow.call({"tool": "t__image", "arguments": {}})
        (saved,) = (tmp_path / "mcp_files").glob("*t__image*.png")
        assert saved.read_bytes().startswith(b"\x89PNG") and not image["failed"]
        size = saved.stat().st_size
        assert f"[an image (image/png, {size} bytes) saved to mcp_files/{saved.name}]" in image["result"]
        huge = flow.call({"tool": "t__huge", "arguments": {"chars": 2_000_000}})
        assert len(huge["result"]) <= 2500 and huge["result"].startswith("line 1: ")
        (whole,) = (tmp_path / "mcp_files").glob("*t__huge*.txt")
        assert (
            "the result is 2,000,000 characters long: cut here; the whole of it is in "
            f"mcp_files/{whole.name}" in huge["result"]
        )
        assert len(whole.read_text()) == 2_000_000, "the whole result is kept"
        unknown = flow.call({"tool": "t__nothing", "arguments": {}})
        assert unknown["failed"] and "is not a tool of this run's MCP servers" in unknown["result"]
        usage = current_run().usage.per_tool_server["t"]
        assert (usage.calls, usage.failed) == (3, 1), "each call counted for its server"
    finally:
        flow.close()
    assert not left_running(tmp_path)


def test_a_call_waits_for_the_users_approval_unless_the_configuration_says_otherwise(
    tmp_path, quiet_console, run_context
):
    user = ScriptedInput(["", "no, not that one"])
    run_context.input_source = user
    flow = tool_flow(tmp_path, autoApprove=["add"])
    try:
        assert flow.call({"tool": "t__echo", "arguments": {"text": "hi"}}) == {"result": "hi", "failed": False}
        refused = flow.call({"tool": "t__echo", "arguments": {"text": "again"}})
        assert refused == {
            "result": "The user did not let the tool echo run. They said: no, not that one",
            "failed": True,
        }
        assert flow.call({"tool": "t__add", "arguments": {"a": 1, "b": 1}})["result"] == "2"
    finally:
        flow.close()
    assert [q["kind"] for q in user.asked] == ["approval", "approval"], "add is in autoApprove: not asked"
    assert 'Call the tool echo of the MCP server t with {"text": "hi"}?' in user.asked[0]["prompt"]
    calls = [json.loads(line)[0] for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert calls == ["echo", "add"], "the refused call never reached the server"
    assert not left_running(tmp_path)


def test_the_modules_demo_server_starts_from_any_folder(tmp_path, monkeypatch, quiet_console):
    monkeypatch.chdir(tmp_path)  # a relative cwd in MCPToolFlow's own mcp_config is the module's folder
    flow = MCPToolFlow.instantiate_from_default_config(
        mcp_config={
            "mcpServers": {
                "demo": {"command": sys.executable, "args": ["add_server.py"], "cwd": "demo", "needs_approval": False}
            }
        }
    )
    try:
        assert flow.call({"tool": "demo__add", "arguments": {"a": 2, "b": 3}}) == {"result": "5", "failed": False}
    finally:
        flow.close()
