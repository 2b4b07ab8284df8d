"""What the user sees (issue 14): the demo through a pseudo-terminal and piped, the status line while a slow call
runs, --stream, --plain. The terminal's own escape sequences (colours, rich's highlighting) are removed before the
text is read; the checks are on what is left."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios

import pytest
from helpers import DEMO, DEMO_CALLS, KEYS, RUN_JARVIS, run_jarvis
from loopback_llm import LoopbackLLMServer, Slow
from subprocess_guard import network_guarded

from aiflows_jarvis.ChatFlowModule import Transcript

COLUMNS = 100
_OURS = re.compile(r"\x1b\[[0-9;]*m")  # the console's colours: the only sequences it writes


class Terminal:
    """run_jarvis.py on a pseudo-terminal of COLUMNS columns; ``read_until`` collects its output."""

    def __init__(self, cwd, *args, columns=COLUMNS, env_extra=None):
        env = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith("FAKE_EDITOR")}
        for name in ("NO_COLOR", "VISUAL", "EDITOR"):
            env.pop(name, None)
        env["TERM"] = "xterm"
        env.update(env_extra or {})
        self._guard = network_guarded(env)
        guarded = self._guard.__enter__()
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        # a session of its own whose controlling terminal is the pseudo-terminal: Ctrl+C typed there is a SIGINT
        self.process = subprocess.Popen(
            [sys.executable, RUN_JARVIS, *args],
            cwd=cwd,
            env=guarded,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.raw = b""

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def read_until(self, predicate, limit=240.0) -> bool:
        """Read until ``predicate(text so far)`` or the end of the output; ``limit`` only bounds a hung run."""
        while not predicate(self.text):
            ready, _, _ = select.select([self.master], [], [], limit)
            if not ready:
                return False
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the child closed the terminal
                return predicate(self.text)
            if not chunk:
                return predicate(self.text)
            self.raw += chunk
        return True

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def close(self, stop: bool = False) -> int:
        """The exit code, once the output is read to its end; ``stop``: SIGTERM first."""
        if stop and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.read_until(lambda _: False, limit=60)
        if self.process.poll() is None:  # a test that failed half-way: nothing is left running
            self.process.kill()
        code = self.process.wait(timeout=60)
        os.close(self.master)
        self._guard.__exit__(None, None, None)
        return code


def screen_lines(raw: str):
    """The lines as the terminal shows them: our colours out, a carriage return starting the line over."""
    plain = _OURS.sub("", raw).replace("\r\n", "\n")
    return [line.split("\r")[-1] for line in plain.split("\n")]


def demo_answer() -> str:
    return next(json.loads(r) for r in Transcript.load(DEMO).replies() if '"final_answer"' in r)["command_args"][
        "answer"
    ]


def check_conversation(lines, width=None):
    text = "\n".join(lines)
    assert "\x1b" not in text, "no escape sequence but the console's colours"
    steps = [i for i, line in enumerate(lines) if " > " in line and line.lstrip().startswith("Jarvis")]
    assert "Jarvis > Coder > ExtendLibrary > write_code" in text and "CtrlExMem" not in text
    for i in steps:  # a step's arguments: real line breaks, never escapes
        for line in lines[i + 1 : i + 6]:
            assert "\\n" not in line, line
    assert text.count(" ".join(demo_answer().split()[:12])) == 1, "the final answer is shown once"
    assert "starts on:" not in text and "Plan: Enter" not in text and "Code: Enter" not in text, "one heading a review"
    assert "context window" not in text, "a replay has no model whose context window to set"
    assert text.count("assert growth_rates([80, 100]) == [25.0]") == 1, "the proposed tests are shown once"
    assert len(re.findall(rf"^ *total +{DEMO_CALLS} +~", text, re.M)) == 1, "the usage table's rows are whole"
    check_nothing_twice(lines)
    if width:
        assert max(len(line) for line in lines) <= width, max(lines, key=len)
        check_code_is_cut_not_wrapped(lines)
    if width == 80:
        assert len(lines) <= 200, f"the demo's screen is {len(lines)} lines at 80 columns"


def demo_code() -> list:
    """The lines of the code the demo writes (the code generator's replies, in their fences)."""
    replies = [r for r in Transcript.load(DEMO).replies() if r.startswith("```python\n")]
    return [line for reply in replies for line in reply.split("```python\n", 1)[1].split("```")[0].split("\n")]


def check_code_is_cut_not_wrapped(lines):
    """Code under review: each line shown is a line of the code, or its start cut with a marker; never a piece of
    a line wrapped onto the next (`0")` under `raise ValueError("cannot measure growth from a value of`)."""
    code = [line.strip() for line in demo_code() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.strip() == "Code:")
    end = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("Enter to approve"))
    shown = [line.strip() for line in lines[start + 1 : end] if line.strip()]
    assert any(line.endswith("\u2026") for line in shown), "a long line is cut, with a marker"
    for line in shown:
        whole = line.removesuffix("\u2026")
        assert any(c == whole or (line != whole and c.startswith(whole)) for c in code), (
            f"not a line of the code: {line}"
        )
    heading = next(i for i, line in enumerate(lines) if line.strip() == "Proposed tests:")
    indent = len(lines[heading]) - len(lines[heading].lstrip())
    assert lines[heading + 1].startswith(" " * (indent + 4) + "assert"), "the tests are indented as code is"


