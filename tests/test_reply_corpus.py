"""Real-looking bad replies, run through every controller of Jarvis's tree: each is either repaired (the command is
read, the repair counted, no second LLM call) or corrected (the correction says exactly what was wrong, and a valid
reply is then accepted). And the reply schemas generated from each controller's commands, in both dialects."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import pytest
from fakes import finish, last_user_message, scripted_factory

from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow, InvalidReply
from aiflows_jarvis.ControllerFlowModule.commands import (
    Command,
    commands_from_config,
    read_command,
    render_commands,
    reply_schema,
)
from aiflows_jarvis.CoreFlowModule import USAGE, ConfigurationError, RunContext

# Every controller configuration of the package appears in Jarvis's tree (its path ends with one of these).
FAMILIES = {
    "Jarvis": "Jarvis/CtrlExMem/Controller",
    "Coder": "Coder/CtrlExMem/Controller",
    "ExtendLibrary": "extend_library/CtrlExMem/Controller",
    "CodeWriter": "write_code/Controller",
    "PlanWriter": "Planner/Controller",
    "Replanning": "re_plan/Controller",
}
INPUT = {
    "goal": "Plot the monthly sales of sales.csv",
    "plan": "1. load sales.csv\n2. plot it",
    "logs": "",
    "memory_files": {"plan": "plan.txt"},
    "code_library": "",
    "result": "done",
}
SAMPLE_VALUES = {"language": "python", "code": "import pandas as pd\nprint(pd.read_csv('sales.csv').head())"}


@pytest.fixture(scope="module")
def controllers() -> Dict[str, ControllerAtomicFlow]:
    """Every controller of Jarvis's tree, built from its real configuration, answering from the scripted LLM."""
    from aiflows_jarvis.app import launcher
    from aiflows_jarvis.JarvisFlowModule import JarvisFlow

    with RunContext(backend_factory=scripted_factory):  # the chats take their backend when they are built
        jarvis = JarvisFlow.instantiate_from_default_config()
    found = {path: node for path, node in launcher.walk(jarvis) if isinstance(node, ControllerAtomicFlow)}
    assert len(found) == 10, list(found)
    for family, suffix in FAMILIES.items():
        assert any(path.endswith(suffix) for path in found), f"no {family} controller in {list(found)}"
    yield found
    launcher.close_interpreters(jarvis)


# ~~~ The corpus ~~~
class Profile:
    """What the corpus needs of a controller to adapt a reply to its commands."""

    def __init__(self, commands: List[Command]):
        assert {"ask_user", "finish"} <= {c.name for c in commands}, "every controller can ask the user and finish"
        self.first = commands[0]
        self.first_args = {a: SAMPLE_VALUES.get(a, f"the {a} of the first step") for a in self.first.input_args}
        self.optional = next(((c.name, a) for c in commands for a in c.optional_args if not c.input_args), None)
        self.boolean = next(
            ((c.name, a) for c in commands for a in c.optional_args + c.input_args if c.type_of(a) == "boolean"), None
        )


@dataclass
class Case:
    reply: str
    expect: Optional[Dict[str, Any]] = None  # repaired: the command read...
    repairs: List[str] = field(default_factory=list)  # ...and the repairs made
    says: Optional[str] = None  # corrected: a fragment of the correction


CORPUS: Dict[str, Callable[[Profile], Optional[Case]]] = {}


def entry(name: str):
    def register(build):
        CORPUS[name] = build
        return build

    return register


def cmd(name: str, **args) -> Dict[str, Any]:
    return {"command": name, "command_args": args}


ASK = cmd("ask_user", question="Which file holds the sales?")
DONE = cmd("finish", summary="The chart is in sales.png.")


def first(p: Profile) -> Dict[str, Any]:
    return cmd(p.first.name, **p.first_args)


def repaired(reply: str, expect: Dict[str, Any], *repairs: str) -> Case:
    return Case(reply, expect=expect, repairs=list(repairs))


def corrected(reply: str, says: str) -> Case:
    return Case(reply, says=says)


# Replies that hold one command: read, and the repair named.
@entry("fenced json")
def _(p):
    return repaired(f"```json\n{json.dumps(first(p))}\n```", first(p), "code fence")


