"""The ``set_*`` functions of the last release still work for one release: each warns (DeprecationWarning, at the
caller's line), changes the current run and returns what was set before. This file is the only one that calls them:
everything else builds a ``RunContext`` with its settings."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from fakes import scripted_factory
from subprocess_guard import network_guarded

from aiflows_jarvis.ChatFlowModule import (
    add_backend_wrapper,
    backend_factory,
    remove_backend_wrapper,
    set_backend_factory,
)
from aiflows_jarvis.CoreFlowModule import (
    AutoApproveInput,
    Console,
    RunBudget,
    RunContext,
    ScriptedInput,
    TerminalInput,
    current_run,
    set_closed_input_hint,
    set_console,
    set_input_source,
    set_run_budget,
    set_step_record,
    set_tool_recorder,
    set_tool_replay,
    set_trace_file,
    set_warm_up,
    using_input_source,
    warm_up,
)
from aiflows_jarvis.CoreFlowModule.console.interaction import CLOSED_INPUT_HINT
from aiflows_jarvis.HumanStandardInputFlowModule import HumanStandardInputFlow
from aiflows_jarvis.VectorStoreFlowModule import hash_embeddings_factory, set_embeddings_factory


def recorder(*args):
    return None


def replay(*args):
    return None


def other_factory(config, flow_name):
    return scripted_factory(config, flow_name)


# (the alias, the RunContext setting it changes, a value the run starts with, the value the alias sets)
SETTERS = [
    (set_input_source, "input_source", ScriptedInput(), AutoApproveInput()),
    (set_console, "console", Console(color=False), Console(color=False)),
    (set_run_budget, "budget", RunBudget(max_calls=1), RunBudget(max_calls=2)),
    (set_warm_up, "warm_up", lambda: None, lambda: None),
    (set_tool_recorder, "tool_recorder", recorder, replay),
    (set_tool_replay, "tool_replay", replay, recorder),
    (set_backend_factory, "backend_factory", scripted_factory, other_factory),
    (set_embeddings_factory, "embeddings_factory", hash_embeddings_factory, other_factory),
]


@pytest.mark.parametrize("setter, setting, before, after", SETTERS, ids=[s[0].__name__ for s in SETTERS])
def test_a_deprecated_setter_warns_changes_the_current_run_and_returns_the_previous_value(
    setter, setting, before, after
):
    with RunContext(**{setting: before}) as run:
        with pytest.warns(
            DeprecationWarning,
            match=f"{setter.__name__}\\(\\) is deprecated.*RunContext\\({setting}="
            r"\.\.\.\)",
        ) as caught:
            previous = setter(after)
        assert getattr(run, setting) is after, "the current run changed"
        assert previous is before, "the setter returns what was set before"
    assert caught[0].filename == __file__, "the warning points at the line that called the setter"
    assert getattr(current_run(), setting) is not after, "the run that was current outside is not changed"


def test_set_input_source_none_and_using_input_source():
    source = ScriptedInput(["red"])
    with RunContext(input_source=source) as run:
        with pytest.warns(DeprecationWarning, match="set_input_source"):
            assert set_input_source(None) is source
        assert isinstance(run.input_source, TerminalInput), "None puts the terminal back"
        scripted = ScriptedInput()
        with pytest.warns(DeprecationWarning, match="using_input_source"):
            with using_input_source(scripted) as used:
                assert used is scripted and run.input_source is scripted
        assert isinstance(run.input_source, TerminalInput), "the block's source left with the block"


def test_set_closed_input_hint_returns_the_hint_in_effect():
    with RunContext() as run:
        with pytest.warns(DeprecationWarning, match="set_closed_input_hint"):
            assert set_closed_input_hint("pass --yes") == CLOSED_INPUT_HINT, "the default hint was in effect"
        assert run.closed_input_hint == "pass --yes"
        with pytest.warns(DeprecationWarning):
            assert set_closed_input_hint(None) == "pass --yes"
        assert run.closed_input_hint is None


def test_set_warm_up_arms_the_warm_up_again():
    ran = []
    with RunContext(warm_up=lambda: ran.append("first")) as run:
        assert warm_up() is True and run.warmed
        with pytest.warns(DeprecationWarning, match="set_warm_up"):
            set_warm_up(lambda: ran.append("second"))
        assert not run.warmed and warm_up() is True
    assert ran == ["first", "second"]


def test_the_backend_wrappers_and_the_backend_factory_block():
    def wrap(backend, flow_name):
        return backend

    with RunContext(backend_factory=scripted_factory) as run:
        with pytest.warns(DeprecationWarning, match="add_backend_wrapper"):
            assert add_backend_wrapper(wrap) is None
        assert run.backend_wrappers == (wrap,)
        with pytest.warns(DeprecationWarning, match="remove_backend_wrapper"):
            remove_backend_wrapper(wrap)
        assert run.backend_wrappers == ()
        with pytest.warns(DeprecationWarning, match="backend_factory"):
            with backend_factory(other_factory) as factory:
                assert factory is other_factory and run.backend_factory is other_factory
        assert run.backend_factory is scripted_factory, "the block's factory left with the block"


@pytest.mark.parametrize(
    "setter, setting, attribute", [(set_trace_file, "trace_file", "trace"), (set_step_record, "step_record", "steps")]
)
def test_a_record_setter_opens_the_file_now_and_none_closes_it(tmp_path, setter, setting, attribute):
    path = tmp_path / "record.jsonl"
    with RunContext(input_source=ScriptedInput(["red"])) as run:
        with pytest.warns(DeprecationWarning, match=setter.__name__):
            record = setter(str(path))
        assert getattr(run, attribute) is record and getattr(run, setting) == str(path) and path.exists()
        HumanStandardInputFlow.instantiate_from_default_config().call({"question": "Which colour?"})
        with pytest.warns(DeprecationWarning):
            assert setter(None) is None
        assert record._file.closed and getattr(run, attribute) is None and getattr(run, setting) is None


# ~~~ The deprecated context managers warn at the caller's line ~~~
@pytest.mark.parametrize(
    "enter",
    [lambda: using_input_source(ScriptedInput()), lambda: backend_factory(None)],
    ids=["using_input_source", "backend_factory"],
)
def test_a_deprecated_context_manager_warns_at_the_callers_line(enter):
    """Python shows a DeprecationWarning by default only when it is attributed to ``__main__``: one attributed to
    contextlib.py (the ``__enter__`` that runs the generator) is never seen by the script that should change."""
    with RunContext():
        with pytest.warns(DeprecationWarning) as caught:
            with enter():
                pass
    assert caught[0].filename == __file__, f"the warning points at {caught[0].filename}:{caught[0].lineno}"


# ~~~ A script of the last release: set_* at its top level, flows called from threads it starts ~~~
SCRIPT = """
import threading, warnings
warnings.simplefilter("ignore", DeprecationWarning)
from aiflows_jarvis.CoreFlowModule import (
    RunBudget, ScriptedInput, get_input_source, get_run_budget, set_input_source, set_run_budget,
)
source, budget = ScriptedInput(["red"]), RunBudget(max_calls=1)
set_input_source(source)
set_run_budget(budget)
seen = {}
def worker():  # what a flow called in this thread would ask and be limited by
    seen["source"], seen["budget"] = get_input_source() is source, get_run_budget() is budget
