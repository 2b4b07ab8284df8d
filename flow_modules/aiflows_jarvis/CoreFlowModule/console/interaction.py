"""The user in the loop: what is shown (a console with a colour per role) and where answers come from (input sources).

Every human touch point of every flow goes through ``get_input_source().ask(prompt, kind)``:

* ``TerminalInput`` (the default): reads the terminal; a line holding only three double quotes starts and ends a
  multi-line answer;
* ``AutoApproveInput`` (``--yes``): approvals and feedback requests pass, questions get "Use your best judgement.";
* ``ScriptedInput``: a queue of answers, for tests and demos.

``kind`` tells the source what is asked: ``approval`` (an empty answer approves), ``feedback`` (an empty answer means
"looks good") or ``question`` (free text).

What is shown goes through the ``Console``, which cleans every text of escape sequences and control characters
(``terminal.clean_text``) and of the secrets the process knows (``redaction``) before adding colours of its own, and
never lets a print fail a run: characters the output cannot encode are shown escaped (``\\u20ac``), and a closed
output (``| head -1``) raises ``OutputClosed``.
"""

from __future__ import annotations

import builtins
import errno
import io
import itertools
import json
import os
import re
import shutil
import sys
import threading
import time
import weakref
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Deque, Dict, Iterable, List, NoReturn, Optional, Union

import colorama

from ..errors import InputUnavailableError
from ..run.current import current_run
from ..run.redaction import redact
from ..text import CUT_MARK
from .terminal import clean_text

APPROVAL = "approval"
FEEDBACK = "feedback"
QUESTION = "question"
KINDS = (APPROVAL, FEEDBACK, QUESTION)

BEST_JUDGEMENT = "Use your best judgement."
# How the status of a flow the user ended at a question (q, stop) starts: a command line exits with its own code.
STOPPED_BY_USER = "stopped: the user said"
_APPROVAL_WORDS = {
    "",
    "y",
    "yes",
    "ok",
    "okay",
    "lgtm",
    "approve",
    "approved",
    "accept",
    "accepted",
    "looks good",
    "good",
    "fine",
    "go",
    "go ahead",
    "continue",
    "sure",
    "yes please",
    "run",
    "run it",
    "do it",
    "ok run it",
    "good to go",
}


def is_approval(answer: Optional[str]) -> bool:
    """True if a user's answer approves (empty, 'y', 'ok', 'lgtm', 'approve', ...)."""
    if answer is None:
        return True
    return answer.strip().lower().rstrip(".!") in _APPROVAL_WORDS


# ~~~ Flow paths as the user reads them ~~~
# Parts of a flow path that every boss repeats and that tell two flows apart nowhere: the loop and executor nodes,
# and the plan writer's branch (its one chat is the PlanGenerator).
PLUMBING = {"CtrlExMem", "Executor", "write_plan"}


def meaningful_parts(path: str) -> List[str]:
    """``Jarvis/CtrlExMem/Executor/Coder/Planner/Executor/write_plan/PlanGenerator`` ->
    ``[Jarvis, Coder, Planner, write_plan, PlanGenerator]``: without the loop plumbing and repeated names (a branch
    named like the flow it runs)."""
    parts: List[str] = []
    for part in path.split("/"):
        if part in PLUMBING or (parts and parts[-1] == part):
            continue
        parts.append(part)
    return parts or path.split("/")


def flow_label(name: str) -> str:
    """A boss's branch name as the user reads it everywhere: ``extend_library`` -> ``ExtendLibrary``."""
    return "".join(word[:1].upper() + word[1:] for word in name.split("_")) if "_" in name else name