@entry("bare fence")
def _(p):
    return repaired(f"```\n{json.dumps(ASK)}\n```", ASK, "code fence")


@entry("fence with an upper-case tag around indented JSON")
def _(p):
    return repaired(f"```JSON\n{json.dumps(first(p), indent=4)}\n```", first(p), "code fence")


@entry("prose before")
def _(p):
    return repaired(f"Sure! The next step is to ask the user which file to use.\n\n{json.dumps(ASK)}", ASK, "prose")


@entry("prose after")
def _(p):
    return repaired(f"{json.dumps(DONE)}\n\nThis ends the task: everything in the plan is done.", DONE, "prose")


@entry("prose around a fence")
def _(p):
    return repaired(
        f"I will now start with the first step of the plan.\n```json\n{json.dumps(first(p))}\n```\n"
        "Let me know if you want me to change anything.",
        first(p),
        "code fence",
        "prose",
    )


@entry("python dict")
def _(p):
    return repaired(repr(ASK), ASK, "python dict")


@entry("python dict with a double-quoted apostrophe")
def _(p):
    return repaired(
        "{'command': 'finish', 'command_args': {'summary': \"The user's chart is in sales.png.\"}}",
        cmd("finish", summary="The user's chart is in sales.png."),
        "python dict",
    )


@entry("python dict with True for a boolean argument")
def _(p):
    if p.boolean is None:
        return None
    name, arg = p.boolean
    return repaired(
        f"{{'command': '{name}', 'command_args': {{'{arg}': True}}}}", cmd(name, **{arg: True}), "python dict"
    )


@entry("trailing commas")
def _(p):
    return repaired(
        '{"command": "finish", "command_args": {"summary": "The chart is in sales.png.",},}', DONE, "trailing comma"
    )


@entry("trailing comma in a fence after prose")
def _(p):
    return repaired(
        'Here you go:\n```json\n{"command": "ask_user", "command_args": {"question": '
        '"Which file holds the sales?",}}\n```',
        ASK,
        "code fence",
        "trailing comma",
        "prose",
    )


@entry("invalid escape in a string (a regex)")
def _(p):
    return repaired(
        '{"command": "finish", "command_args": {"summary": "Matched \\d+ rows with \\s*sales"}}',
        cmd("finish", summary="Matched \\d+ rows with \\s*sales"),
        "invalid escape",
    )


@entry("raw line breaks inside a string (accepted as they are)")
def _(p):
    return repaired(
        '{"command": "finish", "command_args": {"summary": "Loaded the data.\nPlotted it."}}',
        cmd("finish", summary="Loaded the data.\nPlotted it."),
    )


@entry("command_args as a JSON string")
def _(p):
    return repaired(
        json.dumps({"command": "ask_user", "command_args": json.dumps(ASK["command_args"])}), ASK, "args as string"
    )


@entry("args instead of command_args")
def _(p):
    return repaired(json.dumps({"command": "ask_user", "args": ASK["command_args"]}), ASK, "key names")


@entry("tool-call style name and arguments")
def _(p):
    return repaired(json.dumps({"name": "ask_user", "arguments": ASK["command_args"]}), ASK, "key names")


@entry("the command as the key")
def _(p):
    return repaired(json.dumps({"finish": DONE["command_args"]}), DONE, "command as key")


@entry("arguments beside the command")
def _(p):
    return repaired(json.dumps({"command": "ask_user", **ASK["command_args"]}), ASK, "flat arguments")


@entry("a number where a string is declared")
def _(p):
    return repaired(json.dumps(cmd("finish", summary=42)), cmd("finish", summary="42"), "argument type")


@entry("a boolean where a string is declared")
def _(p):
    return repaired(json.dumps(cmd("ask_user", question=True)), cmd("ask_user", question="true"), "argument type")


@entry("the object in a one-element list")
def _(p):
    return repaired(json.dumps([ASK]), ASK, "array wrapper")


@entry("the whole object as one JSON string")
def _(p):
    return repaired(json.dumps(json.dumps(DONE)), DONE, "json string")


