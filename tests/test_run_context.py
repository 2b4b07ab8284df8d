"""RunContext: one object holds what a run uses; contexts nest, threads see theirs, nothing leaks between two."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from fakes import SCRIPT, scripted_factory
from subprocess_guard import network_guarded

from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow, add_backend_wrapper, set_backend_factory
from aiflows_jarvis.ChatFlowModule.servers import server_settings
from aiflows_jarvis.CoreFlowModule import (
    USAGE,
    Console,
    RunContext,
    ScriptedInput,
    current_run,
    get_console,
    get_input_source,
    set_input_source,
    set_trace_file,
)
from aiflows_jarvis.CoreFlowModule.errors import InputUnavailableError
from aiflows_jarvis.CoreFlowModule import TerminalInput, set_closed_input_hint
from aiflows_jarvis.CoreFlowModule import RunBudget, get_run_budget, set_run_budget
from aiflows_jarvis.CoreFlowModule.run.context import default_run
from aiflows_jarvis.CoreFlowModule import run_tool, set_tool_recorder
from aiflows_jarvis.CoreFlowModule import set_warm_up, warm_up
from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow
from aiflows_jarvis.VectorStoreFlowModule import hash_embeddings_factory, set_embeddings_factory
from aiflows_jarvis.VectorStoreFlowModule.embeddings import build_embeddings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_each_test_runs_in_a_context_of_its_own(run_context):
    assert current_run() is run_context, "the autouse fixture entered it"
    assert run_context is not default_run(), "tests never change the process's default context"


def test_nesting_restores_the_outer_context():
    outer_source, inner_source = ScriptedInput(), ScriptedInput()
    with RunContext(input_source=outer_source) as outer:
        assert current_run() is outer and get_input_source() is outer_source
        with RunContext(input_source=inner_source) as inner:
            assert current_run() is inner and get_input_source() is inner_source
            set_run_budget(RunBudget(max_calls=3))
        assert current_run() is outer, "leaving the inner context puts the outer one back"
        assert get_input_source() is outer_source and get_run_budget() is None, "the inner one's budget left with it"
        assert inner.budget.max_calls == 3, "what the inner run set stays readable on its object"


def test_an_error_inside_a_context_still_restores_the_outer_one(run_context):
    with pytest.raises(KeyError):
        with RunContext():
            raise KeyError("boom")
    assert current_run() is run_context


def test_the_defaults_are_the_terminal_and_stdout():
    with RunContext() as run:
        assert isinstance(get_input_source(), TerminalInput), "a bare context asks the terminal"
        assert get_console().stream is sys.stdout, "and prints to stdout"
        assert run.backend_factory is None and run.budget is None and run.trace is None
        assert USAGE.total().calls == 0


def test_a_bare_flow_call_works_with_the_defaults(tmp_path):
    """In a fresh process, with no context entered and nothing set: the flow prints its question on stdout and reads
    the answer from the terminal's input."""
    script = ("from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow\n"
              "flow = HumanStandardInputFlow.instantiate_from_default_config()\n"
              "print('ANSWER=' + flow.call({'question': 'Which colour?'})['human_input'])\n")
    env = {**os.environ, "NO_COLOR": "1"}
    with network_guarded(env) as guarded:
        done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=guarded, input="blue\n",
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Which colour?" in done.stdout, "the default console printed the question"
    assert "ANSWER=blue" in done.stdout, "the default input source read the line given on stdin"


def test_a_flow_called_inside_a_context_uses_its_input_and_console():
    from fakes import Sink

    sink = Sink()
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    with RunContext(input_source=ScriptedInput(["green"], echo=True), console=Console(stream=sink, color=False)):
        assert flow.call({"question": "Which colour?"}) == {"human_input": "green"}
    assert "Which colour?" in sink.text, "the context's console showed the question"


def test_a_thread_started_inside_a_run_sees_that_run():
    seen = {}

    def look():
        seen["run"], seen["source"] = current_run(), get_input_source()

    source = ScriptedInput()
    with RunContext(input_source=source) as run:
        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
    assert seen == {"run": run, "source": source}


def test_the_warm_up_runs_in_its_run_and_only_once():
    seen = []
    with RunContext() as run:
        started = threading.Event()

        def callback():
            threading.Thread(target=lambda: (seen.append(current_run()), started.set())).start()

        set_warm_up(callback)
        assert warm_up() is True
        assert started.wait(30), "the warm-up thread ran"
        assert warm_up() is False, "the callback runs once"
    assert seen == [run], "the warm-up thread saw the run that started it"


