"""RunContext: one object holds what a run uses, built once and entered once. The runs are a ContextVar: contexts
nest, a thread sees the run only if started with ``start_thread``, two runs in two threads each see their own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from fakes import SCRIPT, Sink, scripted_factory
from subprocess_guard import network_guarded

from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
from aiflows_jarvis.ChatFlowModule.servers import server_settings
from aiflows_jarvis.CoreFlowModule import (
    USAGE,
    Console,
    RunBudget,
    RunContext,
    ScriptedInput,
    TerminalInput,
    current_run,
    entered_run,
    get_closed_input_hint,
    get_console,
    get_input_source,
    get_run_budget,
    run_tool,
    start_thread,
    warm_up,
)
from aiflows_jarvis.CoreFlowModule.errors import InputUnavailableError
from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow
from aiflows_jarvis.VectorStoreFlowModule import hash_embeddings_factory
from aiflows_jarvis.VectorStoreFlowModule.embeddings import build_embeddings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT_S = 60  # a bound on waiting for another thread, only hit if it is stuck


# ~~~ Each test, each `with`, its own run ~~~
SEEN_BY_TESTS: list = []  # (the run, the input source it set), one per case of the test below


@pytest.mark.parametrize("case", [0, 1])
def test_each_test_runs_in_a_context_of_its_own(run_context, case):
    assert current_run() is run_context and entered_run() is run_context, "the autouse fixture entered it"
    source = ScriptedInput()
    run_context.input_source = source
    for earlier_run, earlier_source in SEEN_BY_TESTS:  # the case that ran before this one, if any
        assert earlier_run is not run_context, "each test gets a new context"
        assert get_input_source() is source and earlier_run.input_source is earlier_source
    SEEN_BY_TESTS.append((run_context, source))


def test_nesting_restores_the_outer_context():
    outer_source, inner_source = ScriptedInput(), ScriptedInput()
    with RunContext(input_source=outer_source) as outer:
        assert current_run() is outer and get_input_source() is outer_source
        with RunContext(input_source=inner_source, budget=RunBudget(max_calls=3)) as inner:
            assert current_run() is inner and get_input_source() is inner_source
            assert get_run_budget() is inner.budget
            USAGE.record("Asker", 10, 2, 0.1)
        assert current_run() is outer, "leaving the inner context puts the outer one back"
        assert get_input_source() is outer_source and get_run_budget() is None, "the inner one's budget left with it"
        assert USAGE.total().calls == 0, "the inner run's call was counted in the inner run only"
    assert inner.budget.max_calls == 3 and inner.usage.total().calls == 1, "the inner run stays readable on its object"


def test_an_error_inside_a_context_still_restores_the_outer_one(run_context, tmp_path):
    trace = tmp_path / "trace.jsonl"
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    with pytest.raises(KeyError):
        with RunContext(trace_file=str(trace), input_source=ScriptedInput(["red"])) as failed:
            flow.call({"question": "Which colour?"})
            raise KeyError("boom")
    assert current_run() is run_context, "the error left the failed run"
    assert failed.trace is None and failed.records_closed, "and its trace file was closed"


def test_a_context_entered_twice_is_left_when_its_outer_with_ends(run_context):
    run = RunContext()
    with run:
        with run:
            assert current_run() is run
        assert current_run() is run and not run.records_closed, "the inner `with` leaves its records open"
    assert current_run() is run_context and run.records_closed


def test_the_defaults_are_the_terminal_stdout_and_no_limit(monkeypatch):
    monkeypatch.delenv("JARVIS_TRACE", raising=False)
    with RunContext() as run:
        assert isinstance(get_input_source(), TerminalInput), "a bare context asks the terminal"
        assert get_console().stream is sys.stdout, "and prints to stdout"
        assert "RunContext(input_source=AutoApproveInput())" in get_closed_input_hint(), "a library user's hint"
        assert run.backend_factory is None and run.backend_wrappers == () and run.embeddings_factory is None
        assert run.budget is None and get_run_budget() is None
        assert run.trace_file is None and run.step_record is None and run.trace is None and run.steps is None
        assert run.warm_up is None and run.tool_recorder is None and run.tool_replay is None
        assert run.memory_dir is None and run.tool_provider is None and run.servers == {}
        assert USAGE.total().calls == 0 and run.usage.total().calls == 0


def test_a_bare_flow_call_works_with_the_defaults(tmp_path):
    """In a fresh process, with no context entered and nothing set: the flow prints its question on stdout and reads
    the answer from the terminal's input."""
    script = (
        "from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow\n"
        "from aiflows_jarvis.CoreFlowModule import current_run, entered_run\n"
        "assert entered_run() is None, 'nothing entered yet'\n"
        "flow = HumanStandardInputFlow.instantiate_from_default_config()\n"
        "print('ANSWER=' + flow.call({'question': 'Which colour?'})['human_input'])\n"
        "assert entered_run() is None and current_run() is current_run(), 'one run with the defaults serves all'\n"
    )
    env = {**os.environ, "NO_COLOR": "1"}
    with network_guarded(env) as guarded:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            env=guarded,
            input="blue\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Which colour?" in done.stdout, "the default console printed the question"
    assert "ANSWER=blue" in done.stdout, "the default input source read the line given on stdin"


