"""A small MCP server speaking Streamable HTTP on 127.0.0.1, standard library only, for the tests.

    with MCPHTTPServer(sse=True, token="s3cret-token") as server:
        ... {"url": server.url, "headers": {"Authorization": "Bearer s3cret-token"}} ...

Each POST is one JSON-RPC message: a request is answered with a JSON body, or (``sse=True``) with a stream of
server-sent events that first pings the client (a request the client must answer) and then holds the response;
``cut_first_stream`` ends the first stream after an event id and before the response, so the client resumes it with
``Last-Event-ID``. Notifications and responses get 202. ``initialize`` gives a ``Mcp-Session-Id``, which every later
request must carry (else 400), with ``MCP-Protocol-Version``; DELETE ends the session. With ``token``, a request
without ``Authorization: Bearer <token>`` gets 401. The tools are mcp_stdio_server's. ``requests`` records
``(method, headers, body)``.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from typing import Any, Dict, List, Optional

import mcp_stdio_server


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    def _reply(self, status: int, body: bytes = b"", kind: str = "application/json", headers=None):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self):
        owner = self.server.owner
        owner.requests.append(("DELETE", dict(self.headers), None))
        owner.deleted.append(self.headers.get("Mcp-Session-Id"))
        owner.sessions.discard(self.headers.get("Mcp-Session-Id"))
        self._reply(200)

    def do_GET(self):
        owner = self.server.owner
        owner.requests.append(("GET", dict(self.headers), None))
        held = owner.held.pop(self.headers.get("Last-Event-ID") or "", None)
        if held is None:
            self._reply(405)
            return
        self._events([(None, held)])

    def _events(self, events):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event_id, message in events:
            text = (f"id: {event_id}\n" if event_id else "") + (f"data: {json.dumps(message)}\n\n" if message else "\n")
            self.wfile.write(text.encode())
            self.wfile.flush()
        self.close_connection = True

    def do_POST(self):
        owner = self.server.owner
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        owner.requests.append(("POST", dict(self.headers), body))
        if owner.token and self.headers.get("Authorization") != f"Bearer {owner.token}":
            self._reply(401, b'{"error": "invalid token"}')
            return
        method = body.get("method") if isinstance(body, dict) else None
        if method != "initialize":
            if self.headers.get("Mcp-Session-Id") not in owner.sessions:
                self._reply(404 if self.headers.get("Mcp-Session-Id") else 400, b'{"error": "no such session"}')
                return
            if self.headers.get("MCP-Protocol-Version") != owner.version:
                self._reply(400, b'{"error": "MCP-Protocol-Version missing or wrong"}')
                return
        if "id" not in body or "method" not in body:  # a notification, or the answer to our ping
            if body.get("id") == "ping-1":
                owner.pings_answered += 1
            self._reply(202)
            return
        number, params = body["id"], body.get("params") or {}
        headers = {}
        if method == "initialize":
            session = uuid.uuid4().hex
            owner.sessions.add(session)
            headers["Mcp-Session-Id"] = session
            response = {
                "jsonrpc": "2.0",
                "id": number,
                "result": {
                    "protocolVersion": owner.version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "test-http", "version": "1"},
                },
            }
        elif method == "tools/list":
            response = {"jsonrpc": "2.0", "id": number, "result": {"tools": mcp_stdio_server.TOOLS[:8]}}
        elif method == "tools/call":
            result = mcp_stdio_server.call(params.get("name"), params.get("arguments") or {})
            response = (
                {"jsonrpc": "2.0", "id": number, "result": result}
                if result is not None
                else {"jsonrpc": "2.0", "id": number, "error": {"code": -32602, "message": "Unknown tool"}}
            )
        else:
            response = {"jsonrpc": "2.0", "id": number, "error": {"code": -32601, "message": f"no {method}"}}
        if not owner.sse or method == "initialize":
            self._reply(200, json.dumps(response).encode(), headers=headers)
            return
        ping = {"jsonrpc": "2.0", "id": "ping-1", "method": "ping"}
        if owner.cut_first_stream:
            owner.cut_first_stream = False
            owner.held["event-2"] = response
            self._events([("event-1", ping), ("event-2", None)])
            return
        self._events([("event-1", ping), ("event-2", response)])


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class MCPHTTPServer:
    """The server on a free port of 127.0.0.1; a context manager (``close()`` stops it)."""

    def __init__(
        self,
        sse: bool = False,
        token: Optional[str] = None,
        version: str = "2025-06-18",
        cut_first_stream: bool = False,
    ):
        self.sse, self.token, self.version, self.cut_first_stream = sse, token, version, cut_first_stream
        self.requests: List[tuple] = []
        self.sessions: set = set()
        self.deleted: List[Any] = []
        self.held: Dict[str, Any] = {}
        self.pings_answered = 0
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/mcp"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "MCPHTTPServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
