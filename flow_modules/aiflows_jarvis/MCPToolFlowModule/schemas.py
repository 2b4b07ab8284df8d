"""An MCP tool as a controller's command: its name ``server__tool``, its description, and its input schema made into
arguments a controller's reply schema can carry.

A tool's input schema is JSON Schema (2020-12 since protocol 2025-11-25), often with ``$ref`` to ``$defs``,
``anyOf`` for optional values, nested objects. A command has arguments of one type each (string, integer, number,
boolean, array, object), a note saying what each means, and for some an ``enum`` or an array's item type. So each
property of the tool's schema is brought down to that: a ``$ref`` is followed (within the schema), an ``anyOf`` /
``oneOf`` / a list of types whose one non-null type is clear gives that type, what is left unclear is a string whose
note says so. The required properties are the command's arguments, the others its optional ones.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import one_line

SCALARS = ("string", "integer", "number", "boolean")
TYPES = SCALARS + ("array", "object")
SEPARATOR = "__"
MAX_NAME = 64  # a command name as function-calling APIs take one
MAX_DESCRIPTION = 800  # a tool's description in the prompt (many tools: the prompt holds them all)
MAX_NOTE = 240  # an argument's note
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class Tool:
    """A tool of a server, as the run knows it: the command it is offered as, and the names to call it by."""

    command: str
    server: str
    name: str
    declaration: Dict[str, Any] = field(default_factory=dict)


def command_name(server: str, tool: str) -> str:
    """``server__tool``, with what a command name cannot hold (blanks, dots, slashes) made ``_``."""
    return f"{_NAME_CHARS.sub('_', server)}{SEPARATOR}{_NAME_CHARS.sub('_', tool)}"


def _resolve(schema: Any, root: Dict[str, Any], depth: int = 0) -> Dict[str, Any]:
    """``schema`` with a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) followed, a few levels at most (a schema
    may refer to itself)."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 8:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        schema, depth = (
            ({**target, **{k: v for k, v in schema.items() if k != "$ref"}} if isinstance(target, dict) else {}),
            depth + 1,
        )
    return schema if isinstance(schema, dict) else {}