def test_a_flow_called_inside_a_context_uses_its_input_and_console():
    sink = Sink()
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    with RunContext(input_source=ScriptedInput(["green"], echo=True), console=Console(stream=sink, color=False)):
        assert flow.call({"question": "Which colour?"}) == {"human_input": "green"}
    assert "Which colour?" in sink.text, "the context's console showed the question"


# ~~~ Threads ~~~
def look_from(start, name):
    """What a thread started by ``start(target, name)`` sees: its entered run, its current run, its input source."""
    seen = {}

    def look():
        seen["entered"] = entered_run()
        seen["run"], seen["source"] = current_run(), get_input_source()
        seen["run again"] = current_run()

    thread = start(look, name)
    thread.join(WAIT_S)
    assert not thread.is_alive() and seen, "the thread ran to its end"
    return seen


def plain_thread(target, name):
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


@pytest.mark.filterwarnings("ignore:a flow was called in a thread:RuntimeWarning")  # (said: the next test)
def test_a_thread_started_with_start_thread_sees_the_run_a_plain_thread_the_defaults():
    source = ScriptedInput()
    with RunContext(input_source=source) as run:
        started = look_from(start_thread, "sees-the-run")
        plain = look_from(plain_thread, "plain")
        assert current_run() is run, "nothing a thread did changed this context's run"
    assert started["entered"] is run and started["run"] is run and started["source"] is source
    assert plain["entered"] is None, "a plain thread starts with no run"
    assert plain["run"] is not run and isinstance(plain["source"], TerminalInput), "it gets the defaults"
    assert plain["run again"] is plain["run"], "the process's run with the defaults, the same for what follows"


def test_a_flow_in_a_thread_with_no_run_while_one_is_entered_elsewhere_is_said_once(monkeypatch):
    """A plain thread of the user's calls a flow while a run is entered in another thread: it gets the defaults (no
    budget, the terminal), which a RuntimeWarning says once, naming start_thread."""
    import contextvars
    import warnings

    from aiflows_jarvis.CoreFlowModule.run import current

    monkeypatch.setattr(current, "_WARNED", [])
    with RunContext():
        in_a_plain_thread = contextvars.Context()  # what a thread started with threading.Thread begins with
        with pytest.warns(RuntimeWarning, match="start_thread"):
            in_a_plain_thread.run(current_run)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            in_a_plain_thread.run(current_run)  # said once


def test_two_runs_in_two_threads_do_not_see_each_other(run_context):
    both_entered = threading.Barrier(2, timeout=WAIT_S)
    seen = {}

    def one_run(name, calls):
        source = ScriptedInput([name])
        with RunContext(input_source=source) as run:
            for _ in range(calls):
                USAGE.record(f"{name}/Asker", 10, 2, 0.1)
            both_entered.wait()  # the other run is entered, and has counted its calls, at this point
            seen[name] = (
                get_input_source() is source,
                get_input_source().ask("Who?"),
                USAGE.total().calls,
                current_run() is run,
            )
            both_entered.wait()  # neither leaves before both have looked

    threads = [plain_thread(lambda n=name, c=calls: one_run(n, c), name) for name, calls in (("A", 1), ("B", 3))]
    for thread in threads:
        thread.join(WAIT_S)
    assert seen == {"A": (True, "A", 1, True), "B": (True, "B", 3, True)}, seen
    assert USAGE.total().calls == 0 and current_run() is run_context, "neither run touched the test's own"


def test_the_warm_up_runs_once_per_run_and_its_thread_sees_the_run():
    seen = []
    done = threading.Event()

    def callback():
        start_thread(lambda: (seen.append(current_run()), done.set()), name="warm-up")

    with RunContext(warm_up=callback) as run:
        assert warm_up() is True and run.warmed
        assert done.wait(WAIT_S), "the warm-up thread ran"
        assert warm_up() is False, "the callback runs once"
    assert seen == [run], "the warm-up thread saw the run that started it"
    done.clear()
    with RunContext(warm_up=callback) as second:
        assert warm_up() is True, "a new run warms up again: the flag is the run's"
        assert done.wait(WAIT_S)
    assert seen == [run, second]
    with RunContext():
        assert warm_up() is False, "a run without a warm-up does nothing"


