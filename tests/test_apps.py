"""Both command lines, Jarvis and AutoGPT, on the one application layer: each one's demo writes a report and says
where, a start without an LLM is exit 2 with the explanation, a budget reached is exit 3, and every ``--option``
a command prints is one of its own options (``--help``)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
from helpers import KEYS
from subprocess_guard import network_guarded

from aiflows_jarvis.ChatFlowModule import Transcript

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "flow_modules", "aiflows_jarvis")
APPS = {
    "jarvis": (
        "run_jarvis.py",
        os.path.join(PACKAGE, "JarvisFlowModule", "demo", "demo_transcript.jsonl"),
        "Jarvis",
        "a goal",
    ),
    "autogpt": (
        "run_autogpt.py",
        os.path.join(PACKAGE, "AutoGPTFlowModule", "demo", "demo_transcript.jsonl"),
        "AutoGPT",
        "When was the Eiffel Tower finished?",
    ),
}
REPORTS = {"jarvis": "report.html", "autogpt": "autogpt_report.html"}  # each app's report in the memory folder
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
AUTOGPT_EXTRA = bool(importlib.util.find_spec("chromadb") and importlib.util.find_spec("langchain_community"))
apps = pytest.mark.parametrize(
    "app",
    [
        "jarvis",
        pytest.param(
            "autogpt", marks=pytest.mark.skipif(not AUTOGPT_EXTRA, reason='needs pip install -e ".[autogpt]"')
        ),
    ],
)


def run(app, cwd, *args, timeout=300):
    """The app's script in a child process, as a README user starts it: no API keys, no colours, stdin closed, the
    network guarded."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith("FAKE_EDITOR")}
    env["NO_COLOR"] = "1"
    with network_guarded(env) as guarded:
        return subprocess.run(
            [sys.executable, os.path.join(ROOT, APPS[app][0]), *args],
            cwd=cwd,
            env=guarded,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture(scope="module")
def help_options():
    """Each command's options, as its --help lists them."""
    found = {}
    for app in APPS:
        done = run(app, ROOT, "--help")
        assert done.returncode == 0, done.stderr
        found[app] = set(OPTION.findall(done.stdout))
    return found


def options_said(done) -> set:
    return set(OPTION.findall(done.stdout + done.stderr))


def check_options_are_its_own(app, done, help_options):
    unknown = options_said(done) - help_options[app]
    assert not unknown, f"{APPS[app][0]} names options it does not have: {sorted(unknown)}\n{done.stdout[-3000:]}"


@apps
def test_the_demo_writes_a_report_and_says_where(app, tmp_path, help_options):
    done = run(app, tmp_path, "--demo")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "This is a REPLAY" in done.stdout
    assert f"Run report: memory/{REPORTS[app]}" in done.stdout, done.stdout[-2000:]
    page = (tmp_path / "memory" / REPORTS[app]).read_text(encoding="utf-8")
    assert f"<h1>{APPS[app][2]} run report</h1>" in page, "the report names the app that ran"
    assert f"{APPS[app][2]}'s goal:" in done.stdout, "the goal is on screen at the start"
    check_options_are_its_own(app, done, help_options)


@apps
def test_no_llm_is_exit_2_with_the_explanation_naming_the_command_as_started(app, tmp_path, help_options):
    done = run(app, tmp_path, APPS[app][3])
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{APPS[app][2]} needs an LLM" in done.stdout and "OPENAI_API_KEY" in done.stdout
    assert f"python {APPS[app][0]} --demo" in done.stdout, "the hint is the command the user ran, with --demo"
    assert f"python {APPS[app][0]} --api-base" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "memory").exists(), "nothing made: no memory folder, no lock file"
    (tmp_path / "memory").mkdir()
    assert run(app, tmp_path, APPS[app][3]).returncode == 2
    assert os.listdir(tmp_path / "memory") == [], "nothing made in a memory folder that exists either"
    check_options_are_its_own(app, done, help_options)


@apps
def test_a_budget_reached_is_exit_3_and_the_run_file_is_kept_for_resume(app, tmp_path, help_options):
    done = run(app, tmp_path, "--replay", APPS[app][1], "--yes", "--max-calls", "1")
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert "reached its budget" in done.stdout and "--max-calls" in done.stdout and "--resume" in done.stdout
    assert f"Run report: memory/{REPORTS[app]}" in done.stdout, "a stopped run has a report too"
    assert "Traceback" not in done.stdout + done.stderr
    check_options_are_its_own(app, done, help_options)
    goal = json.loads((tmp_path / "memory" / f"{app}_run.json").read_text())["goal"]
    assert goal == Transcript.load(APPS[app][1]).header["goal"], "the run file keeps the goal for --resume"
    again = run(app, tmp_path, "--resume")  # the run to resume is found; then no LLM is configured
    assert again.returncode == 2 and "needs an LLM" in again.stdout and "Nothing to resume" not in again.stdout, (
        again.stdout[-3000:]
    )
    check_options_are_its_own(app, again, help_options)