def breadcrumb_parts(path: str, boss: bool = False) -> List[str]:
    """The flows of ``path`` the user knows: ``Jarvis/CtrlExMem/Executor/Coder/CtrlExMem/Executor/extend_library/
    CtrlExMem/Executor/write_code`` -> ``[Jarvis, Coder, ExtendLibrary, write_code]``. A flow with a loop or a
    planner of its own below it in the path (a boss) is named by its label (``ExtendLibrary``); the others keep their
    name (a command's flow, ``write_code``). ``boss``: the last part is a boss too (a memory layout's paths end at the
    boss)."""
    raw = [p for p in path.split("/") if p]
    parts: List[str] = []
    for i, part in enumerate(raw):
        if part in PLUMBING and i > 0 or (parts and parts[-1] == part):
            continue
        is_boss = (i + 1 < len(raw) and raw[i + 1] in ("CtrlExMem", "Planner")) or (boss and i == len(raw) - 1)
        parts.append(flow_label(part) if is_boss else part)
    return parts or raw


def shown_path(path: str) -> str:
    """A path as the user reads it best, in one form per line: relative inside the current folder
    (``memory/library/data.py``), absolute outside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith(os.pardir) else relative


def breadcrumb(path: str, boss: bool = False) -> str:
    """``Jarvis > Coder > ExtendLibrary > write_code`` (see ``breadcrumb_parts``)."""
    return " > ".join(breadcrumb_parts(path, boss))


# ~~~ Console ~~~
_STYLES = {
    "flow": colorama.Fore.BLUE + colorama.Style.BRIGHT,
    "plan": colorama.Fore.CYAN,
    "code": colorama.Fore.YELLOW,
    "result": colorama.Fore.WHITE,
    "question": colorama.Fore.GREEN + colorama.Style.BRIGHT,
    "llm": colorama.Fore.MAGENTA,
    "answer": colorama.Fore.GREEN,
    "warning": colorama.Fore.YELLOW + colorama.Style.BRIGHT,
    "error": colorama.Fore.RED + colorama.Style.BRIGHT,
    "info": colorama.Style.DIM,
}


class OutputClosed(SystemExit):
    """The output was closed by its reader (``jarvis ... | head -1``): the run ends as a program killed by
    SIGPIPE would, with 141 (128 + 13). A ``SystemExit``, so that no ``except Exception`` of a flow takes it for an
    error to report or retry; the memory is kept as after Ctrl+C."""

    def __init__(self):
        super().__init__(141)


def shown_text(text: Any) -> str:
    """``text`` as the console shows it: cleaned of what a terminal acts on (``clean_text``), then of the secrets
    the process knows (``redact``: a key in a server's error message). Cleaned first, so that a key cut by an escape
    sequence is whole again and found; before lines are cut to the width, which would cut a key in two."""
    return redact(clean_text(str(text)))


def _encodable(text: str, stream) -> str:
    """``text`` with what ``stream``'s encoding cannot hold written as escapes (``caf\\xe9``), so no line is lost."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return text
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding, "replace")
    except LookupError:
        return text


_PLAN_STEP = re.compile(r"^(\s*)(\d+[.)]|[-*])(\s+)")
_FOLD_LINES = 3  # an argument longer than this many lines is folded


def fold(text: str, width: Optional[int], lines: int = _FOLD_LINES) -> List[str]:
    """``text`` as at most ``lines`` lines of ``width`` characters (its own line breaks kept, as real breaks), and a
    last line saying how much was left out (``... 412 more characters, 9 more lines``); whole when it fits, or when
    what is left fits the line the count would take."""
    width = max(20, width or 100)
    cap = (lines + 1) * width  # what of one line can be shown: the rest is not wrapped (a line of megabytes)
    out: List[str] = []
    source = text.split("\n")

    def folded(more_lines: int) -> List[str]:
        left = len(text) - len("\n".join(out[:lines]))
        tail = f", {more_lines} more line{'s' if more_lines != 1 else ''}" if more_lines > 1 else ""
        return out[:lines] + [f"... {left} more characters{tail}"]

    for i, line in enumerate(source):
        head = line[:cap]
        pieces = _wrap_words(head, width) if head.strip() else [head]
        for piece in pieces:
            out.append(piece)
            if len(out) > lines + 1:
                return folded(len(source) - i)
        if len(head) < len(line):  # more of this line than can be shown
            return folded(len(source) - i)
    return out


