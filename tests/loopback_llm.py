"""A loopback OpenAI-compatible chat server for tests (standard library only).

litellm 1.0.0 POSTs to ``f"{api_base}/chat/completions"`` with its own httpx client, so pointing ``api_base`` at
``server.url`` (``http://127.0.0.1:<port>/v1``) drives the real LiteLLMBackend -> litellm -> HTTP path::

    with LoopbackLLMServer(replies=["hello", HTTPError(429, "slow down")]) as server:
        completion(model="gpt-4", messages=[...], api_base=server.url, api_key="sk-test")
        assert server.last_messages()[-1]["content"] == ...

Replies are served first in, first out. A reply is one of:

* ``str``: a normal ``chat.completion`` (see :func:`completion_json`), or a minimal SSE stream if the request
  has ``"stream": true``;
* ``HTTPError(status, message)``: that status with an OpenAI-style ``{"error": {...}}`` body;
* ``Malformed(body)``: status 200 (by default) with that raw body;
* ``Slow(seconds, reply)``: waits, then serves ``reply`` (any kind); ``close()`` cuts the wait short;
  ``Slow(None, reply)`` waits for ``close()`` alone: a reply that must not come however slow the machine is;
* ``Cut(content, after, ...)``: a streamed reply without its end (for a request with ``"stream": true``): the
  first ``after`` pieces of ``content``, then the connection closed, plain or chunked, with no finish_reason and no
  ``data: [DONE]``; or (``finish=True``) every piece and the finish_reason, no ``[DONE]``, the connection closed or
  held open (``hold=True``) until the client closes it;
* a ``dict``: sent as the JSON body, status 200, as is;
* a callable ``(request_json) -> reply``: called with the parsed request body; its result is served.

With no reply left the server answers HTTP 500 ("loopback server: no scripted reply left") and records the
problem in ``server.errors`` / ``server.unexpected_calls``, so a test can fail clearly.

Two more services, for AutoGPT's memory and tools (they never take a scripted chat reply):

* ``POST /v1/embeddings``: deterministic vectors (``embedding_vector``: hashed words, ``embedding_dimension``
  long, normalised), ``usage.prompt_tokens`` counted roughly; ``embedding_errors`` (a deque of HTTPError/Malformed)
  is served first, one per request. Requests are in ``embedding_requests``.
* ``GET /w/api.php``: a stand-in for the MediaWiki API over ``wiki_pages`` (``{title: extract}``): ``list=search``
  finds the titles sharing a word with ``srsearch``; ``prop=extracts`` returns a page's extract. Requests (their
  query parameters) are in ``wiki_requests``. With ``wiki_hangs`` set, a request is held unanswered until
  ``close()``; ``wiki_held`` counts those held now.

And the questions a client asks about the context window (they never take a scripted chat reply either):
``GET /v1/models`` (vLLM), ``GET /props`` (llama.cpp's server), ``POST /api/show`` (Ollama). Each path answers what
``window_answers[path]`` holds (a dict, HTTPError, Malformed or Slow, as chat replies; by default HTTP 404, as a
server without it). Requests (``(method, path, json)``) are in ``window_requests``, their headers in
``window_headers``.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import math
import re
import threading
import time
import urllib.parse
from collections import deque
from typing import Any, Dict, Iterable, List, Optional, Union

__all__ = [
    "LoopbackLLMServer",
    "HTTPError",
    "Malformed",
    "Slow",
    "Cut",
    "completion_json",
    "chunk_json",
    "stream_pieces",
    "NO_REPLY_LEFT",
]

NO_REPLY_LEFT = "loopback server: no scripted reply left"

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
EMBEDDING_PATHS = ("/v1/embeddings", "/embeddings")
WIKI_PATH = "/w/api.php"
WINDOW_PATHS = {"/v1/models": "GET", "/models": "GET", "/props": "GET", "/api/show": "POST"}


def embedding_vector(text: str, dimension: int = 16) -> List[float]:
    """The loopback server's embedding of ``text``: hashed words, normalised (texts sharing words are near)."""
    vector = [0.0] * dimension
    for word in re.findall(r"\w+", str(text).lower()):
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        vector[digest[0] % dimension] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
}

_DEFAULT_MESSAGES = {
    401: "Incorrect API key provided: sk-****. (loopback server: scripted HTTP 401)",
    429: "Rate limit reached for gpt-4 (loopback server: scripted HTTP 429)",
}


