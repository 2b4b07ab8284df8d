"""Default flow configurations read once per process.

aiflows 0.1.7 builds a flow's default configuration (``Flow.get_config``) by parsing the YAML of its class and of
every base class, on every call, so building a flow tree (or walking its configuration) parses the same files many
times. Here each YAML file is parsed once per process (again only when its modification time or size changes), and
each class's merged default is kept, so ``get_config`` costs a copy.

The result is what aiflows computes: the class's ``<ClassName>.yaml`` beside its module (interpolations resolved per
file, relative ``_target_``s made absolute), else its ``__default_flow_config``, merged over its first base's default,
then the overrides on top. A base class with its own ``get_config`` is asked for its default as aiflows does.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
from abc import ABC
from typing import Any, Dict, Optional, Tuple

from aiflows.base_flows import Flow
from aiflows.utils.general_helpers import process_config_leafs, recursive_dictionary_update

from .instantiate import copy_config
from .yaml_loader import load_yaml_text

_lock = threading.RLock()
# path -> ((mtime_ns, size), resolved container)
_files: Dict[str, Tuple[Tuple[int, int], Dict[str, Any]]] = {}
# class -> (signature of its files, merged default config)
_classes: Dict[type, Tuple[tuple, Dict[str, Any]]] = {}
# The get_config implementations that compute aiflows' default (aiflows' own, the lean flows'): a class inheriting
# one of them is merged here; a class with another is asked for its default.
_DEFAULT_GET_CONFIGS = {Flow.get_config.__func__}


def _stamp(path: str) -> Optional[Tuple[int, int]]:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _parse(path: str) -> Dict[str, Any]:
    """``OmegaConf.to_container(OmegaConf.load(path), resolve=True)``, as aiflows reads a flow's YAML; a document
    without interpolations skips the OmegaConf round trip, which would give it back unchanged."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    data = load_yaml_text(text)
    if data is None:
        return {}
    if isinstance(data, dict) and "${" not in text:
        return data
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.create(data), resolve=True)


def read_yaml(path: str) -> Dict[str, Any]:
    """A YAML configuration file as a plain dict (interpolations resolved), parsed once per process while the file
    is unchanged; the caller gets its own copy."""
    path = os.path.abspath(path)
    stamp = _stamp(path)
    with _lock:
        cached = _files.get(path)
        if cached is None or stamp is None or cached[0] != stamp:
            cached = (stamp, _parse(path))
            _files[path] = cached
        return copy_config(cached[1])


def clear() -> None:
    """Forget every parsed file and merged default (the next ``get_config`` reads the files again)."""
    with _lock:
        _files.clear()
        _classes.clear()


def _yaml_path(cls: type) -> Optional[str]:
    module = sys.modules.get(cls.__module__)
    module_file = getattr(module, "__file__", None)
    if not module_file:
        return None
    return os.path.join(os.path.dirname(module_file), f"{cls.__name__}.yaml")


def _chain(cls: type) -> list:
    """``cls`` and its first bases, up to (not including) the first class aiflows' own logic ends at or that has a
    ``get_config`` of its own."""
    chain = []
    while cls not in (Flow, ABC, object) and _uses_default_get_config(cls):
        chain.append(cls)
        cls = cls.__base__
    return chain + [cls]


def _uses_default_get_config(cls: type) -> bool:
    own = getattr(cls.get_config, "__func__", None)
    return own in _DEFAULT_GET_CONFIGS


def _signature(chain: list) -> tuple:
    return tuple((path, _stamp(path)) if path else None for path in (_yaml_path(c) for c in chain[:-1]))


def _merged_default(chain: list) -> Dict[str, Any]:
    top = chain[-1]
    if top is Flow:
        config = copy.deepcopy(getattr(Flow, "_Flow__default_flow_config"))
    elif top in (ABC, object):
        config = {}
    else:  # a base with a get_config of its own
        config = top.get_config()
    for cls in reversed(chain[:-1]):
        path = _yaml_path(cls)
        if path and os.path.exists(path):
            default = read_yaml(path)
            parent_module = ".".join(cls.__module__.split(".")[:-1])
            process_config_leafs(
                default, lambda k, v: parent_module + v if k == "_target_" and v.startswith(".") else v
            )
            config = recursive_dictionary_update(config, default)
        elif hasattr(cls, f"_{cls.__name__}__default_flow_config"):
            config = recursive_dictionary_update(
                config, copy.deepcopy(getattr(cls, f"_{cls.__name__}__default_flow_config"))
            )
    return config


def _cached_default(cls: type) -> Dict[str, Any]:
    """``cls``'s merged default, as kept (not a copy: callers copy what they hand out); call it holding _lock."""
    chain = _chain(cls)
    signature = _signature(chain)
    cached = _classes.get(cls)
    if cached is None or cached[0] != signature or chain[-1] not in (Flow, ABC, object):
        cached = (signature, _merged_default(chain))
        _classes[cls] = cached
    return cached[1]


def default_config(cls: type) -> Dict[str, Any]:
    """What ``Flow.get_config()`` of aiflows 0.1.7 returns for ``cls`` (no overrides), from the files read once; the
    caller gets its own copy."""
    with _lock:
        return copy_config(_cached_default(cls))


def default_value(cls: type, key: str, missing: Any = None) -> Any:
    """A copy of one key of ``cls``'s default configuration (``missing`` if it has none), without copying the rest:
    for a check made every time a flow is built (a controller's default ``commands``)."""
    if not _uses_default_get_config(cls):  # a class with a get_config of its own is asked for the whole default
        return cls.get_config().get(key, missing)
    with _lock:
        return copy_config(_cached_default(cls).get(key, missing))


def get_config(cls: type, **overrides: Any) -> Dict[str, Any]:
    """``cls``'s default configuration with ``overrides`` applied, as aiflows' ``Flow.get_config`` does."""
    return recursive_dictionary_update(default_config(cls), overrides)


def register_default_get_config(function: Any) -> None:
    """Mark a ``get_config`` implementation (the lean flows') as computing aiflows' default, so the chain of bases
    it is inherited by is merged here."""
    _DEFAULT_GET_CONFIGS.add(getattr(function, "__func__", function))
