"""What a run learns about each LLM server, shared by every chat that talks to it.

A Jarvis run has many chats talking to one server. When the server rejects a ``response_format`` (HTTP 400/422
naming it), or says its context window is smaller than assumed, the first chat that finds out tells the others
through the server's ``ServerSettings``, so the discovery costs one request and one line on screen. What a run
learned is kept in its ``RunContext`` (``servers``): the next run asks again.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from aiflows.utils import logging

from aiflows_jarvis.CoreFlowModule import (
    bare_name,
    current_run,
    get_console,
    model_info,
    openai_response_format_support,
)

from .backends import unwrap_backend
from .window_probe import ServerProbe, probe_context_window

log = logging.get_logger(f"aiflows.{__name__}")

STRUCTURED_OUTPUT_MODES = ("auto", "json_schema", "json_object", "off")
STRUCTURED_LEVELS = ("json_schema", "json_object", "off")  # what `auto` goes down through
UNKNOWN_MODEL = "unknown"  # a backend that names no model (a replay, a test's scripted backend)


@dataclass
class ServerSettings:
    """One (server, model): the model's name, where it is served, and what the run learned about it."""

    model: str
    api_base: Optional[str]
    backend_used: str = "openai"
    structured_output: str = "json_schema"  # the level `auto` asks for now
    context_window: Optional[int] = None  # learned from the server's own overflow message
    assumed_context_window: Optional[int] = None
    known_context_window: Optional[int] = None  # what the server says when asked, else litellm's model map
    window_source: Optional[str] = None  # where the window came from (said with --verbose)
    _looked_up: bool = field(default=False, repr=False)
    _noted: bool = field(default=False, repr=False)
    _why_unknown: str = field(default="", repr=False)

    @property
    def official(self) -> bool:
        """OpenAI's or Azure's own API (not a compatible server of someone else's)."""
        if self.backend_used == "azure":
            return True
        return not self.api_base or "api.openai.com" in self.api_base

    @property
    def label(self) -> str:
        if self.backend_used == "azure":
            return f"Azure OpenAI ({bare_name(self.model)})"
        if self.official:
            return f"OpenAI ({bare_name(self.model)})"
        return f"The server at {self.api_base} ({bare_name(self.model)})"

    def provider(self) -> Dict[str, Any]:
        return {"model": self.model, "api_base": self.api_base, "backend_used": self.backend_used}

    @property
    def askable(self) -> bool:
        """A server of someone else's, reached over HTTP as OpenAI's protocol: it may say its context window."""
        return (
            bool(self.api_base) and not self.official and self.backend_used == "openai" and self.model != UNKNOWN_MODEL
        )

    def learn_context_window(self, backend: Any = None) -> Optional[int]:
        """The context window the server states when asked (once per server and run; OpenAI's and Azure's APIs are
        not asked), else litellm's model map's, else None. ``backend``: the chat's, for its API key."""
        with _LOCK:
            if self._looked_up:
                return self.known_context_window
        window, source = None, ""
        if self.askable:
            window, source = probe_context_window(server_probe(self.api_base), self.model, backend_api_key(backend))
            self._why_unknown = "" if window else source
        if not window:
            window = model_info(self.model).context_window
            source = "litellm's model map" if window else source
        with _LOCK:
            if not self._looked_up:
                self._looked_up, self.known_context_window = True, window
                if window:
                    self.window_source = source
        if window:
            self.say_window_source(window, source)
        return self.known_context_window

    def say_window_source(self, window: int, source: str) -> None:
        """With --verbose (aiflows' log at info), say once where the model's context window came from."""
        with _LOCK:
            if self._noted:
                return
            self._noted = True
        if self.model != UNKNOWN_MODEL:
            log.info(f"The context window of {bare_name(self.model)} is {window} tokens (from {source}).")

    def note_assumed_context_window(self, tokens: int) -> None:
        """A model whose context window nobody knows (nor its server, asked): assume ``tokens`` and say so, once
        per model in a run."""
        name = bare_name(self.model)
        with _LOCK:
            if self._noted:
                return
            self._noted = True
            self.assumed_context_window = tokens
            said = any(
                isinstance(other, ServerSettings)
                and other is not self
                and other._noted
                and other.assumed_context_window
                and bare_name(other.model) == name
                for other in known_servers().values()
            )
        # replies from a recording or a script have no model whose window to set; another server said it already
        if self.model == UNKNOWN_MODEL or said:
            return
        why = f" ({self._why_unknown})" if self._why_unknown else ""
        get_console().line(
            "info",
            f"The context window of {name} is not known{why}; prompts are kept within "
            f"{tokens} tokens (`context_window` in the chat's configuration, or the command "
            "line's --context-window N, says it).",
        )


