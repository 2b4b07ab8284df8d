"""The controller protocol: commands from YAML, and the parsing of a reply into ``{"command", "command_args"}``."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from flow_modules.aiflows.CoreFlowModule import ConfigurationError


@dataclass
class Command:
    name: str
    description: str
    input_args: List[str] = field(default_factory=list)
    optional_args: List[str] = field(default_factory=list)


def commands_from_config(config: Dict[str, Any], where: str) -> List[Command]:
    """``commands: {name: {description, input_args}}`` from YAML as a list of Command; clear errors otherwise."""
    if not isinstance(config, dict) or not config:
        raise ConfigurationError(f"{where}: `commands` must be a non-empty mapping name -> {{description, input_args}}")
    commands = []
    for name, spec in config.items():
        if not isinstance(spec, dict) or "description" not in spec:
            raise ConfigurationError(f"{where}: command {name!r} needs a `description` (and `input_args`)")
        lists = {}
        for key in ("input_args", "optional_args"):
            value = spec.get(key) or []
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                raise ConfigurationError(f"{where}: `{key}` of command {name!r} must be a list of names")
            lists[key] = list(value)
        commands.append(Command(str(name), str(spec["description"]).strip(), lists["input_args"],
                                lists["optional_args"]))
    # `finish` comes from the base config, so it would be listed first; the model reads it best last.
    return sorted(commands, key=lambda c: c.name == "finish")


def render_commands(commands: List[Command]) -> str:
    lines = []
    for i, command in enumerate(commands, 1):
        args = ", ".join(command.input_args) if command.input_args else "(none)"
        optional = f"; optional: {', '.join(command.optional_args)}" if command.optional_args else ""
        lines.append(f"{i}. {command.name}: {command.description} Input arguments: {args}{optional}")
    return "\n".join(lines)


class InvalidReply(Exception):
    """The reply is not a valid command; ``str(e)`` says exactly what is wrong, for the model."""


def example_reply(commands: List[Command]) -> str:
    """A well-formed reply calling the first command, for corrections."""
    first = commands[0]
    return json.dumps({"command": first.name, "command_args": {a: "..." for a in first.input_args}})


def parse_command(reply: str, commands: List[Command]) -> Tuple[str, Dict[str, Any]]:
    """``(command, command_args)`` from a reply that is exactly one JSON object; InvalidReply otherwise."""
    by_name = {c.name: c for c in commands}
    text = (reply or "").strip()
    if not text:
        raise InvalidReply("Your reply was empty.")
    if text.startswith("```"):
        raise InvalidReply("Your reply is wrapped in a code fence (```). Reply with the JSON object alone, "
                           "without code fences or any other text.")
    try:
        parsed = json.loads(text, strict=False)  # raw line breaks inside strings are accepted
    except json.JSONDecodeError as error:
        start = text.find("{")
        if start >= 0:
            try:
                _, end = json.JSONDecoder(strict=False).raw_decode(text[start:])
            except json.JSONDecodeError:
                end = None
            if end is not None:
                before, after = text[:start].strip(), text[start + end:].strip()
                where = " and ".join(p for p, t in (("before", before), ("after", after)) if t)
                raise InvalidReply(f"Your reply has text {where} the JSON object. Reply with the JSON object alone, "
                                   "with nothing before or after it.") from None
            if text.startswith("{") and not text.endswith("}"):
                raise InvalidReply("Your reply stops before the JSON object is complete: it was probably cut off "
                                   "for length. Reply with a shorter command (for long code, split the work into "
                                   "several steps).") from None
        raise InvalidReply(f"Your reply is not valid JSON ({error}).") from None
    if not isinstance(parsed, dict):
        raise InvalidReply("Your reply must be a JSON object with the keys \"command\" and \"command_args\".")
    missing = [k for k in ("command", "command_args") if k not in parsed]
    if missing:
        raise InvalidReply(f"Your reply has no {' and no '.join(repr(k) for k in missing)} key.")
    extra = sorted(set(parsed) - {"command", "command_args"})
    if extra:
        raise InvalidReply(f"Your reply has keys other than \"command\" and \"command_args\": {extra}. Remove them.")
    name = parsed["command"]
    if not isinstance(name, str) or name not in by_name:
        raise InvalidReply(f"{name!r} is not a command. The commands are: {', '.join(by_name)}.")
    args = parsed["command_args"]
    if args is None and not by_name[name].input_args:
        args = {}
    if not isinstance(args, dict):
        raise InvalidReply("\"command_args\" must be a JSON object mapping argument names to values.")
    expected = by_name[name].input_args
    optional = by_name[name].optional_args
    missing_args = [a for a in expected if a not in args]
    extra_args = [a for a in args if a not in expected and a not in optional]
    problems = []
    if missing_args:
        problems.append(f"missing argument(s): {', '.join(missing_args)}")
    if extra_args:
        problems.append(f"unknown argument(s): {', '.join(extra_args)}")
    if problems:
        takes = ", ".join(expected) if expected else "no arguments"
        if optional:
            takes += f" (optional: {', '.join(optional)})"
        raise InvalidReply(f"Command {name!r} takes {takes}; your reply has {'; '.join(problems)}.")
    return name, args
