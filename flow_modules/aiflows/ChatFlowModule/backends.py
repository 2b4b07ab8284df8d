"""The backend seam: how a chat flow gets its LLM backend.

By default a ChatAtomicFlow builds the backend its config names (``backend._target_``, normally aiflows'
LiteLLMBackend). A process-wide *factory* can replace that for every chat flow at once, without touching configs:
tests install a scripted backend, ``--replay`` a transcript player, and ``with_api_infos`` builds the configured
backend with given ``api_infos``. *Wrappers* (e.g. the ``--record`` recorder) wrap whatever backend was built.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Callable, Dict, List, Optional

import hydra

from flow_modules.aiflows.CoreFlowModule import ConfigurationError

BackendFactory = Callable[[Dict[str, Any], str], Any]
BackendWrapper = Callable[[Any, str], Any]

_factory: Optional[BackendFactory] = None
_wrappers: List[BackendWrapper] = []


def set_backend_factory(factory: Optional[BackendFactory]) -> Optional[BackendFactory]:
    """Make every chat flow built from now on get its backend from ``factory(backend_config, flow_name)``."""
    global _factory
    previous, _factory = _factory, factory
    return previous


def add_backend_wrapper(wrapper: BackendWrapper) -> None:
    """Wrap every backend built from now on: ``wrapper(backend, flow_name) -> backend``."""
    _wrappers.append(wrapper)


def remove_backend_wrapper(wrapper: BackendWrapper) -> None:
    if wrapper in _wrappers:
        _wrappers.remove(wrapper)


@contextmanager
def backend_factory(factory: Optional[BackendFactory]):
    previous = set_backend_factory(factory)
    try:
        yield factory
    finally:
        set_backend_factory(previous)


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
            f"{flow_name}: backend.api_infos is not set. Fill it with "
            "quick_load(cfg, [ApiInfo(backend_used='openai', api_key=...)]) or pass "
            "backend={'api_infos': [...]} when instantiating."
        )
    target = backend_config["_target_"]
    if target.startswith("aiflows.backends") or target.startswith("litellm"):
        from flow_modules.aiflows.CoreFlowModule.offline import import_litellm

        import_litellm()
    try:
        return hydra.utils.instantiate(backend_config, _convert_="partial")
    except Exception as error:  # hydra wraps the real error; say which flow and which target
        cause = error.__cause__ or error
        raise ConfigurationError(f"{flow_name}: cannot build the backend {target}: {cause}") from error


def build_backend(backend_config: Dict[str, Any], flow_name: str) -> Any:
    backend = _factory(backend_config, flow_name) if _factory is not None else instantiate_backend(backend_config, flow_name)
    for wrapper in _wrappers:
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


def reply_content(replies: Any) -> Optional[str]:
    """The text of the first reply a backend returned (LiteLLMBackend gives litellm Messages; others dicts), or None."""
    if not replies:
        return None
    first = replies[0]
    content = first.get("content") if hasattr(first, "get") else getattr(first, "content", None)
    return None if content is None else str(content)
