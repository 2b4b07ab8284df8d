"""Replies that repeat themselves: a small model caught in a loop writes the same line or sentence until max_tokens.

Such a reply is useless past its second copy, and reading it to the end costs the whole ``max_tokens`` at the
server's speed (minutes on a laptop). :class:`RepetitionGuard` is fed the text as it arrives (a streamed reply is
stopped when it fires) and :func:`find_repetition` reads a whole text the same way, so a reply cut while streaming
and the same text read again (a replay) give the same answer.

Two patterns, both far from what a sound reply does:

- one line or sentence (list markers and step numbers aside, of at least ``MIN_UNIT_CHARS`` characters) written
  ``LINE_REPEATS`` times, each copy at most ``MAX_BLOCK_UNITS`` lines or sentences after the one before;
- the text ending in a loop of up to ``MAX_PERIOD_WORDS`` words written ``LOOP_REPEATS`` times in a row, over at
  least ``MIN_LOOP_CHARS`` characters ("the the the ...", a paragraph without line breaks written again and again).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional

MIN_UNIT_CHARS = 16
LINE_REPEATS = 8
MAX_BLOCK_UNITS = 6  # a loop of up to this many lines or sentences (copies further apart are not counted together)
MAX_PERIOD_WORDS = 40
LOOP_REPEATS = 8
MIN_LOOP_CHARS = 200
CHECK_EVERY = 120  # characters between two checks of a growing text (and at each line break)
_TAIL_CHARS = 6000  # the word loop is looked for in this much of the end of the text

# A unit: a sentence (up to . ! ? followed by a space) or the rest of a line.
_UNIT = re.compile(r"[^\n]+?(?:[.!?]+(?=\s)|(?=\n)|$)")
_MARKER = re.compile(r"^(?:[-*+>#]+|\d+[.):]|step\s+\d+[.):]?)\s*", re.I)
_WORD = re.compile(r"\S+")


@dataclass
class Repetition:
    """What repeated: ``unit`` (shortened for a message), how many times, and ``keep``: the length of the text up to
    the end of its first copy (what is worth keeping of the reply)."""

    unit: str
    count: int
    keep: int

    def describe(self, subject: str = "the reply") -> str:
        unit = self.unit if len(self.unit) <= 60 else self.unit[:57] + "..."
        return f'{subject} repeated "{unit}" {self.count} times'


def _normal(unit: str) -> str:
    return " ".join(_MARKER.sub("", unit.strip()).lower().split())


def _repeated_unit(text: str, complete: bool) -> Optional[Repetition]:
    seen: Dict[str, list] = {}  # normal form -> [end of its first copy of the current run, unit numbers]
    for number, match in enumerate(_UNIT.finditer(text)):
        if not complete and match.end() == len(text) and not text.endswith(("\n", ".", "!", "?")):
            break  # the last unit may still be growing
        unit = _normal(match.group())
        if len(unit) < MIN_UNIT_CHARS:
            continue
        entry = seen.setdefault(unit, [match.end(), []])
        numbers = entry[1]
        if numbers and number - numbers[-1] > MAX_BLOCK_UNITS:
            entry[0], numbers[:] = match.end(), []  # far apart: a line a sound text uses again, not a loop
        numbers.append(number)
        if len(numbers) >= LINE_REPEATS:
            return Repetition(unit, len(numbers), entry[0])
    return None


def _word_loop(text: str) -> Optional[Repetition]:
    start = max(0, len(text) - _TAIL_CHARS)
    words = [(m.group(), m.start() + start, m.end() + start) for m in _WORD.finditer(text, start)]
    if start and words:
        words = words[1:]  # the first may be cut
    count = len(words)
    for period in range(1, MAX_PERIOD_WORDS + 1):
        if count < period * LOOP_REPEATS:
            break
        same = 0
        while same + period < count and words[count - 1 - same][0] == words[count - 1 - same - period][0]:
            same += 1
        repeats = (same + period) // period
        if repeats < LOOP_REPEATS:
            continue
        first = count - same - period  # the loop's first word
        if words[-1][2] - words[first][1] < MIN_LOOP_CHARS:
            continue
        unit = " ".join(word for word, _, _ in words[first:first + period])
        return Repetition(unit, repeats, words[first + period - 1][2])
    return None


class RepetitionGuard:
    """Fed a reply as it arrives; ``feed`` returns a :class:`Repetition` once the reply repeats itself, else None."""

    def __init__(self):
        self.text = ""
        self._checked = 0
        self.found: Optional[Repetition] = None

    def feed(self, piece: str, final: bool = False) -> Optional[Repetition]:
        if self.found is not None or not piece and not final:
            return self.found
        self.text += piece
        if final or "\n" in piece or len(self.text) - self._checked >= CHECK_EVERY:
            self._checked = len(self.text)
            self.found = _repeated_unit(self.text, complete=final) or _word_loop(self.text)
        return self.found


def find_repetition(text: str) -> Optional[Repetition]:
    """The repetition a guard fed ``text`` piece by piece would have found first (None: the text does not repeat
    itself); its ``keep`` and ``count`` are those of that point, not of the whole text."""
    guard = RepetitionGuard()
    for start in range(0, len(text), CHECK_EVERY):
        found = guard.feed(text[start:start + CHECK_EVERY])
        if found is not None:
            return found
    return guard.feed("", final=True)
