"""Guards that keep tests off the network, stdin, FlowVerse and real LLMs.

Each function takes pytest's ``monkeypatch`` fixture, so every patch is undone after the test. The integrator's
conftest turns them into autouse fixtures, e.g.::

    @pytest.fixture(autouse=True)
    def _no_network(monkeypatch):
        guards.block_network(monkeypatch)

Loopback (127.0.0.0/8, ::1, localhost) and AF_UNIX sockets keep working: the loopback LLM server and Jupyter's
IPC rely on them.
"""

from __future__ import annotations

import builtins
import ipaddress
import os
import socket
import sys
from typing import Any, Callable, List, Optional
from urllib.parse import urlsplit

__all__ = [
    "NetworkBlockedError",
    "StdinBlockedError",
    "FlowVerseSyncBlockedError",
    "RealLLMBlockedError",
    "is_loopback_host",
    "is_loopback_url",
    "block_network",
    "block_stdin",
    "block_flow_verse_sync",
    "block_real_llm",
    "unguarded",
    "apply_all",
]

NETWORK_MESSAGE = "network access is blocked in tests: {address}"
STDIN_MESSAGE = "a test tried to read stdin; script the user with ScriptedInput"
FLOW_VERSE_MESSAGE = "flow_verse.sync_dependencies called in a test"
REAL_LLM_MESSAGE = "a test tried to call a real LLM (api_base={api_base})"


class NetworkBlockedError(ConnectionRefusedError):
    """A test tried to reach a non-loopback address (an OSError, so socket users fail as if offline, at once)."""


class StdinBlockedError(RuntimeError):
    """A test tried to read stdin (not an EOFError on purpose: input loops often treat EOF as "quit")."""


class FlowVerseSyncBlockedError(RuntimeError):
    """A test called flow_verse.sync_dependencies (which would download flows from the Hub)."""


class RealLLMBlockedError(RuntimeError):
    """A test called litellm with an api_base that is not a loopback URL."""


# ---------------------------------------------------------------------------------------------------------------
# helpers

_BIND_HOSTS = {None, "", "0.0.0.0", "::", b"", b"0.0.0.0", b"::"}