thread = threading.Thread(target=worker)
thread.start()
thread.join()
print("SEEN=" + repr(seen))
"""


def test_set_star_at_a_scripts_top_level_reaches_the_threads_the_script_starts(tmp_path):
    """The last release kept one default run per process: ``set_run_budget()`` / ``set_input_source()`` before any
    ``with`` applied to every flow call of the process, in any thread (a batch script with a thread pool); the aliases
    keep such scripts working for one release."""
    env = {**os.environ, "NO_COLOR": "1"}
    with network_guarded(env) as guarded:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            cwd=tmp_path,
            env=guarded,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SEEN={'source': True, 'budget': True}" in done.stdout, done.stdout


# ~~~ Import paths the last release's README and docs gave users ~~~
@pytest.mark.parametrize(
    "statement",
    [
        "from aiflows_jarvis.CoreFlowModule.memory import set_memory_files",  # README.md, "Use the flows"
        "from aiflows_jarvis.CoreFlowModule.config_tree import chat_backends_skeleton",  # docs/using-the-flows.md
    ],
)
def test_an_import_the_last_release_documented_still_works(statement):
    """The last release's README taught ``from aiflows_jarvis.CoreFlowModule.memory import set_memory_files`` and its
    docs ``...CoreFlowModule.config_tree import chat_backends_skeleton`` (its hub READMEs the same under
    flow_modules.<namespace>): both work for one release, as the set_* functions do."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(statement, {})
