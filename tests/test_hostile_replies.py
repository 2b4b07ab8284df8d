"""What an LLM or its server sends that is not what it should be: a body that is not UTF-8 is retried like a 502; a
reply's own text (a 100 KB "command name", an argument name, a key) is not echoed whole into the next request; bidi
and invisible characters in text shown for review are made visible ("Trojan Source")."""

from __future__ import annotations

import json

import pytest
from fakes import Sink
from helpers import make_chat
from loopback_llm import Malformed, completion_json

from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow
from aiflows_jarvis.ControllerFlowModule.ControllerAtomicFlow import ECHOED_REPLY_CHARS
from aiflows_jarvis.CoreFlowModule import Console, LLMCallError, clean_text


# ~~~ A body that is not UTF-8 ~~~
def not_utf8_body() -> Malformed:
    """A completion whose reply text holds bytes that are not UTF-8 (a proxy's glitch, a server's bad encoder)."""
    return Malformed(json.dumps(completion_json("hello")).encode().replace(b"hello", b"hel\xff\xfelo"))


def test_a_body_that_is_not_utf8_is_retried_like_a_502(loopback_llm, quiet_console):
    loopback_llm.add(not_utf8_body(), Malformed(b"\xff\xfe\x00\x00binary"), "ok")
    assert make_chat().call({"query": "hi"}) == {"api_output": "ok"}
    assert len(loopback_llm.requests) == 3, "both bodies were retried"
    assert "the server sent a response that is not valid UTF-8 (byte 0xff at position" in quiet_console.text


def test_after_the_last_attempt_the_message_says_the_server_answers_badly(loopback_llm, quiet_console):
    loopback_llm.add(*[not_utf8_body()] * 4)
    with pytest.raises(LLMCallError) as error:
        make_chat().call({"query": "hi"})
    message = str(error.value)
    assert message.startswith(
        "Asker: the LLM call failed 4 times; last error: the server sent a response that is not valid UTF-8"
    )
    assert "check its log (or the proxy in front of it)" in message
    assert error.value.info.kind == "malformed" and error.value.info.retryable


def test_a_prompt_that_cannot_be_encoded_is_not_retried(loopback_llm):
    with pytest.raises(LLMCallError, match="the prompt holds characters that cannot be sent") as error:
        make_chat().call({"query": "plot \udcff"})
    assert not error.value.info.retryable and not loopback_llm.requests


# ~~~ A reply's own text is not echoed whole ~~~
HUGE = 100_000


def controller():
    return ControllerAtomicFlow.instantiate_from_default_config(
        commands={"ask_user": {"description": "ask", "input_args": ["question"]}}, max_corrections=1
    )


LOOP_INPUT = {"goal": "learn the user's colour", "plan": "1. ask", "logs": "", "memory_files": {"plan": "plan.txt"}}
VALID = json.dumps({"command": "ask_user", "command_args": {"question": "Your colour?"}})


@pytest.mark.parametrize(
    "reply, says",
    [
        ({"command": "x" * HUGE, "command_args": {}}, "is not a command"),
        (
            {
                "command": "ask_user",
                "command_args": {"question": "q", "y" * HUGE: 1, **{f"k{i}": 1 for i in range(50)}},
            },
            "unknown argument(s): yyyy",
        ),
        ({"command": "ask_user", "command_args": {"question": "q"}, "z" * HUGE: 1}, "keys other than"),
    ],
)
def test_a_huge_name_in_a_reply_is_cut_in_the_correction_and_the_reply_shown_back(
    loopback_llm, quiet_console, reply, says
):
    loopback_llm.add(json.dumps(reply), VALID)
    assert controller().run(LOOP_INPUT) == {"command": "ask_user", "command_args": {"question": "Your colour?"}}
    first, second = loopback_llm.requests
    correction = second["messages"][-1]["content"]
    assert says in correction and "characters cut" in correction
    assert len(correction) < 1000, "the name is quoted in at most 80 characters"
    assert len(second["messages"][-2]["content"]) < ECHOED_REPLY_CHARS + 100, "the bad reply shown back is cut too"
    sent = len(json.dumps(second["messages"])) - len(json.dumps(first["messages"]))
    assert sent < 6000, f"the correction added {sent} characters to the request"
    assert len(quiet_console.text) < 3000, "the console's warning quotes the cut name too"


def test_many_unknown_arguments_are_listed_up_to_a_few(loopback_llm, quiet_console):
    args = {"question": "q", **{f"extra_{i}": i for i in range(500)}}
    loopback_llm.add(json.dumps({"command": "ask_user", "command_args": args}), VALID)
    controller().run(LOOP_INPUT)
    correction = loopback_llm.requests[1]["messages"][-1]["content"]
    assert "unknown argument(s): extra_0, extra_1" in correction and "and 492 more" in correction


