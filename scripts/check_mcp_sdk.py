"""Check the MCP client (MCPToolFlowModule) against the official SDK's own servers. Run by hand, not in CI: it
installs the SDK from PyPI.

    python scripts/check_mcp_sdk.py [--majors 1 2] [--work DIR]

For each major version of the `mcp` package (1.x: `FastMCP`, 2.x: `MCPServer`), a virtual environment of its own
is made in DIR (default: a temporary folder; one that exists is reused) and the SDK installed there: it cannot be
installed beside aiflows 0.1.7 (anyio). A small server written with the SDK's decorators (add, fail, search,
picture) is then run on stdio and on Streamable HTTP (server-sent events, and JSON responses), and this
repository's client, run here, lists its tools, reads their schemas as commands, calls them (a result, a tool that
raises, arguments of the wrong type, an image) and stops the server. One line per check; the exit code is the number
of checks that failed.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "flow_modules"))

SERVER = '''\
import sys

try:  # 2.x: FastMCP is MCPServer
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.utilities.types import Image
    MAJOR = 2
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server, Image
    from mcp.server.fastmcp.exceptions import ToolError
    MAJOR = 1

transport, port, json_response = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0, "json" in sys.argv
if MAJOR == 1 and transport != "stdio":
    server = Server("sdk-check", host="127.0.0.1", port=port, json_response=json_response)
else:
    server = Server("sdk-check")

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000000000500010d0a2db40000000049454e44ae426082")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def fail(message: str) -> str:
    """Always fails, with the message (ToolError: 2.x hides the message of any other exception)."""
    raise ToolError(message)


@server.tool()
def search(query: str, tags: list[str] | None = None, limit: int = 10) -> str:
    """Search notes."""
    return f"{query} {tags} {limit}"


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PNG, format="png")


if transport == "stdio":
    server.run("stdio")
elif MAJOR == 1:
    server.run("streamable-http")
else:
    server.run("streamable-http", host="127.0.0.1", port=port, json_response=json_response)
'''


def venv_with_sdk(folder: str, major: int) -> tuple:
    """``(python, version)`` of a virtual environment in ``folder`` holding ``mcp`` of that major version."""
    python = os.path.join(folder, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", folder], check=True)
    version = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"], capture_output=True, text=True
    ).stdout.strip()
    if not version.startswith(f"{major}."):
        print(f"installing mcp>={major},<{major + 1} in {folder} ...", flush=True)
        done = subprocess.run(
            [python, "-m", "pip", "install", "-q", f"mcp>={major},<{major + 1}"], capture_output=True, text=True
        )
        if done.returncode:
            raise SystemExit(f"pip could not install mcp {major}.x:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
        version = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    return python, version


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 60) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end and process.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


class Checks:
    def __init__(self, label: str):
        self.label, self.failed = label, 0

    def check(self, ok: bool, what: str, detail: str = "") -> None:
        self.failed += not ok
        print(f"  {'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""), flush=True)


def exercise(label: str, config: dict, workdir: str) -> int:
    """List, read the schemas, call and stop one server; the number of failed checks."""
    from aiflows_jarvis.ControllerFlowModule.commands import commands_from_config, read_command
    from aiflows_jarvis.CoreFlowModule import Console, RunContext
    from aiflows_jarvis.MCPToolFlowModule import MCPServers, load_servers
    from aiflows_jarvis.MCPToolFlowModule.results import result_text

    print(f"{label}", flush=True)
    checks, process = Checks(label), None
    with RunContext(console=Console(stream=open(os.devnull, "w"), color=False)):
        servers = MCPServers(load_servers({"mcpServers": {"sdk": config}}), log_dir=workdir)
        try:
            commands = servers.commands()
            client = servers.servers["sdk"].client
            checks.check(
                client is not None and client.protocol_version is not None,
                "initialize",
                f"protocol {client.protocol_version if client else None}, server "
                f"{(client.server_info if client else {}).get('name')}"
                if client
                else str(servers.servers["sdk"].failure),
            )
            checks.check(
                {"sdk__add", "sdk__fail", "sdk__search", "sdk__picture"} <= set(commands),
                "tools/list",
                ", ".join(commands),
            )
            search = commands.get("sdk__search", {})
            checks.check(
                search.get("input_args") == ["query"]
                and set(search.get("optional_args") or []) == {"tags", "limit"}
                and search.get("arg_types", {}).get("tags") == "array"
                and search.get("arg_types", {}).get("limit") == "integer",
                "search's schema as a command",
                f"input {search.get('input_args')}, optional "
                f"{search.get('optional_args')}, types {search.get('arg_types')}",
            )
            if commands:
                parsed = commands_from_config(commands, "sdk")
                _, args, _ = read_command(
                    '{"command": "sdk__search", "command_args": {"query": "q", "tags": ["a"], "limit": "3"}}', parsed
                )
                checks.check(args == {"query": "q", "tags": ["a"], "limit": 3}, "a reply read against it", str(args))
            added = servers.call("sdk__add", {"a": 2, "b": 3}).get("result") or {}
            text, _ = result_text(added, workdir, "sdk__add")
            checks.check(
                text.strip() == "5" and not added.get("isError"),
                "tools/call add(2, 3)",
                f"{text!r}, structuredContent {added.get('structuredContent')}",
            )
            failed = servers.call("sdk__fail", {"message": "no such note"}).get("result") or {}
            text, _ = result_text(failed, workdir, "sdk__fail")
            checks.check(
                bool(failed.get("isError")) and "no such note" in text, "a tool that raises: isError", repr(text[:120])
            )
            wrong = servers.call("sdk__add", {"a": "two", "b": 3})
            said = wrong.get("error") or result_text(wrong.get("result") or {}, workdir, "x")[0]
            checks.check(
                "error" in wrong or (wrong.get("result") or {}).get("isError"),
                "arguments of the wrong type: an error the model reads",
                repr(said[:120]),
            )
            picture = servers.call("sdk__picture", {}).get("result") or {}
            text, files = result_text(picture, workdir, "sdk__picture")
            checks.check(
                len(files) == 1 and open(files[0], "rb").read().startswith(b"\x89PNG"), "an image saved to a file", text
            )
            process = getattr(getattr(client, "transport", None), "process", None)
        finally:
            servers.close()
    if process is not None:
        gone = process.poll() is not None
        checks.check(gone, "stopped", f"the server (pid {process.pid}) ended with close()")
    return checks.failed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--majors", type=int, nargs="+", default=[1, 2], help="major versions of mcp (default 1 2)")
    parser.add_argument(
        "--work",
        metavar="DIR",
        help="where the virtual environments go (default: a temporary folder, removed at the end)",
    )
    args = parser.parse_args(argv)
    import aiflows_jarvis  # noqa: F401  (first: the tokenizer)

    work_folder = args.work or tempfile.mkdtemp(prefix="mcp-sdk-check-")
    os.makedirs(work_folder, exist_ok=True)
    failed = 0
    for major in args.majors:
        python, version = venv_with_sdk(os.path.join(work_folder, f"mcp{major}"), major)
        script = os.path.join(work_folder, f"server_{major}.py")
        with open(script, "w") as f:
            f.write(SERVER)
        files = os.path.join(work_folder, f"files_{major}")
        os.makedirs(files, exist_ok=True)
        failed += exercise(f"mcp {version}, stdio", {"command": python, "args": [script, "stdio"]}, files)
        for mode in ("events", "json"):
            port = free_port()
            server = subprocess.Popen(
                [python, script, "http", str(port)] + (["json"] if mode == "json" else []),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                if not wait_for_port(port, server):
                    print(f"mcp {version}, Streamable HTTP ({mode}): the server did not start")
                    failed += 1
                    continue
                answers = "server-sent events" if mode == "events" else "JSON responses"
                failed += exercise(
                    f"mcp {version}, Streamable HTTP ({answers})", {"url": f"http://127.0.0.1:{port}/mcp"}, files
                )
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait()
    print(f"{'all checks passed' if not failed else f'{failed} check(s) failed'}")
    if not args.work:
        import shutil

        shutil.rmtree(work_folder, ignore_errors=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