def test_state_does_not_leak_between_two_contexts(tmp_path):
    trace = tmp_path / "trace.jsonl"
    recorded = []
    with RunContext() as first:
        set_input_source(ScriptedInput())
        set_backend_factory(scripted_factory)
        add_backend_wrapper(lambda backend, name: backend)
        set_embeddings_factory(hash_embeddings_factory)
        set_run_budget(RunBudget(max_calls=5))
        set_tool_recorder(lambda *args: recorded.append(args))
        set_warm_up(lambda: None)
        set_closed_input_hint("pass --yes")
        set_trace_file(str(trace))
        USAGE.record("Asker", 10, 2, 0.1)
        server_settings(scripted_factory({"model_name": "m"}, "Asker")).context_window = 1024
        assert run_tool("Search", {"query": "q"}, lambda: "found") == "found" and recorded
    with RunContext() as second:
        assert isinstance(get_input_source(), TerminalInput)
        assert second.backend_factory is None and second.backend_wrappers == []
        assert second.embeddings_factory is None and get_run_budget() is None and second.warm_up is None
        assert USAGE.total().calls == 0, "a new context counts from zero"
        assert server_settings(scripted_factory({"model_name": "m"}, "Asker")).context_window is None
        assert second.trace is None and second.tool_recorder is None
        with pytest.raises(InputUnavailableError, match="call set_input_source"):
            TerminalInput(read_line=_closed).ask("Question?")
    assert first.usage.total().calls == 1, "the first run's usage stays on its object"
    assert first.trace is None and trace.exists(), "leaving the first context closed its trace file"


def _closed(prompt):
    raise EOFError


def test_a_context_writes_its_trace_file_and_closes_it(tmp_path):
    path = tmp_path / "run.jsonl"
    flow = HumanStandardInputFlow.instantiate_from_default_config()
    with RunContext(trace_file=str(path), input_source=ScriptedInput(["red"])) as run:
        flow.call({"question": "Which colour?"})
        trace = run.trace
        assert trace is not None, "opened at the first message"
    assert trace._file.closed and run.trace is None
    assert '"Which colour?"' in path.read_text(), "the input message was traced"


def test_chats_built_in_a_context_use_its_backend_factory():
    SCRIPT.add("Paris.")
    with RunContext(backend_factory=scripted_factory) as run:
        chat = ChatAtomicFlow.instantiate_from_default_config(name="Asker")
        assert chat.call({"query": "Capital of France?"}) == {"api_output": "Paris."}
    assert run.usage.total().calls == 1 and USAGE.total().calls == 0, "the call was counted in that run's meter"


def test_embeddings_follow_the_context():
    with RunContext(embeddings_factory=hash_embeddings_factory):
        assert type(build_embeddings({"type": "litellm"}, "Memory")).__name__ == "HashEmbeddings"


def test_the_memory_folder_of_the_run_is_the_default_of_set_memory_files(tmp_path):
    from aiflows_jarvis.CoreFlowModule import ConfigurationError
    from aiflows_jarvis.CoreFlowModule import set_memory_files
    from aiflows_jarvis.JarvisFlowModule import JarvisFlow

    config = JarvisFlow.get_config()
    with pytest.raises(ConfigurationError, match="no memory folder"):
        set_memory_files(dict(config))
    with RunContext(memory_dir=str(tmp_path / "mem")):
        layout = set_memory_files(config)
    assert layout and all(path.startswith(str(tmp_path / "mem")) for files in layout.values()
                          for path in files.values())


@pytest.mark.parametrize("setting, value, expected", [
    ("input_source", "yes", "an InputSource"),
    ("console", print, "a Console"),
    ("backend_factory", "gpt-4", "a function"),
    ("budget", {"max_calls": 3}, "a RunBudget"),
    ("backend_wrappers", ["recorder"], "a list of functions"),
])
def test_a_wrong_setting_says_what_it_must_be(setting, value, expected):
    with pytest.raises(TypeError, match=f"RunContext\\({setting}=...\\) must be {expected}"):
        RunContext(**{setting: value})


def test_leaving_a_context_that_was_not_entered_is_refused():
    with pytest.raises(RuntimeError, match="not entered"):
        RunContext().__exit__(None, None, None)