class HTTPError:
    """Scripted error reply: HTTP ``status`` with an OpenAI-style error body ``{"error": {message, type, param,
    code}}``.

    ``type``/``code`` default to what OpenAI sends for that status. What litellm 1.0.0 raises (non-streaming):
    429 -> ``litellm.exceptions.RateLimitError``; 401 -> ``AuthenticationError`` (a 401 whose body has type
    ``invalid_request_error`` but lacks "Incorrect API key provided" becomes ``BadRequestError``, which is why a
    custom 401 message gets type ``authentication_error``); 400 (type ``invalid_request_error``) -> ``BadRequestError``;
    a message containing "This model's maximum context length is" -> ``ContextWindowExceededError``; 408/504 ->
    ``Timeout``; other statuses (403, 500, 503, ...) -> ``TypeError`` ("APIError.__init__() missing ... 'body'"),
    whose ``__context__`` is litellm's ``OpenAIError`` carrying ``status_code``.
    """

    def __init__(
        self,
        status: int,
        message: str = "",
        type: Optional[str] = None,
        code: Optional[str] = None,
        headers: Optional[Dict[str, str]] = None,
    ):
        default_type, default_code = _ERROR_TYPES.get(int(status), ("api_error", None))
        if not message:
            message = _DEFAULT_MESSAGES.get(int(status), "loopback server: scripted HTTP {status}").format(
                status=status
            )
        if int(status) == 401 and type is None and "Incorrect API key provided" not in message:
            # litellm 1.0.0 maps any "invalid_request_error" body without that phrase to BadRequestError, even on 401.
            default_type = "authentication_error"
        self.status = int(status)
        self.message = message
        self.type = type if type is not None else default_type
        self.code = code if code is not None else default_code
        self.headers = dict(headers or {})

    def body(self) -> bytes:
        return json.dumps(
            {"error": {"message": self.message, "type": self.type, "param": None, "code": self.code}}
        ).encode("utf-8")

    def __repr__(self) -> str:
        return f"HTTPError({self.status}, {self.message!r})"


class Malformed:
    """Scripted broken reply: ``status`` (200 by default) with ``body`` sent verbatim."""

    def __init__(
        self, body: Union[bytes, str] = b"{not json", status: int = 200, content_type: str = "application/json"
    ):
        self.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        self.status = int(status)
        self.content_type = content_type

    def __repr__(self) -> str:
        return f"Malformed({self.body!r}, status={self.status})"


class Slow:
    """Scripted slow reply: wait ``seconds`` (interruptible by ``close()``), then serve ``reply``.

    seconds: how long; None waits until the server is closed (the client's own timeout, the run's deadline or a
        signal must end the call, and no load on the machine can make the reply come first).
    reply: what is served after the wait (any kind of reply).
    """

    def __init__(self, seconds: Optional[float], reply: Any):
        self.seconds = None if seconds is None else float(seconds)
        self.reply = reply

    def __repr__(self) -> str:
        return f"Slow({self.seconds}, {self.reply!r})"


class Cut:
    """Scripted streamed reply that ends without its end: see the module.

    content: the reply's text, cut into pieces as ``stream_pieces`` cuts it.
    after: how many pieces are sent before the connection is closed (ignored with ``finish``).
    chunked: the body is sent with ``Transfer-Encoding: chunked`` (HTTP/1.1) and dropped without its last chunk;
        else it is a plain body that ends where the connection closes.
    finish: every piece is sent, then the last chunk with ``finish_reason: stop``, never ``data: [DONE]``.
    hold: after the last event, the connection is held open (nothing more sent) until the client closes it or the
        server is closed.
    """

    def __init__(self, content: str, after: int = 0, chunked: bool = False, finish: bool = False, hold: bool = False):
        self.content, self.after = content, int(after)
        self.chunked, self.finish, self.hold = chunked, finish, hold

    def __repr__(self) -> str:
        return (
            f"Cut({self.content[:40]!r}, after={self.after}, chunked={self.chunked}, finish={self.finish}, "
            f"hold={self.hold})"
        )


def _rough_tokens(text: str) -> int:
    return max(1, len(re.findall(r"\w+|[^\w\s]", text or ""))) if text else 0


def completion_json(content: str, model: str = "gpt-4", prompt_tokens: int = 0, finish_reason: str = "stop") -> dict:
    """A non-streaming OpenAI ``chat.completion`` object whose single choice says ``content``."""
    completion_tokens = _rough_tokens(content)
    return {
        "id": f"chatcmpl-loopback-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": int(prompt_tokens),
            "completion_tokens": completion_tokens,
            "total_tokens": int(prompt_tokens) + completion_tokens,
        },
    }


