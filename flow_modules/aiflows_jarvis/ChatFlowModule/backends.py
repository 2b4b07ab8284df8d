"""The backend seam: how a chat flow gets its LLM backend.

A ChatAtomicFlow builds the backend its config names (``backend._target_``), unless the run has a *factory*
(``RunContext(backend_factory=...)`` or ``set_backend_factory``), which replaces it for every chat at once without
touching configs: a scripted backend in tests, a transcript player for ``--replay``, ``with_api_infos`` for given
``api_infos``. The run's *wrappers* (the ``--record`` recorder) wrap whatever was built.

A config naming aiflows' LiteLLMBackend, which returns only the messages, gets :class:`UsageLiteLLMBackend`
(same constructor, same return value), which also records a :class:`ResponseInfo` (usage, finish_reason, model)
per completion; the caller takes it with :func:`take_response_info` right after the call (per thread, so wrappers
need do nothing; other backends leave None).
"""
from __future__ import annotations

import copy
import functools
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from aiflows_jarvis.CoreFlowModule import ConfigurationError
from aiflows_jarvis.CoreFlowModule.instantiate import instantiate
from aiflows_jarvis.CoreFlowModule.redaction import remember_secret, url_password
from aiflows_jarvis.CoreFlowModule.run_context import current_run
from aiflows_jarvis.CoreFlowModule.terminal import without_lone_surrogates

from .repetition import RepetitionGuard

LITELLM_BACKEND = "aiflows.backends.llm_lite.LiteLLMBackend"
USAGE_BACKEND = f"{__name__}.UsageLiteLLMBackend"

BackendFactory = Callable[[Dict[str, Any], str], Any]
BackendWrapper = Callable[[Any, str], Any]

def set_backend_factory(factory: Optional[BackendFactory]) -> Optional[BackendFactory]:
    """Make every chat flow built from now on in the current run get its backend from
    ``factory(backend_config, flow_name)`` (None: the backend its config names); returns the previous factory."""
    run = current_run()
    previous, run.backend_factory = run.backend_factory, factory
    return previous


def add_backend_wrapper(wrapper: BackendWrapper) -> None:
    """Wrap every backend built from now on in the current run: ``wrapper(backend, flow_name) -> backend``."""
    current_run().backend_wrappers.append(wrapper)


def remove_backend_wrapper(wrapper: BackendWrapper) -> None:
    wrappers = current_run().backend_wrappers
    if wrapper in wrappers:
        wrappers.remove(wrapper)


@contextmanager
def backend_factory(factory: Optional[BackendFactory]):
    previous = set_backend_factory(factory)
    try:
        yield factory
    finally:
        set_backend_factory(previous)


