"""Text made harmless for a terminal: what an LLM, a server, a file or a program wrote is shown, never obeyed.

A terminal obeys escape sequences and control characters found in the text it prints: ``ESC[2K ESC[G`` erases the
line just written (code under review can hide ``os.system(...)`` that way), ``ESC]0;...BEL`` sets the window title,
``ESC]52;c;...BEL`` writes the clipboard, a lone carriage return writes over the start of the line. ``clean_text``
removes them all; whoever adds colours of its own does so after cleaning.
"""
from __future__ import annotations

import re

# Well-formed sequences, removed whole. Each starts at an ESC and no run inside one may hold an ESC, so a match attempt
# stops at the next ESC: a text full of unterminated sequences is still cleaned in linear time (the possessive `*+`
# spares the backtracking within an attempt). The 8-bit forms (U+009B CSI, U+009D OSC, ...) are C1 controls, removed
# one character at a time below: they only come in hostile or mis-decoded text, where what follows them is better
# left visible than guessed at.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*+[ -/]*+[@-~]"  # CSI: colours, cursor moves, erasing lines
    r"|\x1b\][^\x07\x1b\x9c]*+(?:\x07|\x1b\\|\x9c)"  # OSC: titles, links, the clipboard; ended by BEL or ST
    r"|\x1b[PX^_][^\x1b\x9c]*+(?:\x1b\\|\x9c)"  # DCS, SOS, PM, APC: up to ST
    r"|\x1b[ -/]*+[0-~]"  # any other escape: intermediate bytes, then a final byte (ESC c resets the terminal)
)
# What is left after the sequences: C0 controls but tab, line feed and carriage return (dealt with apart), a lone or
# unterminated ESC, DEL and the C1 controls. Their removal alone makes a text safe; the sequences are removed first
# only so that their parameters do not show as litter.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_ANY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # the same and CR: is there anything to do at all?


def clean_text(text: str, *, keep_carriage_returns: bool = False) -> str:
    """``text`` without escape sequences (CSI, OSC, DCS, SOS, PM, APC, two-byte ESC sequences) and without control
    characters but line feeds and tabs (C0, DEL, C1 with the 8-bit CSI U+009B). Printable text, Unicode included, is
    kept.

    A carriage return becomes a line break ("\\r\\n" one line break): in a terminal it sends the cursor back to the
    start of the line, so what follows it overwrites what the user would read (``rm -rf ~\\rls -l`` shows as
    ``ls -l~``). Dropped, it would glue the two parts into one misleading line; as a line break both stay visible, and
    code under review reads as Python reads it (a lone CR ends a line for its tokenizer and for universal newlines).
    ``keep_carriage_returns`` leaves them to the caller (the interpreter keeps what a progress bar's last CR left).

    Linear in the length of ``text``; a text with no control character at all is returned as is.
    """
    if not _ANY.search(text):
        return text
    text = _SEQUENCE.sub("", text)
    if not keep_carriage_returns and "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)