def cut_line(line: str, width: Optional[int]) -> str:
    """``line`` cut to ``width`` characters with a mark at its end (``…``) when longer: code, whose lines wrapped
    would read as other code (a string broken in two), and one-line notes."""
    return line if not width or len(line) <= width else line[: max(1, width - 1)] + CUT_MARK


_FOLDED = re.compile(r"\.\.\. \d+ more characters")


def is_folded(pieces: List[str], lines: int = _FOLD_LINES) -> bool:
    """Whether ``fold`` left part of a text out (its last line says how much), not only wrapped it."""
    return len(pieces) > lines and bool(_FOLDED.match(pieces[-1]))


def _wrap(line: str, width: Optional[int]) -> List[str]:
    """``line`` cut at spaces into lines of at most ``width`` characters, the later ones indented like the first plus
    two (a word longer than a line is cut)."""
    if not width or len(line) <= width:
        return [line]
    import textwrap

    lead = len(line) - len(line.lstrip(" "))
    lead = lead if lead < width // 2 else 0
    pieces = textwrap.wrap(
        line[lead:], max(10, width - lead), subsequent_indent="  ", break_long_words=True, break_on_hyphens=False
    ) or [""]
    return [" " * lead + piece for piece in pieces]


def _wrap_words(text: str, width: int) -> List[str]:
    """``text`` cut at spaces into lines of at most ``width`` characters (a longer word is cut)."""
    width = max(10, width)
    if len(text) <= width and text.isprintable() and not text[-1:].isspace():
        return [text]  # what textwrap gives a line that fits with no tab, no control character, no trailing space
    import textwrap

    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


# A long step that reports its progress (``Status.progress``) and has no status line (piped, --plain) says it in a
# line at most this often (seconds).
PROGRESS_EVERY = 10.0


class Status:
    """What ``Console.working`` yields: ``add(text)`` counts what a streaming server sent so far (shown in the
    status line) and, when ``echo`` is on, writes it as it comes (cleaned, like every print); ``progress(text)``
    says how far a long step is."""

    def __init__(self, console: "Console", echo: bool, label: str = "", live: bool = False):
        self.console, self.echo = console, echo
        self.label, self.live = label, live  # live: a status line is drawn
        self.detail = ""
        self.said_at = time.monotonic()
        self.pieces = 0
        self.first_at: Optional[float] = None  # when the first piece came (the rate is counted from there)
        self.echoed = False
        self.lock = threading.Lock()

    def rate(self) -> str:
        """ ", 14.8 tokens/s": how fast the pieces came since the first one ("" until a second has passed)."""
        elapsed = time.monotonic() - self.first_at if self.first_at is not None else 0.0
        return f", {(self.pieces - 1) / elapsed:.1f} tokens/s" if elapsed >= 1.0 and self.pieces > 1 else ""

    def progress(self, text: str) -> None:
        """How far a long step is (``2.1 of 5.0 MB read``): shown in the status line on a terminal; elsewhere a line
        (``label: text``) at most every ``PROGRESS_EVERY`` seconds, so that a piped run is not silent either."""
        with self.lock:
            self.detail = text
            now = time.monotonic()
            if self.live or now - self.said_at < PROGRESS_EVERY:
                return
            self.said_at = now
        self.console.line("info", f"{self.label}: {text}")

    def add(self, text: str) -> None:
        if not text:
            return
        with self.lock:
            self.pieces += 1
            if self.first_at is None:
                self.first_at = time.monotonic()
            if self.echo:
                if not self.echoed:
                    self.console._clear_status()
                    self.echoed = True
                self.console._emit(self.console.style("llm", text))