@entry("null for an optional argument (strict mode sends it)")
def _(p):
    if p.optional is None:
        return None
    name, arg = p.optional
    return repaired(json.dumps(cmd(name, **{arg: None})), cmd(name))


@entry("a boolean argument as a string")
def _(p):
    if p.boolean is None:
        return None
    name, arg = p.boolean
    return repaired(json.dumps(cmd(name, **{arg: "True"})), cmd(name, **{arg: True}), "argument type")


@entry("braces in the prose before the command")
def _(p):
    return repaired(f"I will replace {{file}} with the real name, so I ask first:\n{json.dumps(ASK)}", ASK, "prose")


# Replies that are ambiguous or wrong: corrected, with a precise message.
@entry("empty")
def _(p):
    return corrected("", "Your reply was empty")


@entry("whitespace only")
def _(p):
    return corrected("  \n\t ", "Your reply was empty")


@entry("French prose, no JSON")
def _(p):
    return corrected(
        "Je vais d'abord demander à l'utilisateur quel fichier contient les ventes.",
        "not valid JSON: it holds no JSON object",
    )


@entry("YAML instead of JSON")
def _(p):
    return corrected("command: ask_user\ncommand_args:\n  question: Which file holds the sales?", "looks like YAML")


@entry("ReAct-style text")
def _(p):
    return corrected(
        "Thought: I need the file name.\nAction: ask_user\nAction Input: Which file holds the sales?",
        "holds no JSON object",
    )


@entry("two different commands")
def _(p):
    return corrected(f"{json.dumps(ASK)}\n{json.dumps(DONE)}", "2 JSON objects")


@entry("two commands in two fences")
def _(p):
    return corrected(
        f"First:\n```json\n{json.dumps(first(p))}\n```\nThen:\n```json\n{json.dumps(DONE)}\n```", "2 JSON objects"
    )


@entry("the same command twice")
def _(p):
    return corrected(f"{json.dumps(ASK)}\n{json.dumps(ASK)}", "repeats the same command 2 times")


@entry("the same command three times in fences")
def _(p):
    return corrected("\n".join([f"```json\n{json.dumps(first(p))}\n```"] * 3), "repeats the same command 3 times")


@entry("cut off")
def _(p):
    return corrected(
        '{"command": "finish", "command_args": {"summary": "The analysis shows that the sales grew', "cut off"
    )


@entry("cut off in a fence")
def _(p):
    return corrected('```json\n{"command": "ask_user", "command_args": {"question": "Which', "cut off")


@entry("a command, then a cut-off one")
def _(p):
    return corrected(f'{json.dumps(ASK)}\n{{"command": "finish", "command_args": {{"summ', "more than one JSON object")


@entry("unknown command")
def _(p):
    return corrected(json.dumps(cmd("search_web", query="sales 2023")), "'search_web' is not a command")


@entry("missing argument")
def _(p):
    return corrected(json.dumps(cmd(p.first.name)), f"missing argument(s): {p.first.input_args[0]}")


@entry("extra argument")
def _(p):
    return corrected(json.dumps(cmd("ask_user", question="Which file?", timeout=30)), "unknown argument(s): timeout")


@entry("the arguments of another command")
def _(p):
    return corrected(
        json.dumps(cmd("finish", question="Which file?")), "missing argument(s): summary; unknown argument(s): question"
    )


@entry("no command_args")
def _(p):
    return corrected(json.dumps({"command": "finish"}), "no 'command_args'")


@entry("an extra top-level key")
def _(p):
    return corrected(json.dumps({"thought": "I should ask.", **ASK}), "keys other than")


@entry("command_args as plain text")
def _(p):
    return corrected(
        json.dumps({"command": "ask_user", "command_args": "Which file?"}), "must be a JSON object mapping"
    )


@entry("an array where a string is declared")
def _(p):
    return corrected(json.dumps(cmd("finish", summary=["loaded", "plotted"])), "must be a string, not an array")


@entry("null for a required argument")
def _(p):
    return corrected(json.dumps(cmd("finish", summary=None)), "'summary' of command 'finish' is null")


@entry("unquoted keys (a JavaScript object)")
def _(p):
    return corrected('{command: "finish", command_args: {summary: "done"}}', "not valid JSON")


