"""Python code highlighted for a terminal, its long lines wrapped under their own indentation."""
from __future__ import annotations

import io
from typing import List


def highlighted_lines(code: str, width: int) -> List[str]:
    """Python ``code`` highlighted with ``rich`` (terminal colours), each line fitted to ``width`` as the console fits
    plain lines: cut at spaces, the later pieces indented like the line plus two (rich's own wrapping starts them at
    the margin, which hides the code's structure)."""
    from rich.console import Console as RichConsole
    from rich.syntax import Syntax
    from rich.text import Text

    rich = RichConsole(file=io.StringIO(), force_terminal=True, color_system="standard", width=10_000,
                       highlight=False, soft_wrap=True)
    highlighted = Syntax(code, "python", theme="ansi_dark", background_color="default").highlight(code)
    out = []
    for line in highlighted.split("\n", allow_blank=True)[:len(code.split("\n"))]:
        plain = line.plain
        lead = len(plain) - len(plain.lstrip(" "))
        hang = " " * ((lead if lead < width // 2 else 0) + 2)
        start, pieces = 0, []
        while not pieces or start < len(plain):
            room = width - (len(hang) if pieces else 0)
            end = min(len(plain), start + max(10, room))
            if end < len(plain):  # cut at the last space that leaves some text (else inside a long word)
                space = plain.rfind(" ", start + (lead if not pieces else 0) + 1, end + 1)
                end = space if space > start else end
            piece = line[start:end]
            pieces.append(piece if not pieces else Text(hang) + piece)
            start = end
            while 0 < start < len(plain) and plain[start] == " ":
                start += 1
        for piece in pieces:
            with rich.capture() as captured:
                rich.print(piece, end="")
            out.append(captured.get())
    return out
