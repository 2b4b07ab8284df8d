"""MCPToolFlowModule: the tools of MCP servers (Model Context Protocol) as flows: a synchronous client (stdio and
Streamable HTTP, no asyncio), the configuration users already have (`mcpServers`), and the flow that calls a tool."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .client import MCPClient, MCPError  # noqa: E402
from .config import ServerConfig, load_servers  # noqa: E402
from .MCPToolFlow import MCPToolFlow  # noqa: E402
from .servers import MCPServers  # noqa: E402
