"""Chat completions over HTTP with the standard library: the OpenAI protocol, spoken directly.

Importing litellm 1.0.0 is slow, and it turns most HTTP errors into ``TypeError`` (see ``llm_errors``). So a plain
OpenAI chat completion, to OpenAI's API or an OpenAI-compatible server, is sent here: a JSON POST to
``{api_base}/chat/completions`` over a kept-alive connection (one per thread and server), ``request_timeout`` for
the connect and each read, ``stream: true`` read as server-sent events. Errors carry the HTTP status
(``status_code``), the headers (``response.headers``: Retry-After) and the body (``message``), under the class names
``llm_errors.classify`` knows.

Everything else goes through litellm (:func:`plan_request` returns None): Azure (an ``api_version``), other
providers, parameters only litellm understands, an HTTP proxy set in the environment, embeddings, and
``transport: litellm``.
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import unquote, urlsplit, urlunsplit

from aiflows_jarvis.CoreFlowModule import ConfigurationError

from .llm_errors import MalformedReply

DEFAULT_API_BASE = "https://api.openai.com/v1"
DEFAULT_TIMEOUT = 600.0  # litellm 1.0.0's default request_timeout
# Once a stream's reply has its end (each choice its finish_reason), how long what may follow it (the usage chunk,
# ``data: [DONE]``, a chunked body's last chunk) is waited for: a server that says nothing more has said it all.
END_WAIT = 1.0
TRANSPORTS = ("auto", "litellm")

# The chat completion body's fields this transport sends as given; None values are left out (as litellm does).
BODY_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "n",
        "stream",
        "stop",
        "max_tokens",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
        "response_format",
        "seed",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "logprobs",
        "top_logprobs",
    }
)
# What the backend passes besides the body (LiteLLMBackend's model and api dict, the timeouts).
CALL_PARAMS = frozenset(
    {"model", "messages", "api_base", "api_key", "api_version", "request_timeout", "timeout", "transport"}
)
# Bare model names litellm 1.0.0 sends to OpenAI (its open_ai_chat_completion_models are all of these families).
_OPENAI_MODEL_PREFIXES = ("gpt-3.5", "gpt-4", "gpt-5", "o1", "o3", "o4", "chatgpt-", "ft:gpt-")


# ~~~ Errors (named as openai's, so that llm_errors.classify sorts them the same way) ~~~
class OpenAIHTTPError(Exception):
    """A chat completion sent by this transport failed."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class APIConnectionError(OpenAIHTTPError):
    """The server could not be reached, or dropped the connection."""


class StreamCutOff(APIConnectionError):
    """The connection closed before the end of a streamed reply (no finish_reason, no ``data: [DONE]``): part of a
    reply is no reply. Retried as a connection error; ``explained``: ``llm_errors`` shows the message as it is."""

    explained = True


class APITimeoutError(OpenAIHTTPError):
    """No answer within ``request_timeout`` (to connect, or between two reads). ``retry_after``: seconds to wait
    before asking again (the server may still be writing the abandoned reply), if the sender knows; ``explained``:
    the message says what happened better than "the request timed out" (``llm_errors`` then shows it)."""

    retry_after: Optional[float] = None
    explained: bool = False


@dataclass
class HTTPResponseInfo:
    """What an error keeps of the server's answer (``llm_errors`` reads ``response.headers``)."""

    status_code: int
    headers: Any = field(default_factory=dict)
    text: str = ""
    url: str = ""  # the address asked (a redirect's relative Location is read against it)


class APIStatusError(OpenAIHTTPError):
    """The server answered with an HTTP error status; ``message`` is its body (JSON when the server sent JSON).
    ``sent_credentials``: the request carried the API base's user and password, not the API key (``llm_errors``
    then blames them for a 401)."""

    sent_credentials: bool = False

    def __init__(self, message: str, status_code: int, response: HTTPResponseInfo):
        super().__init__(message)
        self.status_code = status_code
        self.response = response