# ~~~ What a completion said besides its text ~~~
@dataclass
class ResponseInfo:
    """The API's account of one completion: token usage (None when the server did not report it), why the reply
    ended (``"stop"``, ``"length"``: cut by ``max_tokens``, ...; None if unknown) and the model that answered."""

    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    finish_reason: Optional[str] = None
    model: Optional[str] = None

    @property
    def has_usage(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


_last = threading.local()


def record_response_info(info: Optional[ResponseInfo]) -> None:
    """Keep ``info`` as this thread's last completion (a backend calls it after each successful completion)."""
    _last.info = info


def take_response_info() -> Optional[ResponseInfo]:
    """This thread's last recorded completion info, cleared; None if the backend recorded none since the last take."""
    info = getattr(_last, "info", None)
    _last.info = None
    return info


def _field(obj: Any, key: str) -> Any:
    """``obj[key]`` or ``obj.key`` (litellm objects and plain dicts alike), None if absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    try:
        return getattr(obj, key, None)
    except Exception:  # noqa: BLE001 - an odd object has no such field
        return None


def _int_or_none(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _usage_of(response: Any) -> tuple:
    """(prompt_tokens, completion_tokens) from a response's ``usage``, (None, None) if the server sent none.

    litellm 1.0.0's Usage drops zero counts (``if prompt_tokens: ...``): a usage with some counts means the missing
    ones were 0.
    """
    usage = _field(response, "usage")
    counts = [_int_or_none(_field(usage, key)) for key in ("prompt_tokens", "completion_tokens", "total_tokens")]
    prompt, completion, total = counts
    if prompt is None and completion is None and total is None:
        return None, None
    if prompt is None:
        prompt = max(0, (total or 0) - (completion or 0))
    if completion is None:
        completion = max(0, (total or 0) - prompt) if total is not None else 0
    return prompt, completion


def _first_choice_finish_reason(response: Any) -> Optional[str]:
    choices = _field(response, "choices") or []
    for choice in choices:
        if _int_or_none(_field(choice, "index")) in (None, 0):
            reason = _field(choice, "finish_reason")
            return str(reason) if reason else None
    return None


def response_info_of(response: Any) -> ResponseInfo:
    """The ResponseInfo of a non-streamed completion (a litellm ModelResponse or a plain dict)."""
    prompt, completion = _usage_of(response)
    model = _field(response, "model")
    return ResponseInfo(prompt, completion, _first_choice_finish_reason(response), str(model) if model else None)


# Who is told each piece of text a streaming server sends (the console's status line, --stream): set for the time
# of a call by the chat that makes it (litellm may read the stream in a thread of its own: not a thread-local).
class _Listener:
    fn: Optional[Callable[[str], None]] = None


_stream_listener = _Listener()


@contextmanager
def listening_to_streams(listener: Optional[Callable[[str], None]]):
    """While the body runs, ``listener(text)`` gets each piece of reply text a server streams."""
    previous = _stream_listener.fn
    _stream_listener.fn = listener
    try:
        yield
    finally:
        _stream_listener.fn = previous


def _delta_text(chunk: Any) -> str:
    for choice in _field(chunk, "choices") or []:
        if _int_or_none(_field(choice, "index")) in (None, 0):
            delta = _field(choice, "delta")
            text = _field(delta, "content") if delta is not None else None
            return str(text) if text else ""
    return ""


class StreamWatcher:
    """Passes a stream's chunks through and notes the model, the first choice's finish_reason and the usage.

    The *first* finish_reason is kept: litellm 1.0.0 appends a chunk of its own with ``finish_reason="stop"`` after
    the server's last one, which would hide a ``"length"``. With a ``guard`` (a ``RepetitionGuard``), a reply that
    repeats itself is stopped: no more chunks are read, the stream is closed (its connection with it, which stops
    the generation on servers that stop on a closed connection) and the finish_reason is ``"repetition"``. With
    ``stop_at`` (a ``time.monotonic()`` time: the run's end), a stream still running then is closed and
    ``on_late()`` raises.

    A chunk of None (litellm 1.0.0's stream for an error reading the body) is a stream cut off
    (``openai_http.StreamCutOff``); with ``ends_with_finish_reason`` (litellm's streams, which give ``data: [DONE]``
    a finish_reason of their own), so is a stream that ends without a finish_reason. (``openai_http.stream`` sees
    the end of its streams itself.)
    """

    def __init__(self, chunks: Any, guard: Any = None, stop_at: Optional[float] = None,
                 on_late: Optional[Callable[[], None]] = None, ends_with_finish_reason: bool = False):
        self._chunks = chunks
        self.ends_with_finish_reason = ends_with_finish_reason
        self.guard, self.stop_at, self.on_late = guard, stop_at, on_late
        self.finish_reason: Optional[str] = None
        self.model: Optional[str] = None
        self.prompt_tokens: Optional[int] = None
        self.completion_tokens: Optional[int] = None
        self.whole = False  # a whole completion came instead of chunks: the server does not stream
        self.pieces = 0  # chunks that carried text of the first choice
        self.first_piece_at: Optional[float] = None
        self.last_piece_at: Optional[float] = None

    def __iter__(self):
        from .openai_http import StreamCutOff

        try:
            for chunk in self._chunks:
                if chunk is None:  # litellm's stream swallowed an error reading the body
                    raise StreamCutOff("the streamed reply was cut off: the connection was lost after "
                                       f"{self.pieces} piece{'s' if self.pieces != 1 else ''} of it")
                if _field(chunk, "object") == "chat.completion":
                    self.whole = True
                if self.model is None and _field(chunk, "model"):
                    self.model = str(_field(chunk, "model"))
                if self.finish_reason is None:
                    self.finish_reason = _first_choice_finish_reason(chunk)
                prompt, completion = _usage_of(chunk)  # a server sending usage in its last chunk (stream_options)
                if prompt is not None:
                    self.prompt_tokens, self.completion_tokens = prompt, completion
                text = _delta_text(chunk)
                if text:
                    self.pieces += 1
                    self.last_piece_at = time.monotonic()
                    if self.first_piece_at is None:
                        self.first_piece_at = self.last_piece_at
                    listener = _stream_listener.fn
                    if listener is not None:
                        listener(text)
                yield chunk
                if text and self.guard is not None and self.guard.feed(text) is not None:
                    self.finish_reason = "repetition"
                    return
                if self.stop_at is not None and self.on_late is not None and time.monotonic() > self.stop_at:
                    self.on_late()
            if self.finish_reason is None and self.ends_with_finish_reason:
                raise StreamCutOff(f"the streamed reply was cut off: it ended after {self.pieces} piece"
                                   f"{'s' if self.pieces != 1 else ''} of it, before its end (no finish_reason)")
        finally:
            close = getattr(self._chunks, "close", None)
            if callable(close):  # a stream left before its end: its connection is closed, not left half read
                close()

    def info(self) -> ResponseInfo:
        return ResponseInfo(self.prompt_tokens, self.completion_tokens, self.finish_reason, self.model)


@functools.lru_cache(maxsize=None)
def usage_litellm_backend_class():
    """The class UsageLiteLLMBackend, built on first use: aiflows' llm_lite must be imported after the package's
    import hooks are in place, so that it does not import litellm (see ``offline``)."""
    from aiflows_jarvis.CoreFlowModule.offline import ensure_offline_tokenizer

    ensure_offline_tokenizer()
    from aiflows.backends import llm_lite

    from . import openai_http

    class UsageLiteLLMBackend(llm_lite.LiteLLMBackend):
        """aiflows' LiteLLMBackend (same constructor, same return value) that records each completion's
        :class:`ResponseInfo` (usage, finish_reason, model) for :func:`take_response_info`, and sends plain OpenAI
        chat completions itself (``openai_http``: litellm is not even imported for them). ``transport: litellm``
        sends every request through litellm."""

        def _call(self, **kwargs):
            merged_params = {**self.params, **kwargs}
            if self.embeddings_call:
                return super()._call(**kwargs)
            request = openai_http.plan_request(merged_params)
            n = kwargs.get("n", 1)
            if request is not None:  # streamed where the server streams (see ``generation``)
                from .generation import send

                messages, info = send(request, n)
            elif merged_params.get("stream", None):
                merged_params.pop("transport", None)
                watcher = StreamWatcher(llm_lite.completion(**merged_params), guard=RepetitionGuard(),
                                        ends_with_finish_reason=True)
                messages = llm_lite.merge_streams(watcher, n_chat_completion_choices=n)
                info = watcher.info()
            else:
                merged_params.pop("transport", None)
                # through the module attribute, so whoever patches llm_lite.completion (the tests' guards) is obeyed
                response = llm_lite.completion(**merged_params)
                messages = [choice["message"] for choice in response["choices"]]
                info = response_info_of(response)
            if info.model is None:
                info.model = str(merged_params.get("model")) if merged_params.get("model") else None
            record_response_info(info)
            return messages

    UsageLiteLLMBackend.__module__ = __name__
    UsageLiteLLMBackend.__qualname__ = "UsageLiteLLMBackend"
    return UsageLiteLLMBackend


def __getattr__(name: str) -> Any:
    # ``from ...backends import UsageLiteLLMBackend`` (and hydra's ``_target_``) build the class on demand.
    if name == "UsageLiteLLMBackend":
        return usage_litellm_backend_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ~~~ Building backends ~~~
def _api_infos_missing(api_infos: Any) -> bool:
    if api_infos is None or api_infos == "???":
        return True
    return isinstance(api_infos, (list, tuple)) and (not api_infos or any(a == "???" for a in api_infos))


def instantiate_backend(backend_config: Dict[str, Any], flow_name: str) -> Any:
    """Build the backend a config names (no factory, no wrappers); clear errors name the flow and the key."""
    if not isinstance(backend_config, dict) or not backend_config.get("_target_"):
        raise ConfigurationError(f"{flow_name}: `backend` must be a dict with a `_target_`")
    if _api_infos_missing(backend_config.get("api_infos")):
        raise ConfigurationError(
            f"{flow_name}: backend.api_infos is not set. Before instantiating, call "
            "set_backend_factory(with_api_infos([ApiInfo(backend_used='openai', api_key=...)])) (both from "
            "aiflows_jarvis.ChatFlowModule): every chat built from then on gets those api_infos. (aiflows' quick_load "
            "fills only the `api_infos: ???` keys a configuration has: for a flow of several chats, build it with "
            "aiflows_jarvis.CoreFlowModule.config_tree.chat_backends_skeleton first.)"
        )
    remember_api_secrets(backend_config.get("api_infos"))
    target = backend_config["_target_"]
    if target in (LITELLM_BACKEND, USAGE_BACKEND):
        usage_litellm_backend_class()  # litellm itself is imported when a request needs it
    elif target.startswith("aiflows.backends") or target.startswith("litellm"):
        from aiflows_jarvis.CoreFlowModule.offline import import_litellm

        import_litellm()
    if target == LITELLM_BACKEND:  # same constructor; also keeps the API's usage and finish_reason
        usage_litellm_backend_class()
        backend_config = {**backend_config, "_target_": USAGE_BACKEND}
    try:
        return instantiate(backend_config, recursive=True)
    except Exception as error:  # hydra wraps the real error; say which flow and which target
        cause = error.__cause__ or error
        raise ConfigurationError(f"{flow_name}: cannot build the backend {target}: {cause}") from error


def remember_api_secrets(api_infos: Any) -> None:
    """Have the API keys of ``api_infos`` (and the password of an ``api_base``) redacted from what the run writes
    and sends from now on (``CoreFlowModule.redaction``): code may read them from a file and print them."""
    for info in api_infos if isinstance(api_infos, (list, tuple)) else ():
        get = info.get if isinstance(info, dict) else lambda key, i=info: getattr(i, key, None)
        backend_used = str(get("backend_used") or "openai").upper()
        remember_secret(f"{backend_used}_API_KEY", get("api_key"))
        api_base = get("api_base")
        if isinstance(api_base, str) and url_password(api_base):
            remember_secret(f"{backend_used}_API_BASE password", api_base)


def build_backend(backend_config: Dict[str, Any], flow_name: str) -> Any:
    """The backend of a chat: from the current run's factory if it has one, else as the config says; then wrapped by
    the run's wrappers."""
    run = current_run()
    factory = run.backend_factory
    backend = factory(backend_config, flow_name) if factory is not None else instantiate_backend(backend_config,
                                                                                                 flow_name)
    for wrapper in list(run.backend_wrappers):
        backend = wrapper(backend, flow_name)
    return backend


def with_api_infos(api_infos: List[Any], only_missing: bool = False, **overrides: Any) -> BackendFactory:
    """A factory building each flow's configured backend with ``api_infos`` (and ``overrides``, e.g. a
    ``model_name``) filled in; with ``only_missing``, ``api_infos`` a config already sets are kept."""

    def factory(backend_config: Dict[str, Any], flow_name: str) -> Any:
        config = copy.deepcopy(backend_config)
        if not only_missing or _api_infos_missing(config.get("api_infos")):
            config["api_infos"] = list(api_infos)
        config.update(overrides)
        return instantiate_backend(config, flow_name)

    return factory


def unwrap_backend(backend: Any) -> Any:
    """The backend a chain of wrappers (``.inner``: the recorder, ...) was built around."""
    for _ in range(10):
        if not hasattr(backend, "inner"):
            break
        backend = backend.inner
    return backend


def reply_content(replies: Any) -> Optional[str]:
    """The text of the first reply a backend returned (LiteLLMBackend gives litellm Messages; others dicts), or None;
    lone surrogates (a JSON body can escape one) replaced, so that logs, requests and the terminal can take it."""
    if not replies:
        return None
    first = replies[0]
    content = first.get("content") if hasattr(first, "get") else getattr(first, "content", None)
    return None if content is None else without_lone_surrogates(str(content))
