"""Text cut to fit: what a prompt, a log entry or a screen line has room for."""

CUT_MARK = "\u2026"  # where a line was cut (an ellipsis)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping head and tail, saying how much was cut."""
    text = str(text)
    if limit <= 0 or len(text) <= limit:
        return text
    head = int(limit * 0.7)
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[len(text) - tail :] if tail else ''}"


def one_line(text: object, limit: int) -> str:
    """``text`` on one line (its blanks squeezed), cut to ``limit`` characters with an ellipsis."""
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + CUT_MARK