def is_loopback_host(host: Any) -> bool:
    """True for ``localhost`` (and ``*.localhost``), 127.0.0.0/8, ``::1`` and IPv4-mapped loopback; str or bytes."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str) or not host:
        return False
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    return ip.is_loopback


def is_loopback_url(url: Any) -> bool:
    """True if ``url`` (e.g. ``http://127.0.0.1:PORT/v1``) points at a loopback host."""
    if not url or not isinstance(url, str):
        return False
    try:
        host = urlsplit(url if "//" in url else "//" + url).hostname
    except ValueError:
        return False
    return is_loopback_host(host)


def _format_address(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        return f"[{host}]:{port}" if isinstance(host, str) and ":" in host else f"{host}:{port}"
    return repr(address)


def _patch_everywhere(monkeypatch, original: Any, replacement: Any, name: str) -> int:
    """Replace ``name`` in every loaded module whose global ``name`` *is* ``original`` (catches ``from x import f``)."""
    count = 0
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        try:
            if namespace.get(name) is original:
                monkeypatch.setitem(namespace, name, replacement)
                count += 1
        except Exception:  # exotic module objects: skip
            continue
    return count


# ---------------------------------------------------------------------------------------------------------------
# network


def block_network(monkeypatch) -> List[str]:
    """Make every connection to a non-loopback address fail at once with NetworkBlockedError.

    Patches ``socket.socket.connect``/``connect_ex`` (covers ssl and asyncio sockets), ``socket.create_connection``
    and ``socket.getaddrinfo``/``gethostbyname``/``gethostbyname_ex`` (httpx/httpcore, urllib3 and asyncio resolve
    names first; without this a lookup could hang on DNS before any connect). AF_UNIX and loopback keep working;
    resolving "bind" hosts (None, "", 0.0.0.0, ::) is allowed. Returns the list of blocked addresses (appended to
    as attempts happen), so a fixture can also fail a test that swallowed the error.
    """
    blocked: List[str] = []

    def refuse(address: Any) -> NetworkBlockedError:
        text = address if isinstance(address, str) else _format_address(address)
        blocked.append(text)
        return NetworkBlockedError(NETWORK_MESSAGE.format(address=text))

    def check_socket_address(sock: socket.socket, address: Any) -> None:
        family = getattr(sock, "family", None)
        if family not in (socket.AF_INET, socket.AF_INET6):
            return  # AF_UNIX, AF_NETLINK, socketpair(), ...
        if not (isinstance(address, tuple) and address and is_loopback_host(address[0])):
            raise refuse(address)

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection
    real_getaddrinfo = socket.getaddrinfo
    real_gethostbyname = socket.gethostbyname
    real_gethostbyname_ex = socket.gethostbyname_ex

    def guarded_connect(self, address):
        check_socket_address(self, address)
        return real_connect(self, address)

    def guarded_connect_ex(self, address):
        check_socket_address(self, address)
        return real_connect_ex(self, address)

    def guarded_create_connection(address, *args, **kwargs):
        if not (isinstance(address, tuple) and address and is_loopback_host(address[0])):
            raise refuse(address)
        return real_create_connection(address, *args, **kwargs)

    def guarded_getaddrinfo(host, port, *args, **kwargs):
        if host not in _BIND_HOSTS and not is_loopback_host(host):
            raise refuse((host, port))
        return real_getaddrinfo(host, port, *args, **kwargs)

    def guarded_gethostbyname(host):
        if host not in _BIND_HOSTS and not is_loopback_host(host):
            raise refuse((host, 0))
        return real_gethostbyname(host)

    def guarded_gethostbyname_ex(host):
        if host not in _BIND_HOSTS and not is_loopback_host(host):
            raise refuse((host, 0))
        return real_gethostbyname_ex(host)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    monkeypatch.setattr(socket, "create_connection", guarded_create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    monkeypatch.setattr(socket, "gethostbyname", guarded_gethostbyname)
    monkeypatch.setattr(socket, "gethostbyname_ex", guarded_gethostbyname_ex)
    return blocked


# ---------------------------------------------------------------------------------------------------------------
# stdin


class _BlockedStdin:
    """Stands in for sys.stdin: reading raises StdinBlockedError; fileno/isatty/encoding... are the real ones."""

    def __init__(self, real: Any):
        self._real = real

    def _refuse(self, *args, **kwargs):
        raise StdinBlockedError(STDIN_MESSAGE)

    read = readline = readlines = _refuse

    def __iter__(self):
        raise StdinBlockedError(STDIN_MESSAGE)

    def __next__(self):
        raise StdinBlockedError(STDIN_MESSAGE)

    @property
    def buffer(self):
        return self  # sys.stdin.buffer.read() is refused too

    def isatty(self) -> bool:
        try:
            return bool(self._real.isatty())
        except Exception:
            return False

    def __getattr__(self, name):
        return getattr(self._real, name)


def block_stdin(monkeypatch) -> None:
    """``input()`` and ``sys.stdin.read/readline/readlines`` (and iteration) raise StdinBlockedError."""

    def blocked_input(prompt: Any = "") -> str:
        raise StdinBlockedError(STDIN_MESSAGE)

    monkeypatch.setattr(builtins, "input", blocked_input)
    monkeypatch.setattr(sys, "stdin", _BlockedStdin(sys.stdin))


# ---------------------------------------------------------------------------------------------------------------
# flow_verse


def block_flow_verse_sync(monkeypatch) -> None:
    """``aiflows.flow_verse.sync_dependencies`` (wherever it was imported by name) raises FlowVerseSyncBlockedError."""
    import aiflows.flow_verse
    import aiflows.flow_verse.loading as loading

    def blocked_sync_dependencies(*args, **kwargs):
        raise FlowVerseSyncBlockedError(FLOW_VERSE_MESSAGE)

    original = loading.sync_dependencies
    _patch_everywhere(monkeypatch, original, blocked_sync_dependencies, "sync_dependencies")
    # in case either name was already replaced by something else:
    monkeypatch.setattr(loading, "sync_dependencies", blocked_sync_dependencies)
    monkeypatch.setattr(aiflows.flow_verse, "sync_dependencies", blocked_sync_dependencies)
    if hasattr(loading, "_sync_dependencies"):
        monkeypatch.setattr(loading, "_sync_dependencies", blocked_sync_dependencies)


# ---------------------------------------------------------------------------------------------------------------
# real LLMs


def _effective_api_base(kwargs: dict) -> Optional[str]:
    for key in ("api_base", "base_url"):
        if kwargs.get(key):
            return kwargs[key]
    litellm = sys.modules.get("litellm")
    if litellm is not None and getattr(litellm, "api_base", None):
        return litellm.api_base
    return os.environ.get("OPENAI_API_BASE") or None


def _guard_llm_call(original: Callable, what: str) -> Callable:
    def guarded(*args, **kwargs):
        api_base = _effective_api_base(kwargs)
        if not is_loopback_url(api_base):
            raise RealLLMBlockedError(REAL_LLM_MESSAGE.format(api_base=api_base))
        return original(*args, **kwargs)

    guarded.__name__ = getattr(original, "__name__", what)
    guarded.__doc__ = getattr(original, "__doc__", None)
    guarded.__wrapped__ = original
    guarded._loopback_guard = True
    return guarded


def _guard_direct_requests(monkeypatch, import_if_needed: bool) -> None:
    """The requests the package's backend sends itself (``openai_http``, without litellm) refuse what is not
    loopback, the same way."""
    name = "aiflows_jarvis.ChatFlowModule.openai_http"
    if import_if_needed and name not in sys.modules:
        try:
            import importlib

            importlib.import_module(name)
        except ImportError:  # the package is not importable here: the network guard still stops real calls
            pass
    module = sys.modules.get(name)
    original = getattr(module, "_send", None)
    if original is None or getattr(original, "_loopback_guard", False):
        return

    def guarded(request, *args, **kwargs):
        if not is_loopback_url(request.url):
            raise RealLLMBlockedError(REAL_LLM_MESSAGE.format(api_base=request.url.rsplit("/chat/completions", 1)[0]))
        return original(request, *args, **kwargs)

    guarded.__wrapped__ = original
    guarded._loopback_guard = True
    monkeypatch.setattr(module, "_send", guarded)


def block_real_llm(monkeypatch, import_if_needed: bool = True) -> bool:
    """Make litellm's completion/acompletion/embedding, and the chat completions the package's backend sends
    without litellm (``openai_http``), refuse any api_base that is not a loopback URL.

    Patches ``litellm.<name>``, ``litellm.main.<name>`` (litellm's own internal calls, e.g. completion_with_retries)
    and every loaded module that imported the function by name (``aiflows.backends.llm_lite.completion``,
    ``embedding``, ...). litellm is imported first if needed, offline (bundled tokenizer, no price-list download),
    unless ``import_if_needed`` is False, in which case nothing is patched when it is not loaded yet (the network
    guard still stops real calls). Returns True if litellm was patched.
    """
    _guard_direct_requests(monkeypatch, import_if_needed)
    if "litellm" not in sys.modules:
        if not import_if_needed:
            return False
        try:
            from aiflows_jarvis.CoreFlowModule import import_litellm
        except ImportError:  # package not importable: at least make the tokenizer offline
            os.environ.setdefault(
                "TIKTOKEN_CACHE_DIR",
                os.path.join(
                    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "flow_modules",
                    "aiflows_jarvis",
                    "CoreFlowModule",
                    "startup",
                    "tiktoken_cache",
                ),
            )
            import litellm  # noqa: F401
        else:
            import_litellm()
    if import_if_needed and "aiflows.backends.llm_lite" not in sys.modules:
        try:
            import aiflows.backends.llm_lite  # noqa: F401
        except ImportError:
            pass

    import litellm
    import litellm.main

    for name in ("completion", "acompletion", "embedding", "aembedding", "text_completion"):
        original = getattr(litellm.main, name, None) or getattr(litellm, name, None)
        if original is None or getattr(original, "_loopback_guard", False):
            continue
        guarded = _guard_llm_call(original, name)
        _patch_everywhere(monkeypatch, original, guarded, name)
        for module in (litellm, litellm.main):
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, guarded)
    return True


def unguarded(fn: Callable) -> Callable:
    """The function block_real_llm wrapped (``fn`` itself if it is not a guard wrapper)."""
    while getattr(fn, "_loopback_guard", False):
        fn = fn.__wrapped__
    return fn


def apply_all(monkeypatch) -> List[str]:
    """All four guards; returns block_network's list of blocked addresses."""
    blocked = block_network(monkeypatch)
    block_stdin(monkeypatch)
    block_flow_verse_sync(monkeypatch)
    block_real_llm(monkeypatch)
    return blocked