# ~~~ Built once, with everything ~~~
def test_state_does_not_leak_between_two_contexts(tmp_path):
    trace = tmp_path / "trace.jsonl"
    recorded = []
    with RunContext(
        input_source=ScriptedInput(["red"]),
        backend_factory=scripted_factory,
        backend_wrappers=[lambda backend, name: backend],
        embeddings_factory=hash_embeddings_factory,
        budget=RunBudget(max_calls=5),
        tool_recorder=lambda *args: recorded.append(args),
        warm_up=lambda: None,
        closed_input_hint="pass --yes",
        trace_file=str(trace),
    ) as first:
        USAGE.record("Asker", 10, 2, 0.1)
        server_settings(scripted_factory({"model_name": "m"}, "Asker")).context_window = 1024
        assert run_tool("Search", {"query": "q"}, lambda: "found") == "found" and recorded
        with pytest.raises(InputUnavailableError, match="^pass --yes$"):
            TerminalInput(read_line=_closed).ask("Question?")
        HumanStandardInputFlow.instantiate_from_default_config().call({"question": "Which colour?"})
        assert first.trace is not None
    with RunContext() as second:
        assert isinstance(get_input_source(), TerminalInput)
        assert second.backend_factory is None and second.backend_wrappers == ()
        assert second.embeddings_factory is None and get_run_budget() is None and second.warm_up is None
        assert USAGE.total().calls == 0, "a new context counts from zero"
        assert server_settings(scripted_factory({"model_name": "m"}, "Asker")).context_window is None
        assert second.trace is None and second.tool_recorder is None
        with pytest.raises(InputUnavailableError, match=r"RunContext\(input_source=AutoApproveInput\(\)\)"):
            TerminalInput(read_line=_closed).ask("Question?")
    assert first.usage.total().calls == 1, "the first run's usage stays on its object"
    assert first.budget.max_calls == 5 and len(first.backend_wrappers) == 1, "and so do its settings"
    assert first.trace is None and "Which colour?" in trace.read_text(), "leaving the first context closed its trace"


def _closed(prompt):
    raise EOFError


def test_a_context_writes_its_trace_file_and_closes_it(tmp_path):
    path = tmp_path / "run.jsonl"
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    with RunContext(trace_file=str(path), input_source=ScriptedInput(["red"])) as run:
        assert run.trace is None and not path.exists(), "nothing is opened before the first message"
        flow.call({"question": "Which colour?"})
        trace = run.trace
        assert trace is not None, "opened at the first message"
    assert trace._file.closed and run.trace is None
    assert '"Which colour?"' in path.read_text(), "the input message was traced"


def test_a_step_record_is_opened_at_the_first_flow_message_and_keeps_only_steps(tmp_path):
    path = tmp_path / "steps.jsonl"
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    with RunContext(step_record=str(path), input_source=ScriptedInput(["red"])) as run:
        assert run.steps is None and not path.exists(), "building and entering the run opens nothing"
        flow.call({"question": "Which colour?"})
        steps = run.steps
        assert steps is not None and path.exists(), "opened at the run's first message"
        flow.log_output_of("Controller", {"command": "finish", "command_args": {"answer": "red"}})
    assert steps._file.closed and run.steps is None, "leaving the run closed it"
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and '"finish"' in lines[0], "the step only, not the question: " + repr(lines)


def test_close_records_closes_the_trace_and_the_step_record_for_good(tmp_path):
    trace_path, steps_path = tmp_path / "trace.jsonl", tmp_path / "steps.jsonl"
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    with RunContext(
        trace_file=str(trace_path), step_record=str(steps_path), input_source=ScriptedInput(["red", "blue"])
    ) as run:
        flow.call({"question": "Which colour?"})
        trace, steps = run.trace, run.steps
        assert trace is not None and steps is not None
        run.close_records()
        assert trace._file.closed and steps._file.closed, "both files closed (flushed, for a report to read)"
        assert run.trace is None and run.steps is None and run.records_closed
        traced = trace_path.read_text()
        flow.call({"question": "Which other colour?"})
        assert run.trace is None and run.steps is None, "the run keeps no more records"
    assert trace_path.read_text() == traced, "nothing was written after close_records"