# ~~~ Bidi and invisible characters ~~~
TROJAN = 'access_level = "user"\nif access_level != "user\u202e \u2066# Check if admin\u2069 \u2066":\n    grant()\n'


@pytest.mark.parametrize(
    "raw, shown",
    [
        (
            TROJAN,
            'access_level = "user"\nif access_level != "user<U+202E> <U+2066># Check if admin<U+2069> <U+2066>":\n'
            "    grant()\n",
        ),
        ("os.sy\u200bstem('x')\u2060", "os.sy<U+200B>stem('x')<U+2060>"),  # zero-width space, word joiner
        ("\ufeffimport os", "<U+FEFF>import os"),
        ("\u3164 = __import__('os')", "<U+3164> = __import__('os')"),  # a Hangul filler: a blank-looking Python name
        (
            "a\u202ab\u202bc\u202cd\u202de\u2067f\u2068g\u200eh\u200fi\u061cj",
            "a<U+202A>b<U+202B>c<U+202C>d<U+202D>e<U+2067>f<U+2068>g<U+200E>h<U+200F>i<U+061C>j",
        ),
    ],
)
def test_bidi_and_invisible_characters_are_shown_as_code_points(raw, shown):
    assert clean_text(raw) == shown
    assert clean_text(shown) == shown, "cleaning twice changes nothing"


def test_right_to_left_text_without_controls_is_kept():
    text = "שלום עולם, مرحبا"
    assert clean_text(text) is text


def test_code_under_review_shows_that_something_hides_in_it():
    sink = Sink()
    Console(stream=sink, color=False).show("code", "Code to review:", TROJAN)
    assert "\u202e" not in sink.text and "\u2066" not in sink.text
    assert '"user<U+202E> <U+2066># Check if admin<U+2069> <U+2066>":' in sink.text


# ~~~ Text no file, request or terminal can take; nesting no parser survives ~~~
def test_a_lone_surrogate_escaped_in_the_body_becomes_a_replacement_character(loopback_llm, quiet_console):
    """A JSON body may escape a lone surrogate ("\\ud800"): the reply text a flow gets is valid Unicode."""
    loopback_llm.add(Malformed(json.dumps(completion_json("forty\ud800two")).encode()))
    assert make_chat().call({"query": "hi"}) == {"api_output": "forty\ufffdtwo"}


def test_a_command_whose_arguments_escape_a_lone_surrogate_is_read_with_a_replacement_character():
    from aiflows_jarvis.ControllerFlowModule.commands import Command, read_command

    commands = [Command(name="final_answer", description="the answer", input_args=["answer"])]
    reply = json.dumps({"command": "final_answer", "command_args": {"answer": "is \ud800 it"}})
    assert read_command(reply, commands)[1] == {"answer": "is \ufffd it"}


def test_a_reply_nested_past_the_recursion_limit_is_an_invalid_reply_not_a_crash():
    from aiflows_jarvis.ControllerFlowModule.commands import Command, InvalidReply, read_command

    commands = [Command(name="final_answer", description="the answer", input_args=["answer"])]
    nested = '{"command": "final_answer", "command_args": {"answer": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    with pytest.raises(InvalidReply, match="nested too deeply"):
        read_command(nested, commands)


# ~~~ A body nested deeper than the JSON reader follows ~~~
def deeply_nested_body(depth: int = 100_000) -> Malformed:
    return Malformed(b"[" * depth + b"]" * depth)


def test_a_deeply_nested_body_is_an_invalid_reply_named_as_such_not_a_recursion_error(loopback_llm, quiet_console):
    loopback_llm.add(*[deeply_nested_body()] * 4)
    with pytest.raises(LLMCallError) as error:
        make_chat().call({"query": "hi"})
    message = str(error.value)
    assert message.startswith(
        "Asker: the LLM call failed 4 times; last error: the server sent a reply nested too deeply to be read"
    ), message
    assert "RecursionError" not in message and "recursion" not in quiet_console.text
    assert len(loopback_llm.requests) == 4, "retried like any malformed body, within the attempts"


def test_a_deeply_nested_event_of_a_stream_is_an_invalid_reply(loopback_llm, quiet_console):
    event = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    loopback_llm.add(Malformed(event, content_type="text/event-stream"), "ok")
    assert make_chat(stream=True).call({"query": "hi"}) == {"api_output": "ok"}
    assert "nested too deeply" in quiet_console.text
