"""A loop's commands declared once: ``commands: {name: {description, input_args, ..., flow: {...}}}``.

One declaration keeps what the controller is told of a command and the flow that runs it from drifting apart. When
the loop is built (once per instantiation, never per round) it is split: the controller gets the commands without
their flows (``subflows_config.Controller.commands``), the executor one branch per flow
(``subflows_config.Executor.subflows_config``). Entries already there are merged over the declaration (a
configuration may also declare both halves there, with no ``flow``). What does not pair up is refused with the key's
path: a command without a flow, or a branch without a command. The commands the loop runs itself (``finish``) have
no flow.

A loop class's YAML declares the commands every loop of the class has (CtrlExMemFlow's: those of every boss), and a
configuration adds its own, changes one, or leaves one out (``name: null``), as aiflows merges a configuration over
its class's. The controller lists a loop's own commands first, then those declared by its class, then by the class's
bases: the more general a declaration, the later (``finish``, declared by the controller, comes last).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Sequence

from aiflows.utils.general_helpers import recursive_dictionary_update

from aiflows_jarvis.CoreFlowModule import ConfigurationError, copy_config, default_value, flow_class

_MISSING = object()


def _class_commands(controller: Dict[str, Any]) -> Dict[str, Any]:
    """The commands the controller's class declares in its own YAML (``finish``, for ControllerAtomicFlow)."""
    cls = flow_class(controller.get("_target_"))
    commands = default_value(cls, "commands") if cls is not None else None
    return commands if isinstance(commands, dict) else {}


def _mapping(value: Any, key: str, what: str, check: bool) -> Dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if check:
        raise ConfigurationError(f"{key}: must be a mapping {what}, not {type(value).__name__}")
    return {}


# The executor's branch that runs the run's tools (``tools:`` of a loop: MCP servers' tools, one command each).
TOOLS_BRANCH = "tools"


# What a command that carries plan steps offers the model, with bookkeeping by code: it says which step the command
# completes, and the loop marks that step done when the command succeeds (no update_plan call).
STEP_ARGUMENT = "completes_step"
STEP_NOTE = "the number of the plan step it completes: marked done when the command succeeds"


def with_step_argument(spec: Dict[str, Any]) -> Dict[str, Any]:
    """A command's declaration with the optional argument ``completes_step`` (see ``STEP_ARGUMENT``)."""
    spec = dict(spec)
    optional = list(spec.get("optional_args") or [])
    if STEP_ARGUMENT not in optional:
        spec["optional_args"] = optional + [STEP_ARGUMENT]
        spec["arg_types"] = {**(spec.get("arg_types") or {}), STEP_ARGUMENT: "integer"}
        spec["arg_notes"] = {**(spec.get("arg_notes") or {}), STEP_ARGUMENT: STEP_NOTE}
    return spec


def declared_by_classes(cls: type, base: type) -> List[List[str]]:
    """The commands each class declares in its default configuration (its YAML merged over its bases'), from ``cls``
    to ``base`` along the first bases, as aiflows merges them: ``derive_commands``'s ``declared_by``."""
    levels = []
    while isinstance(cls, type) and issubclass(cls, base):
        commands = default_value(cls, "commands")
        levels.append(
            [name for name, spec in commands.items() if spec is not None] if isinstance(commands, dict) else []
        )
        cls = cls.__base__
    return levels


def in_declaration_order(names: Iterable[str], declared_by: Sequence[Iterable[str]]) -> List[str]:
    """``names`` with the commands of a loop's configuration first, then those its class declares, then those of the
    class's bases (``declared_by``: the commands each class declares, from the loop's class to its most general base).
    The order within each group is kept."""
    levels: Dict[str, int] = {}
    for level, declared in enumerate(declared_by):
        for name in declared:
            levels[name] = level  # the most general class that declares it
    return sorted(names, key=lambda name: levels.get(name, -1))