@apps
def test_a_closed_terminal_names_the_commands_own_option(app, tmp_path, help_options):
    """No --yes and stdin closed: the first question ends the run, saying what to pass."""
    done = run(app, tmp_path, "--replay", APPS[app][1])
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "terminal input is closed" in done.stdout and "pass --yes" in done.stdout, done.stdout[-2000:]
    line = next(line for line in done.stdout.splitlines() if "terminal input is closed" in line)
    assert line.startswith(APPS[app][2]), f"the app that asks is the one named: {line}"
    assert "LLM call" in done.stdout and "Run report:" in done.stdout, "the usage is printed as on any stop"
    check_options_are_its_own(app, done, help_options)


@apps
def test_resume_without_a_previous_run_is_exit_2(app, tmp_path, help_options):
    done = run(app, tmp_path, "--resume", "--api-base", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and "Nothing to resume" in done.stdout, done.stdout[-2000:]
    assert not (tmp_path / "memory").exists(), "--resume in a fresh folder makes no memory folder"
    check_options_are_its_own(app, done, help_options)


def test_a_server_that_refuses_before_any_plan_is_not_said_to_be_continued_from_its_plan(tmp_path):
    """Nothing listens at --api-base: the run stops at its first call, exit 1; --resume starts it again with its
    goal and settings, since no plan was made to continue from."""
    done = run("jarvis", tmp_path, "--api-base", "http://127.0.0.1:9/v1", "a goal")
    assert done.returncode == 1 and "nothing is listening at http://127.0.0.1:9/v1" in done.stdout, done.stdout
    words = " ".join(done.stdout.split())
    assert "continue from the plan" not in words and "--resume to start it again with the same goal" in words, words


@pytest.mark.parametrize(
    "argv0, expected, not_expected",
    [("/usr/local/bin/jarvis", "  jarvis --api-base", "run_"), ("run_jarvis.py", "python run_jarvis.py --demo", None)],
)
def test_the_hint_names_the_installed_command_when_that_was_typed(
    monkeypatch, tmp_path, capsys, argv0, expected, not_expected
):
    from aiflows_jarvis.app import jarvis

    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "argv", [argv0])
    assert jarvis.main(["--memory-dir", str(tmp_path / "memory"), "a goal"]) == 2
    out = capsys.readouterr().out
    assert expected in out, out
    assert not_expected is None or not_expected not in out.split("needs an LLM")[1], out


@pytest.mark.parametrize("app", sorted(APPS))
def test_help_fits_80_columns_and_names_the_library_as_it_is(app, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["COLUMNS"] = "80"
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, APPS[app][0]), "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    wide = [line for line in done.stdout.splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)
    assert "library.py" not in done.stdout, "the code library is the package library/"
    words = " ".join(done.stdout.split())
    assert "129 SIGHUP" in words and "4 stopped by the user" in words, "every exit code"


def test_the_apps_share_one_exit_code_table():
    from aiflows_jarvis.app import run

    assert {code: what.split(" (")[0].split(",")[0] for code, what in run.EXIT_CODES.items()} == {
        0: "finished",
        1: "failed or gave up",
        2: "bad input",
        3: "budget reached",
        4: "stopped by the user",
        130: "Ctrl+C",
        143: "SIGTERM",
        129: "SIGHUP",
        141: "the output was closed by its reader",
    }
    from aiflows_jarvis.app.autogpt import AUTOGPT
    from aiflows_jarvis.app.jarvis import JARVIS

    for app in (JARVIS, AUTOGPT):
        assert "exit codes:\n  0   finished" in app.epilog, f"{app.name}'s --help lists the exit codes"


