"""A synchronous MCP client: JSON-RPC 2.0 to a server started as a child (stdio) or reached over HTTP (Streamable
HTTP), with no asyncio.

Why not the official SDK (``mcp``): every release from 0.9.1 to 2.3.0 requires ``anyio>=4.5``, and aiflows 0.1.7
pins ``openai==1.0.0``, which requires ``anyio<4``: pip cannot install both. And the SDK is asyncio all through,
which a synchronous flow would have to run in a loop of its own per call. What a client of tools needs of the
protocol is small: ``initialize`` (the version agreed on), ``tools/list`` (with pagination) and ``tools/call``.

* **stdio**: the server is a child in a process group of its own, given only the environment variables its
  configuration names plus ``PATH`` and ``HOME``; its stderr goes to a log file. Messages are lines of JSON on its
  stdin and stdout, read by a thread of ours, so every wait has a timeout. A line that is not JSON on stdout (a
  server that prints its banner there) fails the server: the stream cannot be trusted after it. Closing it closes
  its stdin, gives it ``GRACE`` seconds to end, then ends its process group (what it started with it).
* **Streamable HTTP**: each message is a POST; the answer is a JSON body or a stream of server-sent events holding
  it (a stream cut before it is resumed with ``Last-Event-ID``). The server's ``Mcp-Session-Id`` is sent back on
  every request, with ``MCP-Protocol-Version``; closing ends the session with a DELETE.

Requests the server makes of the client while it works (``ping``; ``sampling``, ``elicitation`` and ``roots``, which
this client does not offer) are answered; its notifications go to the log.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18")
CLIENT_INFO = {"name": "aiflows-jarvis", "version": "0.1.0"}
GRACE = 2.0  # seconds a stdio server has to end after its stdin is closed, then again after SIGTERM
MAX_MESSAGE = 256 << 20  # the longest message read (a tool's result of megabytes is fine; a stream with no end is not)
MAX_PAGES = 100  # tools/list pages followed


class MCPError(Exception):
    """What went wrong with a server; ``str(e)`` is meant for the user (and the model)."""


class ServerUnavailable(MCPError):
    """The server cannot be used: it did not start, exited, broke the protocol or refused the client."""


class RequestTimeout(MCPError):
    """The server did not answer in time."""


class SessionExpired(MCPError):
    """An HTTP server no longer knows the session (404): a new one is started."""


class RemoteError(MCPError):
    """The server answered with a JSON-RPC error (an unknown tool, invalid arguments, ...)."""

    def __init__(self, message: str, code: Optional[int] = None):
        super().__init__(message)
        self.code = code


def _short(text: Any, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tail(path: Optional[str], lines: int = 2) -> str:
    """The last lines a log file has since the server's last start (its end only is read), for a message."""
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    text = text[text.rfind("\n=== ") + 1 :] if "\n=== " in text else text  # this start's lines only
    kept = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("=== ")]
    return _short(" | ".join(kept[-lines:]), 300)


