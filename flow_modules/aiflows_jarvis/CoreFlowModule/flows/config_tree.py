"""Walking a flow configuration before it is built, together with the default configurations it will be merged with.

aiflows loads a subflow's default YAML only when the subflow is built, so a top-level configuration shows only what
it overrides. These helpers see the whole tree as it will be: each node's class defaults, merged with what its
parent's defaults and the given configuration say of it.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from aiflows.utils.general_helpers import recursive_dictionary_update

from .instantiate import copy_config


def flow_class(target: Any) -> Any:
    """The flow class a ``_target_`` names (``pkg.Class.instantiate_from_default_config`` or ``pkg.Class``)."""
    from .instantiate import locate as _locate  # hydra's _locate, without importing hydra

    if not isinstance(target, str) or not target:
        return None
    if target.endswith((".instantiate_from_default_config", ".instantiate_with_overrides")):
        target = target.rsplit(".", 1)[0]
    try:
        located = _locate(target)
    except Exception:  # an unknown target fails later, when the flow is built, with hydra's message
        return None
    return located if hasattr(located, "get_config") else None


def flow_target_problem(target: Any) -> Optional[str]:
    """Why a flow's ``_target_`` cannot build a flow (to follow the key's name in a message), or None. It must name
    the classmethod of a flow class that builds it (``pkg.Class.instantiate_from_default_config``): hydra calls it
    with the node's other keys, and what it returns must be a flow."""
    from aiflows.base_flows import Flow

    from .instantiate import locate as _locate  # hydra's _locate (same errors), without importing hydra

    if not isinstance(target, str) or not target.strip():
        return f"is {target!r}, not the dotted name of a flow"
    try:
        located = _locate(target)
    except Exception as error:  # hydra's message wraps the import error: say only the latter
        return f"names {target}, which cannot be imported ({error.__cause__ or error})"
    owner = getattr(located, "__self__", None)
    if isinstance(owner, type) and issubclass(owner, Flow):
        return None
    if isinstance(located, type) and issubclass(located, Flow):
        return f"names the flow class {target} itself: write {target}.instantiate_from_default_config"
    kind = (
        "a class that is not a flow"
        if isinstance(located, type)
        else "a function, not a flow"
        if callable(located)
        else f"a {type(located).__name__}, not a flow"
    )
    return f"names {target}, {kind}"


def walk_config(
    node: Dict[str, Any], path: str = "", parent_default: Optional[Dict[str, Any]] = None, create: bool = False
) -> Iterator[Tuple[str, Dict[str, Any], Dict[str, Any]]]:
    """Yield ``(path, node, effective)`` for a configuration node and every subflow below it.

    ``node`` is the (mutable) part of the given configuration for that flow; ``effective`` is what the flow's config
    will be before ``node`` is applied (its class defaults merged with its parent's defaults for it). With
    ``create``, nodes missing from the configuration are created (empty), so the whole tree is visited. A loop whose
    executor's branches come from its ``commands`` (a class with ``derived_config``) has them derived here as when it
    is built, and a command the node gives a flow is visited at its branch's override point (created empty).
    """
    parent_default = parent_default or {}
    cls = flow_class(node.get("_target_") or parent_default.get("_target_"))
    effective = cls.get_config() if cls is not None else {}
    effective = recursive_dictionary_update(effective, {k: v for k, v in parent_default.items() if k != "_target_"})
    path = path or node.get("name") or effective.get("name") or "flow"
    derive = getattr(cls, "derived_config", None)
    if derive is not None:  # a loop whose executor's branches come from its `commands` (ControllerExecutorFlow)
        effective = _derived(node, effective, path, derive)
    yield path, node, effective
    default_subflows = effective.get("subflows_config") or {}
    names = list(node.get("subflows_config") or {})
    if create:
        names += [n for n in default_subflows if n not in names]
    for name in names:
        if create:
            node.setdefault("subflows_config", {}).setdefault(name, {})
        sub = (node.get("subflows_config") or {}).get(name)
        if isinstance(sub, dict):
            yield from walk_config(sub, f"{path}/{name}", copy_config(default_subflows.get(name) or {}), create)


def _derived(node: Dict[str, Any], effective: Dict[str, Any], path: str, derive: Callable) -> Dict[str, Any]:
    """The effective configuration of a loop node with its executor's branches derived from the commands (the
    defaults' and the node's). A command the node gives a flow gets an (empty) node at its branch's override point,
    ``subflows_config.Executor.subflows_config.<name>``, so that the walk visits it: what is set there is merged over
    the command's flow when the loop is built."""
    given = node.get("commands")
    if isinstance(given, dict) and given:
        effective = recursive_dictionary_update(effective, {"commands": copy_config(given)})
        for name, spec in given.items():
            if isinstance(spec, dict) and isinstance(spec.get("flow"), dict):
                executor = node.setdefault("subflows_config", {}).setdefault("Executor", {})
                if isinstance(executor, dict):
                    branches = executor.setdefault("subflows_config", {})
                    if isinstance(branches, dict):
                        branches.setdefault(name, {})
    return derive(effective, where=path.replace("/", ".subflows_config."), check=False)


def root_of(config: Dict[str, Any]) -> Dict[str, Any]:
    """The flow node of a top-level configuration (``{flow: {...}}``), or the configuration itself."""
    return config["flow"] if isinstance(config.get("flow"), dict) else config


def chat_backends_skeleton(target: str, name: Optional[str] = None, model_name: Any = None) -> Dict[str, Any]:
    """A configuration for the flow ``target`` names with ``backend: {api_infos: ???}`` at every LLM chat in its tree,
    and ``<key>: {api_infos: ???}`` wherever else a flow's default has one (a vector store's ``embedding``): the shape
    ``quick_load(cfg, api_infos)`` fills, every chat and embedding model at once.

    ``name``: the root flow's name, if given. ``model_name`` (optional) is set next to each chat's ``api_infos``.
    """
    config: Dict[str, Any] = {"_target_": target}
    if name:
        config["name"] = name
    for _, node, effective in list(walk_config(config, create=True)):
        for key, value in effective.items():
            if key != "subflows_config" and isinstance(value, dict) and value.get("api_infos") == "???":
                node[key] = {"api_infos": "???"}
                if key == "backend" and model_name is not None:
                    node[key]["model_name"] = copy.deepcopy(model_name)
    _prune(config)
    return config


def _prune(node: Dict[str, Any]) -> bool:
    """Drop subflow entries that set nothing; returns whether ``node`` sets something."""
    subflows = node.get("subflows_config")
    if isinstance(subflows, dict):
        for name in list(subflows):
            if not _prune(subflows[name]):
                del subflows[name]
        if not subflows:
            del node["subflows_config"]
    return any(k not in ("_target_",) for k in node)


def fill(
    config: Dict[str, Any], where: Callable[[Dict[str, Any], Dict[str, Any]], Optional[Dict[str, Any]]]
) -> Dict[str, Any]:
    """Apply ``where(node, effective) -> updates or None`` to every node of a configuration; returns
    ``{path: updates}`` for what changed."""
    done = {}
    for path, node, effective in walk_config(root_of(config)):
        updates = where(node, effective)
        if updates:
            node.update(updates)
            done[path] = updates
    return done
