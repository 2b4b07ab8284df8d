"""Bad input at start is refused with a message that says what was wrong and what to do, exit code 2, before anything
in the memory folder is moved: a configuration whose `_target_` does not build a flow, a goal that is not UTF-8 text
(from the command line or from the run --resume continues), a --replay file that is not a transcript, a trace file
named by JARVIS_TRACE that cannot be written. And --resume does not read its run file through a link."""

from __future__ import annotations

import json
import os

import pytest
from helpers import NO_SERVER, ROOT, assert_refused_at_start, run_jarvis

from aiflows_jarvis.app import launcher
from aiflows_jarvis.ChatFlowModule import Transcript
from aiflows_jarvis.ChatFlowModule.transcripts import UnreadableTranscript
from aiflows_jarvis.CoreFlowModule import BadInputError, TranscriptError

JARVIS = "aiflows_jarvis.JarvisFlowModule.JarvisFlow.instantiate_from_default_config"


@pytest.fixture
def memory(tmp_path):
    """A memory folder holding the plan of an earlier run, which a refused run must leave where it is."""
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "plan_jarvis.txt").write_text("1. the earlier run's plan\n")
    return folder


# ~~~ A configuration whose `_target_` is not a flow ~~~
@pytest.mark.parametrize(
    "target, says",
    [
        ("os.getcwd", "names os.getcwd, a function, not a flow"),
        ("collections.OrderedDict", "names collections.OrderedDict, a class that is not a flow"),
        ("aiflows.base_flows.AtomicFlow", "write aiflows.base_flows.AtomicFlow.instantiate_from_default_config"),
        ("no_such_package.Flow", "names no_such_package.Flow, which cannot be imported (No module named"),
        (42, "is 42, not the dotted name of a flow"),
    ],
)
def test_a_target_that_does_not_build_a_flow_is_named_with_its_key(target, says):
    config = {"flow": {"_target_": JARVIS, "subflows_config": {"Planner": {"_target_": target}}}}
    with pytest.raises(BadInputError) as refused:
        launcher.check_flow_targets(config, "my.yaml")
    message = str(refused.value)
    assert message.startswith("my.yaml: `flow.subflows_config.Planner._target_` (the flow Jarvis/Planner) ")
    assert says in message and "instantiate_from_default_config" in message


