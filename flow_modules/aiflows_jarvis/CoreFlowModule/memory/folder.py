"""Which file holds a memory: a flow's ``memory_files`` (plan, logs, code library), and one call that gives a whole
tree of flows its files in a memory folder (``set_memory_files``; a flow called inside ``RunContext(memory_dir=...)``
gets them without it, ``fill_memory_files``)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ..errors import ConfigurationError
from ..run.current import current_run


# ~~~ Which file holds a memory ~~~
def memory_files_of(flow: Any, input_data: Dict[str, Any]) -> Dict[str, str]:
    """`memory_files` from a flow's input, else from its config; a clear error if neither is set."""
    memory_files = input_data.get("memory_files") or flow.flow_config.get("memory_files")
    if not isinstance(memory_files, dict) or not memory_files or memory_files == "???":
        raise ConfigurationError(
            f"{flow.flow_config['name']}: `memory_files` is not set. Call the flow inside "
            '`with RunContext(memory_dir="memory")` (from aiflows_jarvis.CoreFlowModule), or call '
            'set_memory_files(flow, "memory") on it first: either gives every boss of its tree its plan, logs and '
            "code library files in that folder"
        )
    return memory_files


def memory_path(flow: Any, input_data: Dict[str, Any], key: str) -> str:
    """The file of memory ``key`` for a flow (see ``memory_files_of``); a clear error if it is not configured."""
    memory_files = memory_files_of(flow, input_data)
    if key not in memory_files:
        raise ConfigurationError(
            f"{flow.flow_config['name']}: memory_files has no '{key}' (it has {sorted(memory_files)})"
        )
    return memory_files[key]


def with_memory_files(flow: Any, input_data: Dict[str, Any]) -> Dict[str, Any]:
    """``input_data`` with the flow's configured ``memory_files`` added when the input has none."""
    if not input_data.get("memory_files") and isinstance(flow.flow_config.get("memory_files"), dict):
        return {**input_data, "memory_files": flow.flow_config["memory_files"]}
    return input_data


def set_memory_files(
    flow: Any, memory_dir: Optional[str] = None, workdir: Optional[str] = None
) -> Dict[str, Dict[str, str]]:
    """Give every flow of a tree that declares ``memory_file_names`` its ``memory_files`` in ``memory_dir`` (default:
    the current run's, ``RunContext(memory_dir=...)``).

    One call configures a whole hierarchy (Jarvis -> Coder -> ExtendLibrary, ...): each boss names its own files
    (``plan_coder.txt``, ...) in its YAML, and code runners without a ``workspace`` get ``workdir`` (default: the
    current working directory, as on the command line, so that code reads the user's files where the script runs),
    with ``memory_dir`` as their ``library_dir`` (so ``import library`` works there: the library is the package
    ``library/`` in ``memory_dir``). ``flow`` is a
    flow, or a configuration dict (``{_target_: ..., subflows_config: ...}``) before it is instantiated: there every
    ``memory_files: ???`` is filled (hydra refuses to build a config that still has one). Returns
    ``{path: memory_files}`` for what was set.
    """
    memory_dir = memory_dir or current_run().memory_dir
    if not memory_dir:
        raise ConfigurationError(
            'set_memory_files: no memory folder: pass one (set_memory_files(flow, "memory")) '
            "or call it inside `with RunContext(memory_dir=...)`"
        )
    memory_dir = os.path.abspath(memory_dir)
    os.makedirs(memory_dir, exist_ok=True)
    if isinstance(flow, dict):
        return _set_memory_files_in_config(flow, memory_dir)
    return _give_memory_files(flow, memory_dir, workdir, keep_set=False)


def fill_memory_files(flow: Any, memory_dir: str) -> None:
    """What ``set_memory_files(flow, memory_dir)`` does, for the flows of the tree whose ``memory_files`` are not set
    (the others keep theirs): a flow called inside ``RunContext(memory_dir=...)`` needs no call of its own. Called
    at each outermost flow call, it costs a walk of the tree.

    :param flow: the flow called.
    :param memory_dir: the run's memory folder.
    """
    memory_dir = os.path.abspath(memory_dir)
    os.makedirs(memory_dir, exist_ok=True)
    _give_memory_files(flow, memory_dir, None, keep_set=True)


def _give_memory_files(flow: Any, memory_dir: str, workdir: Optional[str], keep_set: bool) -> Dict[str, Any]:
    done: Dict[str, Dict[str, str]] = {}

    def visit(node: Any, path: str) -> None:
        config = node.flow_config
        names = config.get("memory_file_names")
        if isinstance(names, dict) and names and not (keep_set and isinstance(config.get("memory_files"), dict)):
            config["memory_files"] = {key: os.path.join(memory_dir, name) for key, name in names.items()}
            done[path] = config["memory_files"]
        if "workdir" in config and not config["workdir"]:  # a chat whose prompts may name the working folder
            config["workdir"] = os.path.abspath(workdir or os.curdir)
        if "workspace" in config and not config["workspace"]:
            config["workspace"] = os.path.abspath(workdir or os.curdir)
            if "library_dir" in config and not config["library_dir"]:
                config["library_dir"] = memory_dir
        for name, sub in getattr(node, "subflows", {}).items():
            visit(sub, f"{path}/{name}")

    visit(flow, flow.flow_config.get("name", "flow"))
    return done


def _set_memory_files_in_config(config: Dict[str, Any], memory_dir: str) -> Dict[str, Dict[str, str]]:
    """Fill every ``memory_files: ???`` of a configuration from the ``memory_file_names`` its flows declare."""
    from ..flows.config_tree import fill

    def files_for(node: Dict[str, Any], effective: Dict[str, Any]):
        names = node.get("memory_file_names") or effective.get("memory_file_names")
        if node.get("memory_files", effective.get("memory_files")) == "???" and isinstance(names, dict):
            return {"memory_files": {key: os.path.join(memory_dir, name) for key, name in names.items()}}
        return None

    return {path: updates["memory_files"] for path, updates in fill(config, files_for).items()}
