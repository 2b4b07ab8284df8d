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

import functools
import re
import unicodedata
from typing import Any, List, Tuple

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
# Shown as <U+XXXX>: what a terminal may draw as nothing, from the Unicode properties (``invisible_code_points``).
# Characters of format (Cf: the bidirectional controls, the zero-width ones, the soft hyphen, the byte-order mark,
# the tags), the line and paragraph separators (Zl, Zp), the default-ignorable code points (DerivedCoreProperties:
# Cf, the variation selectors and Other_Default_Ignorable_Code_Point, below, whose U+034F and the Hangul fillers are
# valid in a Python name), and the blank fillers (the Hangul ones, the blank Braille pattern). Built at the first
# text that is not ASCII: the scan of the Unicode database costs tens of milliseconds, which plain text never pays.
# Other_Default_Ignorable_Code_Point, from PropList.txt: the one property of these that unicodedata does not give.
_OTHER_DEFAULT_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x2065, 0x2065),
    (0x3164, 0x3164),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0000),
    (0xE0002, 0xE001F),
    (0xE0080, 0xE00FF),
    (0xE01F0, 0xE0FFF),
)
_BLANK_FILLERS = (
    "HANGUL CHOSEONG FILLER",
    "HANGUL JUNGSEONG FILLER",
    "HANGUL FILLER",
    "HALFWIDTH HANGUL FILLER",
    "BRAILLE PATTERN BLANK",
)
# Format characters, separators and variation selectors are assigned in planes 0, 1 and 14 only (plane 2 and 3 hold
# ideographs, 15 and 16 private use): the scan looks there.
_SCANNED = (range(0x0000, 0x20000), range(0xE0000, 0xE1000))
# C0 controls but tab and line feed (and CR, dealt with apart), DEL and C1: the ASCII-and-Latin-1 part of _ANY.
_CONTROLS_AND_CR = "\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f"
_ANY_ASCII = re.compile(f"[{_CONTROLS_AND_CR}]")


def invisible_code_points() -> List[int]:
    """The code points ``clean_text`` shows as ``<U+XXXX>``, in order (see the comment above)."""
    category, name = unicodedata.category, unicodedata.name
    points = {cp for low, high in _OTHER_DEFAULT_IGNORABLE for cp in range(low, high + 1)}
    points.update(ord(unicodedata.lookup(filler)) for filler in _BLANK_FILLERS)
    for block in _SCANNED:
        for cp in block:
            kind = category(chr(cp))
            if kind in ("Cf", "Zl", "Zp") or (kind == "Mn" and "VARIATION SELECTOR" in name(chr(cp), "")):
                points.add(cp)
    return sorted(points)


@functools.lru_cache(maxsize=1)
def _invisible_patterns() -> Tuple["re.Pattern[str]", "re.Pattern[str]"]:
    """(what is shown as a code point, what needs any cleaning at all), as character classes of ranges."""
    ranges: List[List[int]] = []
    for cp in invisible_code_points():
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    shown = "".join(f"\\U{low:08x}" + (f"-\\U{high:08x}" if high > low else "") for low, high in ranges)
    return re.compile(f"[{shown}]"), re.compile(f"[{_CONTROLS_AND_CR}{shown}]")


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
    if text.isascii():
        if not _ANY_ASCII.search(text):
            return text
        shown = None
    else:
        shown, anything = _invisible_patterns()
        if not anything.search(text):
            return text
    text = _SEQUENCE.sub("", text)
    if not keep_carriage_returns and "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    return text if shown is None else shown.sub(_code_point, text)


def invisible_characters_note(text: str, limit: int = 5) -> str:
    """A line saying which characters of ``text`` ``clean_text`` shows as code points, and on which lines ("" when
    none): an editor opened on the raw text may show them as nothing, so the user is told before editing."""
    if text.isascii():
        return ""
    shown, _ = _invisible_patterns()
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        for match in shown.finditer(line):
            found.append(f"U+{ord(match.group()):04X} on line {number}")
    if not found:
        return ""
    more = f" and {len(found) - limit} more" if len(found) > limit else ""
    count = f"{len(found)} invisible character{'s' if len(found) > 1 else ''}"
    return (
        f"The text holds {count} that your editor may not show: {', '.join(found[:limit])}{more} "
        "(shown above as <U+XXXX>)."
    )
