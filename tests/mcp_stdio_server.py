"""A small MCP server speaking stdio (JSON-RPC lines), standard library only, for the tests.

    python mcp_stdio_server.py [--marker TEXT] [--crash-at-start] [--hang] [--garbage] [--grandchild FILE]
                               [--page-size N] [--version V] [--crash-on-call] [--calls FILE]

Its tools: add(a, b), echo(text, upper?), fail(message), image(), huge(chars), env(name), sleep(seconds),
search(query, filters?, tags?, limit?, mode?) (a schema with $ref, anyOf, enum, arrays), and two that a client
cannot offer as they are: "odd name!" (renamed) and "not_an_object" (its input schema is an array).
``--marker`` only puts a text in its command line (tests find what is left running by it). ``--grandchild FILE``
starts a process that sleeps (it stays when the server ends), and writes its pid to FILE. ``--calls FILE`` appends each
tools/call's name and arguments to FILE.
"""

import base64
import json
import os
import subprocess
import sys
import time

ARGS = sys.argv[1:]
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000000000500010d0a2db40000000049454e44ae426082"
    )
).decode()


def option(name, default=None):
    return ARGS[ARGS.index(name) + 1] if name in ARGS else default


TOOLS = [
    {
        "name": "add",
        "description": "Add two whole numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
    {
        "name": "echo",
        "description": "Say a text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "what to say"}, "upper": {"type": "boolean"}},
            "required": ["text"],
        },
    },
    {
        "name": "fail",
        "description": "Report an error.",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    },
    {"name": "image", "description": "A one-pixel PNG.", "inputSchema": {"type": "object", "properties": {}}},
    {
        "name": "huge",
        "description": "A long text.",
        "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}, "required": ["chars"]},
    },
    {
        "name": "env",
        "description": "The value of an environment variable.",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
    {
        "name": "sleep",
        "description": "Wait.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    },
    {
        "name": "search",
        "description": "Search notes.",
        "inputSchema": {
            "type": "object",
            "$defs": {
                "Filters": {"type": "object", "properties": {"author": {"type": "string"}, "year": {"type": "integer"}}}
            },
            "properties": {
                "query": {"type": "string", "description": "words to look for"},
                "filters": {"$ref": "#/$defs/Filters"},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "blue"]}},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 10},
                "mode": {"type": "string", "enum": ["fast", "exact"]},
            },
            "required": ["query"],
        },
    },
    {"name": "odd name!", "description": "A tool whose name is not a command's.", "inputSchema": {"type": "object"}},
    {"name": "not_an_object", "description": "Takes an array.", "inputSchema": {"type": "array"}},
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value, error=False):
    return {"content": [{"type": "text", "text": value}], "isError": error}


def call(name, arguments):
    calls = option("--calls")
    if calls:
        with open(calls, "a") as f:
            f.write(json.dumps([name, arguments]) + "\n")
    if "--crash-on-call" in ARGS:
        sys.stderr.write("the tool crashed the server\n")
        sys.stderr.flush()
        os._exit(5)
    if name == "add":
        total = arguments["a"] + arguments["b"]
        return {**text(str(total)), "structuredContent": {"sum": total}}
    if name == "echo":
        said = arguments["text"]
        return text(said.upper() if arguments.get("upper") else said)
    if name == "fail":
        return text(arguments["message"], error=True)
    if name == "image":
        return {
            "content": [
                {"type": "text", "text": "Here is the image."},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ]
        }
    if name == "huge":
        lines, size = [], 0
        number = 0
        while size < arguments["chars"]:
            number += 1
            line = f"line {number}: " + "x" * 60
            lines.append(line)
            size += len(line) + 1
        return text("\n".join(lines)[: arguments["chars"]])
    if name == "env":
        return text(os.environ.get(arguments["name"], "(unset)"))
    if name == "sleep":
        time.sleep(float(arguments["seconds"]))
        return text("slept")
    if name == "search":
        return text(json.dumps(arguments, sort_keys=True))
    return None


def main():
    if "--crash-at-start" in ARGS:
        sys.stderr.write("cannot open the database /nowhere/db.sqlite\n")
        sys.exit(3)
    if "--garbage" in ARGS:
        print("Server listening on stdio", flush=True)
    if option("--grandchild"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", option("--marker", "")])
        with open(option("--grandchild"), "w") as f:
            f.write(str(child.pid))
    page = int(option("--page-size", "100"))
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, number = message.get("method"), message.get("id")
        if number is None:
            continue  # a notification
        if "--hang" in ARGS:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": number,
                    "result": {
                        "protocolVersion": option("--version", params.get("protocolVersion")),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "test-stdio", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            result = {"tools": TOOLS[start : start + page]}
            if start + page < len(TOOLS):
                result["nextCursor"] = str(start + page)
            send({"jsonrpc": "2.0", "id": number, "result": result})
        elif method == "tools/call":
            result = call(params.get("name"), params.get("arguments") or {})
            if result is None:
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": number,
                        "error": {"code": -32602, "message": f"Unknown tool: {params.get('name')}"},
                    }
                )
            else:
                send({"jsonrpc": "2.0", "id": number, "result": result})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": number, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": number, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
