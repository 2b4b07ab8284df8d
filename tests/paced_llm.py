"""A loopback OpenAI-compatible chat server that writes its replies at a set pace, as a local server on a laptop does.

Like llama.cpp's server and llama-cpp-python's, it generates one request at a time (the others wait in its queue), and
a request whose client went away is handled as they handle it: a streamed one stops at the next token it cannot send
(a closed connection cancels it); a non-streamed one is written to its end all the same. Every generation is counted
(``generations``), so a test sees a reply written twice.

    with PacedLLMServer(["a long reply ..."], tokens_per_second=20) as server:
        ... api_base=server.url ...
        assert server.started == 1 and server.cancelled == 0

Scripted replies are served in order (the last one again when they run out); each is a ``str``, a ``Stall(text,
after)``: the first ``after`` tokens of ``text``, then nothing (the connection held open) until the client closes it,
or a ``Drop(text, after, chunked)``: the first ``after`` tokens, then the connection closed by the server (a plain body,
or a chunked one without its last chunk), with no finish_reason and no ``data: [DONE]``.
``streams=False``: a server that answers ``stream: true`` with one whole completion. A token is a word with the
space before it.
"""

from __future__ import annotations

import http.server
import json
import re
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List

__all__ = ["PacedLLMServer", "Stall", "Drop", "Generation"]


@dataclass
class Stall:
    """A reply that stops after ``after`` tokens and sends nothing more until the client closes the connection."""

    text: str
    after: int


@dataclass
class Drop:
    """A reply whose connection the server closes after ``after`` tokens (``chunked``: a chunked body, dropped
    without its last chunk), as a server that crashes or a proxy that gives up mid-reply."""

    text: str
    after: int
    chunked: bool = False


@dataclass
class Generation:
    """One request the server generated (or began to): what was asked and how it ended."""

    request: Dict[str, Any]
    stream: bool
    tokens: int = 0
    finished: bool = False
    cancelled: bool = False  # stopped because the client had closed the connection
    delivered: bool = False  # the whole reply reached the client
    events: List[str] = field(default_factory=list)


