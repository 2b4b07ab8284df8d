"""The controller protocol: commands from YAML, their reply schema, and the reading of a reply into
``{"command", "command_args"}``.

A reply is read leniently first: a reply that holds exactly one command object is accepted even when it is
wrapped in a code fence, surrounded by prose, written as a Python dict, or has trailing commas; each such repair is
named. Anything ambiguous (two objects, a cut-off object, no JSON at all) raises ``InvalidReply`` whose message says
exactly what is wrong, for the model.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import ConfigurationError, shorten, without_lone_surrogates

# JSON-Schema type names an argument can be declared with (`arg_types` in the YAML); undeclared ones are strings.
ARG_TYPES = ("string", "integer", "number", "boolean", "array", "object")
DIALECTS = ("json_schema", "json_object")


@dataclass
class Command:
    name: str
    description: str
    input_args: List[str] = field(default_factory=list)
    optional_args: List[str] = field(default_factory=list)
    arg_types: Dict[str, str] = field(default_factory=dict)
    arg_notes: Dict[str, str] = field(default_factory=dict)  # what an argument means, where its name does not say
    # more of an argument's JSON schema than its type: `enum` (of a scalar), `items` (of an array: a scalar type,
    # with its own enum, or "object"), as a tool's own input schema gives them
    arg_schemas: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def type_of(self, arg: str) -> str:
        return self.arg_types.get(arg, "string")

    def takes(self) -> str:
        """``question`` / ``no arguments (optional: replace_existing)``, for messages."""
        takes = ", ".join(self.input_args) if self.input_args else "no arguments"
        if self.optional_args:
            takes += f" (optional: {', '.join(self.optional_args)})"
        return takes


def commands_from_config(config: Dict[str, Any], where: str) -> List[Command]:
    """``commands: {name: {description, input_args, optional_args, arg_types, arg_notes, arg_schemas}}`` from YAML
    as a list of Command; clear errors otherwise."""
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
        arg_types = spec.get("arg_types") or {}
        if not isinstance(arg_types, dict):
            raise ConfigurationError(f"{where}: `arg_types` of command {name!r} must be a mapping argument -> type")
        arguments = lists["input_args"] + lists["optional_args"]
        for arg, type_name in arg_types.items():
            if arg not in arguments:
                raise ConfigurationError(
                    f"{where}: `arg_types` of command {name!r} names {arg!r}, which is not one of its arguments "
                    f"(input_args and optional_args: {', '.join(arguments) or 'none'})"
                )
            if type_name not in ARG_TYPES:
                raise ConfigurationError(
                    f"{where}: `arg_types` of command {name!r} gives {arg!r} the type "
                    f"{type_name!r}; the types are {', '.join(ARG_TYPES)}"
                )
        arg_notes = spec.get("arg_notes") or {}
        if not isinstance(arg_notes, dict) or any(arg not in arguments for arg in arg_notes):
            raise ConfigurationError(
                f"{where}: `arg_notes` of command {name!r} must map its arguments "
                f"({', '.join(arguments) or 'none'}) to what they mean"
            )
        arg_schemas = spec.get("arg_schemas") or {}
        if not isinstance(arg_schemas, dict) or any(
            arg not in arguments or not isinstance(schema, dict) for arg, schema in arg_schemas.items()
        ):
            raise ConfigurationError(
                f"{where}: `arg_schemas` of command {name!r} must map its arguments "
                f"({', '.join(arguments) or 'none'}) to JSON-schema keywords (enum, items)"
            )
        commands.append(
            Command(
                str(name),
                str(spec["description"]).strip(),
                lists["input_args"],
                lists["optional_args"],
                {str(a): str(t) for a, t in arg_types.items()},
                {str(a): str(t) for a, t in arg_notes.items()},
                {str(a): dict(schema) for a, schema in arg_schemas.items()},
            )
        )
    # `finish` comes from the base config, so it would be listed first; the model reads it best last.
    return sorted(commands, key=lambda c: c.name == "finish")


def render_commands(commands: List[Command]) -> str:
    def arg(command: Command, name: str) -> str:
        said = [
            t
            for t in (
                command.type_of(name) if command.type_of(name) != "string" else "",
                command.arg_notes.get(name, ""),
            )
            if t
        ]
        return f"{name} ({': '.join(said)})" if said else name

    lines = []
    for i, command in enumerate(commands, 1):
        args = ", ".join(arg(command, a) for a in command.input_args) if command.input_args else "(none)"
        optional = (
            f"; optional: {', '.join(arg(command, a) for a in command.optional_args)}" if command.optional_args else ""
        )
        lines.append(f"{i}. {command.name}: {command.description} Input arguments: {args}{optional}")
    return "\n".join(lines)


class InvalidReply(Exception):
    """The reply is not a valid command; ``str(e)`` says exactly what is wrong, for the model."""


# What a correction quotes of the reply's own text (a command name, a key, an argument name): enough to recognise it.
# A reply whose "command" is 100 KB long must not come back whole in the next request (and on the console).
ECHO_CHARS = 80
_ECHO_ITEMS = 8


def _listed(items: List[Any], show=str) -> str:
    """Names from the reply, as a correction quotes them: each cut to ECHO_CHARS characters, at most a few."""
    shown = [shorten(show(item), ECHO_CHARS) for item in items[:_ECHO_ITEMS]]
    more = f" and {len(items) - _ECHO_ITEMS} more" if len(items) > _ECHO_ITEMS else ""
    return ", ".join(shown) + more


_PLACEHOLDERS = {"string": "...", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


def example_reply(commands: List[Command]) -> str:
    """A well-formed reply calling the first command, for corrections."""
    first = commands[0]
    return json.dumps(
        {"command": first.name, "command_args": {a: _PLACEHOLDERS[first.type_of(a)] for a in first.input_args}}
    )


# ~~~ The reply schema ~~~
_SCALARS = ("string", "integer", "number", "boolean")


def _scalar_schema(type_name: str, enum: Any = None) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"type": type_name}
    if isinstance(enum, list) and enum:
        schema["enum"] = list(enum)
    return schema


def _arg_schema(
    type_name: str, strict: bool, nullable: bool, note: str = "", extra: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """One argument's schema in a dialect. ``extra`` (``Command.arg_schemas``) adds a scalar's ``enum`` and an
    array's ``items``; what strict mode cannot carry (a free-form object, an array of objects) comes as JSON text,
    which reading decodes."""
    extra = extra or {}
    items = extra.get("items") if isinstance(extra.get("items"), dict) else {}
    if type_name == "array":
        item_type = items.get("type") if items.get("type") in _SCALARS + ("object",) else "string"
        if item_type == "object" and strict:
            schema: Dict[str, Any] = {"type": "string", "description": "a JSON array of objects, encoded as a string"}
        else:
            schema = {"type": "array", "items": _scalar_schema(item_type, items.get("enum"))}
    elif type_name == "object" and strict:
        # strict mode has no free-form object (every object lists its properties): the object comes as JSON text,
        # which reading decodes
        schema = {"type": "string", "description": "a JSON object, encoded as a string"}
    else:
        schema = _scalar_schema(type_name, extra.get("enum") if type_name in _SCALARS else None)
    said = [text for text in (schema.get("description"), note) if text]
    if nullable:  # strict mode lists every property as required: an optional one says so, and may be null
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = schema["enum"] + [None]
        said.insert(0, "optional: null to leave it out")
    if said:
        schema["description"] = "; ".join(said)
    return schema


def _args_schema(command: Command, strict: bool) -> Dict[str, Any]:
    """``command_args`` of ``command``: exactly its arguments. Strict mode lists every property in ``required``, so
    the optional ones may be null (reading drops a null optional argument) and their descriptions say they are
    optional; elsewhere only the input arguments are required."""

    def schema(arg: str, nullable: bool) -> Dict[str, Any]:
        return _arg_schema(
            command.type_of(arg), strict, nullable, command.arg_notes.get(arg, ""), command.arg_schemas.get(arg)
        )

    properties = {a: schema(a, False) for a in command.input_args}
    properties.update({a: schema(a, strict) for a in command.optional_args})
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if strict else list(command.input_args),
        "additionalProperties": False,
    }


def reply_schema(commands: List[Command], dialect: str) -> Dict[str, Any]:
    """The ``response_format`` that constrains a reply to one of ``commands``.

    ``json_schema``: OpenAI's strict structured outputs (also vLLM, llama.cpp's server, Ollama). Strict mode wants an
    object at the root and no ``oneOf``/``const``, so ``command`` is an enum of the names and ``command_args`` an
    ``anyOf`` of one object per command: the schema cannot tie the two together, reading checks the pairing.
    ``json_object``: ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server, vLLM), with the exact
    schema: ``oneOf`` one variant per command, ``command`` fixed to its name, ``command_args`` with exactly its
    arguments.
    """
    if dialect == "json_schema":
        schema = {
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": [c.name for c in commands]},
                "command_args": {"anyOf": [_args_schema(c, strict=True) for c in commands]},
            },
            "required": ["command", "command_args"],
            "additionalProperties": False,
        }
        return {"type": "json_schema", "json_schema": {"name": "command", "strict": True, "schema": schema}}
    if dialect == "json_object":
        variants = [
            {
                "type": "object",
                "properties": {"command": {"const": c.name}, "command_args": _args_schema(c, strict=False)},
                "required": ["command", "command_args"],
                "additionalProperties": False,
            }
            for c in commands
        ]
        return {"type": "json_object", "schema": {"oneOf": variants}}
    raise ValueError(f"unknown structured-output dialect {dialect!r}; the dialects are {', '.join(DIALECTS)}")


# ~~~ Reading a reply ~~~
_FENCE = re.compile(r"```[\w+.-]*")
_YAML_COMMAND = re.compile(r"^\s*-?\s*command\s*:", re.MULTILINE)
_JSON_ESCAPES = set('"\\/bfnrtu')
_HEX = set("0123456789abcdefABCDEF")
_JSON_WORDS = {"true": "True", "false": "False", "null": "None"}
# Near misses of the key names, accepted when they leave no doubt (see _normalize_keys).
_COMMAND_KEYS = ("name", "action", "tool", "function")
_ARGS_KEYS = ("args", "arguments", "parameters", "params", "command_arguments", "action_input", "input", "inputs")


class _Unreadable(Exception):
    def __init__(self, error: json.JSONDecodeError):
        super().__init__(str(error))
        self.error = error


def _object_spans(text: str) -> Tuple[List[Tuple[int, int]], Optional[int]]:
    """The top-level ``{...}`` spans of ``text`` (braces inside quoted strings do not count), and where an object that
    is never closed starts (None if every one is closed)."""
    spans: List[Tuple[int, int]] = []
    depth, start, quote, i = 0, 0, None, 0
    while i < len(text):
        ch = text[i]
        if depth == 0:
            if ch == "{":
                depth, start = 1, i
        elif quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
        i += 1
    return spans, (start if depth else None)


def _fix_json(text: str) -> Tuple[str, List[str]]:
    """``text`` with trailing commas dropped and invalid escapes (``\\d`` in a regex) doubled; the repairs made."""
    out: List[str] = []
    repairs: List[str] = []
    in_string, i = False, 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                following = text[i + 1 : i + 2]
                valid = following in _JSON_ESCAPES and (
                    following != "u" or set(text[i + 2 : i + 6]) <= _HEX and len(text[i + 2 : i + 6]) == 4
                )
                if valid:
                    out.append(text[i : i + 2])
                    i += 2
                    continue
                out.append("\\\\")
                if "invalid escape" not in repairs:
                    repairs.append("invalid escape")
                i += 1
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == ",":
            rest = text[i + 1 :].lstrip()
            if rest[:1] in ("}", "]"):
                if "trailing comma" not in repairs:
                    repairs.append("trailing comma")
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out), repairs


def _pythonize(text: str) -> str:
    """``text`` made ready for ``ast.literal_eval``: JSON's true/false/null outside strings become Python's, and line
    breaks inside quoted strings are escaped."""
    out: List[str] = []
    quote, i = None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                out.append(text[i : i + 2])
                i += 2
                continue
            if ch == quote:
                quote = None
            out.append({"\n": "\\n", "\r": "\\r"}.get(ch, ch))
        elif ch in "\"'":
            quote = ch
            out.append(ch)
        elif ch.isalpha() or ch == "_":
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append(_JSON_WORDS.get(word, word))
            i = j
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _load(text: str) -> Tuple[Any, List[str]]:
    """The value ``text`` holds, read as JSON, then as JSON with its usual slips fixed, then as a Python literal;
    the repairs made. _Unreadable (with the JSON error) if none of these reads it."""
    try:
        return json.loads(text, strict=False), []
    except json.JSONDecodeError as error:
        first_error = error
    fixed, repairs = _fix_json(text)
    if repairs:
        try:
            return json.loads(fixed, strict=False), repairs
        except json.JSONDecodeError:
            pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "invalid escape sequence" of code in a string
            return ast.literal_eval(_pythonize(text)), ["python dict"]
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise _Unreadable(first_error) from None


def _looks_like_command(value: Any, by_name: Dict[str, Command]) -> bool:
    if not isinstance(value, dict):
        return False
    if "command" in value or any(isinstance(value.get(k), str) and value[k] in by_name for k in _COMMAND_KEYS):
        return True
    return len(value) == 1 and next(iter(value)) in by_name


def _extract_object(text: str, by_name: Dict[str, Command]) -> Tuple[Any, List[str]]:
    """The one object a reply that is not JSON as a whole holds (in a fence, in prose, as a Python dict, ...), with
    the repairs made; InvalidReply if it holds none, or more than one."""
    spans, unclosed = _object_spans(text)
    objects: List[Tuple[Tuple[int, int], Any, List[str]]] = []
    broken: List[Tuple[Tuple[int, int], json.JSONDecodeError]] = []
    for start, end in spans:
        try:
            value, repairs = _load(text[start:end])
        except _Unreadable as unreadable:
            broken.append(((start, end), unreadable.error))
            continue
        if isinstance(value, dict):
            objects.append(((start, end), value, repairs))
    # A bit of prose with braces in it ("use {name} as ...") is not an attempt at the command.
    broken = [(span, e) for span, e in broken if "command" in text[span[0] : span[1]] or span == (0, len(text))]
    commands = [o for o in objects if _looks_like_command(o[1], by_name)]
    if commands:
        objects = commands

    if unclosed is not None and not objects:
        raise InvalidReply(
            "Your reply stops before the JSON object is complete: it was probably cut off for length. "
            "Reply with a shorter command (for long code, split the work into several steps)."
        )
    if len(objects) + len(broken) + (unclosed is not None) > 1:
        if len(objects) > 1 and not broken and unclosed is None and all(o[1] == objects[0][1] for o in objects):
            raise InvalidReply(
                f"Your reply repeats the same command {len(objects)} times. Send it once: exactly one "
                "JSON object, nothing else."
            )
        what = f"{len(objects)} JSON objects" if len(objects) > 1 else "more than one JSON object"
        if broken or unclosed is not None:
            what += " (not all of them complete or valid)"
        raise InvalidReply(
            f"Your reply has {what}; it must hold exactly one command. Reply with the one JSON "
            "object of the command to run next, and nothing else."
        )
    if not objects:
        if broken:
            (start, end), span_error = broken[0]
            if (start, end) == (0, len(text)):
                raise InvalidReply(f"Your reply is not valid JSON ({span_error}).")
            raise InvalidReply(f"The JSON object in your reply is not valid JSON ({span_error}).")
        if _YAML_COMMAND.search(text):
            raise InvalidReply(
                "Your reply is not valid JSON: it looks like YAML. Write the command as one JSON "
                "object, with double quotes around keys and strings."
            )
        raise InvalidReply("Your reply is not valid JSON: it holds no JSON object, only text.")

    (start, end), value, repairs = objects[0]
    outside = text[:start] + " " + text[end:]
    if "```" in outside:
        repairs = ["code fence"] + repairs
        outside = _FENCE.sub(" ", outside)
    if outside.strip():
        repairs = repairs + ["prose"]
    return value, repairs


def _normalize_keys(obj: Dict[str, Any], by_name: Dict[str, Command]) -> Tuple[Dict[str, Any], List[str]]:
    """Near misses of ``{"command": ..., "command_args": {...}}`` that leave no doubt, brought to that shape."""
    repairs: List[str] = []
    if "command" not in obj:
        aliases = [k for k in _COMMAND_KEYS if isinstance(obj.get(k), str) and obj[k] in by_name]
        if len(aliases) == 1:
            obj = {("command" if k == aliases[0] else k): v for k, v in obj.items()}
            repairs.append("key names")
        elif len(obj) == 1 and next(iter(obj)) in by_name and isinstance(next(iter(obj.values())), (dict, type(None))):
            # {"finish": {"summary": "..."}}
            ((name, args),) = obj.items()
            return {"command": name, "command_args": args if args is not None else {}}, ["command as key"]
    if "command" in obj and "command_args" not in obj:
        aliases = [k for k in _ARGS_KEYS if k in obj]
        command = by_name.get(obj["command"]) if isinstance(obj["command"], str) else None
        others = set(obj) - {"command"}
        if len(aliases) == 1 and others == {aliases[0]}:
            obj = {("command_args" if k == aliases[0] else k): v for k, v in obj.items()}
            repairs.append("key names")
        elif (
            command is not None
            and others <= set(command.input_args + command.optional_args)
            and (others or not command.input_args)
        ):
            # {"command": "finish", "summary": "..."}: the arguments beside the command
            obj = {"command": obj["command"], "command_args": {k: obj[k] for k in obj if k != "command"}}
            repairs.append("flat arguments")
    return obj, repairs


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, name in ((int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _coerce(value: Any, type_name: str, command: str, arg: str) -> Tuple[Any, bool]:
    """``value`` as an argument of ``type_name``, and whether it was converted; InvalidReply if it cannot be."""
    got = _json_type(value)
    if got == type_name or (type_name == "number" and got == "integer"):
        return value, False
    if type_name == "string" and got in ("integer", "number", "boolean"):
        return json.dumps(value), True
    if type_name == "integer" and got == "number" and float(value).is_integer():
        return int(value), True
    if got == "string":
        text = value.strip()
        if type_name == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true", True
        if type_name in ("integer", "number"):
            try:
                number = float(text) if type_name == "number" else int(text)
            except ValueError:
                pass
            else:
                return number, True
        if type_name in ("array", "object"):
            try:
                decoded, _ = _load(text)
            except _Unreadable:
                decoded = None
            if _json_type(decoded) == type_name:
                return decoded, True
    article = "an" if type_name[0] in "aeiou" else "a"
    if got == "null":
        raise InvalidReply(f"Argument {arg!r} of command {command!r} is null; give it {article} {type_name}.")
    raise InvalidReply(
        f"Argument {arg!r} of command {command!r} must be {article} {type_name}, "
        f"not {'an' if got[0] in 'aeiou' else 'a'} {got}."
    )


def read_command(reply: str, commands: List[Command]) -> Tuple[str, Dict[str, Any], List[str]]:
    """``(command, command_args, repairs)`` from a reply that holds exactly one command; InvalidReply otherwise.

    ``repairs`` names what had to be fixed to read it ("code fence", "prose", "python dict", "trailing comma",
    "invalid escape", "key names", "flat arguments", "args as string", "argument type", ...); empty for a reply
    that follows the protocol. Optional arguments given as null (strict structured outputs send them) are dropped.
    Lone surrogates a JSON escape made (``"\\ud800"``) become U+FFFD; a reply nested deeper than Python's
    recursion limit is an InvalidReply.
    """
    try:
        name, args, repairs = _read_command(reply, commands)
        args = without_lone_surrogates(args)
    except RecursionError:
        raise InvalidReply(
            "Your reply is nested too deeply to read. Reply with one flat JSON object: "
            '{"command": ..., "command_args": {...}} with text, number or boolean values.'
        ) from None
    return name, args, repairs


def _read_command(reply: str, commands: List[Command]) -> Tuple[str, Dict[str, Any], List[str]]:
    by_name = {c.name: c for c in commands}
    text = (reply or "").strip()
    if not text:
        raise InvalidReply("Your reply was empty.")
    repairs: List[str] = []
    try:
        value = json.loads(text, strict=False)  # raw line breaks inside strings are accepted
    except json.JSONDecodeError:
        value, repairs = _extract_object(text, by_name)
    else:
        if isinstance(value, str) and value.strip().startswith("{"):
            try:  # the whole object sent as one JSON string
                inner, more = _load(value.strip())
            except _Unreadable:
                inner = None
            if isinstance(inner, dict):
                value, repairs = inner, ["json string"] + more
        elif isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            value, repairs = value[0], ["array wrapper"]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        raise InvalidReply(
            f"Your reply is a list of {len(value)} objects; it must be exactly one JSON object, the "
            "command to run next."
        )
    if not isinstance(value, dict):
        raise InvalidReply('Your reply must be a JSON object with the keys "command" and "command_args".')
    parsed, more = _normalize_keys(value, by_name)
    repairs += more

    missing = [k for k in ("command", "command_args") if k not in parsed]
    if missing:
        raise InvalidReply(f"Your reply has no {' and no '.join(repr(k) for k in missing)} key.")
    extra = sorted(set(parsed) - {"command", "command_args"}, key=str)
    if extra:
        raise InvalidReply(
            f'Your reply has keys other than "command" and "command_args": {_listed(extra, repr)}. Remove them.'
        )
    name = parsed["command"]
    if not isinstance(name, str) or name not in by_name:
        raise InvalidReply(f"{_listed([name], repr)} is not a command. The commands are: {', '.join(by_name)}.")
    command = by_name[name]
    args = parsed["command_args"]
    if args is None and not command.input_args:
        args = {}
    if isinstance(args, str) and args.strip().startswith("{"):
        try:  # command_args sent as JSON text
            decoded, more = _load(args.strip())
        except _Unreadable:
            decoded = None
        if isinstance(decoded, dict):
            args = decoded
            repairs += ["args as string"] + more
    if not isinstance(args, dict):
        raise InvalidReply('"command_args" must be a JSON object mapping argument names to values.')
    args = {k: v for k, v in args.items() if not (v is None and k in command.optional_args)}

    missing_args = [a for a in command.input_args if a not in args]
    extra_args = [a for a in args if a not in command.input_args and a not in command.optional_args]
    problems = []
    if missing_args:
        problems.append(f"missing argument(s): {', '.join(missing_args)}")
    if extra_args:
        problems.append(f"unknown argument(s): {_listed(extra_args)}")
    if problems:
        raise InvalidReply(f"Command {name!r} takes {command.takes()}; your reply has {'; '.join(problems)}.")
    for arg in list(args):
        args[arg], converted = _coerce(args[arg], command.type_of(arg), name, arg)
        if converted and "argument type" not in repairs:
            repairs.append("argument type")
    return name, args, list(dict.fromkeys(repairs))


def parse_command(reply: str, commands: List[Command]) -> Tuple[str, Dict[str, Any]]:
    """``(command, command_args)`` from a reply that holds exactly one command; InvalidReply otherwise."""
    name, args, _ = read_command(reply, commands)
    return name, args