def _variants(schema: Dict[str, Any], root: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The alternatives a schema allows (``anyOf``, ``oneOf``, a one-item ``allOf``, a list of ``type``s), each
    resolved; the schema itself when it has none."""
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            out = []
            for variant in schema[key]:
                out += _variants(_resolve(variant, root), root)
            return out
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        return _variants(
            {**_resolve(schema["allOf"][0], root), **{k: v for k, v in schema.items() if k != "allOf"}}, root
        )
    if isinstance(schema.get("type"), list):
        return [{**schema, "type": t} for t in schema["type"]]
    return [schema]


def _type_of(schema: Dict[str, Any]) -> Optional[str]:
    kind = schema.get("type")
    if kind in TYPES:
        return kind
    if kind == "null":
        return "null"
    values = (
        schema.get("enum")
        if isinstance(schema.get("enum"), list)
        else ([schema["const"]] if "const" in schema else None)
    )
    if values:
        kinds = {
            (
                "boolean"
                if isinstance(v, bool)
                else "integer"
                if isinstance(v, int)
                else "number"
                if isinstance(v, float)
                else "string"
                if isinstance(v, str)
                else "other"
            )
            for v in values
        }
        return kinds.pop() if len(kinds) == 1 and "other" not in kinds else None
    if isinstance(schema.get("properties"), dict):
        return "object"
    if "items" in schema:
        return "array"
    return None


def simplified(schema: Any, root: Dict[str, Any]) -> Tuple[str, Dict[str, Any], List[str]]:
    """``(type, extra, notes)`` of one property: its type as a command's argument takes it, the ``enum`` or array
    ``items`` it keeps (``Command.arg_schemas``), and notes for the prompt (its values, its default, what was
    simplified)."""
    schema = _resolve(schema, root)
    variants = [v for v in _variants(schema, root) if _type_of(v) != "null"]
    kinds = {_type_of(v) for v in variants}
    notes: List[str] = []
    if len(kinds) == 1 and None not in kinds:
        kind = kinds.pop()
        chosen = variants[0]
    elif kinds <= {"integer", "number"} and kinds:
        kind, chosen = "number", variants[0]
    else:
        kind, chosen = "string", {}
        if kinds - {None}:
            notes.append(f"one of: {', '.join(sorted(k for k in kinds if k))}, as text")
    extra: Dict[str, Any] = {}
    enum = (
        chosen.get("enum")
        if isinstance(chosen.get("enum"), list)
        else ([chosen["const"]] if "const" in chosen else None)
    )
    if enum and kind in SCALARS:
        extra["enum"] = enum
        notes.append(
            "one of: "
            + ", ".join(json.dumps(v, ensure_ascii=False) for v in enum[:20])
            + (" ..." if len(enum) > 20 else "")
        )
    if kind == "array":
        items = _resolve(chosen.get("items"), root)
        item_kinds = {_type_of(v) for v in _variants(items, root) if _type_of(v) != "null"}
        item = item_kinds.pop() if len(item_kinds) == 1 else None
        if item in SCALARS:
            extra["items"] = {"type": item, **({"enum": items["enum"]} if isinstance(items.get("enum"), list) else {})}
            notes.append(
                f"each item: {item}"
                + (
                    " one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in items["enum"][:20])
                    if isinstance(items.get("enum"), list)
                    else ""
                )
            )
        elif item in ("object", "array"):
            if item == "object":
                extra["items"] = {"type": "object"}
            shape = _shape(items, root)
            notes.append(f"each item: {shape}" if shape else f"each item: a JSON {item}")
    elif kind == "object":
        shape = _shape(chosen, root)
        if shape:
            notes.append(shape)
    if "default" in schema:
        notes.append(f"default: {json.dumps(schema['default'], ensure_ascii=False, default=str)[:60]}")
    return kind, extra, notes


def _shape(schema: Dict[str, Any], root: Dict[str, Any]) -> str:
    """A nested object's properties, in one short line: ``{oldText: string, newText: string}``."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return ""
    parts = []
    for name, sub in list(properties.items())[:12]:
        kinds = {_type_of(v) for v in _variants(_resolve(sub, root), root)} - {None, "null"}
        parts.append(f"{name}: {kinds.pop() if len(kinds) == 1 else 'any'}")
    return "{" + ", ".join(parts) + (", ..." if len(properties) > 12 else "") + "}"


def declaration(server: str, tool: Dict[str, Any]) -> Dict[str, Any]:
    """The command declaration of an MCP tool (``{description, input_args, optional_args, arg_types, arg_notes,
    arg_schemas, shown_as}``); ValueError saying why when it cannot be offered (its input schema is no object)."""
    schema = tool.get("inputSchema")
    if schema is None:
        schema = {"type": "object"}
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise ValueError("its input schema is not an object")
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        raise ValueError("its input schema's properties are not an object")
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    names = list(properties) + [r for r in required if r not in properties]
    arg_types: Dict[str, str] = {}
    arg_notes: Dict[str, str] = {}
    arg_schemas: Dict[str, Dict[str, Any]] = {}
    for name in names:
        sub = properties.get(name, {})
        kind, extra, notes = simplified(sub, schema)
        if kind != "string":
            arg_types[name] = kind
        if extra:
            arg_schemas[name] = extra
        text = _resolve(sub, schema).get("description") or _resolve(sub, schema).get("title") or ""
        note = "; ".join([t for t in [one_line(text, MAX_NOTE)] if t] + notes)
        if note:
            arg_notes[name] = one_line(note, MAX_NOTE + 120)
    description = tool.get("description") or tool.get("title") or (tool.get("annotations") or {}).get("title") or ""
    description = one_line(description, MAX_DESCRIPTION) or f"The tool {tool.get('name')} of the MCP server {server}."
    if not description.endswith((".", "!", "?", "\u2026")):
        description += "."
    return {
        "description": description,
        "input_args": [n for n in names if n in required],
        "optional_args": [n for n in names if n not in required],
        "arg_types": arg_types,
        "arg_notes": arg_notes,
        "arg_schemas": arg_schemas,
        "shown_as": f"{command_name(server, str(tool.get('name')))} (MCP server {server})",
    }