@apps
def test_a_reader_that_goes_away_ends_the_run_quietly_with_141(app, tmp_path):
    """``python run_autogpt.py --demo | head -1``: the run stops at its next print, exit 141, one line said."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["NO_COLOR"] = "1"
    with network_guarded(env) as guarded:
        child = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, APPS[app][0]), "--demo"],
            cwd=tmp_path,
            env=guarded,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        first = child.stdout.readline()
        child.stdout.close()
        _, stderr = child.communicate(timeout=240)
    assert first.strip(), "the run printed its first line"
    assert child.returncode == 141, stderr.decode()[-3000:]
    assert stderr.decode().strip() == "Stopped: the output was closed.", "no traceback, no 'Exception ignored'"


@pytest.mark.skipif(not AUTOGPT_EXTRA, reason='needs pip install -e ".[autogpt]"')
def test_autogpts_report_shows_its_commands_without_a_trace(tmp_path):
    """AutoGPT keeps no log: its report lists each command with its arguments and result whole, from the run's step
    record (with --trace as without it); its Files section lists what is there."""
    for args in (("--trace", "trace.jsonl", "--report", "run.html"), ()):
        done = run("autogpt", tmp_path, "--demo", *args)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        page = (tmp_path / ("run.html" if args else "memory/autogpt_report.html")).read_text(encoding="utf-8")
        assert re.findall(r'class="cmd">(\w+)', page) == ["wiki_search", "ddg_search"], "the demo's two commands"
        run_section = page.split('id="run"')[1].split("</section>")[0]
        assert "2 commands of AutoGPT" in run_section and "330 metres" in run_section, "with their results"
        assert "Eiffel Tower height in metres" in run_section, "and their arguments"
        files = page.split('id="files"')[1].split("</section>")[0]
        assert "autogpt_steps.jsonl" in files and "<li>" in files, "no heading over an empty list"


def test_a_ctrl_c_in_the_last_steps_of_a_run_still_releases_the_memory_folders_lock(tmp_path, monkeypatch, capsys):
    """A signal while the run ends (the flow finished, its kernel closed) stops the run with 130, and the lock record
    goes with it: the next run is not told of a run that "did not end cleanly"."""
    from aiflows_jarvis.app import jarvis, launcher
    from aiflows_jarvis.CoreFlowModule import RUN_LOCK_NAME

    def closed_then_interrupted(flow, real=launcher.close_interpreters):
        real(flow)  # the kernel is shut down, then Ctrl+C comes
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher, "close_interpreters", closed_then_interrupted)
    monkeypatch.chdir(tmp_path)
    assert jarvis.main(["--demo", "--memory-dir", str(tmp_path / "memory")]) == 130
    lock = tmp_path / "memory" / RUN_LOCK_NAME
    assert lock.read_text() == "", "the lock's record was left as by a killed run"


def test_autogpt_without_its_extra_says_so_first_and_changes_nothing(tmp_path):
    """In an environment without the [autogpt] extra: exit 2 and the command that installs it, before the banner,
    and the memory folder as it was (the previous report not archived, no run file, no lock, no new report)."""
    from linked_venv import linked_venv

    python, site = linked_venv(tmp_path / "venv")
    mirror = tmp_path / "without-extra"  # this environment's packages but the extra's
    mirror.mkdir()
    extra = ("chromadb", "faiss", "langchain", "ddgs")
    for folder in {p.strip() for p in open(os.path.join(site, "test-environment.pth")) if p.strip()}:
        for name in os.listdir(folder):
            if not name.lower().startswith(extra) and not (mirror / name).exists():
                (mirror / name).symlink_to(os.path.join(folder, name))
    with open(os.path.join(site, "test-environment.pth"), "w") as f:
        f.write(f"{mirror}\n")
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "autogpt_report.html").write_text("the previous run's report")
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["NO_COLOR"] = "1"
    with network_guarded(env) as guarded:
        done = subprocess.run(
            [python, os.path.join(ROOT, "run_autogpt.py"), "--demo"],
            cwd=tmp_path,
            env=guarded,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert 'pip install -e ".[autogpt]"' in done.stdout and "[autogpt] extra" in done.stdout, done.stdout
    assert "AutoGPT demo" not in done.stdout and "Traceback" not in done.stdout + done.stderr
    assert (
        sorted(os.listdir(memory)) == ["autogpt_report.html"]
        and (memory / "autogpt_report.html").read_text() == "the previous run's report"
    ), "nothing in the memory folder was made, moved or replaced"


@pytest.mark.skipif(not AUTOGPT_EXTRA, reason='needs pip install -e ".[autogpt]"')
def test_both_demos_in_one_memory_folder_keep_their_own_reports_and_say_truly_what_was_archived(tmp_path):
    """The README's order: Jarvis's demo, then AutoGPT's, in the default memory folder. Each writes its own report;
    a run archives only what is its own, and its line names only what it archived."""

    def archived(done):
        line = next((line for line in done.stdout.splitlines() if line.startswith("The previous ")), None)
        if line is None:
            return None, []
        folder = tmp_path / line.rsplit(" kept in ", 1)[1].rstrip(".")
        return line, sorted(os.listdir(folder))

    assert run("jarvis", tmp_path, "--demo").returncode == 0
    first = run("autogpt", tmp_path, "--demo")
    assert first.returncode == 0 and "Run report: memory/autogpt_report.html" in first.stdout, first.stdout[-2000:]
    assert archived(first) == (None, []), "AutoGPT had nothing of its own to archive"
    assert "<h1>Jarvis run report</h1>" in (tmp_path / "memory" / "report.html").read_text(encoding="utf-8")
    again = run("autogpt", tmp_path, "--demo")
    line, files = archived(again)
    assert line.startswith("The previous report is kept in ") and files == [
        "autogpt_report.html",
        "autogpt_steps.jsonl",
    ], (line, files)
    jarvis = run("jarvis", tmp_path, "--demo")
    line, files = archived(jarvis)
    assert line.startswith("The previous plans, logs, report and code library are kept in "), line
    assert {"plan_jarvis.txt", "logs_jarvis.txt", "report.html", "jarvis_steps.jsonl", "library"} <= set(files), files
    assert not {"autogpt_report.html", "autogpt_steps.jsonl"} & set(files), "AutoGPT's are its own"
    assert (tmp_path / "memory" / "autogpt_report.html").exists()