@entry("a list of two commands")
def _(p):
    return corrected(json.dumps([ASK, DONE]), "list of 2 objects")


@entry("a bare command name")
def _(p):
    return corrected('"finish"', "must be a JSON object")


@entry("a command name that is not a string")
def _(p):
    return corrected(
        json.dumps({"command": ["finish"], "command_args": DONE["command_args"]}), "['finish'] is not a command"
    )


@entry("a word for a boolean argument")
def _(p):
    if p.boolean is None:
        return None
    name, arg = p.boolean
    return corrected(json.dumps(cmd(name, **{arg: "maybe"})), "must be a boolean, not a string")


def test_the_corpus_is_large_and_mixed():
    profile = Profile(
        [
            Command("write_code", "w", ["goal"]),
            Command("ask_user", "a", ["question"]),
            Command("save_code", "s", [], ["replace_existing"], {"replace_existing": "boolean"}),
            Command("finish", "f", ["summary"]),
        ]
    )
    cases = [build(profile) for build in CORPUS.values()]
    assert len(cases) >= 30 and None not in cases
    assert sum(c.says is None for c in cases) >= 15 and sum(c.says is not None for c in cases) >= 15


# ~~~ Driving a controller ~~~
def drive(controller: ControllerAtomicFlow, case: Case, llm, where: str) -> None:
    controller.set_up_flow_state()  # a fresh chat
    USAGE.reset()
    llm.calls.clear()
    if controller.flow_config.get("opening_command"):
        assert "command" in controller.run(dict(INPUT)) and not llm.calls, f"{where}: the opening move is free"
    if case.says is None:
        llm.add(case.reply)
        out = controller.run(dict(INPUT))
        assert out == case.expect, f"{where}: read {out}"
        assert len(llm.calls) == 1, f"{where}: a repaired reply needs no second call"
        total = USAGE.total()
        assert total.repair_kinds == Counter(case.repairs) and total.corrections == 0, (
            f"{where}: repairs {total.repair_kinds}, corrections {total.corrections}"
        )
        return
    llm.add(case.reply, finish("done"))
    out = controller.run(dict(INPUT))
    assert out == cmd("finish", summary="done"), f"{where}: after the correction, a valid reply is accepted"
    assert len(llm.calls) == 2, f"{where}: one correction"
    correction = last_user_message(llm.calls[1]["messages"])
    assert case.says in correction, f"{where}: the correction should say {case.says!r}; it says {correction!r}"
    assert llm.calls[1]["messages"][-2]["content"] == case.reply, f"{where}: the bad reply is shown back"
    assert USAGE.total().corrections == 1 and USAGE.total().repairs == 0, where


@pytest.mark.parametrize("name", list(CORPUS))
def test_each_bad_reply_is_repaired_or_corrected_by_every_controller(name, controllers, scripted_llm, quiet_console):
    ran = 0
    for path, controller in controllers.items():
        case = CORPUS[name](Profile(controller.commands))
        if case is None:
            continue
        drive(controller, case, scripted_llm, f"{path} / {name}")
        ran += 1
    assert ran, "the entry applies to at least one controller"


def test_a_cut_off_reply_at_max_tokens_asks_every_controller_for_a_shorter_command(
    controllers, scripted_llm, quiet_console, monkeypatch
):
    for path, controller in controllers.items():
        controller.set_up_flow_state()
        scripted_llm.calls.clear()
        if controller.flow_config.get("opening_command"):
            controller.run(dict(INPUT))
        real_call = controller.call_llm

        def cut_off_first(messages, real_call=real_call, controller=controller):
            reply = real_call(messages)
            controller.last_finish_reason = "length" if len(scripted_llm.calls) == 1 else "stop"
            return reply

        monkeypatch.setattr(controller, "call_llm", cut_off_first)
        scripted_llm.add(f'```json\n{{"command": "{controller.commands[0].name}", "command_args": {{"', finish())
        assert controller.run(dict(INPUT)) == cmd("finish", summary="done"), path
        correction = last_user_message(scripted_llm.calls[1]["messages"])
        max_tokens = controller.flow_config["backend"]["max_tokens"]
        assert f"cut off at the max_tokens limit ({max_tokens} tokens)" in correction, path
        assert "shorter command" in correction and "split" in correction, path


