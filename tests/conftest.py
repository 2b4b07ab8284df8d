"""Guards and fixtures shared by every test.

Autouse guards make a test fail if it reaches the network (anything but loopback and AF_UNIX), a real LLM, stdin, or
``flow_verse.sync_dependencies``. Each test runs in a fresh ``RunContext`` (the ``run_context`` fixture): the input
source, console, backend factory, usage meter, budget, trace... it sets are its own and gone after it.
"""

from __future__ import annotations

import shutil
import signal

import guards
import pytest

import aiflows_jarvis  # noqa: F401  (the offline tokenizer is set up before anything imports litellm)

# isort: split
from aiflows.backends.api_info import ApiInfo
from aiflows.utils import logging
from fake_editor import editor_command
from fakes import SCRIPT, Sink, scripted_factory
from linked_venv import copy_repository
from loopback_llm import LoopbackLLMServer

from aiflows_jarvis.ChatFlowModule import with_api_infos
from aiflows_jarvis.CoreFlowModule import Console, RunContext, ScriptedInput
from aiflows_jarvis.CoreFlowModule.run.redaction import forget_secrets

logging.set_verbosity_warning()

# A suite started as a background job inherits SIGINT ignored (POSIX shells ignore it for `cmd &`), and so would
# every process it starts: the tests that send Ctrl+C to Jarvis, to a kernel or to pytest itself need it delivered.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The slow half of the suite (over half of its time): kernels, command lines run whole, the fault suite, staging,
# paced streaming servers, the benchmark's own run. CI runs it on the default Python only; the other Pythons of the
# supported range run the rest (`-m "not slow"`).
SLOW_FILES = {
    "test_interpreter.py",
    "test_kernel_security.py",
    "test_cli.py",
    "test_faults_fast.py",
    "test_publish.py",
    "test_streaming.py",
    "test_benchmark_run.py",
}


def pytest_addoption(parser):
    parser.addoption(
        "--shard",
        metavar="I/N",
        default=None,
        help="run the I-th of N parts of the suite (1-based), whole test files in each, the parts about "
        "equal in test count: CI's other Pythons share the fast half this way",
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    if config.getoption("--shard"):
        config.pluginmanager.register(_Shard(config.getoption("--shard")), "shard")


class _Shard:
    """Keeps one part of what the other options selected (after `-m`: the parts of the fast half are even)."""

    def __init__(self, shard: str):
        try:
            self.index, self.count = (int(n) for n in shard.split("/"))
            assert 1 <= self.index <= self.count
        except (ValueError, AssertionError):
            raise pytest.UsageError(f"--shard {shard}: give I/N with 1 <= I <= N, e.g. --shard 2/3") from None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        kept, dropped = shard_items(items, self.index, self.count)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept


def shard_items(items, index: int, count: int):
    """``(the items of part index of count, the others)``: files dealt whole, the largest first, each to the part
    that holds fewest tests so far (the same answer on every machine for the same files)."""
    files = {}
    for item in items:
        files.setdefault(str(item.path), []).append(item)
    totals = [0] * count
    part_of = {}
    for path in sorted(files, key=lambda p: (-len(files[p]), p)):
        part = min(range(count), key=lambda n: (totals[n], n))
        part_of[path] = part
        totals[part] += len(files[path])
    kept = [item for item in items if part_of[str(item.path)] == index - 1]
    return kept, [item for item in items if part_of[str(item.path)] != index - 1]


@pytest.fixture(autouse=True)
def _guards(monkeypatch):
    """The four guards; yields the list of network attempts refused. A test that meant to be refused clears it;
    any other attempt fails the test, even if the code that made it swallowed the error."""
    blocked = guards.block_network(monkeypatch)
    guards.block_stdin(monkeypatch)
    guards.block_flow_verse_sync(monkeypatch)
    guards.block_real_llm(monkeypatch)
    yield blocked
    assert not blocked, f"the test tried the network (the error may have been swallowed): {blocked}"


@pytest.fixture(autouse=True)
def _no_real_editor(monkeypatch):
    """The developer's own $VISUAL / $EDITOR never opens during a test (the fake_editor fixture sets its own)."""
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)


@pytest.fixture(autouse=True)
def run_context():
    """The test's own RunContext, entered for the whole test: what the test (or a fixture) sets on it
    (``run_context.input_source = ...``, ``.backend_factory``...) lives in it and leaves with it (its trace file is
    closed). A test about a run builds its own ``RunContext(...)`` with the settings and enters it inside this one."""
    with RunContext() as context:
        yield context
    SCRIPT.replies.clear()
    SCRIPT.calls.clear()
    forget_secrets()  # the secrets a test's backends and interpreters made known are its own


@pytest.fixture
def scripted_llm(run_context):
    """Every chat flow answers from the scripted queue ``SCRIPT`` (add replies with ``.add``).

    At the end of the test, replies left unused fail the test: the run asked fewer questions than scripted.
    """
    run_context.backend_factory = scripted_factory
    yield SCRIPT
    left = list(SCRIPT.replies)
    SCRIPT.replies.clear()
    assert not left, f"scripted LLM replies were not used: {left}"


@pytest.fixture
def user(run_context):
    """The user, scripted: ``user.add("answer", ...)``; questions asked are in ``user.asked``."""
    source = ScriptedInput()
    run_context.input_source = source
    return source


@pytest.fixture
def loopback():
    """A loopback OpenAI-compatible server (``.add`` replies, ``.requests`` recorded)."""
    with LoopbackLLMServer() as server:
        yield server


@pytest.fixture
def loopback_llm(loopback, run_context):
    """Every chat flow uses the real LiteLLMBackend -> litellm -> HTTP path against the loopback server."""
    api = ApiInfo(backend_used="openai", api_key="sk-test", api_base=loopback.url)
    run_context.backend_factory = with_api_infos([api])
    yield loopback
    assert not loopback.errors, f"the loopback server saw unexpected calls: {loopback.errors}"


@pytest.fixture
def make_interpreter(tmp_path):
    """``make(**kwargs)``: a CodeInterpreter (in a workspace of its own under tmp_path), closed after the test."""
    from aiflows_jarvis.InterpreterFlowModule.interpreter import CodeInterpreter

    made = []

    def make(**kwargs):
        kwargs.setdefault("workspace", str(tmp_path / f"ws{len(made)}"))
        interpreter = CodeInterpreter(**kwargs)
        made.append(interpreter)
        return interpreter

    yield make
    for interpreter in made:
        interpreter.close()


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory):
    """This repository's files (one copy per test module), to build from without writing into the checkout."""
    folder = tmp_path_factory.mktemp("project")
    copy_repository(folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fake_editor(monkeypatch, tmp_path):
    """The editor command is the fake editor; set FAKE_EDITOR_* to say what it does. Its invocations are logged."""
    log = tmp_path / "editor.log"
    monkeypatch.setenv("FAKE_EDITOR_LOG", str(log))
    monkeypatch.setenv("VISUAL", editor_command())
    return log


@pytest.fixture
def quiet_console(run_context):
    """Flows print to a console writing into a list (``.lines``) instead of stdout."""

    sink = Sink()
    run_context.console = Console(stream=sink, color=False)
    return sink
