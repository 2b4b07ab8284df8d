"""The MCP servers a user already has configured: the ``mcpServers`` object of Claude Desktop, Cursor and Claude
Code, VS Code's ``servers`` (with ``type``), and the settings this package adds per server.

A server is started with a command (``command``, ``args``, ``env``, ``cwd``: stdio) or reached at a URL (``url``,
``headers``: Streamable HTTP). ``${VAR}`` (also ``${VAR:-default}`` and VS Code's ``${env:VAR}``) is replaced by the
environment's value in the command, its arguments, ``env``, ``cwd``, ``url`` and ``headers``; a variable that is not
set is an error that names it. Per server, besides: ``allowed_tools`` / ``disabled_tools`` (tool names), ``timeout``
(seconds per request, default 60), ``needs_approval`` (default true: each call is shown to the user first, as code
is; ``--yes`` approves), ``autoApprove`` (Cline's: tools that need no approval) and ``disabled`` (skipped).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import BadInputError

DEFAULT_TIMEOUT = 60.0
# What a configuration file may call its servers: Claude Desktop, Cursor, Claude Code (`mcpServers`), VS Code
# (`servers`)
SERVER_KEYS = ("mcpServers", "servers")
HTTP_TYPES = ("http", "streamable-http", "streamablehttp", "streamable_http")
# Keys of other clients that say nothing this client acts on (VS Code's envFile, dev; Cline's transportType, ...)
_IGNORED = {"type", "transportType", "envFile", "dev", "description", "alwaysAllow", "gallery", "version", "title"}
_KNOWN = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "allowed_tools",
    "disabled_tools",
    "timeout",
    "needs_approval",
    "autoApprove",
    "disabled",
} | _IGNORED
_VARIABLE = re.compile(r"\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{([^}]*)\}")


@dataclass
class ServerConfig:
    """One MCP server: how it is reached and what the run does with it (see the module's docstring)."""

    name: str
    command: Optional[str] = None
    args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None
    url: Optional[str] = None
    headers: Dict[str, str] = field(default_factory=dict)
    allowed_tools: Optional[List[str]] = None
    disabled_tools: List[str] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT
    needs_approval: bool = True
    auto_approve: List[str] = field(default_factory=list)

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def offers(self, tool: str) -> bool:
        """Whether the configuration lets ``tool`` be offered (``allowed_tools``, ``disabled_tools``)."""
        if self.allowed_tools is not None and tool not in self.allowed_tools:
            return False
        return tool not in self.disabled_tools

    def asks_before(self, tool: str) -> bool:
        return self.needs_approval and tool not in self.auto_approve

    def settings(self) -> Dict[str, Any]:
        """What a recording keeps of the server: its name and what the run does with its tools, never how it is
        reached (commands, URLs, environment and headers may hold secrets)."""
        return {
            "allowed_tools": self.allowed_tools,
            "disabled_tools": self.disabled_tools,
            "timeout": self.timeout,
            "needs_approval": self.needs_approval,
            "autoApprove": self.auto_approve,
        }

    def secrets(self) -> Dict[str, str]:
        """``{what: value}`` of the values the configuration gives that are kept out of what a run writes and
        shows: every value of ``env`` and ``headers``."""
        found = {f"MCP server {self.name}: env {key}": value for key, value in self.env.items()}
        found.update({f"MCP server {self.name}: header {key}": value for key, value in self.headers.items()})
        return found


def expand(text: str, environ: Mapping[str, str], where: str) -> str:
    """``text`` with ``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` replaced from ``environ``; BadInputError
    naming ``where`` and the variable when one is not set (and has no default)."""
    if "${" not in text:
        return text

    def value(match: "re.Match[str]") -> str:
        if match.group(4) is not None:
            raise BadInputError(
                f"{where}: ${{{match.group(4)}}} cannot be expanded: write ${{NAME}} (an environment "
                "variable), ${NAME:-default} or the value itself (VS Code's ${input:...} prompts are "
                "not asked here)."
            )
        name, default = match.group(2), match.group(3)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise BadInputError(
            f"{where}: the environment variable {name} is not set (the configuration uses "
            f"${{{name}}}). Export it before the run, or write the value in the file."
        )

    return _VARIABLE.sub(value, text)


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (VS Code's mcp.json) as plain JSON: strings are kept whole, comments
    dropped, then the commas before a closing bracket. Two passes, each linear."""

    def scan(text: str, on_other) -> str:
        out: List[str] = []
        i, n = 0, len(text)
        while i < n:
            if text[i] == '"':
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                out.append(text[i : j + 1])
                i = j + 1
            else:
                i = on_other(text, i, out)
        return "".join(out)

    def comments(text: str, i: int, out: List[str]) -> int:
        if text.startswith("//", i):
            end = text.find("\n", i)
            return len(text) if end < 0 else end
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            return len(text) if end < 0 else end + 2
        out.append(text[i])
        return i + 1

    def commas(text: str, i: int, out: List[str]) -> int:
        if text[i] == ",":
            j = i + 1
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if text[j : j + 1] in ("}", "]"):
                return i + 1
        out.append(text[i])
        return i + 1

    return scan(scan(text, comments), commas)


def read_config_file(path: str) -> Dict[str, Any]:
    """The object a configuration file holds: JSON (with comments and trailing commas, as VS Code writes it), or
    YAML for a ``.yaml`` / ``.yml`` file; BadInputError saying what is wrong."""
    if not os.path.isfile(path):
        raise BadInputError(
            f"--mcp-config {path}: no such file. Give the file that lists your MCP servers (e.g. "
            "Claude Desktop's claude_desktop_config.json, or .vscode/mcp.json)."
        )
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as error:
        raise BadInputError(f"--mcp-config {path} cannot be read: {error}") from None
    try:
        if path.lower().endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(_strip_jsonc(text))
    except Exception as error:  # noqa: BLE001 - JSON or YAML errors, said with where they are
        raise BadInputError(
            f"--mcp-config {path} is not valid {'YAML' if path.endswith(('yaml', 'yml')) else 'JSON'}: {error}"
        ) from None
    if not isinstance(data, dict):
        raise BadInputError(
            f"--mcp-config {path}: the file must hold an object with `mcpServers` (or VS Code's `servers`)."
        )
    return data


def _strings(value: Any, key: str) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise BadInputError(f"{key}: must be a list of strings")
    return [str(v) for v in value]


def _mapping(value: Any, key: str) -> Dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        raise BadInputError(f"{key}: must be an object of names and string values")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


def _server(
    name: str, spec: Any, where: str, environ: Mapping[str, str], base: Optional[str]
) -> Optional[ServerConfig]:
    key = f"{where}.{name}"
    if not isinstance(spec, dict):
        raise BadInputError(f"{key}: must be an object with a `command` (a server started here) or a `url`")
    if spec.get("disabled") is True:
        return None
    kind = str(spec.get("type") or spec.get("transportType") or "").strip().lower()
    if kind == "sse":
        raise BadInputError(
            f"{key}: `type: sse` is the HTTP+SSE transport of 2024-11-05, which this client does not "
            "speak; give the server's Streamable HTTP endpoint (often its URL ending in /mcp) with "
            "`type: http`."
        )
    if kind and kind != "stdio" and kind not in HTTP_TYPES:
        raise BadInputError(f"{key}.type: {spec.get('type')!r} is not a transport this client speaks: stdio or http.")
    unknown = sorted(set(spec) - _KNOWN)
    if unknown:
        raise BadInputError(
            f"{key}: unknown setting(s) {', '.join(unknown)}. A server has `command`, `args`, `env`, "
            "`cwd` (started here) or `url`, `headers` (reached over HTTP), and may have "
            "allowed_tools, disabled_tools, timeout, needs_approval, autoApprove, disabled."
        )
    server = ServerConfig(name)
    if spec.get("command") is not None and spec.get("url") is not None:
        raise BadInputError(f"{key}: give either `command` (a server started here) or `url`, not both")
    if spec.get("command") is not None:
        if not isinstance(spec["command"], str) or not spec["command"].strip():
            raise BadInputError(f"{key}.command: must be the program that starts the server, e.g. npx")
        server.command = expand(spec["command"].strip(), environ, f"{key}.command")
        server.args = [expand(a, environ, f"{key}.args") for a in _strings(spec.get("args") or [], f"{key}.args")]
        if spec.get("cwd") is not None:
            cwd = expand(str(spec["cwd"]), environ, f"{key}.cwd")
            server.cwd = os.path.join(base, cwd) if base and not os.path.isabs(cwd) else cwd
    elif spec.get("url") is not None:
        url = expand(str(spec["url"]), environ, f"{key}.url")
        if not re.match(r"https?://", url):
            raise BadInputError(f"{key}.url: {url!r} is not an http:// or https:// URL")
        server.url = url
        server.headers = {
            k: expand(v, environ, f"{key}.headers.{k}")
            for k, v in _mapping(spec.get("headers") or {}, f"{key}.headers").items()
        }
    else:
        raise BadInputError(
            f"{key}: no `command` and no `url`: say how the server is started (`command`, `args`) or reached (`url`)."
        )
    server.env = {
        k: expand(v, environ, f"{key}.env.{k}") for k, v in _mapping(spec.get("env") or {}, f"{key}.env").items()
    }
    if spec.get("allowed_tools") is not None:
        server.allowed_tools = _strings(spec["allowed_tools"], f"{key}.allowed_tools")
    server.disabled_tools = _strings(spec.get("disabled_tools") or [], f"{key}.disabled_tools")
    server.auto_approve = _strings(spec.get("autoApprove") or [], f"{key}.autoApprove")
    if spec.get("timeout") is not None:
        try:
            server.timeout = float(spec["timeout"])
        except (TypeError, ValueError):
            server.timeout = 0.0
        if not server.timeout > 0:
            raise BadInputError(f"{key}.timeout: must be a number of seconds, more than 0 (got {spec['timeout']!r})")
    if not isinstance(spec.get("needs_approval", True), bool):
        raise BadInputError(f"{key}.needs_approval: must be true or false")
    server.needs_approval = spec.get("needs_approval", True)
    return server


def servers_from(
    data: Mapping[str, Any], source: str, environ: Optional[Mapping[str, str]] = None, base: Optional[str] = None
) -> List[ServerConfig]:
    """The servers a configuration object lists, checked and expanded; BadInputError naming the key otherwise.

    :param data: the object (``{"mcpServers": {...}}`` or ``{"servers": {...}}``).
    :param source: where it comes from, for messages (the file, or ``mcp_config`` in a YAML configuration).
    :param environ: where ``${VAR}`` is looked up (default ``os.environ``).
    :param base: the folder a relative ``cwd`` is taken from (the file's; default: the current folder).
    """
    environ = os.environ if environ is None else environ
    found = [(key, data[key]) for key in SERVER_KEYS if isinstance(data, Mapping) and key in data]
    if not found:
        raise BadInputError(
            f"{source}: no `mcpServers` object (Claude Desktop, Cursor, Claude Code) and no `servers` "
            "object (VS Code): nothing says which MCP servers to use."
        )
    key, servers = found[0]
    if not isinstance(servers, dict):
        raise BadInputError(f"{source}: `{key}` must be an object of server names and their settings")
    out = []
    for name, spec in servers.items():
        server = _server(str(name), spec, f"{source}: {key}", environ, base)
        if server is not None:
            out.append(server)
    return out


def load_servers(
    config: Any, source: str = "mcp_config", environ: Optional[Mapping[str, str]] = None, base: Optional[str] = None
) -> List[ServerConfig]:
    """The servers of ``config``: a file's path (JSON or YAML; a relative path is taken from ``base``) or the object
    itself; see ``servers_from``."""
    if isinstance(config, str):
        path = os.path.join(base, config) if base and not os.path.isabs(config) else config
        path = os.path.expanduser(path)
        return servers_from(read_config_file(path), path, environ, os.path.dirname(os.path.abspath(path)))
    if isinstance(config, Mapping):
        return servers_from(config, source, environ, base)
    raise BadInputError(f"{source}: must be the path of a file listing MCP servers, or an object with `mcpServers`")


def replayed_servers(recorded: Any) -> List[ServerConfig]:
    """The servers a recording names (``ServerConfig.settings`` of each): what a replay offers, with nothing to
    start."""
    out = []
    for name, settings in (recorded or {}).items() if isinstance(recorded, dict) else ():
        settings = settings if isinstance(settings, dict) else {}
        server = ServerConfig(str(name), command="(replayed)")
        server.allowed_tools = settings.get("allowed_tools")
        server.disabled_tools = list(settings.get("disabled_tools") or [])
        server.timeout = float(settings.get("timeout") or DEFAULT_TIMEOUT)
        server.needs_approval = bool(settings.get("needs_approval", True))
        server.auto_approve = list(settings.get("autoApprove") or [])
        out.append(server)
    return out


def described(servers: List[ServerConfig]) -> Tuple[str, ...]:
    """``fs (npx)``, ``web (https://host/mcp)``: the servers as one line names them."""
    from aiflows_jarvis.CoreFlowModule import without_credentials

    return tuple(
        f"{s.name} ({os.path.basename(s.command or '') if s.command else without_credentials(s.url or '')[0]})"
        for s in servers
    )
