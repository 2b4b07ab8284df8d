"""``hydra.utils.instantiate(config, _convert_="partial")`` without hydra's OmegaConf round trip.

aiflows builds every subflow (and the interfaces and prompts of its flows) through hydra, which turns the whole
configuration below that point into OmegaConf objects, resolves it and turns it back into dicts: a composite flow
converts its subtree again at every level of nesting. A configuration made of plain values (dicts, lists, strings,
numbers, booleans, None, and objects such as ``ApiInfo`` passed through) with no ``${...}`` interpolation and none of
hydra's special keys gets the same call directly: the target with the other keys as keyword arguments (copies), and
hydra's errors, except that a ``JarvisError`` (a ConfigurationError that names the key and what to do) is raised as
it is, not wrapped once per level of nesting. Anything else goes through hydra.
"""

from __future__ import annotations

import copy
import importlib
import types
from typing import Any, Dict

from ..errors import JarvisError, root_cause

_HYDRA_KEYS = ("_args_", "_partial_", "_convert_", "_recursive_")


def _plain(value: Any) -> bool:
    """A value hydra would hand over unchanged (as a copy): no interpolation to resolve, no config to convert."""
    if isinstance(value, str):
        return "${" not in value
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, tuple):  # hydra would hand over a list
        return False
    # An object (an ApiInfo, ...): hydra would wrap a dataclass in a DictConfig; it is passed as it is.
    module = type(value).__module__
    return not module.startswith("omegaconf")


_ATOMS = (str, int, float, bool, type(None))


def copy_config(value: Any) -> Any:
    """``copy.deepcopy`` of configuration data, without deepcopy's bookkeeping: building a flow tree copies its
    configuration at every level of nesting. Dicts and lists are rebuilt, strings, numbers, booleans and None shared
    (immutable); anything else (an ApiInfo, ...) is deep-copied. Unlike deepcopy, two references to one list become
    two lists."""
    kind = type(value)
    if kind is dict:
        return {key: copy_config(item) for key, item in value.items()}
    if kind is list:
        return [copy_config(item) for item in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def locate(path: str) -> Any:
    """The object a dotted path names (``package.module.Class.method``), importing modules as needed: hydra's
    ``_locate``, same errors, without importing hydra (which start-up does not need)."""
    if path == "":
        raise ImportError("Empty path")
    parts = path.split(".")
    if not all(parts):
        raise ValueError(f"Error loading '{path}': invalid dotstring.\nRelative imports are not supported.")
    try:
        found = importlib.import_module(parts[0])
    except Exception as error:
        raise ImportError(
            f"Error loading '{path}':\n{error!r}\nAre you sure that module '{parts[0]}' is installed?"
        ) from error
    for m, part in enumerate(parts[1:], start=1):
        try:
            found = getattr(found, part)
            continue
        except AttributeError as missing:
            parent = ".".join(parts[:m])
            if not isinstance(found, types.ModuleType):
                raise ImportError(
                    f"Error loading '{path}':\n{missing!r}\nAre you sure that '{part}' is an attribute of '{parent}'?"
                ) from missing
        try:
            found = importlib.import_module(".".join(parts[: m + 1]))
        except ModuleNotFoundError as error:
            raise ImportError(
                f"Error loading '{path}':\n{error!r}\nAre you sure that '{part}' is importable from module '{parent}'?"
            ) from error
        except Exception as error:
            raise ImportError(f"Error loading '{path}':\n{error!r}") from error
    return found


def _target(name: str) -> Any:
    """The callable a ``_target_`` names; hydra's errors when it cannot be found or called."""
    try:
        target = locate(name)
    except Exception as error:
        raise _instantiation_error(
            f"Error locating target '{name}', set env var HYDRA_FULL_ERROR=1 to see chained exception."
        ) from error
    if not callable(target):
        raise _instantiation_error(f"Expected a callable target, got '{target}' of type '{type(target).__name__}'")
    return target


def _instantiation_error(message: str) -> Exception:
    from hydra.errors import InstantiationException

    return InstantiationException(message)


def _nested_target(value: Any) -> bool:
    if isinstance(value, dict):
        return "_target_" in value or any(_nested_target(item) for item in value.values())
    if isinstance(value, list):
        return any(_nested_target(item) for item in value)
    return False


def is_plain(config: Any, recursive: bool = False) -> bool:
    """True if ``instantiate`` can call ``config``'s target directly (with ``recursive``: and nothing below it is
    to be instantiated)."""
    return (
        isinstance(config, dict)
        and isinstance(config.get("_target_"), str)
        and not any(key in config for key in _HYDRA_KEYS)
        and _plain(config)
        and not (recursive and any(_nested_target(value) for key, value in config.items() if key != "_target_"))
    )


def instantiate(config: Dict[str, Any], recursive: bool = False) -> Any:
    """What ``hydra.utils.instantiate(config, _recursive_=recursive, _convert_="partial")`` returns."""
    if not is_plain(config, recursive):
        import hydra

        try:
            return hydra.utils.instantiate(config, _recursive_=recursive, _convert_="partial")
        except Exception as error:
            cause = root_cause(error)
            if cause is error or not isinstance(cause, JarvisError):
                raise
            raise cause from error
    target = _target(config["_target_"])
    kwargs = {key: copy_config(value) for key, value in config.items() if key != "_target_"}
    try:
        return target(**kwargs)
    except JarvisError:
        raise  # it says what is wrong and where; hydra's wrapper would only bury it
    except Exception as error:  # as hydra words it, so callers see the same errors either way
        raise _instantiation_error(
            f"Error in call to target '{target.__module__}.{target.__qualname__}':\n{error!r}"
        ) from error