def chunk_json(
    delta: dict, model: str = "gpt-4", finish_reason: Optional[str] = None, id: str = "chatcmpl-loopback"
) -> dict:
    """One ``chat.completion.chunk`` of an SSE stream."""
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def stream_pieces(content: str) -> List[str]:
    """How a string reply is cut into stream chunks: words, each carrying the whitespace *before* it.

    litellm 1.0.0 ``.strip()``s the first non-empty chunk, so whitespace is kept at the start of later chunks
    (``"hello world"`` -> ``["hello", " world"]``) and only leading whitespace of the whole reply is lost.
    """
    return re.findall(r"\s*\S+|\s+$", content) or [content]


def _prompt_tokens(messages: Any) -> int:
    if not isinstance(messages, list):
        return 0
    total = 0
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            total += _rough_tokens(m["content"]) + 4
    return total


class _Headers(dict):
    """Request headers with lower-cased names; lookups ignore case."""

    def __getitem__(self, key):
        return super().__getitem__(key.lower())

    def get(self, key, default=None):
        return super().get(key.lower(), default)

    def __contains__(self, key):
        return isinstance(key, str) and super().__contains__(key.lower())


class _Interrupted(Exception):
    pass


class _Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so close() never waits on idle keep-alive connections.
    protocol_version = "HTTP/1.0"
    server_version = "LoopbackLLM/1.0"

    def log_message(self, format, *args):  # noqa: A002 - silence the default stderr logging
        pass

    def do_POST(self):
        self.server.owner._handle(self, "POST")

    def do_GET(self):
        self.server.owner._handle(self, "GET")

    # -- writing helpers (broken pipes are ignored: the client may have given up) --
    def _send(self, status: int, body: bytes, content_type: str = "application/json", headers: Optional[dict] = None):
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_stream(self, events: Iterable[bytes], chunked: bool = False):
        try:
            if chunked:  # HTTP/1.1 for this answer alone: the connection is closed after it all the same
                self.protocol_version = "HTTP/1.1"
                self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in events:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event) if chunked else event)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


Reply = Any


