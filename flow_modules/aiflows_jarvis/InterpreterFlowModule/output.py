"""What a run gives back (``RunResult``) and its output, bounded while it streams (``BoundedText``) and cleaned."""

from __future__ import annotations

import codecs
import dataclasses
import re
from typing import Any, Dict, List

from aiflows_jarvis.CoreFlowModule import clean_text

#: What the kernel writes in its output where it left characters out (``\0jarvis-skip:<count>\0``): a run's output
#: past its bound is not sent at all, only counted, so that huge output costs no memory here. NUL characters are
#: removed from output anyway, so the mark cannot show even where it is not read.
SKIP_MARK = "\0jarvis-skip:"
_SKIP = re.compile("\0jarvis-skip:([0-9]+)\0")


@dataclasses.dataclass
class RunResult:
    """What one run gives back.

    ``output`` is the text a controller reads (stdout/stderr/results/tracebacks and notes, ANSI-free, bounded);
    ``failed``: exception, non-zero shell exit, timeout, kernel death or unsupported language; ``timed_out``;
    ``restarted``: the kernel died or had to be restarted, so the Python state was lost; ``truncated``: output was cut;
    ``figures``: absolute paths of the PNG files saved; ``files``: workspace-relative paths created or modified
    (at most 50; hidden entries, ``__pycache__`` and the saved figures are left out); ``duration`` in seconds.
    """

    output: str
    failed: bool = False
    timed_out: bool = False
    restarted: bool = False
    truncated: bool = False
    figures: List[str] = dataclasses.field(default_factory=list)
    files: List[str] = dataclasses.field(default_factory=list)
    duration: float = 0.0
    language: str = "python"

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


class BoundedText:
    """Text accumulated chunk by chunk, keeping at most ``limit`` characters: a head, a tail, and a count of the cut.

    A chunk may hold skip marks (``SKIP_MARK``): characters the kernel counted but did not send. They count as cut,
    exactly as if they had come: the kernel sends at least ``limit`` characters before the first mark and after the
    last, so the head and the tail are the same."""

    def __init__(self, limit: int):
        self.limit = max(0, int(limit))
        self.head_limit = int(self.limit * 0.6)
        self.tail_limit = self.limit - self.head_limit
        self.head: List[str] = []
        self.head_len = 0
        self.tail = ""
        self.cut = 0
        self.total = 0

    def add(self, text: str) -> None:
        if not text:
            return
        if "\0" in text and SKIP_MARK in text:
            pieces = _SKIP.split(text)
            for index, piece in enumerate(pieces):
                if index % 2:
                    self.skip(int(piece))
                else:
                    self._add(piece)
            return
        self._add(text)

    def skip(self, count: int) -> None:
        """``count`` characters came here and were not kept (nor sent)."""
        if count <= 0:
            return
        self.total += count
        # what the tail held is older than the skipped characters: it is cut with them
        self.cut += len(self.tail) + count
        self.tail = ""

    def _add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        room = self.head_limit - self.head_len
        if room > 0:
            piece = text[:room]
            self.head.append(piece)
            self.head_len += len(piece)
            text = text[room:]
            if not text:
                return
        if len(text) >= self.tail_limit:
            self.cut += len(self.tail) + len(text) - self.tail_limit
            self.tail = text[len(text) - self.tail_limit :] if self.tail_limit else ""
        else:
            self.tail += text
            excess = len(self.tail) - self.tail_limit
            if excess > 0:
                self.cut += excess
                self.tail = self.tail[excess:]

    def note(self, text: str) -> None:
        """Add ``text`` as a line of its own."""
        self.add(("\n" if self.total and self.last_char != "\n" else "") + text.strip("\n") + "\n")

    @property
    def last_char(self) -> str:
        if self.tail:
            return self.tail[-1]
        if self.cut:  # the last characters were skipped: not a line end as far as anyone knows
            return ""
        return self.head[-1][-1] if self.head else ""

    @property
    def truncated(self) -> bool:
        return self.cut > 0

    def render(self) -> str:
        head = "".join(self.head)
        if not self.cut:
            return clean_output(head + self.tail)
        return f"{clean_output(head)}\n[... {self.cut:,} characters cut ...]\n{clean_output(self.tail)}"


def clean_output(text: str) -> str:
    """Escape sequences and control characters but tabs and line breaks removed (``clean_text``: a NUL or a bell
    means nothing to the controller reading the text); for each line, only what the last carriage return left
    (progress bars)."""
    text = clean_text(text, keep_carriage_returns=True)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        text = "\n".join(
            line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r") for line in text.split("\n")
        )
    return text


class Utf8Decoder:
    """Bytes to text across chunk boundaries; invalid bytes become U+FFFD."""

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes, final: bool = False) -> str:
        return self._decoder.decode(data, final)


# pip's lines that say nothing about the outcome: index locations, downloads, progress, cached wheels, notices, and
# the dependencies already installed. What was installed, what was already there, and errors stay.
_PIP_INSTALL = re.compile(r"(?:^|[\s;&|(!%])(?:python3?\s+-m\s+)?pip3?\s+install\b", re.M)
_PIP_NOISE = re.compile(
    r"^\s*(?:WARNING: Location .* is ignored|Looking in (?:indexes|links):|Collecting |Downloading |Using cached |"
    r"Obtaining |Installing collected packages:|Preparing metadata|Building wheels? for|Created wheel for|"
    r"Stored in directory:|Installing build dependencies|Getting requirements to build|Attempting uninstall:|"
    r"Found existing installation:|Uninstalling |Successfully uninstalled |\[notice\]|"
    r"Requirement already satisfied: .*\(from |[\s\u2501\u2578\u257a\-|/\\=#>.]*\d+(?:\.\d+)?\s*[kMG]?B(?:/s)?\b)"
)


def without_pip_noise(code: str, output: str) -> str:
    """``output`` of ``code`` with pip's progress lines left out when the code runs ``pip install`` (a line says how
    many): what was installed, what was already there, and errors stay; other output is kept as it is."""
    if not code or not _PIP_INSTALL.search(code):
        return output
    lines = output.split("\n")
    kept = [line for line in lines if not _PIP_NOISE.match(line)]
    left = len(lines) - len(kept)
    if not left:
        return output
    kept = [line for i, line in enumerate(kept) if line.strip() or (i and kept[i - 1].strip())]
    return "\n".join(kept).strip("\n") + f"\n[{left} lines of pip's progress and notices left out]"
