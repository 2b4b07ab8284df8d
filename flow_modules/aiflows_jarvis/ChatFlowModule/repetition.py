"""Replies that repeat themselves: a small model caught in a loop writes the same line or sentence until max_tokens.

Such a reply is useless past its second copy, and reading it to the end costs the whole ``max_tokens`` at the
server's speed (minutes on a laptop). :class:`RepetitionGuard` is fed the text as it arrives (a streamed reply is
stopped when it fires) and :func:`find_repetition` reads a whole text the same way, so a reply cut while streaming
and the same text read again (a replay) give the same answer.

Two patterns, both far from what a sound reply does:

- one line or sentence (list markers and step numbers aside, of ``MIN_UNIT_CHARS`` to ``MAX_UNIT_CHARS``
  characters) written ``LINE_REPEATS`` times, each copy at most ``MAX_BLOCK_UNITS`` lines or sentences after the
  one before;
- the text ending in a loop of up to ``MAX_PERIOD_WORDS`` words written ``LOOP_REPEATS`` times in a row, over at
  least ``MIN_LOOP_CHARS`` characters ("the the the ...", a paragraph without line breaks written again and again).

The guard reads each character once: it keeps the unit being written (up to ``MAX_UNIT_CHARS``), the units of the
last ``MAX_BLOCK_UNITS`` and the last ``_WINDOW_WORDS`` words, so a 10 MB reply costs what ten 1 MB ones do.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from typing import Deque, Dict, List, Optional, Tuple

MIN_UNIT_CHARS = 16
MAX_UNIT_CHARS = 4000  # a longer line is not compared with others (eight copies of it are cut by max_tokens)
LINE_REPEATS = 8
MAX_BLOCK_UNITS = 6  # a loop of up to this many lines or sentences (copies further apart are not counted together)
MAX_PERIOD_WORDS = 40
LOOP_REPEATS = 8
MIN_LOOP_CHARS = 200
CHECK_EVERY = 120  # characters between two checks of a growing text (and at each line break)
_WINDOW_WORDS = 2 * MAX_PERIOD_WORDS * LOOP_REPEATS  # the word loop is looked for in the last this many words
_MAX_WORD_CHARS = 200  # a longer word equals no other (it is not kept)

# The end of a unit: a line break, or a run of . ! ? followed by white space (a sentence).
_UNIT_END = re.compile(r"\n|[.!?]+(?=\s)")
_LINE_BREAKS = re.compile(r"\n*")
_RUN_BACK = 16  # characters read again from the end of an unfinished unit (a run of . ! ? before the space)
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


class _Units:
    """Lines and sentences as they end, each compared with those of the last ``MAX_BLOCK_UNITS``."""

    def __init__(self):
        self.start = 0  # where the unit being written starts in the whole text
        self.text = ""  # that unit so far (its start only, once it is longer than MAX_UNIT_CHARS)
        self.overlong = False
        self.number = 0  # units seen, short ones included
        self.seen: Dict[str, list] = {}  # normal form -> [end of its first copy of the current run, unit numbers]

    def feed(self, new: str, final: bool) -> Optional[Repetition]:
        text = self.text + new  # ``self.start`` is where it starts in the whole text
        scan = max(0, len(self.text) - _RUN_BACK)  # a run of . ! ? may have waited for the space after it
        pos = 0  # where the next unit starts in ``text``
        while True:
            pos = _LINE_BREAKS.match(text, pos).end()  # line breaks between units belong to none
            if pos == len(text):
                break
            end = _UNIT_END.search(text, max(pos + 1, scan))
            if end is None and not final:
                break
            stop = len(text) if end is None else end.start() if end.group() == "\n" else end.end()
            found = self._unit(text[pos:stop], self.start + stop)
            if found is not None:
                return found
            pos, scan, self.overlong = stop, 0, False
        self.start, self.text = self.start + pos, text[pos:]
        if len(self.text) > MAX_UNIT_CHARS:  # keep only what the next piece may complete
            self.overlong = True
            self.start, self.text = self.start + len(self.text) - _RUN_BACK, self.text[-_RUN_BACK:]
        return None

    def _unit(self, text: str, end: int) -> Optional[Repetition]:
        number, self.number = self.number, self.number + 1
        if number % 64 == 0:  # forget units too far back to join a loop: they would start a new run anyway
            self.seen = {unit: entry for unit, entry in self.seen.items() if number - entry[1][-1] <= MAX_BLOCK_UNITS}
        if self.overlong:
            return None
        unit = _normal(text)
        if len(unit) < MIN_UNIT_CHARS:
            return None
        entry = self.seen.setdefault(unit, [end, []])
        numbers = entry[1]
        if numbers and number - numbers[-1] > MAX_BLOCK_UNITS:
            entry[0], numbers[:] = end, []  # far apart: a line a sound text uses again, not a loop
        numbers.append(number)
        if len(numbers) >= LINE_REPEATS:
            return Repetition(unit, len(numbers), entry[0])
        return None


class _Words:
    """The last ``_WINDOW_WORDS`` words with their places, and whether the text ends in a loop of them."""

    def __init__(self):
        self.offset = 0  # where ``partial`` starts in the whole text
        self.partial = ""  # the last word, which the next piece may go on
        self.long_word = False  # ``partial`` stands for a word longer than _MAX_WORD_CHARS
        self.words: Deque[Tuple[object, int, int]] = collections.deque(maxlen=_WINDOW_WORDS)

    def feed(self, new: str, final: bool) -> Optional[Repetition]:
        text, base = self.partial + new, self.offset
        matches = list(_WORD.finditer(text))
        last_open = matches and matches[-1].end() == len(text) and not final
        for match in matches[:-1] if last_open else matches:
            word: object = match.group()
            if match.start() == 0 and self.long_word or len(match.group()) > _MAX_WORD_CHARS:
                word = object()  # equal to no other word
            self.words.append((word, base + match.start(), base + match.end()))
        if last_open:
            begin = matches[-1].start()
            self.long_word = bool(begin == 0 and self.long_word) or len(text) - begin > _MAX_WORD_CHARS
            keep_from = max(begin, len(text) - 1) if self.long_word else begin
            self.partial, self.offset = text[keep_from:], base + keep_from
        else:
            self.partial, self.offset, self.long_word = "", base + len(text), False
        return self._loop()

    def _loop(self) -> Optional[Repetition]:
        words, count = self.words, len(self.words)
        for period in range(1, MAX_PERIOD_WORDS + 1):
            if count < period * LOOP_REPEATS:
                break
            if words[-1][0] != words[-1 - period][0]:
                continue
            same = 0
            while same + period < count and words[-1 - same][0] == words[-1 - same - period][0]:
                same += 1
            repeats = (same + period) // period
            if repeats < LOOP_REPEATS:
                continue
            first = count - same - period  # the loop's first word
            if words[-1][2] - words[first][1] < MIN_LOOP_CHARS:
                continue
            unit = " ".join(str(words[first + i][0]) for i in range(period))
            return Repetition(unit, repeats, words[first + period - 1][2])
        return None


class RepetitionGuard:
    """Fed a reply as it arrives; ``feed`` returns a :class:`Repetition` once the reply repeats itself, else None.

    Each piece is read once (``_Units`` and ``_Words`` keep bounded windows), however long the reply."""

    def __init__(self):
        self.length = 0  # characters fed
        self._pending: List[str] = []
        self._pending_chars = 0
        self._units, self._words = _Units(), _Words()
        self.found: Optional[Repetition] = None

    def feed(self, piece: str, final: bool = False) -> Optional[Repetition]:
        if self.found is not None or not piece and not final:
            return self.found
        self.length += len(piece)
        self._pending.append(piece)
        self._pending_chars += len(piece)
        if final or "\n" in piece or self._pending_chars >= CHECK_EVERY:
            new = "".join(self._pending)
            self._pending, self._pending_chars = [], 0
            by_unit = self._units.feed(new, final)
            by_word = self._words.feed(new, final)
            self.found = by_unit or by_word
        return self.found


def find_repetition(text: str) -> Optional[Repetition]:
    """The repetition a guard fed ``text`` piece by piece would have found first (None: the text does not repeat
    itself); its ``keep`` and ``count`` are those of that point, not of the whole text."""
    guard = RepetitionGuard()
    for start in range(0, len(text), CHECK_EVERY):
        found = guard.feed(text[start : start + CHECK_EVERY])
        if found is not None:
            return found
    return guard.feed("", final=True)