class LoopbackLLMServer:
    """OpenAI-compatible chat server on 127.0.0.1 (random port) serving scripted replies; a context manager."""

    def __init__(self, replies: Optional[Iterable[Reply]] = None, host: str = "127.0.0.1"):
        self._lock = threading.Lock()
        self._replies: deque = deque(replies or [])
        self._stop = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._closed = False
        self.requests: List[Dict[str, Any]] = []
        self.embedding_requests: List[Dict[str, Any]] = []
        self.embedding_dimension = 16
        self.embedding_errors: deque = deque()
        self.wiki_pages: Dict[str, str] = {}
        self.wiki_requests: List[Dict[str, str]] = []
        self.wiki_hangs = False
        self.wiki_held = 0
        self.window_answers: Dict[str, Any] = {}
        self.window_requests: List[tuple] = []
        self.window_headers: List[Dict[str, str]] = []
        self.errors: List[str] = []
        self.unexpected_calls = 0
        self._httpd = _Server((host, 0), _Handler)
        self._httpd.owner = self
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"loopback-llm-{self.port}",
            daemon=True,
        )
        self._thread.start()

    # -- public API --
    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (no trailing slash): use as litellm's ``api_base``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def wiki_url(self) -> str:
        """The stand-in MediaWiki API: ``http://127.0.0.1:<port>/w/api.php``."""
        return f"http://{self.host}:{self.port}{WIKI_PATH}"

    def add(self, *replies: Reply) -> "LoopbackLLMServer":
        """Queue more scripted replies (served after those already queued)."""
        with self._lock:
            self._replies.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not served yet."""
        with self._lock:
            return len(self._replies)

    def last_messages(self) -> Optional[list]:
        """The ``messages`` of the most recent request (None if there was none)."""
        with self._lock:
            return self.requests[-1]["messages"] if self.requests else None

    def assert_ok(self, allow_leftover: bool = True) -> None:
        """Raise AssertionError if the server recorded errors (or, with allow_leftover=False, replies are left)."""
        problems = list(self.errors)
        if not allow_leftover and self.pending:
            problems.append(f"loopback server: {self.pending} scripted repl(ies) never requested")
        if problems:
            raise AssertionError("\n".join(problems))

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving, interrupt Slow replies, wait (up to ``timeout`` s) for requests in flight and join the
        server thread; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=timeout)
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._in_flight and time.monotonic() < deadline:
                self._idle.wait(deadline - time.monotonic())

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "LoopbackLLMServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LoopbackLLMServer {self.url} pending={self.pending} requests={len(self.requests)}>"

    # -- request handling --
    def _record_error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)
            self.unexpected_calls += 1

    def _handle(self, handler: _Handler, method: str) -> None:
        with self._lock:
            self._in_flight += 1
        try:
            self._handle_request(handler, method)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _handle_request(self, handler: _Handler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length > 0 else b""
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        path = handler.path.split("?", 1)[0]
        if method == "GET" and path == WIKI_PATH:
            self._serve_wiki(handler)
            return
        if method == "POST" and path in EMBEDDING_PATHS:
            self._serve_embeddings(handler, body)
            return
        if WINDOW_PATHS.get(path) == method:
            self._serve_window_question(handler, method, path, body)
            return
        record = {
            "path": path,
            "headers": _Headers((k.lower(), v) for k, v in handler.headers.items()),
            "json": body,
            "messages": body.get("messages") if isinstance(body, dict) else None,
            "model": body.get("model") if isinstance(body, dict) else None,
        }
        with self._lock:
            self.requests.append(record)
            number = len(self.requests)

        if method != "POST" or path not in CHAT_PATHS:
            message = (
                f"loopback server: unexpected request {method} {handler.path} (only POST {' / '.join(CHAT_PATHS)})"
            )
            self._record_error(message)
            handler._send(404, HTTPError(404, message).body())
            return
        if not isinstance(body, dict):
            message = f"loopback server: request {number} to {path} has no JSON object body: {raw[:200]!r}"
            self._record_error(message)
            handler._send(400, HTTPError(400, message).body())
            return

        with self._lock:
            reply = self._replies.popleft() if self._replies else None
            had_reply = reply is not None
        if not had_reply:
            message = f"{NO_REPLY_LEFT} (request {number} to {path}, model {body.get('model')!r})"
            self._record_error(message)
            handler._send(500, HTTPError(500, message).body())
            return

        try:
            self._serve(handler, reply, body)
        except _Interrupted:
            handler.close_connection = True  # server closing: drop the connection without a reply

    def _serve(self, handler: _Handler, reply: Reply, body: dict) -> None:
        model = body.get("model") or "gpt-4"
        stream = bool(body.get("stream"))
        for _ in range(100):  # resolve callables / Slow wrappers
            if isinstance(reply, Slow):
                if self._stop.wait(reply.seconds):
                    raise _Interrupted()
                reply = reply.reply
            elif callable(reply) and not isinstance(reply, (str, bytes, dict, HTTPError, Malformed, Cut)):
                try:
                    reply = reply(body)
                except Exception as e:  # a broken test callback should fail loudly, not hang the client
                    message = f"loopback server: scripted reply callable raised {type(e).__name__}: {e}"
                    self._record_error(message)
                    handler._send(500, HTTPError(500, message).body())
                    return
            else:
                break

        if isinstance(reply, Cut):
            if not stream:
                message = f"loopback server: {reply!r} is a streamed reply, asked without stream: true"
                self._record_error(message)
                handler._send(500, HTTPError(500, message).body())
                return
            events = list(self._sse_events(reply.content, model))[:-1]  # never data: [DONE]
            # the role chunk, then the pieces (and with `finish` the chunk with the finish_reason)
            handler._send_stream(events if reply.finish else events[: 1 + reply.after], chunked=reply.chunked)
            if reply.hold:
                self._hold(handler)
            self._drop(handler)
        elif isinstance(reply, str):
            if stream:
                handler._send_stream(self._sse_events(reply, model))
            else:
                payload = completion_json(reply, model=model, prompt_tokens=_prompt_tokens(body.get("messages")))
                handler._send(200, json.dumps(payload).encode("utf-8"))
        elif isinstance(reply, HTTPError):
            handler._send(reply.status, reply.body(), headers=reply.headers)
        elif isinstance(reply, Malformed):
            handler._send(reply.status, reply.body, content_type=reply.content_type)
        elif isinstance(reply, dict):
            handler._send(200, json.dumps(reply).encode("utf-8"))
        else:
            message = (
                f"loopback server: unsupported scripted reply {reply!r} (use str, HTTPError, Malformed, Slow, "
                "Cut, dict or a callable)"
            )
            self._record_error(message)
            handler._send(500, HTTPError(500, message).body())

    def _hold(self, handler: _Handler) -> None:
        """Send nothing more until the client closes the connection (or the server is closed)."""
        import select
        import socket

        connection = handler.connection
        while not self._stop.is_set():
            readable, _, _ = select.select([connection], [], [], 0.05)
            if not readable:
                continue
            try:
                if connection.recv(1, socket.MSG_PEEK) == b"":
                    return
            except OSError:
                return

    @staticmethod
    def _drop(handler: _Handler) -> None:
        """Close the connection as a server that stops mid-reply does: its end of the body sent (FIN), and no chunked
        body's last chunk."""
        import socket

        handler.close_connection = True
        try:
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _serve_embeddings(self, handler: _Handler, body: Any) -> None:
        with self._lock:
            self.embedding_requests.append(
                {"json": body, "headers": _Headers((k.lower(), v) for k, v in handler.headers.items())}
            )
            error = self.embedding_errors.popleft() if self.embedding_errors else None
        if isinstance(error, HTTPError):
            handler._send(error.status, error.body(), headers=error.headers)
            return
        if isinstance(error, Malformed):
            handler._send(error.status, error.body, content_type=error.content_type)
            return
        texts = body.get("input") if isinstance(body, dict) else None
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list):
            message = f"loopback server: an embeddings request without `input`: {body!r}"[:300]
            self._record_error(message)
            handler._send(400, HTTPError(400, message).body())
            return
        data = [
            {"object": "embedding", "index": i, "embedding": embedding_vector(t, self.embedding_dimension)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(_rough_tokens(str(t)) for t in texts)
        payload = {
            "object": "list",
            "data": data,
            "model": body.get("model"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        handler._send(200, json.dumps(payload).encode("utf-8"))

    def _serve_window_question(self, handler: _Handler, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.window_requests.append((method, path, body))
            self.window_headers.append(_Headers((k.lower(), v) for k, v in handler.headers.items()))
            answer = self.window_answers.get(path)
        if answer is None:
            answer = HTTPError(404, f"loopback server: no {path} here")
        try:
            while isinstance(answer, Slow):
                if self._stop.wait(answer.seconds):
                    raise _Interrupted()
                answer = answer.reply
        except _Interrupted:
            handler.close_connection = True
            return
        if isinstance(answer, HTTPError):
            handler._send(answer.status, answer.body(), headers=answer.headers)
        elif isinstance(answer, Malformed):
            handler._send(answer.status, answer.body, content_type=answer.content_type)
        else:
            handler._send(200, json.dumps(answer).encode("utf-8"))

    def _serve_wiki(self, handler: _Handler) -> None:
        query = dict(urllib.parse.parse_qsl(handler.path.split("?", 1)[1] if "?" in handler.path else ""))
        with self._lock:
            self.wiki_requests.append(query)
            pages = dict(self.wiki_pages)
            hangs = self.wiki_hangs
            self.wiki_held += hangs
        if hangs:  # a wiki that never answers: held until close(), then the connection is dropped
            self._stop.wait()
            with self._lock:
                self.wiki_held -= 1
            handler.close_connection = True
            return
        if query.get("list") == "search":
            words = set(re.findall(r"\w+", query.get("srsearch", "").lower()))
            hits = [t for t in pages if words & set(re.findall(r"\w+", t.lower()))]
            limit = int(query.get("srlimit") or 10)
            payload = {
                "query": {"search": [{"ns": 0, "title": t, "pageid": i + 1} for i, t in enumerate(hits[:limit])]}
            }
        elif query.get("prop") == "extracts":
            title = query.get("titles", "")
            page = (
                {"pageid": 1, "ns": 0, "title": title, "extract": pages[title]}
                if title in pages
                else {"ns": 0, "title": title, "missing": ""}
            )
            payload = {"query": {"pages": {"1" if title in pages else "-1": page}}}
        else:
            payload = {"error": {"code": "badparams", "info": f"loopback wiki: unsupported query {query}"}}
        handler._send(200, json.dumps(payload).encode("utf-8"))

    @staticmethod
    def _sse_events(content: str, model: str):
        cid = f"chatcmpl-loopback-{time.time_ns()}"

        def event(obj) -> bytes:
            return b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n"

        yield event(chunk_json({"role": "assistant", "content": ""}, model=model, id=cid))
        for piece in stream_pieces(content):
            yield event(chunk_json({"content": piece}, model=model, id=cid))
        yield event(chunk_json({}, model=model, finish_reason="stop", id=cid))
        yield b"data: [DONE]\n\n"