# ~~~ stdio ~~~
class StdioTransport:
    """A server started as a child: JSON-RPC lines over its stdin and stdout.

    :param name: the server's name, for messages.
    :param command: the program; ``args`` its arguments; ``env`` the variables it gets besides PATH and HOME.
    :param cwd: the folder it starts in (None: ours).
    :param log_path: where its stderr goes (appended to; None: discarded).
    """

    def __init__(
        self,
        name: str,
        command: str,
        args: List[str],
        env: Dict[str, str],
        cwd: Optional[str] = None,
        log_path: Optional[str] = None,
    ):
        self.name = name
        self.log_path = log_path
        self.protocol_version: Optional[str] = None
        environment = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
        if sys.platform == "win32":  # pragma: no cover - what a Windows program needs to start at all
            environment.update(
                {k: os.environ[k] for k in ("SYSTEMROOT", "COMSPEC", "PATHEXT", "TEMP") if k in os.environ}
            )
        environment.update(env)
        program = shutil.which(command, path=environment.get("PATH")) if not os.path.dirname(command) else command
        if program is None:
            raise ServerUnavailable(
                f"the program `{command}` was not found on PATH. Install it (npx and node come "
                "with Node.js, uvx with uv), or give its full path as `command`."
            )
        if cwd is not None and not os.path.isdir(cwd):
            raise ServerUnavailable(f"its folder `cwd` {cwd} does not exist.")
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            if log_path:
                log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {command} {' '.join(args)}\n".encode())
                log.flush()
            self.process = subprocess.Popen(
                [program, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=cwd,
                env=environment,
                start_new_session=(os.name == "posix"),
            )
        except OSError as error:
            raise ServerUnavailable(f"`{command}` could not be started: {error.strerror or error}.") from None
        finally:
            if log_path:
                log.close()
        self._pending: Dict[Any, "queue.Queue[Dict[str, Any]]"] = {}
        self._lock = threading.Lock()
        self._outbox: "queue.Queue[Optional[bytes]]" = queue.Queue()
        self.failure: Optional[ServerUnavailable] = None
        self._closing = False
        self._reader = threading.Thread(target=self._read, name=f"mcp-{name}-reader", daemon=True)
        self._writer = threading.Thread(target=self._write, name=f"mcp-{name}-writer", daemon=True)
        self._reader.start()
        self._writer.start()

    # ~~~ The threads ~~~
    def _write(self) -> None:
        """Writes what is queued: a server that does not read its stdin blocks this thread, never a caller."""
        while True:
            data = self._outbox.get()
            if data is None:
                return
            try:
                self.process.stdin.write(data)
                self.process.stdin.flush()
            except (OSError, ValueError):
                return  # the reader sees the end of the server and says why

    def _read(self) -> None:
        stdout = self.process.stdout
        try:
            while True:
                line = stdout.readline(MAX_MESSAGE)
                if not line:
                    break
                if not line.endswith(b"\n") and len(line) >= MAX_MESSAGE:
                    self._fail(f"it wrote a message of more than {MAX_MESSAGE >> 20} MB on its stdout.")
                    return
                text = line.strip()
                if not text:
                    continue
                try:
                    message = json.loads(text)
                except (ValueError, RecursionError):
                    shown = text[:120].decode("utf-8", errors="replace")
                    self._fail(
                        f"it wrote text that is not JSON-RPC on its stdout: {shown!r}. A stdio server writes "
                        "only protocol messages there (its logs go to stderr): check its command and "
                        "arguments (some servers need a flag to speak stdio)."
                    )
                    return
                for item in message if isinstance(message, list) else [message]:
                    self._dispatch(item)
        except (OSError, ValueError):
            pass
        if not self._closing:
            self._fail(self._exit_reason())

    def _exit_reason(self) -> str:
        try:
            code = self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        said = _tail(self.log_path)
        what = (
            "it closed its stdout"
            if code is None
            else f"it exited ({f'signal {-code}' if code < 0 else f'exit code {code}'})"
        )
        return f"{what}." + (f" Its log ends with: {said.rstrip('.')}." if said else "")

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" in message and "id" in message:  # the server asks the client
            self.send(_answer_server_request(message))
        elif "id" in message:
            with self._lock:
                waiting = self._pending.get(message["id"])
            if waiting is not None:
                waiting.put(message)
        elif self.log_path and message.get("method") not in (None, "notifications/progress"):
            try:
                with open(self.log_path, "ab") as f:
                    f.write(f"[notification] {_short(json.dumps(message, ensure_ascii=False), 2000)}\n".encode())
            except OSError:
                pass

    def _fail(self, reason: str) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = ServerUnavailable(reason)
            waiting = list(self._pending.values())
        for one in waiting:
            one.put({"_failed": True})

    # ~~~ What the client uses ~~~
    def send(self, message: Dict[str, Any]) -> None:
        self._outbox.put(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")

    def request(self, message: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
        answer: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        with self._lock:
            if self.failure is not None:
                raise self.failure
            self._pending[message["id"]] = answer
        try:
            self.send(message)
            try:
                reply = answer.get(timeout=timeout)
            except queue.Empty:
                raise RequestTimeout(f"it did not answer `{message.get('method')}` within {timeout:g} s.") from None
        finally:
            with self._lock:
                self._pending.pop(message["id"], None)
        if reply.get("_failed"):
            raise self.failure or ServerUnavailable("it stopped.")
        return reply

    def notify(self, message: Dict[str, Any]) -> None:
        if self.failure is None:
            self.send(message)

    def close(self) -> None:
        """Close its stdin, give it GRACE seconds, then end its process group: SIGTERM, then SIGKILL."""
        self._closing = True
        self._outbox.put(None)
        self._writer.join(timeout=GRACE)
        try:
            self.process.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            self.process.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            pass
        end_group(self.process)
        self._reader.join(timeout=GRACE)
        for stream in (self.process.stdout,):
            try:
                stream.close()
            except (OSError, ValueError):
                pass


def group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs (zombies, ended and waiting to be reaped, do not count)."""
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    try:
        names = os.listdir("/proc")
    except OSError:  # pragma: no cover - no /proc: what killpg says
        return True
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and fields[2] == str(group).encode() and fields[0] != b"Z":
                return True
    return False


def end_group(process: "subprocess.Popen[bytes]") -> None:
    """End what is left of a child's process group (the child, and what it started and left there): SIGTERM, GRACE
    seconds, then SIGKILL; the child is reaped."""
    if os.name != "posix":  # pragma: no cover
        if process.poll() is None:
            process.kill()
    else:
        group = process.pid  # a session of its own: its group's id is its pid, kept while a member lives
        for signum, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, 5.0)):
            process.poll()
            if not group_alive(group):
                break
            try:
                os.killpg(group, signum)
            except OSError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                process.poll()
                if not group_alive(group):
                    break
                time.sleep(0.02)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL cannot end (uninterruptible I/O)
        pass


def _answer_server_request(message: Dict[str, Any]) -> Dict[str, Any]:
    """The client's answer to a request of the server: ``ping`` is answered; the client offers nothing else."""
    if message.get("method") == "ping":
        return {"jsonrpc": "2.0", "id": message["id"], "result": {}}
    return {
        "jsonrpc": "2.0",
        "id": message["id"],
        "error": {"code": -32601, "message": f"this client does not offer {message.get('method')}"},
    }


# ~~~ Streamable HTTP ~~~
class HTTPTransport:
    """A server reached over HTTP: one POST per message, answered with JSON or server-sent events.

    :param name: the server's name, for messages.
    :param url: its MCP endpoint.
    :param headers: sent with every request (``Authorization``, ...).
    """

    def __init__(self, name: str, url: str, headers: Dict[str, str]):
        self.name = name
        self.url = url
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = dict(headers)
        self.session_id: Optional[str] = None
        self.protocol_version: Optional[str] = None
        self._lock = threading.Lock()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            import ssl

            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **self.headers,
            **(extra or {}),
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _open(
        self, method: str, body: Optional[bytes], timeout: float, extra: Optional[Dict[str, str]] = None
    ) -> tuple:
        connection = self._connection(max(0.1, timeout))
        try:
            connection.request(method, self._path, body=body, headers=self._headers(extra))
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            if isinstance(error, TimeoutError) or "timed out" in str(error):
                raise RequestTimeout(f"it did not answer within {timeout:g} s.") from None
            if isinstance(error, ConnectionRefusedError):
                raise ServerUnavailable(
                    f"nothing answers at {self.url} (connection refused): is the server running?"
                ) from None
            raise ServerUnavailable(f"{self.url} cannot be reached: {error}") from None
        return connection, response

    def _refused(self, response: http.client.HTTPResponse, what: str) -> MCPError:
        status = response.status
        body = _short(response.read(2000).decode("utf-8", errors="replace"))
        if status == 404 and self.session_id and what != "initialize":
            return SessionExpired("the server ended the session.")
        if status in (401, 403):
            return ServerUnavailable(
                f"it refused the request to {self.url} (HTTP {status}): check the credentials "
                "in its `headers` (Authorization) in the MCP configuration." + (f" It said: {body}" if body else "")
            )
        if status in (404, 405) and what == "initialize":
            return ServerUnavailable(
                f"no MCP endpoint at {self.url} (HTTP {status}): check its `url` (a Streamable "
                "HTTP endpoint, often ending in /mcp)."
            )
        return ServerUnavailable(f"it answered `{what}` with HTTP {status}" + (f": {body}" if body else "."))

    def request(self, message: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
        with self._lock:
            deadline = time.monotonic() + (timeout if timeout else 24 * 3600)
            connection, response = self._open("POST", json.dumps(message).encode("utf-8"), deadline - time.monotonic())
            try:
                if response.status not in (200, 201):
                    raise self._refused(response, str(message.get("method")))
                if message.get("method") == "initialize" and response.getheader("mcp-session-id"):
                    self.session_id = response.getheader("mcp-session-id")
                kind = (response.getheader("content-type") or "").split(";")[0].strip().lower()
                if kind == "text/event-stream":
                    return self._from_events(connection, response, message["id"], deadline)
                body = response.read(MAX_MESSAGE)
            finally:
                connection.close()
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise ServerUnavailable(
                f"its answer to `{message.get('method')}` is not JSON: "
                f"{_short(body[:120].decode('utf-8', errors='replace'))!r}"
            ) from None
        for item in data if isinstance(data, list) else [data]:
            if isinstance(item, dict) and item.get("id") == message["id"] and "method" not in item:
                return item
        raise ServerUnavailable(f"its answer to `{message.get('method')}` is not the JSON-RPC response asked for.")

    def _from_events(
        self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse, wanted: Any, deadline: float
    ) -> Dict[str, Any]:
        """The response to request ``wanted`` from a stream of server-sent events (the server's own requests in
        it answered); a stream that ends before it is resumed from its last event id."""
        last_id: Optional[str] = None
        for _ in range(10):  # a stream cut and resumed, a few times at most
            data: List[str] = []
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RequestTimeout("it did not answer in time.")
                if connection.sock is not None:
                    connection.sock.settimeout(remaining)
                try:
                    line = response.readline(MAX_MESSAGE)
                except (OSError, http.client.HTTPException) as error:
                    if "timed out" in str(error) or isinstance(error, TimeoutError):
                        raise RequestTimeout("it did not answer in time.") from None
                    line = b""
                if not line:
                    break
                text = line.decode("utf-8", errors="replace").rstrip("\r\n")
                if text.startswith("data:"):
                    data.append(text[6:] if text[5:6] == " " else text[5:])  # one space after the colon
                elif text.startswith("id:"):
                    last_id = text[3:].strip()
                elif not text and data:
                    found = self._event("\n".join(data), wanted)
                    data = []
                    if found is not None:
                        return found
            if data:
                found = self._event("\n".join(data), wanted)
                if found is not None:
                    return found
            connection.close()
            if not last_id:
                raise ServerUnavailable("it closed its event stream before answering.")
            connection, response = self._open(
                "GET", None, deadline - time.monotonic(), {"Last-Event-ID": last_id, "Accept": "text/event-stream"}
            )
            if response.status != 200:
                raise self._refused(response, "a resumed event stream")
        raise ServerUnavailable("its event stream kept ending before the answer.")

    def _event(self, data: str, wanted: Any) -> Optional[Dict[str, Any]]:
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            raise ServerUnavailable(f"it sent an event that is not JSON: {_short(data[:120])!r}") from None
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict):
                continue
            if "method" in item and "id" in item:
                self.notify(_answer_server_request(item))
            elif item.get("id") == wanted:
                return item
        return None

    def notify(self, message: Dict[str, Any]) -> None:
        """A notification (or the answer to a server's request): the server accepts it with 202."""
        try:
            connection, response = self._open("POST", json.dumps(message).encode("utf-8"), 10.0)
        except MCPError:
            return
        try:
            response.read(65536)
        finally:
            connection.close()

    def close(self) -> None:
        """End the session (DELETE), if the server gave one; a server that does not allow it answers 405."""
        if not self.session_id:
            return
        try:
            connection, response = self._open("DELETE", None, 5.0)
            response.read(65536)
            connection.close()
        except MCPError:
            pass
        self.session_id = None


# ~~~ The protocol ~~~
class MCPClient:
    """The protocol over a transport: ``start`` (initialize), ``list_tools``, ``call_tool``, ``close``.

    :param name: the server's name, for messages.
    :param open_transport: makes the transport (a StdioTransport or HTTPTransport); called by ``start``, and again
        when an HTTP server has forgotten the session.
    """

    def __init__(self, name: str, open_transport: Callable[[], Any]):
        self.name = name
        self._open_transport = open_transport
        self.transport: Any = None
        self._ids = itertools.count(1)
        self.protocol_version: Optional[str] = None
        self.capabilities: Dict[str, Any] = {}
        self.server_info: Dict[str, Any] = {}

    def _request(self, method: str, params: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
        number = next(self._ids)
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        try:
            response = self.transport.request(message, timeout)
        except RequestTimeout:
            if method != "initialize":  # the server may stop the work it does for nobody
                self.transport.notify(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": number, "reason": "timeout"},
                    }
                )
            raise
        except KeyboardInterrupt:
            self.transport.notify(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": number, "reason": "interrupted by the user"},
                }
            )
            raise
        if "error" in response:
            error = response["error"] if isinstance(response["error"], dict) else {"message": response["error"]}
            raise RemoteError(_short(error.get("message") or error, 1000), error.get("code"))
        result = response.get("result")
        if not isinstance(result, dict):
            raise ServerUnavailable(f"its answer to `{method}` has no result object.")
        return result

    def start(self, timeout: Optional[float]) -> None:
        """Start the transport and agree on the protocol (``initialize``, then ``notifications/initialized``)."""
        self.transport = self._open_transport()
        try:
            result = self._request(
                "initialize",
                {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
                timeout,
            )
        except RemoteError as error:
            raise ServerUnavailable(f"it refused to start a session: {error}") from None
        version = result.get("protocolVersion")
        if version not in SUPPORTED_VERSIONS:
            raise ServerUnavailable(
                f"it speaks MCP protocol {version}; this client speaks "
                f"{' and '.join(SUPPORTED_VERSIONS)}. Update the server (its package), or use "
                "one that speaks a newer protocol."
            )
        self.protocol_version = self.transport.protocol_version = version
        self.capabilities = result.get("capabilities") if isinstance(result.get("capabilities"), dict) else {}
        self.server_info = result.get("serverInfo") if isinstance(result.get("serverInfo"), dict) else {}
        self.transport.notify({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _with_session(self, method: str, params: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
        try:
            return self._request(method, params, timeout)
        except SessionExpired:
            self.transport.session_id = None
            self.start(timeout)
            return self._request(method, params, timeout)

    def list_tools(self, timeout: Optional[float]) -> List[Dict[str, Any]]:
        """Every tool of the server (``tools/list``, page after page); ``timeout`` bounds the whole listing."""
        deadline = time.monotonic() + timeout if timeout else None
        tools: List[Dict[str, Any]] = []
        cursor, seen = None, set()
        for _ in range(MAX_PAGES):
            left = max(0.1, deadline - time.monotonic()) if deadline else None
            result = self._with_session("tools/list", {"cursor": cursor} if cursor else {}, left)
            page = result.get("tools")
            if not isinstance(page, list):
                raise ServerUnavailable("its answer to `tools/list` has no list of tools.")
            tools += [tool for tool in page if isinstance(tool, dict) and isinstance(tool.get("name"), str)]
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen:
                break
            seen.add(cursor)
        return tools

    def call_tool(self, name: str, arguments: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
        """The result of ``tools/call`` (``content``, ``isError``, ``structuredContent``)."""
        return self._with_session("tools/call", {"name": name, "arguments": arguments}, timeout)

    @property
    def failure(self) -> Optional[MCPError]:
        """Why the server cannot be used any more (a stdio server that exited), or None."""
        return getattr(self.transport, "failure", None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