_LOCK = threading.Lock()


def known_servers() -> Dict[Any, Any]:
    """What the current run learned of its servers (``RunContext.servers``): settings, probes, paces, by key."""
    return current_run().servers


def reset_servers() -> None:
    """Forget what the current run learned (a new run in the same process without a RunContext of its own)."""
    with _LOCK:
        known_servers().clear()


def server_probe(api_base: str) -> ServerProbe:
    """What the server at ``api_base`` said about its context window in this run (one per server)."""
    key = ("window probe", api_base.rstrip("/"))
    with _LOCK:
        servers = known_servers()
        probe = servers.get(key)
        if probe is None:
            probe = servers[key] = ServerProbe(api_base.rstrip("/"))
    return probe


def _first_api_info(backend: Any) -> Any:
    """The first of a backend's ``api_infos`` (an ApiInfo or a dict), None if it has none."""
    infos = getattr(backend, "api_infos", None)
    if isinstance(infos, dict):
        infos = list(infos.values())
    return infos[0] if isinstance(infos, (list, tuple)) and infos else None


def backend_api_key(backend: Any) -> Optional[str]:
    """The API key a backend sends, looking through wrappers; None if it has none."""
    info = _first_api_info(unwrap_backend(backend)) if backend is not None else None
    key = info.get("api_key") if isinstance(info, dict) else getattr(info, "api_key", None)
    return str(key) if key else None


def backend_identity(backend: Any) -> Tuple[str, Optional[str], str]:
    """``(model, api_base, backend_used)`` of a backend, looking through wrappers (recorder, ...)."""
    backend = unwrap_backend(backend)
    info = _first_api_info(backend)
    if isinstance(info, dict):
        api_base, backend_used = info.get("api_base"), info.get("backend_used") or "openai"
    else:
        api_base, backend_used = getattr(info, "api_base", None), getattr(info, "backend_used", None) or "openai"
    model = getattr(backend, "model_name", None)
    if isinstance(model, dict):
        model = model.get(backend_used) or next(iter(model.values()), None)
    return str(model or UNKNOWN_MODEL), api_base or None, str(backend_used)


def server_settings(backend: Any) -> ServerSettings:
    """The shared settings of the server and model ``backend`` talks to."""
    model, api_base, backend_used = backend_identity(backend)
    key = (backend_used, api_base or "", model)
    servers: Dict[Tuple[str, str, str], ServerSettings] = known_servers()
    with _LOCK:
        settings = servers.get(key)
        if settings is None:
            settings = ServerSettings(model, api_base, backend_used)
            # OpenAI and Azure: what the model is known to take; any other server is asked, from the top down.
            settings.structured_output = (
                openai_response_format_support(model) if settings.official else STRUCTURED_LEVELS[0]
            )
            servers[key] = settings
    return settings


# A 400/422 about the request's format (OpenAI: "Invalid parameter: 'response_format' ..."; llama-cpp-python and vLLM
# (FastAPI): {"loc": ["body", "response_format", "type"], ...}; "schema", "grammar" for servers that compile it).
FORMAT_REJECTION = re.compile(r"response_format|json_schema|json_object|schema|grammar", re.I)

_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.I),
    re.compile(r"context window of (\d+)", re.I),
    re.compile(r"context (?:size|length|window)[^\d]{0,30}(\d{3,7})", re.I),
    re.compile(r"n_ctx[^\d]{0,5}(\d{3,7})", re.I),
    re.compile(r"max_model_len[^\d]{0,5}(\d{3,7})", re.I),
)


def context_window_from_error(text: str) -> Optional[int]:
    """The context window a server states in its overflow error ("maximum context length is 8192", "context window
    of 2048", "n_ctx: 4096"), or None."""
    for pattern in _WINDOW_PATTERNS:
        match = pattern.search(text or "")
        if match:
            value = int(match.group(1))
            if 256 <= value <= 10_000_000:
                return value
    return None