def test_chats_built_in_a_context_use_its_backend_factory_and_wrappers():
    SCRIPT.add("Paris.")
    wrapped = []

    def wrapper(backend, flow_name):
        wrapped.append(flow_name)
        return backend

    with RunContext(backend_factory=scripted_factory, backend_wrappers=[wrapper]) as run:
        chat = ChatAtomicFlow.instantiate_from_default_config(name="Asker")
        assert chat.call({"query": "Capital of France?"}) == {"api_output": "Paris."}
    assert wrapped == ["Asker"], "the run's wrapper wrapped the backend built"
    assert run.usage.total().calls == 1 and USAGE.total().calls == 0, "the call was counted in that run's meter"


def test_embeddings_follow_the_context():
    with RunContext(embeddings_factory=hash_embeddings_factory):
        assert type(build_embeddings({"type": "litellm"}, "Memory")).__name__ == "HashEmbeddings"


def test_the_memory_folder_of_the_run_is_the_default_of_set_memory_files(tmp_path):
    from aiflows_jarvis.CoreFlowModule import ConfigurationError, set_memory_files
    from aiflows_jarvis.JarvisFlowModule import JarvisFlow

    config = JarvisFlow.get_config()
    with pytest.raises(ConfigurationError, match="no memory folder"):
        set_memory_files(dict(config))
    with RunContext(memory_dir=str(tmp_path / "mem")):
        layout = set_memory_files(config)
    assert layout and all(
        path.startswith(str(tmp_path / "mem")) for files in layout.values() for path in files.values()
    )


@pytest.mark.parametrize(
    "setting, value, expected",
    [
        ("input_source", "yes", "an InputSource"),
        ("console", print, "a Console"),
        ("backend_factory", "gpt-4", "a function"),
        ("budget", {"max_calls": 3}, "a RunBudget"),
        ("backend_wrappers", ["recorder"], "a list of functions"),
        ("step_record", "", "a file path"),
        ("tool_provider", object(), "a tool provider"),
    ],
)
def test_a_wrong_setting_says_what_it_must_be(setting, value, expected):
    with pytest.raises(TypeError, match=f"RunContext\\({setting}=...\\) must be {expected}"):
        RunContext(**{setting: value})


def test_leaving_a_context_that_was_not_entered_is_refused():
    with pytest.raises(RuntimeError, match="not entered"):
        RunContext().__exit__(None, None, None)


def test_a_run_with_a_memory_dir_gives_the_flows_without_files_theirs_and_keeps_the_others(tmp_path, scripted_llm):
    """`RunContext(memory_dir=...)` stands for `set_memory_files`: at the outermost call, each boss of the tree with no
    memory files gets its own in the folder, and code runs in the working directory; files a flow was given stay."""
    from types import SimpleNamespace

    from aiflows_jarvis.CoderFlowModule import CoderFlow
    from aiflows_jarvis.CoreFlowModule import ConfigurationError, memory_files_of
    from aiflows_jarvis.CoreFlowModule.memory.folder import fill_memory_files

    coder = CoderFlow.instantiate_from_default_config()
    extend = coder.subflows["CtrlExMem"].subflows["Executor"].subflows["extend_library"]
    own = {key: str(tmp_path / "elsewhere" / name) for key, name in extend.flow_config["memory_file_names"].items()}
    extend.flow_config["memory_files"] = own
    fill_memory_files(coder, str(tmp_path / "memory"))
    assert coder.flow_config["memory_files"]["plan"] == str(tmp_path / "memory" / "plan_coder.txt")
    assert extend.flow_config["memory_files"] == own, "files a flow was given are kept"
    interpreter = coder.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"]
    assert interpreter.flow_config["workspace"] == os.getcwd()
    assert interpreter.flow_config["library_dir"] == str(tmp_path / "memory"), "`import library` works there"
    with pytest.raises(ConfigurationError, match=r"RunContext\(memory_dir="):
        memory_files_of(SimpleNamespace(flow_config={"name": "Boss", "memory_files": "???"}), {})


def test_a_stream_tells_the_listener_of_the_call_that_opened_it_not_another_contexts():
    """Two runs in two threads each show their own stream on their own status line: a stream takes the listener of
    the call that opens it, and keeps it wherever it is read."""
    import contextvars

    from aiflows_jarvis.ChatFlowModule.responses import StreamWatcher, listening_to_streams

    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "blue "}}]},
        {"choices": [{"index": 0, "delta": {"content": "sky"}, "finish_reason": "stop"}]},
    ]
    mine, theirs = [], []
    with listening_to_streams(mine.append):
        watcher = StreamWatcher(iter(chunks))

    def read_in_another_run():
        with listening_to_streams(theirs.append):
            list(watcher)

    contextvars.Context().run(read_in_another_run)
    assert mine == ["blue ", "sky"] and theirs == []
