"""What the user sees (issue 14): the demo through a pseudo-terminal and piped, the status line while a slow call
runs, --stream, --plain. The terminal's own escape sequences (colours, rich's highlighting) are removed before the
text is read; the checks are on what is left."""
from __future__ import annotations

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
import fcntl

from loopback_llm import LoopbackLLMServer, Slow
from subprocess_guard import network_guarded
from test_cli import DEMO, KEYS, RUN_JARVIS, run_jarvis
from flow_modules.aiflows.ChatFlowModule import Transcript

COLUMNS = 100
_OURS = re.compile(r"\x1b\[[0-9;]*m")  # the console's colours: the only sequences it writes


class Terminal:
    """run_jarvis.py on a pseudo-terminal of COLUMNS columns; ``read_until`` collects its output."""

    def __init__(self, cwd, *args, columns=COLUMNS):
        env = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith("FAKE_EDITOR")}
        env.pop("NO_COLOR", None)
        env["TERM"] = "xterm"
        self._guard = network_guarded(env)
        guarded = self._guard.__enter__()
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        self.process = subprocess.Popen([sys.executable, RUN_JARVIS, *args], cwd=cwd, env=guarded, stdin=slave,
                                        stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.raw = b""

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
    return json.loads(Transcript.load(DEMO).replies()[-2])["command_args"]["answer"]


def check_conversation(lines, width=None):
    text = "\n".join(lines)
    assert "\x1b" not in text, "no escape sequence but the console's colours"
    steps = [i for i, line in enumerate(lines) if " > " in line and line.lstrip().startswith("Jarvis")]
    assert "Jarvis > Coder > ExtendLibrary > write_code" in text and "CtrlExMem" not in text
    for i in steps:  # a step's arguments: real line breaks, never escapes
        for line in lines[i + 1:i + 6]:
            assert "\\n" not in line, line
    assert text.count(" ".join(demo_answer().split()[:12])) == 1, "the final answer is shown once"
    assert "starts on:" not in text and "Plan: Enter" not in text and "Code: Enter" not in text, "one heading a review"
    if width:
        assert max(len(line) for line in lines) <= width, max(lines, key=len)


def test_the_demo_through_a_pseudo_terminal_reads_like_a_conversation(tmp_path):
    terminal = Terminal(tmp_path, "--demo")
    try:
        assert terminal.read_until(lambda text: "Run report:" in text)
    finally:
        code = terminal.close()
    assert code == 0, terminal.text[-3000:]
    lines = screen_lines(terminal.text)
    check_conversation(lines, width=COLUMNS)
    assert "\x1b[" in terminal.text, "colours and highlighting on a terminal"
    assert "  Jarvis > Coder > ExtendLibrary > save_code" in lines[[i for i, l in enumerate(lines)
                                                                   if "save_code" in l][0]], "indented by depth"


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
    with LoopbackLLMServer(replies=[Slow(60, demo.replies()[0])]) as server:
        terminal = Terminal(tmp_path, "--api-base", server.url, "--yes", demo.header["goal"])
        try:
            assert terminal.read_until(lambda text: re.search(r"Jarvis > Planner > PlanGenerator: waiting for the "
                                                              r"LLM \([1-9]\d*s\)", text)), terminal.text[-2000:]
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
    assert "tokens so far" in terminal.text or "def growth_rates" in terminal.text
    first_plan = demo.replies()[0].split("\n")[0]
    shown = _OURS.sub("", terminal.text)
    assert shown.index(first_plan[:60]) < shown.index("Plan:\r\n"), "the plan shown as written, before its review"
    assert "29 LLM calls" in terminal.text, "usage is counted with streams too"
