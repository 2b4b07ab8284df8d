"""The user in the loop: input sources, approvals, reviews with the editor."""

from __future__ import annotations

import pytest

from aiflows_jarvis.CoreFlowModule import AutoApproveInput, RunContext, ScriptedInput, TerminalInput, is_approval
from aiflows_jarvis.CoreFlowModule.errors import InputUnavailableError
from aiflows_jarvis.HumanStandardInputFlowModule import HumanReviewFlow, HumanStandardInputFlow


@pytest.mark.parametrize("answer", ["", "  ", "y", "Yes", "ok", "LGTM", "approve", "looks good!"])
def test_approvals(answer):
    assert is_approval(answer)


@pytest.mark.parametrize("answer", ["no", "add a step", "e", "use pandas instead"])
def test_not_approvals(answer):
    assert not is_approval(answer)


def test_the_terminal_reads_one_line_or_a_triple_quoted_block(quiet_console):
    lines = iter(["  fine  ", '"""', "line one", "", "line three", '"""'])
    terminal = TerminalInput(read_line=lambda prompt: next(lines))
    assert terminal.ask("Question?") == "fine"
    assert terminal.ask("Question?") == "line one\n\nline three"
    assert "Question?" in quiet_console.text


def test_a_closed_terminal_says_what_to_do():
    """A library user is told the call to make; run_jarvis.py sets its own option (--yes) instead."""

    def closed(prompt):
        raise EOFError

    with pytest.raises(
        InputUnavailableError, match=r"`with RunContext\(input_source=AutoApproveInput\(\)\):`"
    ) as error:
        TerminalInput(read_line=closed).ask("Question?")
    assert "--yes" not in str(error.value) and "Jarvis" not in str(error.value)
    with RunContext(closed_input_hint="pass --yes"):
        with pytest.raises(InputUnavailableError, match="^pass --yes$"):
            TerminalInput(read_line=closed).ask("Question?")


def test_auto_approve_approves_and_answers_questions_with_best_judgement(quiet_console):
    auto = AutoApproveInput()
    assert auto.ask("Approve?", kind="approval") == ""
    assert auto.ask("Feedback?", kind="feedback") == ""
    assert auto.ask("Which file?", kind="question") == "Use your best judgement."
    assert "(auto)" in quiet_console.text


def test_scripted_input_fails_clearly_when_it_runs_out():
    with pytest.raises(InputUnavailableError, match="no answer left .*'What now\\?'"):
        ScriptedInput().ask("What now?")


def test_human_standard_input_flow_renders_its_template_and_returns_the_answer(user):
    user.add("blue")
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    assert flow.run({"question": "Favourite colour?"}) == {"human_input": "blue"}
    assert user.asked == [{"prompt": "Favourite colour?", "kind": "question", "answer": "blue"}]


def review(**overrides):
    return HumanReviewFlow.instantiate_from_default_config(content_key="plan", **overrides)


def test_the_user_edits_the_draft_in_the_editor_then_approves(user, fake_editor, monkeypatch, quiet_console):
    monkeypatch.setenv("FAKE_EDITOR_REPLACE", "2. b=>2. better b")
    user.add("e", "")
    out = review().run({"plan": "1. a\n2. b"})
    assert out == {"plan": "1. a\n2. better b", "feedback": "", "approved": True, "edited": True}
    assert len(fake_editor.read_text().splitlines()) == 1, "the editor ran once"
    assert "Your edited version" in quiet_console.text and "or 'e' to edit" in user.asked[0]["prompt"]


def test_a_comment_is_returned_as_feedback(user, fake_editor):
    user.add("add a testing step")
    out = review().run({"plan": "1. a"})
    assert out == {"plan": "1. a", "feedback": "add a testing step", "approved": False, "edited": False}


def test_a_failing_editor_keeps_the_draft_and_asks_again(user, fake_editor, monkeypatch, quiet_console):
    monkeypatch.setenv("FAKE_EDITOR_WRITE", "garbage")
    monkeypatch.setenv("FAKE_EDITOR_EXIT", "3")
    user.add("e", "ok")
    out = review().run({"plan": "1. a"})
    assert out["plan"] == "1. a" and out["approved"] and not out["edited"]
    assert "exited with code 3" in quiet_console.text