def derive_commands(
    config: Dict[str, Any],
    where: str,
    loop_commands: Iterable[str] = ("finish",),
    check: bool = True,
    declared_by: Sequence[Iterable[str]] = (),
) -> Dict[str, Any]:
    """``config`` with the controller's commands and the executor's branches derived from its ``commands``.

    The result shares what it does not change with ``config`` (which is not modified); its ``commands`` keep the
    declarations without their flows, which become the executor's branches. With ``bookkeeping_by_code`` (the
    default), a command declared with ``carries_steps`` takes the optional argument ``completes_step``. A loop's
    ``tools: {flow, ...}`` becomes the branch ``tools`` (``TOOLS_BRANCH``), which runs every tool the run offers
    (their commands are added when the controller is first called); the rest of ``tools`` is what each of those
    commands is declared with besides its own declaration (``result_keys``, ``succeeds_when``, ``carries_steps``).
    A command declared ``null`` (in ``commands`` or the controller's) is left out: how a configuration drops one
    that its loop's class declares.

    :param config: a ControllerExecutorFlow configuration (merged defaults and overrides).
    :param where: the key path of that configuration, for messages (``Jarvis.subflows_config.CtrlExMem``).
    :param loop_commands: the commands the loop runs itself: they have no flow.
    :param check: raise ConfigurationError for a command without a flow or a branch without a command (a walk over
        a configuration that is not built yet derives what it can, without checking).
    :param declared_by: the commands each class of the loop declares, from its own class to its most general base:
        the order the controller lists them in (``in_declaration_order``).
    """
    loop_commands = tuple(loop_commands)
    given = _mapping(config.get("commands"), f"{where}.commands", "name -> {description, input_args, flow}", check)
    subflows = dict(_mapping(config.get("subflows_config"), f"{where}.subflows_config", "name -> flow", check))
    controller = dict(_mapping(subflows.get("Controller"), f"{where}.subflows_config.Controller", "", check))
    executor = dict(_mapping(subflows.get("Executor"), f"{where}.subflows_config.Executor", "", check))
    branch_key = f"{where}.subflows_config.Executor.subflows_config"
    overrides = _mapping(executor.get("subflows_config"), branch_key, "name -> flow", check)
    told_key = f"{where}.subflows_config.Controller.commands"
    told = _mapping(controller.get("commands"), told_key, "name -> {description, input_args}", check)

    left_out = {name for name, spec in list(given.items()) + list(told.items()) if spec is None}
    declared: Dict[str, Dict[str, Any]] = {}
    flows: Dict[str, Any] = {}
    origin: Dict[str, str] = {}
    for name, spec in given.items():
        if name in left_out:
            continue
        if not isinstance(spec, dict):
            if check:
                raise ConfigurationError(
                    f"{where}.commands.{name}: must be a mapping {{description, input_args, "
                    f"flow}}, not {type(spec).__name__}"
                )
            continue
        spec = dict(spec)
        flows[name] = spec.pop("flow", _MISSING)
        declared[name] = spec
        origin[name] = f"{where}.commands.{name}"
    for name, spec in told.items():
        if name in left_out:
            continue
        if isinstance(spec, dict):
            declared[name] = recursive_dictionary_update(copy_config(declared.get(name) or {}), copy_config(spec))
        origin.setdefault(name, f"{told_key}.{name}")
    declared = {name: declared[name] for name in in_declaration_order(declared, declared_by)}
    named = dict.fromkeys(list(declared) + (list(_class_commands(controller)) if check else []))

    branches: Dict[str, Dict[str, Any]] = {}
    for name in named:
        flow, override = flows.get(name, _MISSING), overrides.get(name)
        key = origin.get(name, f"{told_key}.{name} (in the controller's class YAML)")
        if name in loop_commands:
            if check and (isinstance(flow, dict) or override is not None):
                raise ConfigurationError(
                    f"{key}: `{name}` is run by the loop itself and takes no flow; remove "
                    f"its flow (and any branch {branch_key}.{name})."
                )
            continue
        if flow is not _MISSING and flow is not None and not isinstance(flow, dict):
            if check:
                raise ConfigurationError(
                    f"{key}.flow: must be a flow's configuration (a mapping with a "
                    f"`_target_`), not {type(flow).__name__}"
                )
            continue
        branch = flow if isinstance(flow, dict) else {}
        if isinstance(override, dict):  # merged into a copy of the flow; the override's leaves are shared
            branch = recursive_dictionary_update(copy_config(branch), override)
        if "_target_" not in branch:
            if check:
                raise ConfigurationError(
                    f"{key}: no flow. Give the command the flow that runs it, `flow: {{_target_: "
                    f"package.Class.instantiate_from_default_config, ...}}`, or remove the command."
                )
            continue
        branches[name] = branch
    tools = config.get("tools")
    tools_key = f"{where}.tools"
    if tools is not None:
        flow = tools.get("flow") if isinstance(tools, dict) else None
        branch = flow if isinstance(flow, dict) else {}
        if isinstance(overrides.get(TOOLS_BRANCH), dict):
            branch = recursive_dictionary_update(copy_config(branch), overrides[TOOLS_BRANCH])
        if check and (not isinstance(tools, dict) or "_target_" not in branch):
            raise ConfigurationError(
                f"{tools_key}: must be a mapping with the `flow` that runs the run's tools, "
                "`tools: {flow: {_target_: package.Class.instantiate_from_default_config}}`, "
                "or null"
            )
        if check and TOOLS_BRANCH in named:
            raise ConfigurationError(
                f"{where}.commands.{TOOLS_BRANCH}: `{TOOLS_BRANCH}` is the branch that runs the "
                f"tools ({tools_key}); give the command another name."
            )
        if "_target_" in branch:
            branches[TOOLS_BRANCH] = branch
    for name in overrides:
        if name == TOOLS_BRANCH and TOOLS_BRANCH in branches:
            continue
        if name not in named and check:
            raise ConfigurationError(
                f"{branch_key}.{name}: no command. A branch runs a command: declare it under {where}.commands."
                f"{name} with its description, input_args and flow (or remove the branch)."
            )
    if check and "finish" in loop_commands and "finish" not in named:
        raise ConfigurationError(
            f"{where}.commands: no `finish`; the loop ends when the controller calls it. "
            "Declare it: `finish: {description: ..., input_args: [summary]}`."
        )

    if config.get("bookkeeping_by_code", True):
        declared = {
            name: with_step_argument(spec) if spec.get("carries_steps") else spec for name, spec in declared.items()
        }
    derived = dict(config)
    derived["commands"] = declared
    if isinstance(tools, dict):
        derived["tools"] = {key: value for key, value in tools.items() if key != "flow"}
    controller["commands"] = declared
    controller["bookkeeping_by_code"] = bool(config.get("bookkeeping_by_code", True))
    executor["subflows_config"] = branches
    subflows.update(Controller=controller, Executor=executor)
    derived["subflows_config"] = subflows
    return derived
