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

from aiflows_jarvis.CoreFlowModule import get_console
from aiflows_jarvis.CoreFlowModule.models import bare_name, openai_response_format_support
from aiflows_jarvis.CoreFlowModule.run_context import current_run

from .backends import unwrap_backend

STRUCTURED_OUTPUT_MODES = ("auto", "json_schema", "json_object", "off")
STRUCTURED_LEVELS = ("json_schema", "json_object", "off")  # what `auto` goes down through
UNKNOWN_MODEL = "unknown"  # a backend that names no model (a replay, a test's scripted backend)


@dataclass
class ServerSettings:
    """One (server, model): the model's name, where it is served, and what the run learned about it."""

    model: str
    api_base: Optional[str]
    backend_used: str = "openai"
    structured_output: str = "json_schema"   # the level `auto` asks for now
    context_window: Optional[int] = None     # learned from the server's own overflow message
    assumed_context_window: Optional[int] = None
    _noted: bool = field(default=False, repr=False)

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

    def note_assumed_context_window(self, tokens: int) -> None:
        """A model whose context window nobody knows: assume ``tokens`` and say so, once per server."""
        with _LOCK:
            if self._noted:
                return
            self._noted = True
            self.assumed_context_window = tokens
        if self.model == UNKNOWN_MODEL:  # replies from a recording or a script: no model whose window to set
            return
        get_console().line("info", f"The context window of {bare_name(self.model)} is not known; prompts are kept "
                                   f"within {tokens} tokens (`context_window` in the chat's configuration, or the "
                                   "command line's --context-window N, says it).")


_LOCK = threading.Lock()


def reset_servers() -> None:
    """Forget what the current run learned (a new run in the same process without a RunContext of its own)."""
    with _LOCK:
        current_run().servers.clear()


def backend_identity(backend: Any) -> Tuple[str, Optional[str], str]:
    """``(model, api_base, backend_used)`` of a backend, looking through wrappers (recorder, ...)."""
    backend = unwrap_backend(backend)
    infos = getattr(backend, "api_infos", None)
    if isinstance(infos, dict):
        infos = list(infos.values())
    info = infos[0] if isinstance(infos, (list, tuple)) and infos else None
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
    servers: Dict[Tuple[str, str, str], ServerSettings] = current_run().servers
    with _LOCK:
        settings = servers.get(key)
        if settings is None:
            settings = ServerSettings(model, api_base, backend_used)
            # OpenAI and Azure: what the model is known to take; any other server is asked, from the top down.
            settings.structured_output = openai_response_format_support(model) if settings.official \
                else STRUCTURED_LEVELS[0]
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