def check_nothing_twice(lines):
    """What the screen says once: a goal is not shown folded and then whole, a summary not after what it sums up, a
    step not as its own child, a path in one form."""
    text = "\n".join(lines)
    words = " ".join(text.split())
    assert "(as above)" not in text and "write_code > write_code" not in text
    assert words.count("(1) Add to the code library a reusable function") == 1, "Coder's goal, shown once"
    assert "it now defines" not in words, "ExtendLibrary's summary repeats the line that says what was saved"
    assert "The tests passed and the user accepted the code" not in words, "the review said it"
    assert "Generated code may use" not in text, "the memory limit is not news at every start"
    assert re.search(r"^ *Saved growth_rates in memory/library/data\.py\.$", text, re.M), "one path form"


@pytest.mark.parametrize("columns", [80, COLUMNS])
def test_the_demo_through_a_pseudo_terminal_reads_like_a_conversation(tmp_path, columns):
    terminal = Terminal(tmp_path, "--demo", columns=columns)
    try:
        assert terminal.read_until(lambda text: "Run report:" in text)
    finally:
        code = terminal.close()
    assert code == 0, terminal.text[-3000:]
    lines = screen_lines(terminal.text)
    check_conversation(lines, width=columns)
    assert "\x1b[" in terminal.text, "colours and highlighting on a terminal"
    assert "      Jarvis > Coder > ExtendLibrary > write_code > test" in lines, "indented by depth"


def test_the_demo_piped_and_with_plain_is_plain_text(tmp_path):
    piped = run_jarvis(tmp_path, "--demo")
    assert piped.returncode == 0, piped.stdout[-3000:]
    check_conversation(piped.stdout.split("\n"))
    (tmp_path / "plain").mkdir()
    plain = Terminal(tmp_path / "plain", "--demo", "--plain")
    try:
        assert plain.read_until(lambda text: "Run report:" in text)
    finally:
        assert plain.close() == 0
    # (colorama, which a dependency initialises, resets the terminal's style at exit: its one sequence, not ours)
    assert "\x1b" not in plain.text.removesuffix("\x1b[0m"), "--plain: no colours on a terminal either"
    check_conversation(screen_lines(plain.text))


