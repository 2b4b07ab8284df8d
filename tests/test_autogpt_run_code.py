"""AutoGPT's optional `run_code` branch (the Interpreter): off unless turned on; through run_autogpt.py against the
loopback server (controller and embeddings), the code's output is the observation in the controller's next prompt,
the kernel runs in the folder the command is run from, and it is shut down however the run ends (finished, failed,
Ctrl+C, a signal)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal

import pytest
from fakes import command, last_user_message
from helpers import ROOT, kernels_in, pid_gone, run_until
from loopback_llm import HTTPError, LoopbackLLMServer, Slow
from waiting import eventually

from aiflows_jarvis.app import autogpt as run_autogpt
from aiflows_jarvis.AutoGPTFlowModule import AutoGPTFlow

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec("chromadb") and importlib.util.find_spec("langchain_community")),
    reason='AutoGPT needs its extra: pip install -e ".[autogpt]"',
)

GOAL = "How many files are in this folder?"
# Prints the kernel's PID (to check it is gone after the run) and working folder, and keeps a variable.
FIRST = "import os\nfiles = sorted(os.listdir('.'))\nprint('kernel', os.getpid(), os.getcwd(), 'files:', files)"
SECOND = "print('still defined:', files)"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The folder the user runs run_autogpt.py from, with one file of theirs."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the user's file")
    monkeypatch.chdir(work)
    return work


def controller_prompts(server):
    return [r["messages"] for r in server.requests if r["messages"]]


def kernel_pid(prompt_messages) -> int:
    observation = last_user_message(prompt_messages)
    return int(observation.split("kernel ", 1)[1].split()[0])


def autogpt(server, tmp_path, *args):
    return run_autogpt.main(["--api-base", server.url, "--memory-dir", str(tmp_path / "memory"), *args])


def test_run_code_is_off_unless_turned_on_and_then_a_command_with_its_branch(scripted_llm):
    for run_code, expected in (
        (False, {"wiki_search", "ddg_search"}),
        (True, {"wiki_search", "ddg_search", "run_code"}),
    ):
        flow = AutoGPTFlow.instantiate_from_default_config(run_code=run_code)
        commands = {c.name for c in flow.subflows["Controller"].commands}
        assert set(flow.subflows["Executor"].subflows) == expected | {"tools"}, f"run_code: {run_code}"
        assert commands == expected | {"finish"}, (
            "the controller offers exactly the branches the executor has "
            "(tools: the branch of the run's MCP tools, offered when listed)"
        )
    run_code = next(c for c in flow.subflows["Controller"].commands if c.name == "run_code")
    assert run_code.input_args == ["language", "code"]
    assert flow.subflows["Executor"].subflows["run_code"].workspace == os.getcwd(), "the folder it is run from"


def test_run_code_output_is_the_next_observation_and_the_kernel_ends_with_the_run(
    loopback, tmp_path, folder, user, quiet_console
):
    loopback.add(
        command("run_code", language="python", code=FIRST),
        command("run_code", language="python", code=SECOND),
        command("finish", answer="One file: notes.txt"),
    )
    user.add("", "")
    transcript = tmp_path / "run.jsonl"
    assert autogpt(loopback, tmp_path, "--run-code", "--record", str(transcript), GOAL) == 0, quiet_console.text[-3000:]

    prompts = controller_prompts(loopback)
    assert len(prompts) == 3
    assert "run_code" in prompts[0][0]["content"], "the controller's prompt lists the command"
    first = last_user_message(prompts[1])
    assert first.startswith("Here is the observation of your previous command:\nkernel "), first
    assert f"{folder} files: ['notes.txt']" in first, "the code ran in the folder run_autogpt.py was run from"
    assert "still defined: ['notes.txt']" in last_user_message(prompts[2]), "one Python session for the run"
    assert f"runs in {folder}" in quiet_console.text, "the user is told where the code runs"
    assert pid_gone(kernel_pid(prompts[1])), "the kernel was shut down at the end of the run"
    assert eventually(lambda: kernels_in(folder) == [os.getpid()]), (
        f"no process of the run is left in the folder (but pytest): {kernels_in(folder)}"
    )


def test_a_recording_made_with_run_code_replays_with_it(loopback, tmp_path, folder, user, quiet_console):
    loopback.add(
        command("run_code", language="bash", code="echo $((6 * 7)) > answer.txt && cat answer.txt"),
        command("finish", answer="42"),
    )
    user.add("")
    transcript = tmp_path / "run.jsonl"
    assert autogpt(loopback, tmp_path, "--run-code", "--record", str(transcript), GOAL) == 0, quiet_console.text[-3000:]
    assert "observation of your previous command:\n42" in last_user_message(controller_prompts(loopback)[1])
    assert json.loads(transcript.read_text().splitlines()[0])["run_code"] is True
    (folder / "answer.txt").unlink()

    user.add("")  # no --run-code: the recording's header says it; the code runs again, for real
    assert run_autogpt.main(["--replay", str(transcript), "--memory-dir", str(tmp_path / "replay")]) == 0, (
        quiet_console.text[-3000:]
    )
    assert (folder / "answer.txt").read_text() == "42\n"
    assert eventually(lambda: kernels_in(folder) == [os.getpid()]), (
        f"no process of the runs is left in the folder (but pytest): {kernels_in(folder)}"
    )


def test_a_failed_run_shuts_the_kernel_down(loopback, tmp_path, folder, user, quiet_console):
    loopback.add(command("run_code", language="python", code=FIRST), HTTPError(401, "key revoked"))
    user.add("")
    assert autogpt(loopback, tmp_path, "--run-code", GOAL) == 1
    assert "key revoked" in quiet_console.text
    assert pid_gone(kernel_pid(controller_prompts(loopback)[1])), "the kernel was shut down"


def test_ctrl_c_shuts_the_kernel_down(loopback, tmp_path, folder, user, quiet_console):
    questions = []

    def ctrl_c(prompt, kind):
        questions.append(prompt)
        raise KeyboardInterrupt

    loopback.add(command("run_code", language="python", code=FIRST))
    user.add(ctrl_c)  # Ctrl+C at the feedback question, the kernel running
    assert autogpt(loopback, tmp_path, "--run-code", GOAL) == 130
    assert "Stopped." in quiet_console.text
    assert pid_gone(int(questions[0].split("kernel ", 1)[1].split()[0])), "the kernel was shut down"
    assert eventually(lambda: kernels_in(folder) == [os.getpid()]), kernels_in(folder)


def test_the_demo_is_not_replayed_with_run_code(capsys):
    with pytest.raises(SystemExit):
        run_autogpt.parse_args(["--demo", "--run-code"])
    assert "--run-code" in capsys.readouterr().err


@pytest.mark.parametrize("signal_number, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_run_of_the_command_line_ends_the_kernel(tmp_path, signal_number, code):
    """The command in a process of its own, run from the user's folder: stopped by a signal while the controller
    waits for its next reply, the kernel started by run_code ends with it."""
    work = tmp_path / "work"
    work.mkdir()
    replies = [command("run_code", language="python", code=FIRST), Slow(None, command("finish", answer="-"))]
    with LoopbackLLMServer(replies=replies) as server:
        process, attempts = run_until(server, 2, work, "--run-code", GOAL, script=os.path.join(ROOT, "run_autogpt.py"))
        assert kernels_in(work), "the kernel runs, in the folder the command was run from"
        process.send_signal(signal_number)
        out, err = process.communicate(timeout=60)
        observation = last_user_message(controller_prompts(server)[1])
    assert process.returncode == code, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    assert pid_gone(int(observation.split("kernel ", 1)[1].split()[0])), "the kernel was shut down"
    assert eventually(lambda: not kernels_in(work)), kernels_in(work)
