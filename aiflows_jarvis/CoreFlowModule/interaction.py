"""The user in the loop: what is shown (a console with a colour per role) and where answers come from (input sources).

Every human touch point of every flow goes through ``get_input_source().ask(prompt, kind)``:

* ``TerminalInput`` (the default): reads the terminal; a line holding only three double quotes starts and ends a
  multi-line answer;
* ``AutoApproveInput`` (``--yes``): approvals and feedback requests pass, questions get "Use your best judgement.";
* ``ScriptedInput``: a queue of answers, for tests and demos.

``kind`` tells the source what is asked: ``approval`` (an empty answer approves), ``feedback`` (an empty answer means
"looks good") or ``question`` (free text).

What is shown goes through the ``Console``, which cleans every text of escape sequences and control characters
(``terminal.clean_text``) before adding colours of its own, and never lets a print fail a run: characters the output
cannot encode are shown escaped (``\\u20ac``), and a closed output (``| head -1``) raises ``OutputClosed``.
"""
from __future__ import annotations

import builtins
import errno
import itertools
import os
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterable, List, NoReturn, Optional, Union

import colorama

from .errors import InputUnavailableError
from .terminal import clean_text

APPROVAL = "approval"
FEEDBACK = "feedback"
QUESTION = "question"
KINDS = (APPROVAL, FEEDBACK, QUESTION)

BEST_JUDGEMENT = "Use your best judgement."
_APPROVAL_WORDS = {
    "", "y", "yes", "ok", "okay", "lgtm", "approve", "approved", "accept", "accepted", "looks good", "good",
    "fine", "go", "go ahead", "continue", "sure", "yes please", "run", "run it", "do it", "ok run it", "good to go",
}


def is_approval(answer: Optional[str]) -> bool:
    """True if a user's answer approves (empty, 'y', 'ok', 'lgtm', 'approve', ...)."""
    if answer is None:
        return True
    return answer.strip().lower().rstrip(".!") in _APPROVAL_WORDS


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


class Console:
    """Prints what the flows do, one colour per role; colours only on a terminal and unless ``NO_COLOR`` is set.

    Every text is cleaned (``clean_text``) before the console's own colours are added, so what an LLM, a server or a
    file wrote cannot move the cursor, hide a line, set the title or write the clipboard. Printing never raises but
    ``OutputClosed``: what the stream's encoding cannot hold is escaped; once the output is closed, the next print
    raises ``OutputClosed`` and later ones are dropped.
    """

    def __init__(self, stream=None, color: Optional[bool] = None, spinner: Optional[bool] = None):
        self._stream = stream
        self._color = color
        self._spinner = spinner
        self._closed = False

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stdout

    def _isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except Exception:
            return False

    @property
    def color(self) -> bool:
        if self._color is not None:
            return self._color
        return self._isatty() and not os.environ.get("NO_COLOR")

    def style(self, role: str, text: str) -> str:
        """``text`` cleaned, in the colour of ``role`` (when colours are on)."""
        text = clean_text(str(text))
        if not self.color:
            return text
        return f"{_STYLES.get(role, '')}{text}{colorama.Style.RESET_ALL}"

    def show(self, role: str, title: str, body: Optional[str] = None) -> None:
        """A titled block: ``title`` on its own line, then ``body`` indented (if any)."""
        lines = [self.style(role, title)]
        if body:
            text = clean_text(str(body)).rstrip("\n")  # before splitting: a carriage return becomes a line of its own
            lines.extend(self.style(role if role != "flow" else "result", "    " + line) for line in text.split("\n"))
        self._emit("\n".join(lines) + "\n")

    def line(self, role: str, text: str) -> None:
        self._emit(self.style(role, text) + "\n")

    def write(self, text: str) -> None:
        """``text`` cleaned, then a line break."""
        self._emit(clean_text(str(text)) + "\n")

    def _emit(self, text: str) -> None:
        """Writes ``text`` (clean, colours added) as the stream's encoding allows; see the class for the failures."""
        if self._closed:
            return
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

    @contextmanager
    def working(self, label: str):
        """Shows a spinner with ``label`` while the body runs (on a terminal only)."""
        show = self._spinner if self._spinner is not None else self._isatty()
        if not show:
            yield
            return
        stop = threading.Event()
        label = " ".join(clean_text(label).split("\n"))  # the spinner's own CRs redraw one line

        def spin():
            started = time.monotonic()
            try:
                for frame in itertools.cycle("|/-\\"):
                    if stop.wait(0.12):
                        break
                    elapsed = time.monotonic() - started
                    self.stream.write(_encodable(f"\r{self.style('info', f'{frame} {label} ({elapsed:.0f}s)')}",
                                                 self.stream))
                    self.stream.flush()
                self.stream.write("\r" + " " * (len(label) + 16) + "\r")
                self.stream.flush()
            except (OSError, ValueError):  # the terminal is gone: the next print in the run says so
                pass

        thread = threading.Thread(target=spin, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=1)


_console: Optional[Console] = None


def get_console() -> Console:
    global _console
    if _console is None:
        _console = Console()
    return _console


def set_console(console: Optional[Console]) -> Optional[Console]:
    """Replace the console every flow prints to; returns the previous one."""
    global _console
    previous, _console = _console, console
    return previous


# ~~~ Input sources ~~~
class InputSource:
    """Where the user's answers come from."""

    #: False when no human is there to edit files or read long prompts (auto-approve).
    interactive: bool = True

    def ask(self, prompt: str, kind: str = QUESTION) -> str:
        raise NotImplementedError


# What a closed terminal says. A library user has no command line: the call to make. Jarvis's command line replaces
# it with its own option (set_closed_input_hint).
closed_input_hint = ("The flow needs your answer but the terminal input is closed. Run it in a terminal, or call "
                     "set_input_source(AutoApproveInput()) (both from aiflows_jarvis.CoreFlowModule) before calling "
                     "the flow, to approve plans and code automatically.")


def set_closed_input_hint(text: str) -> str:
    """Make ``text`` what a closed terminal says (a command line names its own option); returns the previous one."""
    global closed_input_hint
    previous, closed_input_hint = closed_input_hint, text
    return previous


class TerminalInput(InputSource):
    """Reads answers from the terminal. A line with only three double quotes starts and ends a multi-line answer."""

    MULTILINE_MARK = '"""'

    def __init__(self, read_line: Optional[Callable[[str], str]] = None, console: Optional[Console] = None):
        self._read_line = read_line
        self._console = console

    def _read(self, prompt: str) -> str:
        # `input` is looked up when called, not when the class is defined, so a replaced builtins.input is used.
        return (self._read_line or builtins.input)(prompt)

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
            raise InputUnavailableError(closed_input_hint) from None
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
        console.show("question", prompt)
        console.line("info", f"> (auto) {answer or ('approved' if kind == APPROVAL else 'no objection')}")
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


_input_source: Optional[InputSource] = None


def get_input_source() -> InputSource:
    global _input_source
    if _input_source is None:
        _input_source = TerminalInput()
    return _input_source


def set_input_source(source: Optional[InputSource]) -> Optional[InputSource]:
    """Make ``source`` the one every flow asks; returns the previous one (``None`` restores the terminal)."""
    global _input_source
    previous, _input_source = _input_source, source
    return previous


@contextmanager
def using_input_source(source: InputSource):
    previous = set_input_source(source)
    try:
        yield source
    finally:
        set_input_source(previous)
