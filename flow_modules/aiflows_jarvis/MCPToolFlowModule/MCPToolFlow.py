from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, Optional

from aiflows_jarvis.CoreFlowModule import (
    APPROVAL,
    ConfigurationError,
    LeanAtomicFlow,
    get_console,
    get_input_source,
    is_approval,
    shorten,
)

from .config import load_servers
from .results import bounded, result_text
from .servers import MCPServers


class MCPToolFlow(LeanAtomicFlow):
    """Calls one tool of an MCP server: the one branch of a controller-executor loop that runs every MCP tool.

    A loop with `tools: {flow: MCPToolFlow}` (AutoGPT's, Coder's) offers the run's MCP tools to its controller as
    commands `server__tool`; this flow gets the command and its arguments. Unless the server's configuration says
    otherwise (`needs_approval: false`, `autoApprove`), the user approves the call first (`--yes` approves). The
    result comes back as text: images, audio and binary resources are saved to files in the working folder
    (`mcp_files/`) and named; a result longer than `max_result_chars` is cut, with the whole of it saved to a file
    the cut names. A tool error (`isError`), a server that stopped or did not answer in time is a result the
    controller reads and can act on, marked `failed`; the run goes on. Each call is counted per server in the run's
    usage.

    The servers are the run's (`RunContext(tool_provider=MCPServers(...))`, which the command lines set from
    `--mcp-config`), or the flow's own when `mcp_config` is given: then it starts them when first called and stops
    them at `close()`.

    *Configuration Parameters*:
    - `mcp_config` (str or dict, optional): a file listing MCP servers (Claude Desktop's `mcpServers`, VS Code's
      `servers`), or that object itself (where a relative `cwd` is this module's folder); null: the run's servers.
    - `max_result_chars` (int): the longest result returned; the whole of a longer one is saved to a file.
    - `show_result_lines` (int): the lines of a result shown on screen (folded beyond); 0: not shown (AutoGPT shows
      it when it asks for feedback).
    - `workdir` (str): where files are saved (`mcp_files/`); null: the working folder.

    *Input Interface*:
    - `tool` (str): the command, `server__tool`.
    - `arguments` (dict): the tool's arguments.

    *Output Interface*:
    - `result` (str): what the tool returned, as text (or what went wrong).
    - `failed` (bool): the tool reported an error, the call failed, or the user did not let it run.
    """

    def _servers(self) -> MCPServers:
        config = self.flow_config.get("mcp_config")
        if config:
            if self.__dict__.get("_own") is None:
                # a relative `cwd` in the object given here is the module's folder (its demo server is there)
                module = os.path.dirname(os.path.abspath(sys.modules[type(self).__module__].__file__))
                self._own = MCPServers(
                    load_servers(
                        config,
                        f"{self.flow_config['name']}.mcp_config",
                        base=None if isinstance(config, str) else module,
                    )
                )
                self._own.commands()
            return self._own
        provider = self.run_context.tool_provider
        if provider is None:
            raise ConfigurationError(
                f"{self.flow_config['name']}: no MCP servers: give `mcp_config` (a file listing "
                "them, or {mcpServers: {...}}), or run with --mcp-config FILE."
            )
        return provider

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        command = str(input_data.get("tool") or "")
        arguments = input_data.get("arguments") or {}
        servers = self._servers()
        tool = servers.tool(command)
        if tool is None:
            return {"result": f"Error: {command!r} is not a tool of this run's MCP servers.", "failed": True}
        if servers.asks_before(command):
            shown = shorten(json.dumps(arguments, ensure_ascii=False), 300)
            answer = get_input_source().ask(
                f"Call the tool {tool.name} of the MCP server {tool.server} with {shown}? (Enter: yes; or say why not)",
                kind=APPROVAL,
            )
            if not is_approval(answer):
                return {"result": f"The user did not let the tool {tool.name} run. They said: {answer}", "failed": True}
        started = time.monotonic()
        outcome = servers.call(command, arguments)
        seconds = time.monotonic() - started
        workdir = self.flow_config.get("workdir") or os.getcwd()
        if "result" in outcome and isinstance(outcome["result"], dict):
            result = outcome["result"]
            text, _ = result_text(result, workdir, command)
            failed = bool(result.get("isError"))
            if failed:
                text = f"The tool reported an error: {text}"
        else:
            text, failed = f"Error: {outcome.get('error') or 'the call failed'}", True
        text, _ = bounded(text, int(self.flow_config.get("max_result_chars") or 0), workdir, command)
        self.run_context.usage.record_tool_call(tool.server, seconds, failed)
        lines = int(self.flow_config.get("show_result_lines") or 0)
        if lines > 0:
            get_console().show("error" if failed else "result", "Result:", text, folded=lines)
        return {"result": text, "failed": failed}

    def close(self) -> None:
        """Stop the servers this flow started itself (`mcp_config`); the run's are the launcher's to stop."""
        own: Optional[MCPServers] = self.__dict__.get("_own")
        if own is not None:
            own.close()
