"""Ask an OpenAI-compatible server how long its context window is.

A local server knows the window it was started with, and the model's name alone does not say it. So when neither a
chat's configuration nor ``--context-window`` sets the window, the server is asked, in this order, each with a short
timeout:

1. ``GET {api_base}/models``: vLLM gives ``max_model_len`` per model (OpenRouter-like servers ``context_length``);
2. ``GET {root}/props``: llama.cpp's server gives ``default_generation_settings.n_ctx`` (the window of one slot);
3. ``POST {root}/api/show``: Ollama gives the model's ``num_ctx`` in ``parameters`` when one is set, else
   ``model_info["<arch>.context_length"]``.

``root`` is ``api_base`` without its ``/v1``. An answer that is not there (404, another shape) moves on to the next
question; a server that does not answer in time, or cannot be reached, is not asked further. What the server said is
kept per server for the run (``ServerProbe``), so each server is asked at most once, and only Ollama's per-model
question is asked again for another model. OpenAI's and Azure's APIs are never asked.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import bare_name

from .openai_http import authorization, split_credentials

PROBE_TIMEOUT = 3.0  # seconds, to connect and to read each answer
_MIN_WINDOW, _MAX_WINDOW = 256, 100_000_000


class _NoAnswer(Exception):
    """The server did not answer in time or could not be reached: it is not asked anything more."""


@dataclass
class ServerProbe:
    """What one server said about its context window during a run (one per ``api_base``)."""

    api_base: str
    models: Any = None  # the /models answer (None: not asked yet or no JSON)
    props: Any = None  # the /props answer
    asked: set = field(default_factory=set)
    unreachable: Optional[str] = None  # why the server is not asked again
    shown: Dict[str, Any] = field(default_factory=dict)  # model -> the /api/show answer
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def server_root(api_base: str) -> str:
    """``http://host:8000/v1`` -> ``http://host:8000`` (where llama.cpp's /props and Ollama's /api/ live)."""
    base = api_base.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def _window(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, (int, float)) and _MIN_WINDOW <= value <= _MAX_WINDOW:
        return int(value)
    return None


def _ask(
    url: str,
    api_key: Optional[str],
    timeout: float,
    body: Optional[dict] = None,
    credentials: Optional[Tuple[str, str]] = None,
) -> Any:
    """The JSON answer of ``url`` (None: an HTTP error status or no JSON); raises ``_NoAnswer`` when the server
    does not answer in time or cannot be reached. It is asked as the chat requests are (``openai_http``): with the
    API base's ``credentials`` (its user and password) if it has them, else the API key."""
    headers = {"Accept": "application/json"}
    auth = authorization(api_key, credentials)
    if auth:
        headers["Authorization"] = auth
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read(2_000_000)
    except urllib.error.HTTPError as error:
        error.close()
        return None
    except (urllib.error.URLError, OSError, ValueError) as error:  # refused, timed out, reset, a bad address
        raise _NoAnswer(str(getattr(error, "reason", None) or error)) from error
    try:
        return json.loads(text.decode("utf-8", "replace"))
    except ValueError:
        return None


def from_models(answer: Any, model: str) -> Optional[int]:
    """vLLM's ``max_model_len`` (or a ``context_length``) of ``model`` in a ``/models`` answer; the only model's
    if none is named so."""
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list):
        return None
    windows = {
        str(e.get("id")): _window(e.get("max_model_len") or e.get("context_length"))
        for e in entries
        if isinstance(e, dict)
    }
    windows = {name: window for name, window in windows.items() if window}
    if model in windows:
        return windows[model]
    return next(iter(windows.values())) if len(windows) == 1 else None


def from_props(answer: Any) -> Optional[int]:
    """llama.cpp's ``default_generation_settings.n_ctx`` (a slot's window), else a top-level ``n_ctx``."""
    if not isinstance(answer, dict):
        return None
    settings = answer.get("default_generation_settings")
    window = _window(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return window or _window(answer.get("n_ctx"))


def from_show(answer: Any) -> Optional[int]:
    """Ollama's ``num_ctx`` parameter when the model sets one, else ``model_info["<arch>.context_length"]``."""
    if not isinstance(answer, dict):
        return None
    match = re.search(r"^\s*num_ctx\s+(\d+)", str(answer.get("parameters") or ""), re.M)
    if match and _window(match.group(1)):
        return _window(match.group(1))
    info = answer.get("model_info")
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    window = _window(info.get(f"{arch}.context_length")) if arch else None
    return window or next(
        (_window(v) for k, v in info.items() if str(k).endswith(".context_length") and _window(v)), None
    )


def probe_context_window(
    probe: ServerProbe, model: str, api_key: Optional[str] = None, timeout: Optional[float] = None
) -> Tuple[Optional[int], str]:
    """``(window, where it came from)`` for ``model`` at ``probe``'s server, or ``(None, why not)``.

    probe: the server's ``ServerProbe`` (what earlier questions of the run found is reused, nothing is asked twice).
    model: the model's name as the requests send it (a provider prefix such as ``openai/`` is dropped).
    api_key: sent as a bearer token (vLLM and llama.cpp started with an API key want it).
    timeout: seconds to connect and to read each answer (``PROBE_TIMEOUT``).
    """
    timeout = PROBE_TIMEOUT if timeout is None else timeout
    base, credentials = split_credentials(probe.api_base)  # a password never goes into a message
    base = base.rstrip("/")
    name, root = bare_name(model), server_root(base)
    name = name.split("/", 1)[1] if name.startswith(("ollama/", "ollama_chat/")) else name  # litellm's Ollama names
    with probe.lock:
        try:
            if "models" not in probe.asked and not probe.unreachable:
                probe.asked.add("models")
                probe.models = _ask(f"{base}/models", api_key, timeout, credentials=credentials)
            window = from_models(probe.models, name)
            if window:
                return window, f"the server's {base}/models (max_model_len)"
            if "props" not in probe.asked and not probe.unreachable:
                probe.asked.add("props")
                probe.props = _ask(f"{root}/props", api_key, timeout, credentials=credentials)
            window = from_props(probe.props)
            if window:
                return window, f"the server's {root}/props (n_ctx)"
            if name not in probe.shown and not probe.unreachable:
                probe.shown[name] = None
                probe.shown[name] = _ask(
                    f"{root}/api/show", api_key, timeout, body={"model": name, "name": name}, credentials=credentials
                )
            window = from_show(probe.shown.get(name))
            if window:
                return window, f"the server's {root}/api/show (Ollama's context length)"
        except _NoAnswer as error:
            probe.unreachable = f"the server did not answer when asked: {error}"
        return None, probe.unreachable or "the server does not say it: /models, /props and /api/show asked"