class RateLimitError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


def status_error(status: int, headers: Any, body: str, url: str = "") -> APIStatusError:
    kind = RateLimitError if status == 429 else AuthenticationError if status == 401 else APIStatusError
    text = body.strip() or f"HTTP {status}"
    return kind(text, status, HTTPResponseInfo(status, headers, body, url))


# ~~~ Which requests go directly ~~~
@dataclass
class DirectRequest:
    url: str  # without the user part of the API base (see ``credentials``)
    api_key: Optional[str]
    body: Dict[str, Any]
    timeout: float
    credentials: Optional[Tuple[str, str]] = None  # the API base's user and password (see ``authorization``)

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


def split_credentials(url: str) -> Tuple[str, Optional[Tuple[str, str]]]:
    """``url`` without its user part, and that part's user name and password, percent-decoded ("" for one it does
    not name), or None when it has none: ``http://alice:p%40ss@host/v1`` -> ``("http://host/v1", ("alice", "p@ss"))``.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


def authorization(api_key: Optional[str], credentials: Optional[Tuple[str, str]] = None) -> Optional[str]:
    """The ``Authorization`` header of a request: HTTP Basic authentication with the user and password of the API
    base when it has them (a proxy in front of a local server wants them, and no key), else the API key as a bearer
    token. One header holds one or the other: the key is then not sent, as httpx does for litellm's requests."""
    if credentials is not None:
        return "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode("utf-8")).decode("ascii")
    return f"Bearer {api_key}" if api_key else None


def _proxied(url: str) -> bool:
    """True if the environment sends requests to ``url`` through a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``,
    ``ALL_PROXY`` and ``NO_PROXY``, as httpx reads them): litellm's httpx then sends it."""
    if not any(
        key.lower().endswith("_proxy") and key.lower() != "no_proxy" and value for key, value in os.environ.items()
    ):
        return False  # the usual case, without importing urllib.request
    import urllib.request

    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not proxies.get(parts.scheme) and not proxies.get("all"):
        return False
    return not urllib.request.proxy_bypass_environment(parts.hostname or "", proxies)


def openai_model(model: Any) -> Optional[str]:
    """The name to send for ``model`` if litellm 1.0.0 would send it to an OpenAI(-compatible) API, else None:
    ``openai/<name>`` -> ``<name>``; a bare OpenAI model name as it is."""
    if not isinstance(model, str) or not model.strip():
        return None
    model = model.strip()
    if model.startswith("openai/"):
        return model[len("openai/") :] or None
    if "/" not in model and model.startswith(_OPENAI_MODEL_PREFIXES) and "instruct" not in model:
        return model  # (gpt-3.5-turbo-instruct is a text completion model: litellm sends it to /completions)
    return None