def test_the_shipped_configuration_and_relative_targets_pass_the_check():
    launcher.check_flow_targets(launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml")))
    launcher.check_flow_targets(
        {
            "flow": {
                "_target_": JARVIS,
                "subflows_config": {"CtrlExMem": {"_target_": ".CtrlExMemFlow.instantiate_from_default_config"}},
            }
        }
    )


@pytest.mark.parametrize("where", ["root", "subflow"])
def test_run_jarvis_refuses_a_configuration_whose_target_is_not_a_flow(tmp_path, memory, where):
    if where == "root":
        flow = "  _target_: collections.OrderedDict\n  name: Jarvis\n"
        key = "`flow._target_` (the flow Jarvis)"
    else:
        flow = f"  _target_: {JARVIS}\n  name: Jarvis\n  subflows_config:\n    Planner:\n      _target_: os.getcwd\n"
        key = "`flow.subflows_config.Planner._target_` (the flow Jarvis/Planner)"
    (tmp_path / "mine.yaml").write_text(f"flow:\n{flow}")
    done = run_jarvis(tmp_path, "--config", "mine.yaml", *NO_SERVER, "a goal")
    assert_refused_at_start(done, memory, f"mine.yaml: {key}")
    assert not (memory / "jarvis_run.json").exists()


# ~~~ A goal that is not UTF-8 text ~~~
def test_a_goal_with_bytes_that_are_not_utf8_is_refused_at_start(tmp_path, memory):
    # bash's $'\xff\xfe' reaches Python (UTF-8 locale) as the lone surrogates '\udcff\udcfe'
    done = run_jarvis(tmp_path, *NO_SERVER, "plot the data \udcff\udcfe now")
    assert_refused_at_start(done, memory, 'The goal is not valid UTF-8 text: "plot the data \\xff\\xfe now"')
    assert "from character 15 on" in done.stdout
    assert not (memory / "jarvis_run.json").exists(), "no run was started"


def test_a_goal_of_blanks_is_no_goal(tmp_path):
    done = run_jarvis(tmp_path, *NO_SERVER, "   ")
    assert done.returncode == 2 and "give a goal" in done.stderr


def test_resume_refuses_a_run_file_whose_goal_is_not_utf8(tmp_path, memory):
    # written by a run started before goals were checked: json.dumps keeps a lone surrogate as "\udcff"
    (memory / "jarvis_run.json").write_text(json.dumps({"goal": "plot \udcff", "model": None}))
    done = run_jarvis(tmp_path, "--resume", *NO_SERVER)
    assert_refused_at_start(
        done, memory, f"The goal in {memory / 'jarvis_run.json'} (the run --resume continues) is not valid UTF-8 text"
    )


def test_check_text_says_what_is_wrong():
    assert launcher.check_text("The goal", "plot é, 日本, 🎉") is None
    assert "is not text (it is int 5)" in launcher.check_text("The goal", 5)
    problem = launcher.check_text("--model", "m\udc80x\ud800")
    assert problem.startswith(
        '--model is not valid UTF-8 text: "m\\x80x\\ud800" has bytes that are not UTF-8 from character 2 on'
    )


# ~~~ A --replay file that is not a transcript ~~~
def test_a_binary_replay_file_is_refused_naming_the_file_and_what_a_transcript_is(tmp_path, memory):
    (tmp_path / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    done = run_jarvis(tmp_path, "--replay", "picture.png")
    assert_refused_at_start(done, memory, "picture.png is not a transcript: line 1 is not UTF-8 text")
    assert "A transcript is the JSON-lines file a recording run (`--record FILE`" in done.stdout


@pytest.mark.parametrize(
    "content, says",
    [
        (b"[1, 2]\n", "line 1 is neither a header nor an llm record"),
        (b'{"type": "header"}\n{"type": "llm", "flow": 3, "reply": "x"}\n', "line 2 is neither a header nor an llm"),
        (b'{"type": "llm", "flow": "f", "reply": "x", "messages": ["hi"]}\n', "line 1 is neither"),
        (b'{"type": "header"}\n\n{"type": "llm", ', "line 3 is not valid JSON"),
        (b"[" * 100_000 + b"\n", "line 1 is not valid JSON"),
    ],
)
def test_a_file_that_is_not_a_transcript_says_which_line(tmp_path, content, says):
    (tmp_path / "t.jsonl").write_bytes(content)
    with pytest.raises(UnreadableTranscript, match="is not a transcript") as refused:
        Transcript.load(str(tmp_path / "t.jsonl"))
    assert says in str(refused.value)
    assert isinstance(refused.value, TranscriptError) and isinstance(refused.value, BadInputError)


def test_a_missing_transcript_or_a_folder_is_named(tmp_path):
    with pytest.raises(UnreadableTranscript, match="it is a folder"):
        Transcript.load(str(tmp_path))
    with pytest.raises(UnreadableTranscript, match="it does not exist"):
        Transcript.load(str(tmp_path / "none.jsonl"))


# ~~~ --resume and links; JARVIS_TRACE ~~~
def test_resume_does_not_read_its_run_file_through_a_link(tmp_path, memory):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"goal": "a goal planted outside the memory folder"}))
    (memory / "jarvis_run.json").symlink_to(elsewhere)
    (tmp_path / "empty.jsonl").write_text('{"type": "header"}\n')  # no LLM call could be answered
    done = run_jarvis(tmp_path, "--resume", "--replay", "empty.jsonl")
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "is a symbolic link" in out and "does not follow links" in out, out[-3000:]
    assert "planted" not in out, "the goal behind the link was not read"
    assert "Traceback" not in out
    assert (memory / "jarvis_run.json").is_symlink() and "planted" in elsewhere.read_text(), "both left as they were"


def test_a_jarvis_trace_file_that_cannot_be_written_is_refused_before_anything_is_archived(
    tmp_path, memory, monkeypatch
):
    (tmp_path / "a_file").write_text("not a folder")
    monkeypatch.setenv("JARVIS_TRACE", str(tmp_path / "a_file" / "trace.jsonl"))
    done = run_jarvis(tmp_path, *NO_SERVER, "a goal")
    assert_refused_at_start(
        done,
        memory,
        f"The JARVIS_TRACE file {tmp_path / 'a_file' / 'trace.jsonl'} cannot be "
        f"written: {tmp_path / 'a_file'} is not a folder.",
    )


def test_a_jarvis_trace_link_in_the_memory_folder_is_refused(tmp_path, memory, monkeypatch):
    target = tmp_path / "bashrc"
    target.write_text("export PATH=/usr/bin\n")
    (memory / "trace.jsonl").symlink_to(target)
    monkeypatch.setenv("JARVIS_TRACE", str(memory / "trace.jsonl"))
    done = run_jarvis(tmp_path, *NO_SERVER, "a goal")
    assert_refused_at_start(done, memory, "is a symbolic link in the memory folder")
    assert target.read_text() == "export PATH=/usr/bin\n"
