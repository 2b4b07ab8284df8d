"""run_jarvis.py: the demo, a run against the loopback server, record and replay, resume, missing credentials."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from fakes import library_text
from helpers import DEMO, DEMO_CALLS, KEYS, ROOT, RUN_JARVIS, commands, kernels_in, run_jarvis, run_until
from loopback_llm import HTTPError, LoopbackLLMServer, Slow
from subprocess_guard import check_guarded_run, guarded_environment, network_guarded
from waiting import eventually

from aiflows_jarvis.ChatFlowModule import Transcript
from aiflows_jarvis.CoreFlowModule import read_text, split_log_entries, undone_steps

MEMORY_FILES = [
    "plan_jarvis.txt",
    "logs_jarvis.txt",
    "plan_coder.txt",
    "logs_coder.txt",
    "plan_extlib.txt",
    "logs_extlib.txt",
    "library",
]


@pytest.fixture(scope="module")
def demo():
    return Transcript.load(DEMO)


def assert_the_whole_hierarchy_ran(memory, workdir=None):
    """``workdir``: where the code ran (default: the folder Jarvis was started in, the memory folder's parent)."""
    workdir = memory.parent if workdir is None else workdir
    for name in MEMORY_FILES:
        assert (memory / name).exists(), name
    # the update_plan entries are made by code: a step done by the command that completes it, the rest at a finish
    assert commands(memory / "logs_jarvis.txt") == ["Coder", "update_plan", "final_answer", "update_plan"]
    assert commands(memory / "logs_coder.txt") == [
        "extend_library",
        "run_code",
        "extend_library",
        "run_code",
        "update_plan",
    ]
    assert commands(memory / "logs_extlib.txt") == [
        "write_code",
        "save_code",
        "update_plan",
        "write_code",
        "save_code",
        "update_plan",
    ]
    library = library_text(str(memory / "library.py"))
    assert "def growth_rates(values: list[float])" in library and "def svg_bar_chart(" in library
    assert "<svg" in read_text(workdir / "sales_chart.svg"), "the chart was drawn by the library function"
    runs = read_text(memory / "logs_coder.txt")
    assert "Apr: +17.2%" in runs and "Highest growth: Apr (+17.2%)" in runs, "first run_code: the library function ran"
    second = runs.split("from library import svg_bar_chart")[-1]
    assert "sales_chart.svg" in second and "Error" not in second, (
        "the second run_code imported the new function (from a new module of the library) and drew `sales` kept "
        "from the first run"
    )
    assert read_text(memory / "logs_extlib.txt").count("The tests passed") == 2, "each function was tested"
    for boss in ("jarvis", "coder", "extlib"):
        plan = read_text(memory / f"plan_{boss}.txt")
        assert plan.strip() and "[done]" in plan and not undone_steps(plan), f"the finished run's {boss} plan is done"


def test_the_demo_runs_offline_and_shows_every_layer(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "library.py").write_text("def mine():\n    pass\n")
    (tmp_path / "memory" / "notes.txt").write_text("the user's own file")
    done = run_jarvis(tmp_path, "--demo")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (tmp_path / "sales_chart.svg").exists(), "the demo's code runs in its memory folder"
    out = done.stdout
    assert "REPLAY: the LLM replies are a recording" in out and "runs for real" in out
    # the steps the controllers chose, each on its line (what the loops made by code is said by what it did)
    for layer in (
        "Plan:",
        "Jarvis > Coder",
        "Jarvis > Coder > extend_library",
        "ExtendLibrary > write_code > test",
        "Save growth_rates in library/data.py",
        "Saved growth_rates in memory/library/data.py.",
        "Jarvis > Coder > run_code",
        "Jarvis > update_plan: step 1 done",
        "Jarvis's final answer:",
    ):
        assert layer in out, layer
    assert "April grew the most" in out.split("Final answer:")[-1]
    assert "memory/sales_chart.svg" in out.split("Files made or changed in memory:")[-1]
    assert f"{DEMO_CALLS} LLM calls" in out
    assert_the_whole_hierarchy_ran(tmp_path / "memory", tmp_path / "memory")
    (archived,) = (tmp_path / "memory" / "archive").iterdir()
    assert (archived / "library.py").read_text().startswith("def mine"), (
        "the demo starts from an empty library; the user's is kept in the archive"
    )
    assert f"The previous code library is kept in memory/archive/{archived.name}." in out.replace("\n", " "), (
        "the line names what was archived: here, only the library"
    )
    assert (tmp_path / "memory" / "notes.txt").read_text() == "the user's own file", "other files are not touched"


def test_a_goal_through_the_loopback_server_with_yes(tmp_path, demo):
    with LoopbackLLMServer(replies=demo.replies()) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--model", "my-local-model", demo.header["goal"])
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert len(server.requests) == DEMO_CALLS and not server.errors
        assert {r["model"] for r in server.requests} == {"my-local-model"}, "--model reaches the server as given"
        assert server.requests[0]["headers"]["authorization"].startswith("Bearer ")
    assert_the_whole_hierarchy_ran(tmp_path / "memory")
    answer = next(json.loads(r) for r in demo.replies() if '"final_answer"' in r)["command_args"]["answer"]
    assert done.stdout.count(answer) == 1, "the final answer is shown once"
    assert "Generated code may use " not in done.stdout + done.stderr, "the memory limit is said with --verbose only"


def test_a_recorded_run_replays_identically(tmp_path, demo):
    live, replayed = tmp_path / "live", tmp_path / "replayed"
    live.mkdir()
    replayed.mkdir()
    transcript = tmp_path / "run.jsonl"
    with LoopbackLLMServer(replies=demo.replies()) as server:
        first = run_jarvis(live, "--api-base", server.url, "--yes", "--record", str(transcript), demo.header["goal"])
    assert first.returncode == 0, first.stdout[-3000:]
    recorded = Transcript.load(str(transcript))
    assert recorded.header["goal"] == demo.header["goal"] and len(recorded.records) == DEMO_CALLS
    assert recorded.records[0]["flow"] == "Jarvis/Planner/Executor/write_plan/PlanGenerator"
    assert recorded.records[0]["messages"][0]["role"] == "system", "the prompts are recorded too"
    second = run_jarvis(replayed, "--replay", str(transcript), "--yes")
    assert second.returncode == 0, second.stdout[-3000:]
    for name in MEMORY_FILES[:-1] + ["library.py", "sales_chart.svg"]:
        a, b = (
            library_text(str(folder / "memory" / name))
            if name == "library.py"
            else read_text(folder / "memory" / name).replace(str(folder / "memory"), "<memory>")
            for folder in (live, replayed)
        )
        if name.startswith("logs_"):  # entries carry the time they were written
            a, b = ([e.split("\n", 1)[1] for _, e in split_log_entries(t)] for t in (a, b))
        assert a == b, name
    final = lambda text: text.split("final answer:\n")[-1].split("Enter if this answers")[0]  # noqa: E731
    assert final(first.stdout) == final(second.stdout)


def test_a_replay_that_runs_out_names_the_flow_and_the_call(tmp_path, demo):
    short = tmp_path / "short.jsonl"
    lines = open(DEMO, encoding="utf-8").read().splitlines()
    short.write_text("\n".join(lines[:4]) + "\n")  # the header and three exchanges
    done = run_jarvis(tmp_path, "--replay", str(short), "--yes")
    assert done.returncode == 1
    assert (
        "holds no reply for call 1 of Jarvis/CtrlExMem/Executor/Coder/CtrlExMem/Executor/extend_library/CtrlExMem/"
        "Executor/write_code/Executor/write_code/CodeGenerator" in done.stdout
    )
    assert "Traceback" not in done.stdout + done.stderr
    answer = read_text(tmp_path / "memory" / "report.html").split('id="answer"')[1].split("</section>")[0]
    assert "No final answer: the run failed." in answer and "holds no reply for call 1" in answer, (
        "the failed run's report says why, as the screen did"
    )


def test_a_replay_that_goes_off_script_stops_and_names_the_flow_the_call_and_the_difference(tmp_path):
    cut = tmp_path / "cut.jsonl"
    lines = open(DEMO, encoding="utf-8").read().splitlines()
    first_run = next(i for i, line in enumerate(lines[1:], 1) if '"command": "run_code"' in json.loads(line)["reply"])
    cut.write_text("\n".join(lines[:first_run] + lines[first_run + 1 :]) + "\n")  # the first run_code is gone
    done = run_jarvis(tmp_path, "--replay", str(cut), "--yes")
    assert done.returncode == 1
    assert (
        "The run has left the recording at call 2 of Jarvis/CtrlExMem/Executor/Coder/CtrlExMem/Controller"
        in done.stdout
    ), "the run asks Coder's next command before any code ran: the recorded reply would not fit"
    assert "recorded: Feb: +12.5%" in done.stdout
    assert "Final answer:" not in done.stdout, "no recorded answer is passed off as this run's"
    assert "Traceback" not in done.stdout + done.stderr


def test_a_replay_must_start_from_the_library_it_was_recorded_with(tmp_path):
    first = run_jarvis(tmp_path, "--replay", DEMO, "--yes")
    assert first.returncode == 0, first.stdout[-3000:]
    second = run_jarvis(tmp_path, "--replay", DEMO, "--yes")  # the library now already has growth_rates
    assert second.returncode == 1
    assert "recorded: (empty)" in second.stdout and "this run: The library is the package" in second.stdout, (
        "Jarvis's first prompt already shows a library that is not the recorded one"
    )
    assert "fresh --memory-dir" in second.stdout
    assert "--resume" not in second.stdout.split("left the recording")[-1], "a replay is not resumed"


@pytest.mark.parametrize(
    "signal_number, code, says", [(signal.SIGINT, 130, "Stopped."), (signal.SIGTERM, 143, "Terminated.")]
)
def test_ctrl_c_or_sigterm_in_a_run_stops_cleanly_and_keeps_the_memory(tmp_path, demo, signal_number, code, says):
    replies = demo.replies()
    first_run = next(i for i, reply in enumerate(replies) if '"run_code"' in reply)
    # After the first run_code, the controller's next call hangs: the signal comes then.
    with LoopbackLLMServer(replies=replies[: first_run + 1] + [Slow(None, replies[first_run + 1])]) as server:
        work = tmp_path / "work"
        work.mkdir()
        process, attempts = run_until(server, first_run + 2, tmp_path, "--workdir", str(work), demo.header["goal"])
        memory = tmp_path / "memory"
        assert kernels_in(work), "the interpreter's kernel runs, in the working folder"
        process.send_signal(signal_number)
        out, err = process.communicate(timeout=60)
    assert process.returncode == code, out[-2000:] + err[-2000:]
    assert says in out and f"Plans, logs and the library are in {memory}" in out
    assert "Traceback" not in out + err
    assert f"{first_run + 1} LLM calls" in out, "what the completed calls cost is said however the run ends"
    assert (
        "def growth_rates" in library_text(str(memory / "library.py"))
        and commands(memory / "logs_coder.txt")[-1] == "run_code"
    ), "what was done is kept"
    assert eventually(lambda: not kernels_in(work), poll=0.1), "the kernel was shut down"
    check_guarded_run(attempts)


def test_resume_continues_from_the_stored_plan(tmp_path, demo):
    replies = demo.replies()
    with LoopbackLLMServer(replies=[replies[0], HTTPError(401, "key revoked")]) as server:
        first = run_jarvis(tmp_path, "--api-base", server.url, "--yes", demo.header["goal"])
    assert first.returncode == 1 and "authentication failed (HTTP 401): key revoked" in first.stdout
    assert "--resume" in first.stdout and "Traceback" not in first.stdout + first.stderr
    plan = read_text(tmp_path / "memory" / "plan_jarvis.txt")
    assert plan.startswith("1. Ask Coder"), "the plan written before the interruption is kept"

    with LoopbackLLMServer(replies=replies[1:]) as server:
        second = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--resume")
        assert second.returncode == 0, second.stdout[-3000:]
        first_call = server.requests[0]["messages"]
        assert "You are Jarvis" in first_call[0]["content"], "no new plan: Jarvis's controller comes first"
        assert plan.strip() in first_call[1]["content"] and demo.header["goal"] in first_call[0]["content"], (
            "its memory: in its first message"
        )
    assert "resumes its plan" in second.stdout
    assert_the_whole_hierarchy_ran(tmp_path / "memory")
    assert commands(tmp_path / "memory" / "logs_jarvis.txt", markers=True)[0] == "resume", (
        "the logs tell the controller that the run was resumed (and the Python session is new)"
    )


@pytest.mark.parametrize(
    "limit, first_replies, resume_from",
    [
        (["--max-calls", "1", "--model", "local-model", "--context-window", "16000"], 2, 1),  # remembered for --resume
        (["--max-tokens", "50"], 2, 1),  # the plan's call alone uses more (the API's usage)
        (["--max-cost", "0.0001", "--model", "gpt-4"], 2, 1),  # priced: $0.03 / 1K prompt tokens
        (["--max-time", "3"], "slow", 0),  # the first call is cut at the run's deadline
    ],
)
def test_a_run_that_reaches_its_budget_stops_cleanly_and_resume_goes_on_with_a_fresh_one(
    tmp_path, demo, limit, first_replies, resume_from
):
    replies = demo.replies()
    served = [Slow(None, replies[0])] if first_replies == "slow" else replies[:first_replies]
    with LoopbackLLMServer(replies=served) as server:
        first = run_jarvis(tmp_path, "--api-base", server.url, "--yes", *limit, demo.header["goal"])
        assert len(server.requests) == 1, "no call beyond the budget"
    assert first.returncode == 3, first.stdout[-3000:] + first.stderr[-2000:]
    assert "reached its budget" in first.stdout and limit[0] in first.stdout and "--resume" in first.stdout
    assert "Traceback" not in first.stdout + first.stderr
    assert "1 LLM call" in first.stdout or first_replies == "slow", "the cost of the stopped run is printed"
    if resume_from:
        assert read_text(tmp_path / "memory" / "plan_jarvis.txt").startswith("1. Ask Coder"), "the plan is kept"
    assert not kernels_in(tmp_path), "no interpreter is left"

    with LoopbackLLMServer(replies=replies[resume_from:]) as server:
        second = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--resume")
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
        assert len(server.requests) == len(replies) - resume_from
    assert_the_whole_hierarchy_ran(tmp_path / "memory")
    if "--context-window" in limit:
        assert "is not known" not in second.stdout, "a resumed run keeps the context window it was given"


@pytest.mark.parametrize(
    "flag, value", [("--max-calls", "0"), ("--max-cost", "-1"), ("--max-time", "soon"), ("--context-window", "many")]
)
def test_budget_and_model_flags_refuse_bad_values(tmp_path, flag, value):
    done = run_jarvis(tmp_path, flag, value, "--api-base", "http://127.0.0.1:9/v1", "a goal")
    assert done.returncode == 2 and flag in done.stderr and "Traceback" not in done.stderr


def test_resume_refuses_another_goal_and_a_missing_run(tmp_path):
    """Bad input at the start: exit code 2, as the README's exit codes say."""
    done = run_jarvis(tmp_path, "--resume", "--api-base", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and "Nothing to resume" in done.stdout
    (tmp_path / "memory").mkdir(exist_ok=True)
    (tmp_path / "memory" / "jarvis_run.json").write_text(json.dumps({"goal": "the old goal"}))
    done = run_jarvis(tmp_path, "--resume", "--api-base", "http://127.0.0.1:9/v1", "a new goal")
    assert done.returncode == 2 and "whose goal was: 'the old goal'" in done.stdout
    (tmp_path / "memory" / "jarvis_run.json").write_text("{broken")
    done = run_jarvis(tmp_path, "--resume", "--api-base", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and "jarvis_run.json is unreadable" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_no_key_and_no_server_is_explained_with_exit_code_2(tmp_path):
    done = run_jarvis(tmp_path, "Plot y = x^2")
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stdout and "--api-base" in done.stdout and "--demo" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_help_lists_the_options(tmp_path):
    done = run_jarvis(tmp_path, "--help")
    assert done.returncode == 0
    for option in (
        "--model",
        "--api-base",
        "--config",
        "--memory-dir",
        "--resume",
        "--yes",
        "--record",
        "--replay",
        "--demo",
    ):
        assert option in done.stdout


def test_a_new_run_archives_plans_and_logs_and_keeps_the_library(tmp_path, scripted_llm):
    from aiflows_jarvis.app import launcher

    memory = tmp_path / "memory"
    memory.mkdir()
    for name, text in (
        ("plan_jarvis.txt", "old plan"),
        ("logs_coder.txt", "old logs"),
        ("library.py", "def f(): pass"),
    ):
        (memory / name).write_text(text)
    flow = launcher.instantiate(launcher.DEFAULT_FLOW_CONFIG, [{"backend_used": "openai", "api_key": "x"}], str(memory))
    launcher.prepare_memory(flow, str(memory), resume=False)
    assert not (memory / "plan_jarvis.txt").exists() and not (memory / "logs_coder.txt").exists()
    archived = list((memory / "archive").iterdir())[0]
    assert (archived / "plan_jarvis.txt").read_text() == "old plan", "nothing is deleted"
    assert (memory / "library.py").read_text() == "def f(): pass", "the library is kept"
    launcher.prepare_memory(flow, str(memory), resume=True)
    assert flow.flow_config["resume"] is True


@pytest.mark.parametrize(
    "model, backend, api_base, expected",
    [
        ("gpt-4", "openai", None, "gpt-4"),
        ("gpt-4o-mini", "openai", None, "openai/gpt-4o-mini"),
        ("openai/gpt-4o", "openai", None, "openai/gpt-4o"),
        ("llama3", "openai", "http://localhost:11434/v1", "openai/llama3"),
        ("meta-llama/Llama-3-8B", "openai", "http://localhost:8000/v1", "openai/meta-llama/Llama-3-8B"),
        ("my-gpt4-deployment", "azure", None, "azure/my-gpt4-deployment"),
    ],
)
def test_model_names_are_made_acceptable_to_litellm(model, backend, api_base, expected):
    from aiflows_jarvis.app.launcher import litellm_model_name

    assert litellm_model_name(model, backend, api_base) == expected


def test_another_providers_model_without_a_server_is_refused_not_sent_the_openai_key():
    from aiflows_jarvis.app.launcher import ConfigurationError, litellm_model_name

    with pytest.raises(ConfigurationError, match="OpenAI-compatible proxy"):
        litellm_model_name("anthropic/claude-3-opus", "openai", None)
    assert (
        litellm_model_name("anthropic/claude-3-opus", "openai", "http://localhost:4000/v1")
        == "openai/anthropic/claude-3-opus"
    ), "behind an OpenAI-compatible proxy the name goes through"


@pytest.mark.parametrize(
    "args, says",
    [
        (["--demo", "a goal"], "drop the goal"),
        (["--demo", "--model", "gpt-4"], "--model, --mcp-config and --api-base do not apply"),
        (
            ["--replay", "x.jsonl", "--api-base", "http://127.0.0.1:9/v1"],
            "--model, --mcp-config and --api-base do not apply",
        ),
    ],
)
def test_options_that_do_not_go_together_are_refused(tmp_path, args, says):
    done = run_jarvis(tmp_path, *args)
    assert done.returncode == 2 and says in done.stderr


def test_credentials_come_from_the_usual_variables():
    from aiflows_jarvis.app.launcher import MissingCredentials, api_infos_from_environment

    (info,) = api_infos_from_environment(None, {"OPENAI_API_KEY": "sk-1"})
    assert (info.backend_used, info.api_key) == ("openai", "sk-1")
    (info,) = api_infos_from_environment(None, {"AZURE_API_KEY": "az", "AZURE_API_BASE": "https://x.openai.azure.com"})
    assert (info.backend_used, info.api_base, info.api_version) == (
        "azure",
        "https://x.openai.azure.com",
        "2023-07-01-preview",
    )
    (info,) = api_infos_from_environment("http://localhost:8000/v1/", {})
    assert info.api_base == "http://localhost:8000/v1" and info.api_key
    with pytest.raises(MissingCredentials, match="AZURE_API_BASE"):
        api_infos_from_environment(None, {"AZURE_API_KEY": "az"})
    with pytest.raises(MissingCredentials):
        api_infos_from_environment(None, {})


@pytest.mark.parametrize("script", [RUN_JARVIS, os.path.join(ROOT, "run_autogpt.py")])
@pytest.mark.parametrize(
    "signal_number, code, says",
    [(signal.SIGINT, 130, "Stopped."), (signal.SIGTERM, 143, "Terminated."), (signal.SIGHUP, 129, "Terminated.")],
)
def test_a_signal_while_python_still_imports_ends_with_its_exit_code(tmp_path, script, signal_number, code, says):
    """A signal in the first half second (the imports, before main() runs): the exit code of that signal and one
    line, not a KeyboardInterrupt traceback or a process killed by the signal (-2, -15, -1). The imports are held
    at aiflows's by a stand-in that says when it is reached, so the signal comes then, not after some time."""
    held = tmp_path / "held" / "aiflows"
    held.mkdir(parents=True)
    (held / "__init__.py").write_text(
        "import sys, time\nprint('importing aiflows', flush=True)\nwhile True:\n    time.sleep(0.05)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env.update(NO_COLOR="1", PYTHONPATH=str(held.parent))
    env, attempts = guarded_environment(str(tmp_path / "guard"), env)
    process = subprocess.Popen(
        [sys.executable, script, "--demo"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout.readline() == "importing aiflows\n", "the stand-in holds the imports"
        process.send_signal(signal_number)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == code, (process.returncode, out[-2000:], err[-2000:])
    assert says in err and "Traceback" not in out + err, err[-2000:]
    assert not (tmp_path / "memory").exists(), "nothing was made"


def test_main_gives_back_the_callers_sigterm_handler(tmp_path, capsys):
    from aiflows_jarvis.app import jarvis as run_jarvis

    mine = lambda *_: None  # noqa: E731
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with pytest.raises(SystemExit):
            run_jarvis.main(["--demo", "a goal"])  # refused by the argument parser
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_goal_reads_an_input_file_from_the_folder_jarvis_is_started_in(tmp_path):
    """The code runs where the user runs Jarvis (library.py importable from the memory folder); the end of the run
    lists the memory files that exist and every file the run made there, the CSV as well as the figure."""
    from fakes import command, finish

    (tmp_path / "words.txt").write_text("the cat and the dog and the bird\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "library.py").write_text(
        'def shout(text):\n    """Upper case."""\n    return text.upper()\n'
    )
    code = (
        "import collections, csv\nfrom library import shout\n"
        "counts = collections.Counter(open('words.txt').read().split())\n"
        "with open('counts.csv', 'w', newline='') as f:\n    csv.writer(f).writerows(counts.most_common())\n"
        "open('chart.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/svg\"/>')\n"
        "print(shout(counts.most_common(1)[0][0]))"
    )
    replies = [
        "1. Ask Coder to count the words of words.txt.\n2. Give the final answer.",
        command("Coder", goal="Count the words of words.txt into counts.csv; say the most common one."),
        command("run_code", language="python", code=code),  # Coder's plan is its goal
        finish("The most common word is THE; counts.csv holds the counts."),
        command("final_answer", answer="The most common word in words.txt is 'the'; counts are in counts.csv."),
    ]
    # (the run ends when the user accepts the final answer)
    with LoopbackLLMServer(replies=replies) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "Count the words of words.txt")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert not server.errors and not server.pending
    assert "THE" in read_text(tmp_path / "memory" / "logs_coder.txt"), "words.txt was read, with the library"
    assert (tmp_path / "counts.csv").read_text().startswith("the,3")
    assert not (tmp_path / "code_runs").exists(), "the scripts run are kept in the memory folder"
    assert list((tmp_path / "memory" / "code_runs").iterdir())
    end = done.stdout.split("Memory files:")[-1]
    assert "Jarvis: memory/plan_jarvis.txt, memory/logs_jarvis.txt" in end
    assert "Coder: memory/plan_coder.txt" in end and "ExtendLibrary" not in end, "only files that exist"
    made = end.split("Files made or changed in this folder:\n")[1].split("\n")
    assert [line.strip() for line in made[:3]][:2] == ["chart.svg", "counts.csv"] and "LLM calls" in made[2], made


def test_workdir_chooses_where_the_code_runs(tmp_path):
    from fakes import command, finish

    data = tmp_path / "data"
    data.mkdir()
    (data / "n.txt").write_text("41")
    replies = [
        "1. Ask Coder.",
        command("Coder", goal="Add one to the number in n.txt."),
        "1. Run code.",
        command("run_code", language="python", code="print(int(open('n.txt').read()) + 1)"),
        finish("42"),
        command("final_answer", answer="42"),
        finish("Answered."),
    ]
    with LoopbackLLMServer(replies=replies) as server:
        done = run_jarvis(tmp_path, "--api-base", server.url, "--yes", "--workdir", "data", "Add one to n.txt")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "42" in read_text(tmp_path / "memory" / "logs_coder.txt")
    assert json.loads(read_text(tmp_path / "memory" / "jarvis_run.json"))["workdir"] == str(data), "kept for --resume"
    missing = run_jarvis(tmp_path, "--api-base", "http://127.0.0.1:9/v1", "--workdir", "nowhere", "x")
    assert missing.returncode == 2 and "--workdir nowhere: no such folder" in missing.stdout


def readme_run_commands():
    """The commands the README gives for running Jarvis (in code blocks and tables), as written."""
    import re

    text = read_text(os.path.join(ROOT, "README.md"))
    return sorted(set(re.findall(r"(\.venv/bin/python run_jarvis\.py[^`\n|]*)", text)))


def test_the_readmes_run_commands_work_as_written_in_a_fresh_clone(tmp_path):
    """After the README's set-up (a .venv in the clone; here the tests' own environment stands in for it, no second
    pip install), its commands run as written: the demo to its end, the others' options are all valid."""
    import shlex

    from aiflows_jarvis.app import jarvis as cli

    commands = readme_run_commands()
    assert any("--demo" in c for c in commands) and len(commands) >= 5, commands
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", ROOT, str(clone)], check=True, capture_output=True, timeout=120)
    os.symlink(sys.prefix, clone / ".venv")
    for command in commands:
        argv = shlex.split(command)
        assert argv[:2] == [".venv/bin/python", "run_jarvis.py"] and os.path.exists(clone / argv[0]), command
        cli.parse_args(argv[2:])  # exits (SystemExit) on an option the command line does not take
    demo = next(c for c in commands if c.endswith("--demo"))
    env = {k: v for k, v in os.environ.items() if k not in KEYS and k not in ("PYTHONPATH", "FAKE_EDITOR")}
    env["NO_COLOR"] = "1"
    with network_guarded(env, keep_pythonpath=False) as guarded:
        done = subprocess.run(
            shlex.split(demo),
            cwd=clone,
            env=guarded,
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Run report: memory/report.html" in done.stdout and (clone / "memory" / "sales_chart.svg").exists()
