"""The backend seam: how a chat flow gets its LLM backend.

A ChatAtomicFlow builds the backend its config names (``backend._target_``), unless the run has a *factory*
(``RunContext(backend_factory=...)``), which replaces it for every chat at once without
touching configs: a scripted backend in tests, a transcript player for ``--replay``, ``with_api_infos`` for given
``api_infos``. The run's *wrappers* (the ``--record`` recorder) wrap whatever was built.

A config naming aiflows' LiteLLMBackend, which returns only the messages, gets :class:`UsageLiteLLMBackend`
(same constructor, same return value), which also returns a :class:`ResponseInfo` (usage, finish_reason, model) with
each completion's messages (``Replies``; ``response_info(replies)`` reads it, None from other backends).
"""

from __future__ import annotations

import copy
import functools
from contextlib import contextmanager
from typing import Any, Callable, Dict, List, Optional

from aiflows_jarvis.CoreFlowModule import (
    ConfigurationError,
    current_run,
    deprecated_setting,
    instantiate,
    remember_secret,
    url_password,
    without_lone_surrogates,
)

from .repetition import RepetitionGuard
from .responses import Replies, StreamWatcher, response_info_of

LITELLM_BACKEND = "aiflows.backends.llm_lite.LiteLLMBackend"
USAGE_BACKEND = f"{__name__}.UsageLiteLLMBackend"

BackendFactory = Callable[[Dict[str, Any], str], Any]
BackendWrapper = Callable[[Any, str], Any]


def set_backend_factory(factory: Optional[BackendFactory]) -> Optional[BackendFactory]:
    """Deprecated: ``RunContext(backend_factory=...)``."""
    return deprecated_setting("set_backend_factory", "backend_factory", factory)[0]


def add_backend_wrapper(wrapper: BackendWrapper) -> None:
    """Deprecated: ``RunContext(backend_wrappers=[...])``."""
    deprecated_setting("add_backend_wrapper", "backend_wrappers", change=lambda wrappers: tuple(wrappers) + (wrapper,))


def remove_backend_wrapper(wrapper: BackendWrapper) -> None:
    """Deprecated: ``RunContext(backend_wrappers=[...])``."""
    deprecated_setting(
        "remove_backend_wrapper",
        "backend_wrappers",
        change=lambda wrappers: tuple(w for w in wrappers if w is not wrapper),
    )


@contextmanager
def backend_factory(factory: Optional[BackendFactory]):
    """Deprecated: ``with RunContext(backend_factory=...)``."""
    previous, run = deprecated_setting("backend_factory", "backend_factory", factory, stacklevel=4)
    try:
        yield factory
    finally:
        run.backend_factory = previous


@functools.lru_cache(maxsize=None)
def usage_litellm_backend_class():
    """The class UsageLiteLLMBackend, built on first use: aiflows' llm_lite must be imported after the package's
    import hooks are in place, so that it does not import litellm (see CoreFlowModule's ``startup/offline.py``)."""
    from aiflows_jarvis.CoreFlowModule import ensure_offline_tokenizer

    ensure_offline_tokenizer()
    from aiflows.backends import llm_lite

    from . import openai_http

    class UsageLiteLLMBackend(llm_lite.LiteLLMBackend):
        """aiflows' LiteLLMBackend (same constructor, same return value) that records each completion's
        :class:`ResponseInfo` (usage, finish_reason, model) with its messages (``Replies``), and sends plain OpenAI
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
                watcher = StreamWatcher(
                    llm_lite.completion(**merged_params), guard=RepetitionGuard(), ends_with_finish_reason=True
                )
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
            return Replies(messages, info)

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
            f"{flow_name}: backend.api_infos is not set. Instantiate the flow inside "
            "`with RunContext(backend_factory=with_api_infos([ApiInfo(backend_used='openai', api_key=...)]))` "
            "(RunContext from aiflows_jarvis.CoreFlowModule, with_api_infos from aiflows_jarvis.ChatFlowModule): "
            "every chat built in the run gets those api_infos. (aiflows' quick_load "
            "fills only the `api_infos: ???` keys a configuration has: for a flow of several chats, build it with "
            "aiflows_jarvis.CoreFlowModule.chat_backends_skeleton first.)"
        )
    remember_api_secrets(backend_config.get("api_infos"))
    target = backend_config["_target_"]
    if target in (LITELLM_BACKEND, USAGE_BACKEND):
        usage_litellm_backend_class()  # litellm itself is imported when a request needs it
    elif target.startswith("aiflows.backends") or target.startswith("litellm"):
        from aiflows_jarvis.CoreFlowModule import import_litellm

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
    backend = (
        factory(backend_config, flow_name) if factory is not None else instantiate_backend(backend_config, flow_name)
    )
    for wrapper in run.backend_wrappers:
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
