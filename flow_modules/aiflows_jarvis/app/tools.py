"""The run's MCP servers, for both command lines: named by ``--mcp-config FILE`` or the configuration's
``mcp_config:`` (none unless the user names them), or by the recording a replay answers from; offered to the
controllers through the run's context, and stopped when the run ends, however it ends."""

from __future__ import annotations

import os
from typing import Any, Optional


def start_tools(session: Any) -> Optional[Any]:
    """The run's ``MCPServers`` (nothing is started yet: a controller's first call lists their tools), for the run's
    ``tool_provider``; None when no MCP server is named. A configuration that cannot be used is a BadInputError, raised
    before anything in the memory folder is moved.

    :param session: the run (``run.Session``): its options, configuration, recording and memory folder.
    """
    from aiflows_jarvis.MCPToolFlowModule.config import described, load_servers, replayed_servers
    from aiflows_jarvis.MCPToolFlowModule.servers import LOG_FOLDER, MCPServers

    args, config = session.args, session.config or {}
    if session.transcript is not None:  # a replay offers what the recording's servers offered; nothing starts
        recorded = session.transcript.header.get("mcp_servers")
        if not recorded:
            return None
        servers, source = replayed_servers(recorded), f"the recording {session.transcript.path}"
    elif args.mcp_config:
        servers = load_servers(os.path.abspath(args.mcp_config))
        source = f"--mcp-config {args.mcp_config}"
    elif config.get("mcp_config"):
        path = os.path.abspath(args.config or session.app.config)
        source = f"mcp_config in {path}"
        servers = load_servers(config["mcp_config"], source, base=os.path.dirname(path))
    else:
        return None
    provider = MCPServers(servers, log_dir=os.path.join(session.memory_dir, LOG_FOLDER), source=source)
    if servers:
        shown = ", ".join(described(servers)) if session.transcript is None else ", ".join(s.name for s in servers)
        session.console.line(
            "info",
            f"MCP servers ({source}): {shown}; their tools are listed when a controller "
            "first needs them" + (", from the recording." if session.transcript else "."),
        )
    else:
        session.console.line("warning", f"{source} names no MCP server that is not disabled.")
    return provider


def stop_tools(session: Any) -> None:
    """Stop the run's MCP servers (stdio: stdin closed, then the process group ended; HTTP: the session ended)."""
    provider, session.tools = session.tools, None
    if provider is not None:
        provider.close()