# ~~~ The schemas ~~~
def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def validates(schema: Dict[str, Any], value: Any) -> bool:
    """A JSON-Schema validator for the subset the reply schemas use."""
    if "anyOf" in schema and not any(validates(s, value) for s in schema["anyOf"]):
        return False
    if "oneOf" in schema and sum(validates(s, value) for s in schema["oneOf"]) != 1:
        return False
    if "const" in schema and value != schema["const"]:
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        got = json_type(value)
        if got not in types and not (got == "integer" and "number" in types):
            return False
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if any(k not in value for k in schema.get("required", [])):
            return False
        if schema.get("additionalProperties") is False and set(value) - set(properties):
            return False
        return all(validates(properties[k], v) for k, v in value.items() if k in properties)
    if isinstance(value, list) and "items" in schema:
        return all(validates(schema["items"], v) for v in value)
    return True


SAMPLES = {"string": "text", "integer": 3, "number": 2.5, "boolean": True, "array": ["a"], "object": {"k": "v"}}


def good_args(c: Command, strict: bool) -> Dict[str, Any]:
    args = {a: SAMPLES[c.type_of(a)] for a in c.input_args}
    if strict:  # strict mode: every property is required, the optional ones may be null
        args.update({a: None for a in c.optional_args})
    return args


def nodes(schema: Any):
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from nodes(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from nodes(value)


def test_the_strict_json_schema_has_an_object_root_no_oneof_or_const_and_closed_objects(controllers):
    for path, controller in controllers.items():
        response_format = controller.response_format("json_schema")
        assert (
            response_format["type"] == "json_schema"
            and set(response_format["json_schema"]) == {"name", "strict", "schema"}
            and response_format["json_schema"]["strict"] is True
        ), path
        schema = response_format["json_schema"]["schema"]
        assert schema["type"] == "object" and schema["required"] == ["command", "command_args"], path
        assert schema["properties"]["command"]["enum"] == [c.name for c in controller.commands], path
        assert len(schema["properties"]["command_args"]["anyOf"]) == len(controller.commands), path
        for node in nodes(schema):
            assert "oneOf" not in node and "const" not in node, f"{path}: strict mode takes neither"
            if node.get("type") == "object":
                assert node["additionalProperties"] is False, path
                assert sorted(node["required"]) == sorted(node["properties"]), f"{path}: strict: all required"
        json.dumps(response_format)  # it goes into the HTTP body as it is


def test_the_json_object_schema_has_one_exact_variant_per_command(controllers):
    for path, controller in controllers.items():
        response_format = controller.response_format("json_object")
        assert response_format["type"] == "json_object" and list(response_format) == ["type", "schema"], path
        variants = response_format["schema"]["oneOf"]
        assert [v["properties"]["command"]["const"] for v in variants] == [c.name for c in controller.commands]
        for variant, c in zip(variants, controller.commands):
            args = variant["properties"]["command_args"]
            assert variant["additionalProperties"] is False and args["additionalProperties"] is False, path
            assert args["required"] == c.input_args and list(args["properties"]) == c.input_args + c.optional_args
        json.dumps(response_format)


@pytest.mark.parametrize("dialect", ["json_schema", "json_object"])
def test_each_variant_validates_a_correct_reply_and_a_wrong_pairing_is_rejected(controllers, dialect):
    strict = dialect == "json_schema"
    for path, controller in controllers.items():
        schema = controller.response_format(dialect)
        schema = schema["json_schema"]["schema"] if strict else schema["schema"]
        for c in controller.commands:
            good = cmd(c.name, **good_args(c, strict))
            assert validates(schema, good), f"{path}: {good}"
            assert read_command(json.dumps(good), controller.commands)[:2] == (c.name, good_args(c, strict=False))
            if c.optional_args and not strict:
                with_optional = cmd(
                    c.name, **good_args(c, strict), **{a: SAMPLES[c.type_of(a)] for a in c.optional_args}
                )
                assert validates(schema, with_optional), f"{path}: {with_optional}"
            assert not validates(schema, cmd(c.name, **good_args(c, strict), unexpected="x")), path
            if c.input_args:
                assert not validates(
                    schema, cmd(c.name, **{a: v for a, v in good_args(c, strict).items() if a != c.input_args[0]})
                ), path
            for other in controller.commands:
                given = set(good_args(other, strict=False))
                if set(c.input_args) <= given <= set(c.input_args + c.optional_args):
                    continue  # other's arguments are a right set of c's too
                wrong = cmd(c.name, **good_args(other, strict))
                if not strict:  # the exact schema ties each command to its arguments
                    assert not validates(schema, wrong), f"{path}: {wrong}"
                # strict mode cannot: reading checks the pairing
                with pytest.raises(InvalidReply, match="argument"):
                    read_command(json.dumps(wrong), controller.commands)


def test_the_response_format_hook_returns_the_schema_and_a_copy(controllers):
    controller = next(iter(controllers.values()))
    for dialect in ("json_schema", "json_object"):
        first = controller.response_format(dialect)
        assert first == reply_schema(controller.commands, dialect)
        first["type"] = "changed by the caller"
        assert controller.response_format(dialect)["type"] == dialect, "the cached schema is not shared"
    with pytest.raises(ValueError, match="json_schema, json_object"):
        reply_schema(controller.commands, "xml")


def test_argument_types_come_from_the_yaml(controllers):
    (extend_library,) = [c for p, c in controllers.items() if p.endswith(FAMILIES["ExtendLibrary"])]
    save_code = next(c for c in extend_library.commands if c.name == "save_code")
    assert save_code.type_of("replace_existing") == "boolean", "SaveCode reads it as a boolean"
    (code_writer,) = [c for p, c in controllers.items() if p.endswith(FAMILIES["CodeWriter"])]
    assert next(c for c in code_writer.commands if c.name == "test").type_of("tests") == "string", (
        "TestCode parses the tests as Python source"
    )
    assert "optional: module, replace_existing (boolean)" in render_commands(extend_library.commands)
    strict = reply_schema([save_code], "json_schema")["json_schema"]["schema"]
    assert strict["properties"]["command_args"]["anyOf"][0]["properties"]["replace_existing"] == {
        "type": ["boolean", "null"],
        "description": "optional: null to leave it out",
    }, "strict mode lists every argument as required: an optional one says it is optional, and may be null"


@pytest.mark.parametrize(
    "arg_types, says",
    [
        ({"colour": "string"}, "names 'colour', which is not one of its arguments"),
        ({"question": "str"}, "the type 'str'; the types are string, integer"),
        (["question"], "must be a mapping argument -> type"),
    ],
)
def test_a_wrong_arg_types_entry_is_a_clear_configuration_error(arg_types, says):
    with pytest.raises(ConfigurationError) as error:
        commands_from_config(
            {"ask_user": {"description": "a", "input_args": ["question"], "arg_types": arg_types}}, "Boss/Controller"
        )
    assert says in str(error.value) and "Boss/Controller" in str(error.value)


def test_typed_arguments_are_converted_or_precisely_refused():
    commands = [
        Command(
            "plot",
            "p",
            ["points", "width", "scale", "options"],
            ["log"],
            {"points": "array", "width": "integer", "scale": "number", "options": "object", "log": "boolean"},
        ),
        Command("finish", "f", ["summary"]),
    ]
    name, args, repairs = read_command(
        json.dumps(cmd("plot", points='["a", "b"]', width="640", scale=1, options='{"grid": true}', log="false")),
        commands,
    )
    assert args == {"points": ["a", "b"], "width": 640, "scale": 1, "options": {"grid": True}, "log": False}
    assert repairs == ["argument type"]
    for bad, says in [
        ({"width": 6.5}, "'width' of command 'plot' must be an integer, not a number"),
        ({"log": 1}, "'log' of command 'plot' must be a boolean, not an integer"),
        ({"options": "grid"}, "'options' of command 'plot' must be an object, not a string"),
    ]:
        reply = cmd("plot", **{"points": [], "width": 1, "scale": 1, "options": {}, **bad})
        with pytest.raises(InvalidReply) as error:
            read_command(json.dumps(reply), commands)
        assert says in str(error.value)
