"""Text made harmless for a terminal: what an LLM, a server, a file or a program wrote is shown, never obeyed.

A terminal obeys escape sequences and control characters found in the text it prints: ``ESC[2K ESC[G`` erases the
line just written (code under review can hide ``os.system(...)`` that way), ``ESC]0;...BEL`` sets the window title,
``ESC]52;c;...BEL`` writes the clipboard, a lone carriage return writes over the start of the line. ``clean_text``
removes them all; whoever adds colours of its own does so after cleaning.

Some characters are not obeyed as commands but change what is seen: bidirectional overrides and isolates reorder the
text that follows them (code under review can show a comment where Python sees a statement: "Trojan Source",
CVE-2021-42574), and zero-width or blank-looking characters are there without being seen. ``clean_text`` shows them
as their code point (``<U+202E>``): removed, the code the user approves would not be the code that runs, and the
user must see that something is there.
"""
from __future__ import annotations

import re
from typing import Any

# Well-formed sequences, removed whole. Each starts at an ESC and no run inside one may hold an ESC, so a match attempt
# stops at the next ESC. Within an attempt, each repeated class is disjoint from everything that may follow it
# (parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E; an OSC body excludes its terminators), so giving a
# character back can never let the rest match: backtracking costs one failed step per character, and a text full of
# unterminated sequences is cleaned in linear time on every supported Python (possessive quantifiers, which say the
# same thing, need 3.11). The 8-bit forms (U+009B CSI, U+009D OSC, ...) are C1 controls, removed one character at a
# time below: they only come in hostile or mis-decoded text, where what follows them is better left visible.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erasing lines
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC: titles, links, the clipboard; ended by BEL or ST
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)"  # DCS, SOS, PM, APC: up to ST
    r"|\x1b[ -/]*[0-~]"  # any other escape: intermediate bytes, then a final byte (ESC c resets the terminal)
)
# What is left after the sequences: C0 controls but tab, line feed and carriage return (dealt with apart), a lone or
# unterminated ESC, DEL and the C1 controls. Their removal alone makes a text safe; the sequences are removed first
# only so that their parameters do not show as litter.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Shown as <U+XXXX>: the bidirectional formatting characters (the Arabic letter mark, LRM and RLM, the embeddings and
# overrides U+202A-U+202E, the isolates U+2066-U+2069), the zero-width ones (U+200B-U+200D, the word joiner and the
# invisible operators U+2060-U+2064, the byte-order mark U+FEFF, the Mongolian vowel separator) and the Hangul
# fillers, which are blank yet letters (a Python name can be made of them).
_INVISIBLE = "\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\u3164\ufeff\uffa0"
_SHOWN = re.compile(f"[{_INVISIBLE}]")
# All of the above and CR: is there anything to do at all?
_ANY = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_INVISIBLE}]")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """``value`` (a text, or a dict or list holding texts, at any depth) with each lone surrogate replaced by U+FFFD.
    A JSON reply may write one as an escape (``"\\ud800"``), which decodes to a str that no UTF-8 file, request or
    terminal can take: the log append, the next request and the print would each fail on it."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    return value


def _code_point(match: "re.Match[str]") -> str:
    return f"<U+{ord(match.group()):04X}>"


def clean_text(text: str, *, keep_carriage_returns: bool = False) -> str:
    """``text`` without escape sequences (CSI, OSC, DCS, SOS, PM, APC, two-byte ESC sequences) and without control
    characters but line feeds and tabs (C0, DEL, C1 with the 8-bit CSI U+009B). Bidirectional formatting characters
    and invisible ones are shown as their code point (``<U+202E>``, see the module's docstring). Printable text,
    Unicode included, is kept.

    A carriage return becomes a line break ("\\r\\n" one line break): in a terminal it sends the cursor back to the
    start of the line, so what follows it overwrites what the user would read (``rm -rf ~\\rls -l`` shows as
    ``ls -l~``). Dropped, it would glue the two parts into one misleading line; as a line break both stay visible, and
    code under review reads as Python reads it (a lone CR ends a line for its tokenizer and for universal newlines).
    ``keep_carriage_returns`` leaves them to the caller (the interpreter keeps what a progress bar's last CR left).

    Linear in the length of ``text``; a text with nothing to clean is returned as is.
    """
    if not _ANY.search(text):
        return text
    text = _SEQUENCE.sub("", text)
    if not keep_carriage_returns and "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _SHOWN.sub(_code_point, _CONTROL.sub("", text))
