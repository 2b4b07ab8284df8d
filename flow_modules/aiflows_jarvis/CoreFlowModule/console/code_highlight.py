"""Python code highlighted for a terminal, its long lines cut at the width with a mark."""

from __future__ import annotations

import io
from typing import List

from ..text import CUT_MARK


def highlighted_lines(code: str, width: int) -> List[str]:
    """Python ``code`` highlighted with ``rich`` (terminal colours), each line cut to ``width`` with a mark at its
    end (``…``) when longer: a line wrapped would read as two lines of code (a string broken in two). The report
    and the editor show the code whole."""
    from rich.console import Console as RichConsole
    from rich.syntax import Syntax

    rich = RichConsole(
        file=io.StringIO(), force_terminal=True, color_system="standard", width=10_000, highlight=False, soft_wrap=True
    )
    highlighted = Syntax(code, "python", theme="ansi_dark", background_color="default").highlight(code)
    out = []
    for line in highlighted.split("\n", allow_blank=True)[: len(code.split("\n"))]:
        if len(line.plain) > width:
            line = line[: max(1, width - 1)]
            line.append(CUT_MARK)
        with rich.capture() as captured:
            rich.print(line, end="")
        out.append(captured.get())
    return out