def test_a_status_line_shows_while_a_slow_call_runs_and_stream_counts_tokens(tmp_path):
    demo = Transcript.load(DEMO)
    with LoopbackLLMServer(replies=[Slow(None, demo.replies()[0])]) as server:
        terminal = Terminal(tmp_path, "--api-base", server.url, "--yes", demo.header["goal"])
        try:
            assert terminal.read_until(
                lambda text: re.search(
                    r"Jarvis > Planner > PlanGenerator: waiting for the "
                    r"LLM \([1-9]\d*s\)",
                    text,
                )
            ), terminal.text[-2000:]
        finally:
            assert terminal.close(stop=True) == 143, "SIGTERM ends the run"
    with LoopbackLLMServer(replies=demo.replies()) as server:
        (tmp_path / "streamed").mkdir()
        terminal = Terminal(tmp_path / "streamed", "--api-base", server.url, "--yes", "--stream", demo.header["goal"])
        try:
            assert terminal.read_until(lambda text: "Run report:" in text), terminal.text[-3000:]
        finally:
            assert terminal.close() == 0, terminal.text[-3000:]
        assert all(request["json"].get("stream") for request in server.requests)
    shown = _OURS.sub("", terminal.text)
    # a slow call shows its token count in the status line; a quick one was echoed as written (the reply's own
    # fence is shown only so), piece by piece
    assert "tokens so far" in terminal.text or "```python\r\ndef growth_rates" in shown, shown[-3000:]
    first_plan = demo.replies()[0].split("\n")[0]
    assert shown.index(first_plan[:60]) < shown.index("Plan:\r\n"), "the plan shown as written, before its review"
    assert f"{DEMO_CALLS} LLM calls" in terminal.text, "usage is counted with streams too"


def test_reviews_the_editor_and_ctrl_c_work_through_a_pseudo_terminal(tmp_path):
    editor = tmp_path / "editor.sh"  # an editor that rewrites the plan it is given
    editor.write_text("#!/bin/sh\nprintf '1. Compute the growth rates, edited in the editor.\\n' > \"$1\"\n")
    editor.chmod(0o755)
    demo = Transcript.load(DEMO)
    (tmp_path / "work").mkdir()

    def reviews(text):
        return text.count("Enter to approve")

    with LoopbackLLMServer(replies=demo.replies()) as server:
        terminal = Terminal(
            tmp_path / "work",
            "--api-base",
            server.url,
            "--memory-dir",
            str(tmp_path / "memory"),
            demo.header["goal"],
            env_extra={"EDITOR": str(editor)},
        )
        try:
            assert terminal.read_until(lambda text: reviews(text) == 1 and text.endswith("> \x1b[0m")), terminal.text[
                -2000:
            ]
            assert "'e' to edit it in" in terminal.text and f"{editor.name}." in terminal.text
            terminal.type("e\n")
            assert terminal.read_until(lambda text: reviews(text) == 2 and text.endswith("> \x1b[0m")), terminal.text[
                -2000:
            ]
            edited = screen_lines(terminal.text)
            assert "> e" in edited, "what the user types is echoed"
            assert "Your edited version:" in edited[-5] and "edited in the editor." in edited[-4], edited[-6:]
            terminal.type("\n")  # Enter: the edited plan is approved, Jarvis goes on with it
            assert terminal.read_until(lambda text: reviews(text) == 3 and text.endswith("> \x1b[0m")), terminal.text[
                -2000:
            ]
            plan = (tmp_path / "memory" / "plan_jarvis.txt").read_text()
            assert "edited in the editor." in plan, plan
            assert "edited in the editor." in server.requests[1]["json"]["messages"][1]["content"], (
                "the controller works from the plan as edited"
            )
            requests = len(server.requests)
            terminal.type("\x03")  # Ctrl+C at Coder's plan review: what should be done instead?
            assert terminal.read_until(lambda text: "(Enter to stop" in text and text.endswith("> \x1b[0m")), (
                terminal.text[-2000:]
            )
            assert "Interrupted `write_plan` (in Jarvis > Coder > Planner)." in "\n".join(screen_lines(terminal.text))
            terminal.type("\n")  # nothing: stop the whole run
        finally:
            code = terminal.close()
    assert code == 130, terminal.text[-3000:]
    lines = screen_lines(terminal.text)
    assert "Traceback" not in terminal.text, "\n".join(lines)
    stopped = [i for i, line in enumerate(lines) if line.strip().startswith("Stopped. Plans, logs and the library")]
    assert stopped and f"{tmp_path / 'memory'};" in lines[stopped[0] + 1], "\n".join(lines[-30:])
    assert len(server.requests) == requests, "nothing more was asked of the LLM"
    assert max(len(line) for line in lines) <= COLUMNS