class Console:
    """Prints what the flows do, one colour per role; colours only on a terminal and unless ``NO_COLOR`` is set.

    On a terminal (unless ``plain``): a step is one line indented by its depth, lines fit the terminal's width,
    code is syntax-highlighted with ``rich`` and plans get hanging indents; a status line runs while an LLM works.
    Elsewhere (a pipe, a file, ``--plain``): the same text, plain, lines whole.

    Every text is cleaned (``shown_text``) before the console's own colours are added, so what an LLM, a server or a
    file wrote cannot move the cursor, hide a line, set the title or write the clipboard, nor show a secret the
    process knows (an API key in a server's error message). Printing never raises but
    ``OutputClosed``: what the stream's encoding cannot hold is escaped; once the output is closed, the next print
    raises ``OutputClosed`` and later ones are dropped.
    """

    def __init__(
        self,
        stream=None,
        color: Optional[bool] = None,
        spinner: Optional[bool] = None,
        plain: Optional[bool] = None,
        width: Optional[int] = None,
        stream_replies: bool = False,
    ):
        self._stream = stream
        self._color = color
        self._spinner = spinner
        self._plain = plain
        self._width = width
        self.stream_replies = stream_replies  # --stream: long replies (plans, code) shown as they are written
        self._closed = False
        self._tty = None  # (stream, whether it is a terminal)
        self._indent = ""  # the depth of the last step: what follows it is indented as deep
        self._status_width = 0
        self._folded_seen: Deque[str] = deque(maxlen=64)
        self._recent: Deque[str] = deque(maxlen=64)  # the last blocks shown, blanks folded: see was_shown
        self._last_step = ("", -1)  # the last step shown (its breadcrumb) and the output count after it (see step)
        self._emits = 0
        self._steps_hushed = False

    def _remember(self, text: str) -> None:
        folded = " ".join(str(text).split())
        if folded:
            self._recent.append(folded)

    def remember(self, text: str) -> None:
        """Count ``text`` as shown (``was_shown``) without showing it: what the screen already said in other words
        (the summary of a finish made by code after the save it sums up)."""
        self._remember(shown_text(text))

    def was_shown(self, text: str) -> bool:
        """Whether ``text`` (blanks aside) was shown whole in one of the last blocks or lines: what was on screen is
        not shown again (a final answer the user approved, a summary the finish step showed)."""
        folded = " ".join(shown_text(text).split())
        return bool(folded) and any(folded in block for block in self._recent)

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stdout

    def _isatty(self) -> bool:
        """Whether the stream is a terminal; asked once per stream object (every line styled asks it)."""
        stream = self.stream
        cached = self._tty
        if cached is not None and cached[0] is stream:
            return cached[1]
        try:
            answer = bool(stream.isatty())
        except Exception:
            answer = False
        self._tty = (stream, answer)
        return answer

    @property
    def color(self) -> bool:
        if self._color is not None:
            return self._color
        return self._isatty() and not os.environ.get("NO_COLOR")

    @property
    def fancy(self) -> bool:
        """Terminal rendering (widths, rich highlighting, a status line): on a terminal unless ``plain``."""
        return self._isatty() and not self._plain

    @property
    def width(self) -> Optional[int]:
        """The width lines are fitted to: the terminal's (on a terminal), else None (lines whole)."""
        if self._width:
            return self._width
        if not self.fancy:
            return None
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or None
        except (AttributeError, OSError, ValueError):
            return shutil.get_terminal_size().columns

    def set_depth(self, depth: int) -> None:
        self._indent = "  " * max(0, depth)

    # ~~~ Steps ~~~
    @contextmanager
    def steps_hushed(self, hushed: bool = True):
        """Step lines are not shown while the body runs (``hushed``), though they set the depth: a step whose
        news the next output says (the done mark a finish brings)."""
        previous, self._steps_hushed = self._steps_hushed, bool(hushed) or self._steps_hushed
        try:
            yield
        finally:
            self._steps_hushed = previous

    def step(
        self,
        path: str,
        command: str,
        args: Optional[Dict[str, Any]] = None,
        quiet: bool = False,
        note: str = "",
        silent: bool = False,
    ) -> None:
        """One step of the run: ``Jarvis > Coder > ExtendLibrary > write_code`` indented by its depth, then its
        arguments, each whole when short, folded with a count when long (``quiet``: the branch shows them whole
        itself, so they are not shown here). An argument folded before is said to be the same as above. ``note``:
        what the step did, on its line (``Jarvis > update_plan: step 1 done``), cut to the width; with no
        ``command``, ``path`` is the command's own flow (``Jarvis/CtrlExMem/Executor/update_plan``). A step that only
        repeats the step above (a loop's first command named like the loop: ``write_code > write_code``), with no
        argument to show, is not shown again. ``silent`` (or ``steps_hushed``): nothing is shown, the depth is set
        (what follows is indented as the step's would be)."""
        parts = breadcrumb_parts(path) if path else []
        if not command and parts:  # the path of the command's own flow (a branch that says its step)
            parts, command = parts[:-1], parts[-1]
        head = " > ".join(parts + [command])
        if (
            parts
            and parts[-1] == command
            and self._last_step == (" > ".join(parts), self._emits)
            and (quiet or not args)
        ):
            return
        depth = max(0, len([p for p in parts if p != "Planner"]) - 1)  # a boss's planning is at the boss's depth
        self.set_depth(depth)
        if silent or self._steps_hushed:
            return
        width = self.width
        if note:
            line = f"{self._indent}{head}: {shown_text(note)}"
            self._remember(note)
            self._emit(self.style("flow", cut_line(line, width)) + "\n")
            self._last_step = (head, self._emits)
            return
        lines = [self.style("flow", self._indent + head)]
        room = (width - len(self._indent) - 4) if width else 100
        for key, value in [] if quiet else (args or {}).items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            text = shown_text(text).strip("\n")
            label = f"{key}: "
            folded = fold(text, room - len(label))
            if is_folded(folded) and text in self._folded_seen:
                folded = ["(as above)"]
            elif is_folded(folded):
                self._folded_seen.append(text)
            else:
                self._remember(text)
            pad = " " * len(label)
            for i, piece in enumerate(folded):
                prefix = label if i == 0 else pad
                styled = "info" if i and i == len(folded) - 1 and is_folded(folded) else "result"
                lines.append(self.style(styled, f"{self._indent}    {prefix}{piece}"))
        self._emit("\n".join(lines) + "\n")
        self._last_step = (head, self._emits)

    def _render_body(self, role: str, text: str, width: Optional[int]) -> List[str]:
        """The lines of a block's body (cleaned text): highlighted code and hanging-indented plans on a terminal;
        plain lines elsewhere. Colours are added here, after cleaning."""
        indent = self._indent + "    "
        room = (width - len(indent)) if width else None
        if self.fancy and self.color and role == "code" and room and room > 20:
            try:
                from .code_highlight import highlighted_lines

                return [indent + line for line in highlighted_lines(text, room)]
            except Exception:  # noqa: BLE001 - highlighting is a nicety: plain text then
                pass
        out = []
        if role == "code":  # a long line is cut, never wrapped: its second half would read as another line of code
            return [indent + self.style(role, cut_line(line, room)) for line in text.split("\n")]
        for line in text.split("\n"):
            step = _PLAN_STEP.match(line) if role == "plan" else None
            if step and room:  # a plan step: later lines hang under its text, not under its number
                hang = " " * len(step.group(0))
                body = line[len(step.group(0)) :]
                pieces = _wrap_words(body, room - len(hang))
                first = self.style("flow", step.group(0)) + self._style_plan(pieces[0])
                out.append(indent + first)
                out.extend(indent + hang + self._style_plan(p) for p in pieces[1:])
                continue
            out.extend(indent + self.style(role if role != "flow" else "result", piece) for piece in _wrap(line, room))
        return out

    def _style_plan(self, text: str) -> str:
        styled = self.style("plan", text)
        if self.color and "[done]" in text:
            styled = styled.replace("[done]", f"{colorama.Fore.GREEN}[done]{colorama.Style.RESET_ALL}{_STYLES['plan']}")
        return styled

    def style(self, role: str, text: str) -> str:
        """``text`` cleaned (``shown_text``), in the colour of ``role`` (when colours are on)."""
        text = shown_text(text)
        if not self.color:
            return text
        return f"{_STYLES.get(role, '')}{text}{colorama.Style.RESET_ALL}"

    def show(self, role: str, title: str, body: Optional[str] = None, folded: Optional[int] = None) -> None:
        """A titled block: ``title`` on its own line, then ``body`` indented (if any); with ``folded``, a body longer
        than that many lines is folded as a long argument is (``fold``: a goal of a megabyte)."""
        width = self.width
        title = shown_text(title)
        self._remember(title)
        lines = [self.style(role, piece) for piece in self._fit(title, width)]
        if body:
            text = shown_text(body).rstrip("\n")  # before splitting: a carriage return becomes a line of its own
            pieces = fold(text, (width - len(self._indent) - 4) if width else None, folded) if folded else None
            if pieces is not None and is_folded(pieces, folded):
                indent = self._indent + "    "
                lines.extend(indent + self.style(role if role != "flow" else "result", piece) for piece in pieces[:-1])
                lines.append(indent + self.style("info", pieces[-1]))
            else:
                self._remember(text)
                lines.extend(self._render_body(role, text, width))
        self._emit("\n".join(lines) + "\n")

    def answered(self, prompt: str, answer: str) -> None:
        """A question and the answer nobody typed (``> (auto) approved``), the answer on the question's last line
        when it fits there: the review stays on screen, in fewer lines."""
        text = shown_text(prompt).rstrip("\n")
        self._remember(text)
        lines = self._fit(text, self.width)
        answer = shown_text(answer)
        room = self.width
        if lines and lines[-1].strip() and (not room or len(lines[-1]) + 1 + len(answer) <= room):
            out = [self.style("question", line) for line in lines[:-1]]
            out.append(self.style("question", lines[-1]) + " " + self.style("info", answer))
        else:
            out = [self.style("question", line) for line in lines]
            out += [self.style("info", piece) for piece in self._fit(answer, room)]
        self._emit("\n".join(out) + "\n")

    def _fit(self, text: str, width: Optional[int]) -> List[str]:
        """``text``'s lines at the current depth, each fitted to ``width``."""
        return [piece for line in text.split("\n") for piece in _wrap(self._indent + line if line else line, width)]

    def line(self, role: str, text: str) -> None:
        text = shown_text(text)
        self._remember(text)
        self._emit("\n".join(self.style(role, piece) for piece in self._fit(text, self.width)) + "\n")

    def write(self, text: str) -> None:
        """``text`` cleaned (``shown_text``), then a line break."""
        self._emit(shown_text(text) + "\n")

    def _emit(self, text: str) -> None:
        """Writes ``text`` (clean, colours added) as the stream's encoding allows; see the class for the failures.
        The one point every line goes out by: redacted once more (what a stream echoes comes in pieces)."""
        if self._closed:
            return
        self._emits += 1
        text = redact(text)
        stream = self.stream
        try:
            try:
                stream.write(_encodable(text, stream))
            except UnicodeEncodeError:  # a stream that names no encoding but has one
                stream.write(text.encode("ascii", "backslashreplace").decode("ascii"))
            stream.flush()
        except BrokenPipeError:
            self.output_closed(stream)
        except OSError as error:
            if error.errno in (errno.EPIPE, errno.ECONNRESET):
                self.output_closed(stream)
            # another failure (a full disk under a redirected output) loses this line, not the run
        except ValueError:  # stream closed (e.g. at interpreter shutdown)
            pass

    def output_closed(self, stream=None) -> NoReturn:
        """The reader of ``stream`` (default: this console's) is gone: later prints are dropped, the descriptor is
        pointed at the null device (so that flushing what Python still buffers at exit cannot fail and print
        "Exception ignored ... BrokenPipeError"), and ``OutputClosed`` is raised."""
        self._closed = True
        stream = stream if stream is not None else self.stream
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, stream.fileno())
            finally:
                os.close(null)
        except (AttributeError, OSError, ValueError):  # no descriptor (a test's sink): nothing buffered to lose
            pass
        raise OutputClosed()

    def _clear_status(self) -> None:
        """Erase the status line (spaces, not an escape sequence), if one is drawn."""
        if self._status_width:
            try:
                self.stream.write("\r" + " " * self._status_width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._status_width = 0

    @contextmanager
    def working(self, label: str, echo: bool = False):
        """A status line while the body runs (on a terminal, unless plain): ``label``, the seconds elapsed and, when
        a streaming server sends text (``Status.add``), how many pieces (tokens) came so far and how fast, so a slow
        model is seen working (redrawn in place: one line however long it works), or how far a long step is
        (``Status.progress``). Yields the ``Status``; with ``echo`` (and ``stream_replies``) the text streamed is
        written as it comes, in place of the line."""
        show = self._spinner if self._spinner is not None else self.fancy
        status = Status(self, echo=echo and self.stream_replies, label=label, live=bool(show))
        if not show:
            try:
                yield status
            finally:
                if status.echoed:
                    self._emit("\n")
            return
        stop = threading.Event()
        label = " ".join(shown_text(label).split("\n"))  # the spinner's own CRs redraw one line

        def spin():
            started = time.monotonic()
            try:
                for frame in itertools.cycle("|/-\\"):
                    if stop.wait(0.12):
                        break
                    with status.lock:
                        if status.echoed:
                            continue
                        elapsed = time.monotonic() - started
                        tokens = f", {status.pieces} tokens so far{status.rate()}" if status.pieces else ""
                        detail = f", {status.detail}" if status.detail else ""
                        text = f"{frame} {label} ({elapsed:.0f}s{tokens}{detail})"
                        width = self.width
                        if width and len(text) >= width:
                            text = text[: width - 1]
                        self._status_width = max(self._status_width, len(text))
                        self.stream.write(_encodable(f"\r{self.style('info', text)}", self.stream))
                        self.stream.flush()
                with status.lock:
                    self._clear_status()
            except (OSError, ValueError):  # the terminal is gone: the next print in the run says so
                pass

        thread = threading.Thread(target=spin, daemon=True)
        thread.start()
        try:
            yield status
        finally:
            stop.set()
            thread.join(timeout=1)
            if status.echoed:
                self._emit("\n")


def get_console() -> Console:
    """The console of the current run (``current_run().console``)."""
    return current_run().console


_said_once: "weakref.WeakKeyDictionary[Any, set]" = weakref.WeakKeyDictionary()


def warn_once(text: str) -> None:
    """A warning line on the run's console, said once per console (a run has its own): what a run finds again at
    every round (a library module that does not compile) is said the first time, not at every prompt."""
    console = get_console()
    said = _said_once.setdefault(console, set())
    if text not in said:
        said.add(text)
        console.line("warning", text)


# ~~~ Input sources ~~~
class InputSource:
    """Where the user's answers come from."""

    #: False when no human is there to edit files or read long prompts (auto-approve).
    interactive: bool = True

    def ask(self, prompt: str, kind: str = QUESTION) -> str:
        raise NotImplementedError


# What a closed terminal says. A library user has no command line: the call to make. Jarvis's command line replaces
# it with its own option (RunContext(closed_input_hint=...)).
CLOSED_INPUT_HINT = (
    "The flow needs your answer but the terminal input is closed. Run it in a terminal, or call "
    "the flow inside `with RunContext(input_source=AutoApproveInput()):` (both from "
    "aiflows_jarvis.CoreFlowModule), to approve plans and code automatically."
)


def get_closed_input_hint() -> str:
    """What a closed terminal says in the current run."""
    return current_run().closed_input_hint or CLOSED_INPUT_HINT


_BUILTIN_INPUT = builtins.input
_LINE_POLL_S = 0.2


def prompt_then_wait_for_line(prompt: str) -> bool:
    """On a terminal: write ``prompt`` and wait until a line is typed, in short waits; False (nothing done) when the
    input is not a terminal. ``input`` alone can miss a Ctrl+C: a SIGINT that comes after it wrote its prompt and
    before it blocks in read() is handled (the flag set) but read() is not interrupted, so the KeyboardInterrupt
    waits for the next Enter. Between these waits Python runs the handler, and the interrupt is raised at once."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return False
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return False
    import select

    sys.stdout.write(prompt)
    sys.stdout.flush()
    while not select.select([fd], [], [], _LINE_POLL_S)[0]:
        pass
    return True


class TerminalInput(InputSource):
    """Reads answers from the terminal. A line with only three double quotes starts and ends a multi-line answer."""

    MULTILINE_MARK = '"""'

    def __init__(self, read_line: Optional[Callable[[str], str]] = None, console: Optional[Console] = None):
        self._read_line = read_line
        self._console = console

    def _read(self, prompt: str) -> str:
        # `input` is looked up when called, not when the class is defined, so a replaced builtins.input is used.
        read_line = self._read_line or builtins.input
        if read_line is _BUILTIN_INPUT and prompt_then_wait_for_line(prompt):
            prompt = ""
        return read_line(prompt)

    def ask(self, prompt: str, kind: str = QUESTION) -> str:
        console = self._console or get_console()
        console.show("question", prompt)
        try:
            first = self._read(console.style("question", "> "))  # `input` writes this prompt to stdout
            if first.strip() != self.MULTILINE_MARK:
                return first.strip()
            lines = []
            while True:
                line = self._read("")
                if line.strip() == self.MULTILINE_MARK:
                    return "\n".join(lines).strip()
                lines.append(line)
        except EOFError:
            raise InputUnavailableError(get_closed_input_hint()) from None
        except BrokenPipeError:  # `input` could not write its prompt: the output was closed
            console.output_closed(sys.stdout)


class AutoApproveInput(InputSource):
    """Approves plans and code and answers questions with "Use your best judgement." (``--yes``)."""

    interactive = False

    def __init__(self, console: Optional[Console] = None, answer_to_questions: str = BEST_JUDGEMENT):
        self._console = console
        self.answer_to_questions = answer_to_questions
        self.asked: List[dict] = []

    def ask(self, prompt: str, kind: str = QUESTION) -> str:
        answer = self.answer_to_questions if kind == QUESTION else ""
        self.asked.append({"prompt": prompt, "kind": kind, "answer": answer})
        console = self._console or get_console()
        console.answered(prompt, f"> (auto) {answer or ('approved' if kind == APPROVAL else 'ok')}")
        return answer


Answer = Union[str, Callable[[str, str], str]]


class ScriptedInput(InputSource):
    """Answers from a queue: strings, or callables ``(prompt, kind) -> str``. Records every question in ``asked``."""

    def __init__(self, answers: Iterable[Answer] = (), interactive: bool = True, echo: bool = False):
        self.answers = deque(answers)
        self.asked: List[dict] = []
        self.interactive = interactive
        self.echo = echo

    def add(self, *answers: Answer) -> "ScriptedInput":
        self.answers.extend(answers)
        return self

    def ask(self, prompt: str, kind: str = QUESTION) -> str:
        if not self.answers:
            raise InputUnavailableError(
                f"the scripted input has no answer left for this {kind} request: {prompt[:300]!r}"
            )
        answer = self.answers.popleft()
        if callable(answer):
            answer = answer(prompt, kind)
        self.asked.append({"prompt": prompt, "kind": kind, "answer": answer})
        if self.echo:
            get_console().show("question", prompt)
            get_console().line("info", f"> {answer}")
        return answer


def get_input_source() -> InputSource:
    """Where the current run's answers come from (``current_run().input_source``)."""
    return current_run().input_source
