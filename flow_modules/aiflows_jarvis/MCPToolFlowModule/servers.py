"""The MCP servers of a run: started when first needed, their tools listed once and kept, stopped at the end.

``MCPServers`` is what a run's controllers get their tools from (``RunContext(tool_provider=...)``): ``commands``
lists every server's tools the first time a controller asks (starting the servers then), and names once what cannot
be offered; ``call`` runs a tool; ``close`` stops every server (the launcher calls it however the run ends; an exit
handler does it for a program that forgets). A server that does not start, exits, hangs or breaks the protocol is
said in one line, naming it, what to check and its log, and the run goes on without its tools.

Listings and calls go through ``CoreFlowModule.tool_calls.run_tool`` as ``mcp:<server>``: ``--record`` keeps them,
``--replay`` answers them from the recording and starts nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import tempfile
import threading
import time
import weakref
from typing import Any, Dict, Iterable, List, Optional

from aiflows_jarvis.CoreFlowModule import (
    check_time,
    current_run,
    get_console,
    remember_secret,
    run_tool,
    shorten,
    tool_timeout,
)

from .client import HTTPTransport, MCPClient, MCPError, RemoteError, RequestTimeout, StdioTransport
from .config import ServerConfig
from .schemas import MAX_NAME, Tool, command_name, declaration

#: Offering more tools than this is said once: each takes room in every prompt of the controller.
MANY_TOOLS = 40
LOG_FOLDER = "mcp_logs"

_OPEN: "weakref.WeakSet[MCPServers]" = weakref.WeakSet()


@atexit.register
def _close_left_open() -> None:  # a program that never called close(): its servers end with it, not after
    for servers in list(_OPEN):
        servers.close()


class _Server:
    """One server's state in the run."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.client: Optional[MCPClient] = None
        self.failure: Optional[str] = None  # why it is left out (its tools are not offered, its calls refused)
        self.listed = False


