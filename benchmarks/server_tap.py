"""A recording relay between a client and an LLM server, for benchmarks: what each chat completion cost the server.

The client is pointed at the relay's ``url``; every request is passed on to the server as it is, and the answer back
as it comes (a stream chunk by chunk). For each chat completion the relay keeps a ``Call``: the chat it belongs to
(``tap.chat``, set by the benchmark before it calls a chat), the messages sent, the seconds to the first streamed
token and in all, and what the server reported: ``usage`` (``prompt_tokens``, OpenAI's and vLLM's
``prompt_tokens_details.cached_tokens``) and llama.cpp's ``timings`` (``prompt_n``: prompt tokens read, not taken
from the prefix cache; ``prompt_ms``).
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "accept-encoding"}


@dataclass
class Call:
    chat: str
    messages: List[dict]
    stream: bool
    status: int = 0
    seconds: float = 0.0
    first_token: Optional[float] = None  # seconds to the first streamed content
    usage: Dict[str, Any] = field(default_factory=dict)
    timings: Dict[str, Any] = field(default_factory=dict)

    @property
    def prefill_tokens(self) -> Optional[int]:
        """Prompt tokens the server had to read (not taken from its prefix cache), when it says; else None."""
        if isinstance(self.timings.get("prompt_n"), int):
            return self.timings["prompt_n"]
        details = self.usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        prompt = self.usage.get("prompt_tokens")
        if isinstance(prompt, int) and isinstance(cached, int):
            return prompt - cached
        return None

    @property
    def prefill_seconds(self) -> Optional[float]:
        ms = self.timings.get("prompt_ms")
        return ms / 1000 if isinstance(ms, (int, float)) else None


class ServerTap:
    """The relay, on 127.0.0.1 (random port); a context manager. ``url`` replaces the server's ``api_base``."""

    def __init__(self, api_base: str):
        parts = urlsplit(api_base.rstrip("/"))
        self.scheme, self.host, self.path = parts.scheme, parts.netloc, parts.path
        self.chat = ""
        self.calls: List[Call] = []
        self._lock = threading.Lock()
        tap = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):  # noqa: D401 - quiet
                pass

            def do_GET(self):
                tap._relay(self, "GET")

            def do_POST(self):
                tap._relay(self, "POST")

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True, name="server-tap")
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{self.path}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ServerTap":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _relay(self, handler: http.server.BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else None
        path = handler.path[len(self.path) :] if handler.path.startswith(self.path) else handler.path
        body = _json(raw)
        call = None
        if method == "POST" and path.endswith("/chat/completions") and isinstance(body, dict):
            call = Call(self.chat, list(body.get("messages") or []), bool(body.get("stream")))
            with self._lock:
                self.calls.append(call)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_HEADERS}
        connection = (http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection)(
            self.host, timeout=3600
        )
        started = time.monotonic()
        try:
            connection.request(method, handler.path, body=raw, headers=headers)
            response = connection.getresponse()
            handler.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_HEADERS:
                    handler.send_header(key, value)
            if call is not None:
                call.status = response.status
            if call is not None and call.stream and response.status == 200:
                handler.end_headers()
                self._relay_stream(handler, response, call, started)
            else:
                data = response.read()
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
                if call is not None:
                    self._note(call, _json(data))
        except (OSError, http.client.HTTPException) as error:
            try:
                handler.send_error(502, f"server tap: {error}")
            except OSError:
                pass
        finally:
            connection.close()
            if call is not None:
                call.seconds = time.monotonic() - started

    def _relay_stream(self, handler, response, call: Call, started: float) -> None:
        while True:
            line = response.readline()
            if not line:
                break
            handler.wfile.write(line)
            handler.wfile.flush()
            if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
                continue
            chunk = _json(line[5:])
            if not isinstance(chunk, dict):
                continue
            self._note(call, chunk)
            delta = ((chunk.get("choices") or [{}])[0] or {}).get("delta") or {}
            if call.first_token is None and (delta.get("content") or delta.get("reasoning_content")):
                call.first_token = time.monotonic() - started

    @staticmethod
    def _note(call: Call, answer: Any) -> None:
        if not isinstance(answer, dict):
            return
        if isinstance(answer.get("usage"), dict):
            call.usage = answer["usage"]
        if isinstance(answer.get("timings"), dict):
            call.timings = answer["timings"]


def _json(data: Optional[bytes]) -> Any:
    try:
        return json.loads(data.decode("utf-8")) if data else None
    except (UnicodeDecodeError, ValueError):
        return None