def test_auto_approve_never_opens_the_editor(fake_editor, monkeypatch, quiet_console, run_context):
    run_context.input_source = AutoApproveInput()
    out = review(open_editor="auto").run({"plan": "1. a"})
    assert out["approved"] and not fake_editor.exists(), "no editor in auto-approve mode"


def test_open_editor_auto_opens_it_before_asking(user, fake_editor, monkeypatch):
    monkeypatch.setenv("FAKE_EDITOR_APPEND", "\n2. b")
    user.add("")
    out = review(open_editor="auto").run({"plan": "1. a"})
    assert out["plan"] == "1. a\n2. b" and out["edited"]


def test_an_editor_open_when_jarvis_ends_is_asked_to_quit_not_killed(tmp_path):
    """A terminal editor killed outright leaves the terminal in raw mode; asked to quit, it restores it."""
    import signal
    import sys
    import threading

    from aiflows_jarvis.HumanStandardInputFlowModule.editor import edit_file

    draft = tmp_path / "plan.txt"
    draft.write_text("1. a\n")
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import signal, sys, time\n"
        "def quit(*_):\n"
        "    open(sys.argv[1] + '.restored', 'w').write('terminal restored')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, quit)\n"
        "open(sys.argv[1] + '.started', 'w').close()\n"
        "time.sleep(60)\n"
    )
    ending = lambda *_: (_ for _ in ()).throw(SystemExit(143))  # noqa: E731 - what run_jarvis's SIGTERM handler does
    previous = signal.signal(signal.SIGUSR1, ending)
    started = tmp_path / "plan.txt.started"

    def end_jarvis_once_the_editor_runs():
        while not started.exists():
            threading.Event().wait(0.05)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    threading.Thread(target=end_jarvis_once_the_editor_runs, daemon=True).start()
    try:
        with pytest.raises(SystemExit):
            edit_file(str(draft), configured=f"{sys.executable} {editor}")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert (tmp_path / "plan.txt.restored").read_text() == "terminal restored", "the editor got SIGTERM, not SIGKILL"


def test_a_goal_of_a_megabyte_is_shown_folded_as_long_arguments_are():
    import io

    from aiflows_jarvis.CoreFlowModule import Console

    out = io.StringIO()
    goal = "Summarise this: " + "lorem ipsum " * 90_000  # 1 MB
    Console(stream=out, color=False).show("flow", "Jarvis's goal:", goal, folded=10)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Jarvis's goal:" and len(lines) == 12 and len(out.getvalue()) < 2000, out.getvalue()[:3000]
    assert lines[-1] == f"    ... {len(goal) - len(' '.join(line.strip() for line in lines[1:-1]))} more characters"
    short = io.StringIO()
    Console(stream=short, color=False).show("flow", "Jarvis's goal:", "Plot y = x^2", folded=10)
    assert short.getvalue() == "Jarvis's goal:\n    Plot y = x^2\n"


def test_a_long_query_is_not_echoed_whole(tmp_path, run_context):
    import io

    from aiflows_jarvis.CoreFlowModule import Console
    from aiflows_jarvis.MemoryReadingFlowModule import MemorySearchAtomicFlow

    library = tmp_path / "library.py"
    library.write_text('def lorem():\n    """Lorem ipsum."""\n    return 1\n')
    out = io.StringIO()
    run_context.console = Console(stream=out, color=False)
    search = MemorySearchAtomicFlow.instantiate_from_default_config(name="search_library", memory="code_library")
    query = "lorem ipsum " * 3_500  # 40 KB
    result = search.run({"query": query, "memory_files": {"code_library": str(library)}})["result"]
    assert len(out.getvalue()) < 1000, out.getvalue()[:2000]
    assert len(result.split("\n", 1)[0]) < 1000, "the result does not quote 40 KB back either"


def test_a_text_one_line_over_the_fold_is_shown_whole_not_with_a_count_as_long_as_that_line():
    from aiflows_jarvis.CoreFlowModule.console.interaction import fold, is_folded

    four = "line one\nline two\nline three\nline four"
    assert fold(four, 80, lines=3) == four.split("\n"), "the count would take the line the rest fits in"
    five = four + "\nline five"
    assert is_folded(fold(five, 80, lines=3), 3) and fold(five, 80, lines=3)[-1].startswith("... 20 more characters")