def plan_request(params: Dict[str, Any]) -> Optional[DirectRequest]:
    """The request to send for a backend call's merged ``params``, or None when litellm must send it."""
    transport = str(params.get("transport") or "auto")
    if transport not in TRANSPORTS:
        raise ConfigurationError(f"backend.transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    if transport == "litellm" or params.get("api_version"):
        return None
    if any(key not in BODY_PARAMS and key not in CALL_PARAMS for key in params):
        return None
    model = openai_model(params.get("model"))
    if model is None:
        return None
    api_base = params.get("api_base") or os.environ.get("OPENAI_API_BASE") or DEFAULT_API_BASE
    api_base = str(api_base).rstrip("/")
    if urlsplit(api_base).scheme not in ("http", "https") or not urlsplit(api_base).hostname:
        return None  # not a URL this transport can reach: litellm says what is wrong with it
    api_base, credentials = split_credentials(api_base)
    url = f"{api_base}/chat/completions"
    if _proxied(url):
        return None
    body: Dict[str, Any] = {"model": model, "messages": params.get("messages")}
    # None and empty values are left out, as litellm 1.0.0 leaves out its defaults (functions=[], user="", ...)
    body.update(
        {
            key: value
            for key, value in params.items()
            if key in BODY_PARAMS and value is not None and not (isinstance(value, (str, list, dict)) and not value)
        }
    )
    timeout = params.get("request_timeout") or DEFAULT_TIMEOUT  # litellm 1.0.0 ignores `timeout` too
    api_key = params.get("api_key") or os.environ.get("OPENAI_API_KEY")
    return DirectRequest(url, str(api_key) if api_key else None, body, float(timeout), credentials)


# ~~~ Connections ~~~
_ssl_lock = threading.Lock()  # two threads making the first https request at once make one context


def _tls_context():
    """One TLS context for the process, made at the first https request: certifi's certificates (as httpx uses)
    unless SSL_CERT_FILE / SSL_CERT_DIR say otherwise."""
    with _ssl_lock:
        return _new_tls_context()


@functools.lru_cache(maxsize=None)
def _new_tls_context():
    import ssl

    cafile = None
    if not os.environ.get("SSL_CERT_FILE") and not os.environ.get("SSL_CERT_DIR"):
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:  # pragma: no cover - certifi comes with requests and httpx
            cafile = None
    return ssl.create_default_context(cafile=cafile)


_connections = threading.local()


def _connection(url: str, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
    """This thread's connection to the server of ``url`` (made if needed), and whether it was used before."""
    parts = urlsplit(url)
    key = (parts.scheme, parts.hostname, parts.port)
    pool: Dict[tuple, http.client.HTTPConnection] = getattr(_connections, "pool", None)
    if pool is None:
        pool = _connections.pool = {}
    connection = pool.get(key)
    reused = connection is not None and connection.sock is not None
    if connection is None:
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=timeout, context=_tls_context()
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        pool[key] = connection
    connection.timeout = timeout
    if connection.sock is not None:
        connection.sock.settimeout(timeout)
    return connection, reused


def close_connections() -> None:
    """Close this thread's kept-alive connections."""
    for connection in (getattr(_connections, "pool", None) or {}).values():
        connection.close()
    _connections.pool = {}


def _target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _send(request: DirectRequest) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """POST the request; returns the connection and the response (status 200), its body unread. A kept-alive
    connection the server had closed meanwhile is opened again once; an error status raises APIStatusError with the
    body read."""
    payload = json.dumps(request.body, ensure_ascii=False).encode("utf-8")  # lone surrogates: UnicodeEncodeError
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream" if request.stream else "application/json",
        "User-Agent": "aiflows-jarvis",
    }
    auth = authorization(request.api_key, request.credentials)
    if auth:
        headers["Authorization"] = auth
    for attempt in (1, 2):
        connection, reused = _connection(request.url, request.timeout)
        try:
            connection.request("POST", _target(request.url), body=payload, headers=headers)
            response = connection.getresponse()
            break
        except TimeoutError as error:  # socket.timeout
            connection.close()
            raise APITimeoutError(f"request timed out after {request.timeout:g} s") from error
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            stale = (
                isinstance(
                    error,
                    (
                        http.client.RemoteDisconnected,
                        http.client.ImproperConnectionState,
                        ConnectionResetError,
                        ConnectionAbortedError,
                        BrokenPipeError,
                    ),
                )
                or type(error).__name__ == "SSLEOFError"
            )
            if stale and reused and attempt == 1:  # the server closed an idle kept-alive connection: not an answer
                continue
            raise APIConnectionError(f"connection error: {error!r}") from error
        except BaseException:  # Ctrl+C while waiting: the connection is mid-request, never to be reused
            connection.close()
            raise
    if response.status != 200:
        try:
            raw = _read(connection, response, request.timeout)
        except (APITimeoutError, APIConnectionError):
            raw = b""
        connection.close()
        # a redirect (3xx) is not followed: the request carries the API key (llm_errors says where it points)
        error = status_error(response.status, response.headers, raw.decode("utf-8", "replace"), request.url)
        error.sent_credentials = request.credentials is not None
        raise error
    return connection, response


def _close(connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
    """Close a connection mid-reply, its socket included: a response the server said it closes after (HTTP/1.0,
    ``Connection: close``) holds the socket apart from the connection. A server that stops generating on a closed
    connection (llama.cpp's) sees it at once."""
    try:
        response.close()
    finally:
        connection.close()


def _read(
    connection: http.client.HTTPConnection, response: http.client.HTTPResponse, timeout: float, line: bool = False
) -> bytes:
    """The rest of the body (or its next line); on any failure, Ctrl+C included, the connection is closed (it is
    mid-reply, never to be reused)."""
    try:
        return response.readline() if line else response.read()
    except TimeoutError as error:
        _close(connection, response)
        if line:  # the connection is closed first: a server that stops on a closed connection stops generating
            stalled = APITimeoutError(
                f"the streamed reply stalled: nothing came for {timeout:g} s; the connection was closed"
            )
            stalled.explained = True
            raise stalled from error
        raise APITimeoutError(f"request timed out after {timeout:g} s (reading the reply)") from error
    except (OSError, http.client.HTTPException) as error:
        _close(connection, response)
        raise APIConnectionError(f"connection error while reading the reply: {error!r}") from error
    except BaseException:
        _close(connection, response)
        raise


def complete(request: DirectRequest) -> Dict[str, Any]:
    """A non-streamed chat completion: the server's JSON object. A body that is not UTF-8 raises
    UnicodeDecodeError, one that is not JSON JSONDecodeError (both classified as malformed replies)."""
    return complete_body(*_send(request), request)


def _json(text: str) -> Any:
    """A body (or an event's data) read as JSON. One nested deeper than Python's JSON reader follows (a hostile or
    broken server: ``[[[[...``) is a malformed reply, not a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError as error:
        raise MalformedReply(f"the server's reply ({len(text)} characters) is nested too deeply to be read") from error


def complete_body(
    connection: http.client.HTTPConnection, response: http.client.HTTPResponse, request: DirectRequest
) -> Dict[str, Any]:
    raw = _read(connection, response, request.timeout)
    reply = _json(raw.decode("utf-8"))
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not all(
        isinstance(choice, dict) and isinstance(choice.get("message"), dict) for choice in choices
    ):
        raise MalformedReply(f"the server's reply is not a completion with choices and messages: {raw[:300]!r}")
    return reply


def stream(request: DirectRequest) -> Iterator[Dict[str, Any]]:
    """A streamed chat completion: the chunks (JSON objects) the server sends as ``data:`` events, up to its end:
    ``data: [DONE]``, or each choice's finish_reason (what may follow then is waited for ``END_WAIT`` seconds at
    most). A body that ends before either (the server or a proxy closed the connection mid-reply) raises
    ``StreamCutOff``."""
    connection, response = _send(request)
    if (response.getheader("Content-Type") or "").split(";")[0].strip() == "application/json":
        yield _as_chunk(complete_body(connection, response, request))  # a server that does not stream
        return
    finished, events, pieces = False, 0, 0
    going, ended = set(), set()  # the choices spoken of, and those that had their finish_reason
    try:
        while True:
            try:
                line = _read(connection, response, request.timeout, line=True)
            except APITimeoutError:
                if ended and going <= ended:  # the reply had its end: a body held open after it adds nothing
                    return
                raise
            if not line:
                if not events:
                    raise MalformedReply("the server sent no event in its streamed reply")
                if not ended or not going <= ended:
                    raise StreamCutOff(
                        f"the streamed reply was cut off: the connection closed after {pieces} "
                        f"piece{'s' if pieces != 1 else ''} of it, before its end (no finish_reason, "
                        "no data: [DONE])"
                    )
                finished = True
                return
            text = line.decode("utf-8").strip()
            if not text.startswith("data:"):
                continue  # blank lines between events, comments (": ping"), "event:" lines
            data = text[len("data:") :].strip()
            if data == "[DONE]":
                finished = True
                if not events:
                    raise MalformedReply("the server's streamed reply ended before any chunk")
                _finish_body(connection, response)
                return
            events += 1
            chunk = _json(data)
            if isinstance(chunk, dict) and "error" in chunk and not chunk.get("choices"):
                raise status_error(500, response.headers, data)  # an error sent inside the stream
            had_end = bool(ended) and going <= ended
            for choice in (chunk.get("choices") if isinstance(chunk, dict) else None) or []:
                if isinstance(choice, dict):
                    index = choice.get("index") if isinstance(choice.get("index"), int) else 0
                    going.add(index)
                    if choice.get("finish_reason"):
                        ended.add(index)
                    delta = choice.get("delta")
                    pieces += bool(isinstance(delta, dict) and delta.get("content"))
            if not had_end and ended and going <= ended:
                _set_read_timeout(connection, response, min(END_WAIT, request.timeout))
            yield chunk
    finally:
        if not finished:  # an error, or a consumer that stopped reading: the rest of the body is never read
            _close(connection, response)


def _set_read_timeout(
    connection: http.client.HTTPConnection, response: http.client.HTTPResponse, seconds: float
) -> None:
    """Wait at most ``seconds`` for each next read of the reply. A response the server closes after (HTTP/1.0,
    ``Connection: close``) holds the socket apart from the connection."""
    sock = connection.sock or getattr(getattr(response.fp, "raw", None), "_sock", None)
    if sock is not None:
        try:
            sock.settimeout(seconds)
        except OSError:  # already closed: the next read says so
            pass


def _as_chunk(reply: Dict[str, Any]) -> Dict[str, Any]:
    """A whole completion as one stream chunk (for a server that answers ``stream: true`` without streaming)."""
    choices = [
        {
            "index": choice.get("index", i),
            "finish_reason": choice.get("finish_reason"),
            "delta": {"content": (choice.get("message") or {}).get("content")},
        }
        for i, choice in enumerate(reply.get("choices") or [])
        if isinstance(choice, dict)
    ]
    # "object" says it is a whole completion: the caller learns that the server does not stream
    return {
        **{k: v for k, v in reply.items() if k in ("id", "model", "usage")},
        "object": "chat.completion",
        "choices": choices,
    }


def _finish_body(connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
    """After ``[DONE]``: read what is left of the body (a chunked body's last chunk) so that the connection can be
    used again, waiting a second at most; a server that keeps the body open loses the connection, not the reply."""
    if response.isclosed():
        return
    try:
        _set_read_timeout(connection, response, min(END_WAIT, connection.timeout or END_WAIT))
        response.read()
    except Exception:  # noqa: BLE001 - the reply is complete; only the connection cannot be used again
        connection.close()
    except BaseException:
        connection.close()
        raise


def merged_stream_messages(chunks: Iterator[Dict[str, Any]], n: int = 1) -> List[Dict[str, Any]]:
    """The messages a stream spells out, one per choice: ``{"content": ...}``, as aiflows' ``merge_streams`` gives
    them (which fails on a ``"content": null`` delta, which servers send with a role or a finish_reason)."""
    parts: Dict[int, List[str]] = {}
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            texts = parts.setdefault(int(choice.get("index") or 0), [])
            if isinstance(content, str) and content:
                texts.append(content)
    count = max([max(1, int(n or 1))] + [index + 1 for index in parts])
    # a choice the stream spoke of without text (a role, a finish_reason) is an empty reply, which the model is told
    # of like any invalid one; a choice never spoken of is {} (as merge_streams leaves it): no reply at all
    return [{"content": "".join(parts[index])} if index in parts else {} for index in range(count)]