def _tokens(text: str) -> List[str]:
    return re.findall(r"\s*\S+", text) or [text]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):  # noqa: A002
        pass

    def do_POST(self):
        self.server.owner._handle(self)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class PacedLLMServer:
    """See the module; ``url`` is the API base, ``generations`` what was generated, ``queue_lengths`` how many
    requests were waiting each time one arrived."""

    def __init__(
        self, replies: List[Any], tokens_per_second: float = 50.0, streams: bool = True, include_usage: bool = True
    ):
        self.replies = list(replies)
        self.delay = 1.0 / float(tokens_per_second)
        self.streams, self.include_usage = streams, include_usage
        self.generations: List[Generation] = []
        self.queue_lengths: List[int] = []
        self._served = 0
        self._waiting = 0
        self._lock = threading.Lock()
        self._one_at_a_time = threading.Lock()
        self._idle = threading.Condition()
        self._busy = 0
        self._stop = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # ~~~ What tests read ~~~
    @property
    def started(self) -> int:
        return len(self.generations)

    @property
    def cancelled(self) -> int:
        return sum(1 for g in self.generations if g.cancelled)

    @property
    def finished(self) -> int:
        return sum(1 for g in self.generations if g.finished)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no request is being generated or waiting (an abandoned one included)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy and time.monotonic() < deadline:
                self._idle.wait(deadline - time.monotonic())
            return not self._busy

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "PacedLLMServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ~~~ Serving ~~~
    def _next_reply(self) -> Any:
        with self._lock:
            reply = self.replies[min(self._served, len(self.replies) - 1)]
            self._served += 1
        return reply

    def _handle(self, handler: _Handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        if not handler.path.rstrip("/").endswith("/chat/completions"):  # e.g. a question about the context window
            handler.send_error(404)
            return
        with self._idle:
            self._busy += 1
        try:
            with self._lock:
                self.queue_lengths.append(self._waiting)
                self._waiting += 1
            with self._one_at_a_time:  # the queue: one generation at a time
                with self._lock:
                    self._waiting -= 1
                self._generate(handler, body)
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    def _generate(self, handler: _Handler, body: Dict[str, Any]) -> None:
        reply = self._next_reply()
        stall = reply.after if isinstance(reply, Stall) else None
        drop = reply.after if isinstance(reply, Drop) else None
        chunked = isinstance(reply, Drop) and reply.chunked
        text = reply.text if isinstance(reply, (Stall, Drop)) else str(reply)
        tokens = _tokens(text)
        if body.get("max_tokens"):
            tokens = tokens[: int(body["max_tokens"])]
        stream = bool(body.get("stream")) and self.streams
        generation = Generation(body, stream)
        with self._lock:
            self.generations.append(generation)
        model = body.get("model") or "paced"
        if not stream:
            for _ in tokens:  # written to its end, whether the client still waits or not
                if self._stop.wait(self.delay):
                    return
                generation.tokens += 1
            generation.finished = True
            payload = {
                "id": "chatcmpl-paced",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "".join(tokens)}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": len(tokens), "total_tokens": 10 + len(tokens)},
            }
            generation.delivered = self._write(handler, json.dumps(payload).encode(), "application/json", length=True)
            return
        if not self._write(handler, b"", "text/event-stream", chunked=chunked):
            generation.cancelled = True
            return
        for number, token in enumerate(tokens):
            if drop is not None and number >= drop:  # the server goes away mid-reply
                self._drop(handler)
                return
            if stall is not None and number >= stall:
                while not self._stop.is_set():  # nothing more, until the client closes the connection
                    if self._client_gone(handler.connection):
                        generation.cancelled = True
                        return
                return
            if self._stop.wait(self.delay):
                return
            chunk = {
                "id": "chatcmpl-paced",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": {"content": token}, "finish_reason": None}],
            }
            if not self._event(handler, chunk, chunked):
                generation.cancelled = True  # llama.cpp's server: a closed connection stops the generation
                return
            generation.tokens += 1
        generation.finished = True
        last = [
            {
                "id": "chatcmpl-paced",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
        ]
        if self.include_usage and (body.get("stream_options") or {}).get("include_usage"):
            last.append(
                {
                    "id": "chatcmpl-paced",
                    "object": "chat.completion.chunk",
                    "model": model,
                    "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(tokens), "total_tokens": 10 + len(tokens)},
                }
            )
        delivered = all(self._event(handler, chunk) for chunk in last)
        generation.delivered = delivered and self._raw(handler, b"data: [DONE]\n\n")

    @staticmethod
    def _client_gone(connection: socket.socket) -> bool:
        readable, _, _ = select.select([connection], [], [], 0.05)
        if not readable:
            return False
        try:
            return connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    @staticmethod
    def _drop(handler: _Handler) -> None:
        handler.close_connection = True
        try:
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    @staticmethod
    def _write(handler: _Handler, data: bytes, content_type: str, length: bool = False, chunked: bool = False) -> bool:
        try:
            if chunked:  # HTTP/1.1 for this answer alone
                handler.protocol_version = "HTTP/1.1"
                handler.close_connection = True
            handler.send_response(200)
            handler.send_header("Content-Type", content_type)
            if length:
                handler.send_header("Content-Length", str(len(data)))
            if chunked:
                handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
            return True
        except OSError:
            return False

    def _event(self, handler: _Handler, chunk: Dict[str, Any], chunked: bool = False) -> bool:
        data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        return self._raw(handler, b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)

    @staticmethod
    def _raw(handler: _Handler, data: bytes) -> bool:
        try:
            handler.wfile.write(data)
            handler.wfile.flush()
            return True
        except OSError:
            return False
