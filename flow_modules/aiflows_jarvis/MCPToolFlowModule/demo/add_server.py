"""The demo's MCP server: one tool, add(a, b), over stdio (JSON-RPC lines). Standard library only.

python3 add_server.py      (MCPToolFlow starts it in this folder: `mcp_config` in demo.yaml)
"""

import json
import sys

TOOL = {
    "name": "add",
    "description": "Add two numbers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
}


def answer(number, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": number, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, number, params = message.get("method"), message.get("id"), message.get("params") or {}
    if number is None:  # a notification
        continue
    if method == "initialize":
        answer(
            number,
            {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "add-demo", "version": "1"},
            },
        )
    elif method == "tools/list":
        answer(number, {"tools": [TOOL]})
    elif method == "tools/call":
        arguments = params.get("arguments") or {}
        answer(number, {"content": [{"type": "text", "text": str(arguments["a"] + arguments["b"])}]})
    else:
        answer(number, {})