class MCPServers:
    """The run's MCP servers and their tools.

    :param servers: the servers (``config.load_servers``); the values of their ``env`` and ``headers`` are
        remembered as secrets (redacted from what the run writes and shows).
    :param log_dir: where each stdio server's stderr goes (``<log_dir>/<server>.log``); default: ``mcp_logs/`` in
        the run's memory folder, else in the temporary folder.
    :param source: where the servers were configured, named in messages (``--mcp-config FILE``).
    """

    def __init__(
        self, servers: List[ServerConfig], log_dir: Optional[str] = None, source: str = "the MCP configuration"
    ):
        self.servers: Dict[str, _Server] = {}
        for config in servers:
            self.servers[config.name] = _Server(config)
            for what, value in config.secrets().items():
                remember_secret(what, value)
        memory_dir = current_run().memory_dir
        self.log_dir = log_dir or os.path.join(memory_dir or tempfile.gettempdir(), LOG_FOLDER)
        self.source = source
        self.tools: Dict[str, Tool] = {}
        self._named: set = set()
        self._lock = threading.RLock()
        _OPEN.add(self)

    # ~~~ Tools as commands ~~~
    def commands(self, taken: Iterable[str] = ()) -> Dict[str, Dict[str, Any]]:
        """``{command: declaration}`` of every tool offered, the servers listed first if they were not (once per
        run). A tool whose command would be one of ``taken`` (a loop's own command) is not offered there, and said
        once."""
        with self._lock:
            for server in self.servers.values():
                if not server.listed:
                    self._list(server)
            out = {}
            for name, tool in self.tools.items():
                if name in taken:
                    self._say_once(
                        name,
                        f"MCP server {tool.server}: its tool {tool.name} is not offered: a command "
                        f"of the controller is named {name} already.",
                    )
                    continue
                out[name] = tool.declaration
            return out

    def _say_once(self, key: str, text: str) -> None:
        if key not in self._named:
            self._named.add(key)
            get_console().line("warning", text)

    def _list(self, server: _Server) -> None:
        """List a server's tools (starting it), through the recording; what it offers is said in one line."""
        server.listed = True
        name = server.config.name
        observation = run_tool(f"mcp:{name}", {"method": "tools/list"}, lambda: self._listing(server))
        try:
            listed = json.loads(observation)
        except ValueError:
            listed = {"error": "the recorded listing is not JSON"}
        if not isinstance(listed, dict) or "tools" not in listed:
            self._leave_out(server, str(listed.get("error") if isinstance(listed, dict) else listed))
            return
        offered, refused = [], []
        for raw in listed["tools"] if isinstance(listed["tools"], list) else []:
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                continue
            tool = raw["name"]
            if not server.config.offers(tool):
                continue
            command = command_name(name, tool)
            try:
                if len(command) > MAX_NAME:
                    raise ValueError(
                        f"its command name {command} is longer than {MAX_NAME} characters (a shorter "
                        "server name in the configuration helps)"
                    )
                if command in self.tools:
                    raise ValueError(f"its command name {command} is another tool's already")
                declared = declaration(name, raw)
            except ValueError as why:
                refused.append(f"{tool} ({why})")
                continue
            self.tools[command] = Tool(command, name, tool, declared)
            offered.append(command)
        console = get_console()
        if offered:
            console.line(
                "info",
                f"MCP server {name}: {len(offered)} tool{'s' if len(offered) != 1 else ''} offered "
                f"({', '.join(t.split('__', 1)[-1] for t in offered[:12])}"
                f"{', ...' if len(offered) > 12 else ''}).",
            )
        else:
            console.line(
                "warning",
                f"MCP server {name} offers no tool" + (" its configuration allows." if listed["tools"] else "."),
            )
        for text in refused:
            console.line("warning", f"MCP server {name}: the tool {text} is not offered.")
        if len(self.tools) > MANY_TOOLS and "many" not in self._named:
            self._say_once(
                "many",
                f"{len(self.tools)} MCP tools are offered: each takes room in every prompt of "
                "the controller. `allowed_tools` (or `disabled_tools`) per server in "
                f"{self.source} keeps the ones the goal needs.",
            )

    def _listing(self, server: _Server) -> str:
        """The server's tools as JSON (``{"tools": [...]}``), or why it cannot be used (``{"error": ...}``)."""
        where = f"the MCP server {server.config.name}"
        try:
            client = self._client(server, tool_timeout(server.config.timeout, where))
            tools = client.list_tools(tool_timeout(server.config.timeout, where))
        except MCPError as error:
            self._stop(server)
            check_time(where)  # a wait the run's budget cut short stops the run
            return json.dumps({"error": self._hint(server, error)})
        return json.dumps({"tools": tools}, ensure_ascii=False)

    def _client(self, server: _Server, timeout: Optional[float]) -> MCPClient:
        if server.client is not None:
            return server.client
        config = server.config
        if config.url:

            def open_transport() -> Any:
                return HTTPTransport(config.name, config.url, config.headers)
        else:
            os.makedirs(self.log_dir, exist_ok=True)
            log = os.path.join(self.log_dir, f"{config.name}.log")

            def open_transport() -> Any:
                return StdioTransport(config.name, config.command, config.args, config.env, config.cwd, log)

        client = MCPClient(config.name, open_transport)
        server.client = client
        client.start(timeout)
        return client

    def _hint(self, server: _Server, error: MCPError) -> str:
        """Why a server cannot be used, and what to check."""
        config, text = server.config, str(error)
        if isinstance(error, RequestTimeout) and not (server.client and server.client.protocol_version):
            started = " ".join([os.path.basename(config.command or "")] + config.args)
            text += (
                f" Check that `{shorten(started, 100) if config.command else config.url}` is an MCP server "
                f"speaking {'stdio' if config.command else 'Streamable HTTP'}, or give it a longer `timeout` "
                f"(now {config.timeout:g} s)."
            )
        log = os.path.join(self.log_dir, config.name + ".log")
        if config.command and os.path.exists(log):
            text += f" Its log: {log}."
        return text

    def _leave_out(self, server: _Server, reason: str) -> None:
        server.failure = reason
        get_console().line(
            "warning", f"MCP server {server.config.name} is left out: {reason} The run goes on without its tools."
        )

    def _stop(self, server: _Server) -> None:
        client, server.client = server.client, None
        if client is not None:
            client.close()

    # ~~~ Calls ~~~
    def tool(self, command: str) -> Optional[Tool]:
        return self.tools.get(command)

    def asks_before(self, command: str) -> bool:
        """Whether a call of ``command`` is shown to the user for approval first."""
        tool = self.tools.get(command)
        return tool is not None and self.servers[tool.server].config.asks_before(tool.name)

    def call(self, command: str, arguments: Dict[str, Any]) -> Dict[str, Any]:
        """Call the tool of ``command``: ``{"result": <the tools/call result>}``, or ``{"error": why, "kind":
        "server" | "timeout" | "refused"}``. Recorded and replayed as ``mcp:<server>``; timed by the server's
        ``timeout``, cut to what the run's budget leaves (a wait the budget cut short stops the run)."""
        tool = self.tools.get(command)
        if tool is None:
            return {"error": f"{command} is not a tool of the MCP servers of this run.", "kind": "refused"}
        server = self.servers[tool.server]
        where = f"the MCP tool {command}"

        def call() -> str:
            if server.failure:
                return json.dumps(
                    {"error": f"the MCP server {tool.server} is left out: {server.failure}", "kind": "server"}
                )
            started = time.monotonic()
            try:
                with self._lock:
                    client = self._client(server, tool_timeout(server.config.timeout, where))
                result = client.call_tool(tool.name, arguments, tool_timeout(server.config.timeout, where))
            except RemoteError as error:
                return json.dumps({"error": f"the server refused the call: {error}", "kind": "refused"})
            except RequestTimeout:
                check_time(where)
                return json.dumps(
                    {
                        "error": f"the MCP server {tool.server} did not answer within "
                        f"{time.monotonic() - started:.0f} s; the call was cancelled.",
                        "kind": "timeout",
                    }
                )
            except MCPError as error:
                self._stop(server)
                server.failure = self._hint(server, error)
                get_console().line(
                    "warning",
                    f"MCP server {tool.server} stopped: {server.failure} Its tools answer with this from now on.",
                )
                return json.dumps({"error": f"the MCP server {tool.server} stopped: {error}", "kind": "server"})
            return json.dumps({"result": result}, ensure_ascii=False)

        observation = run_tool(f"mcp:{tool.server}", {"tool": tool.name, "arguments": arguments}, call)
        try:
            outcome = json.loads(observation)
        except ValueError:
            outcome = None
        return outcome if isinstance(outcome, dict) else {"error": "the recorded result is not JSON", "kind": "server"}

    def settings(self) -> Dict[str, Any]:
        """What a recording keeps of the servers (``ServerConfig.settings``): a replay offers the same tools."""
        return {name: server.config.settings() for name, server in self.servers.items()}

    def close(self) -> None:
        """Stop every server that was started (stdio: its stdin closed, then its process group ended; HTTP: its
        session ended). Safe to call twice."""
        with self._lock:
            for server in self.servers.values():
                self._stop(server)
        _OPEN.discard(self)
