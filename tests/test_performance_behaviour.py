"""What makes start-up and rounds cheap, checked as behaviour (never as times; the figures are in benchmarks/):
a prompt template is compiled once, each YAML file is parsed once per process, the cl100k tokenizer is not loaded
when the API reports usage, subflows are built without hydra, and starting a run leaves unloaded what only other
uses need (litellm's tokenizer, aiflows' hub client, hydra, rich, aiohttp) until something uses it."""

from __future__ import annotations

import builtins
import collections
import io
import json
import os
import subprocess
import sys
import uuid
import warnings

import jinja2
import pytest
import tiktoken.registry
from aiflows.backends.api_info import ApiInfo
from fakes import command, scripted_factory
from loopback_llm import completion_json
from subprocess_guard import network_guarded

from aiflows_jarvis.app import launcher
from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
from aiflows_jarvis.CoreFlowModule import ConfigurationError, StrictJinjaPrompt
from aiflows_jarvis.CoreFlowModule.flows import config_cache, prompts
from aiflows_jarvis.CoreFlowModule.run import usage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def compiles(monkeypatch):
    """``{template source: times compiled}`` for every Jinja template compiled during the test."""
    counts = {}
    real = jinja2.Environment.compile

    def counting(self, source, *args, **kwargs):
        counts[source] = counts.get(source, 0) + 1
        return real(self, source, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    prompts.compiled.cache_clear()
    return counts


def test_a_template_is_compiled_once_however_often_it_is_rendered(compiles):
    template = f"Hello {{{{ name }}}} ({uuid.uuid4()})"
    prompt = StrictJinjaPrompt(template=template, input_variables=["name"])
    rendered = [prompt.format(name=f"user {i}") for i in range(5)]
    again = prompt.partial(name="Ada")
    rendered += [again.format(), StrictJinjaPrompt.from_prompt({"template": template}).format(name="Bob")]
    assert rendered[0].startswith("Hello user 0") and rendered[-2].startswith("Hello Ada")
    assert compiles[template] == 1, "seven renders by three prompt objects, one compilation"


def test_a_chat_compiles_each_of_its_templates_once_over_many_rounds(compiles, scripted_llm):
    chat = ChatAtomicFlow.instantiate_from_default_config(name="Asker")
    for i in range(6):
        scripted_llm.add(f"answer {i}")
        assert chat.call({"query": f"question {i}"}) == {"api_output": f"answer {i}"}
    sources = [
        chat.system_message_prompt_template.template,
        chat.init_human_message_prompt_template.template,
        chat.human_message_prompt_template.template,
    ]
    assert all(compiles.get(source) == 1 for source in sources), (
        f"six rounds compile each template once: {[compiles.get(s) for s in sources]}"
    )


@pytest.fixture
def yaml_reads(monkeypatch):
    """``{path: times opened}`` for every YAML file opened during the test (a parse opens the file)."""
    counts = {}
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and str(file).endswith((".yaml", ".yml")):
            path = os.path.realpath(file)
            counts[path] = counts.get(path, 0) + 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    config_cache.clear()
    return counts


def test_each_yaml_file_is_parsed_once_per_process_across_two_builds_of_jarvis(yaml_reads, tmp_path, run_context):
    run_context.backend_factory = scripted_factory
    api_infos = [ApiInfo(backend_used="openai", api_key="sk-test")]
    for run in ("first", "second"):
        config = launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml"))
        flow = launcher.instantiate(config, api_infos, str(tmp_path / run))
        launcher.close_interpreters(flow)
    assert os.path.realpath(os.path.join(ROOT, "configs", "jarvis.yaml")) in yaml_reads
    modules = [path for path in yaml_reads if os.sep + "aiflows_jarvis" + os.sep in path]
    assert len(modules) >= 20, f"building Jarvis reads the YAML of every flow class of its tree: {sorted(yaml_reads)}"
    parsed_again = {path: n for path, n in yaml_reads.items() if n > 1}
    assert not parsed_again, f"parsed more than once: {parsed_again}"


def test_a_yaml_file_that_changes_is_read_again(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("a: 1\nb: ${a}\n")
    first = config_cache.read_yaml(str(path))
    first["a"] = 99  # the caller's copy: the cache keeps its own
    assert config_cache.read_yaml(str(path)) == {"a": 1, "b": 1}
    path.write_text("a: 2\nb: ${a}\nc: [1, 2]\n")
    assert config_cache.read_yaml(str(path)) == {"a": 2, "b": 2, "c": [1, 2]}


@pytest.fixture
def fresh_tokenizer_state(monkeypatch):
    """No cl100k encoding loaded yet in this process, as far as tiktoken and the usage meter know."""
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    usage.cl100k_tokenizer.cache_clear()
    monkeypatch.setattr(usage, "_counts", collections.OrderedDict())  # no text counted yet either
    yield
    usage.cl100k_tokenizer.cache_clear()


def test_the_tokenizer_is_not_loaded_when_the_api_reports_usage(fresh_tokenizer_state, loopback_llm):
    loopback_llm.add(completion_json("Paris.", prompt_tokens=25))
    chat = ChatAtomicFlow.instantiate_from_default_config(name="Asker")
    assert chat.call({"query": "Capital of France?"}) == {"api_output": "Paris."}
    assert not usage.tokenizer_loaded() and "cl100k_base" not in tiktoken.registry.ENCODINGS, (
        "the API counted the tokens and the prompt fits for sure: nothing needed the tokenizer"
    )

    no_usage = completion_json("Rome.")
    del no_usage["usage"]
    loopback_llm.add(no_usage)
    assert chat.call({"query": "Capital of Italy?"}) == {"api_output": "Rome."}
    assert usage.tokenizer_loaded(), "a reply without usage is counted with the tokenizer"
    assert not usage.USAGE.calls[-1].reported


def test_a_prompt_that_may_not_fit_is_still_counted_and_shortened(fresh_tokenizer_state, scripted_llm):
    """The byte bound only skips the count for prompts that fit for sure; a long one is counted and fitted."""
    chat = ChatAtomicFlow.instantiate_from_default_config(
        name="Asker",
        context_window=1024,
        announce_fitting=False,
        backend={"max_tokens": 200},
        shrinkable_inputs=["query"],
        min_input_chars=100,
    )
    scripted_llm.add("ok")
    assert chat.call({"query": "word " * 3000}) == {"api_output": "ok"}
    sent = scripted_llm.calls[-1]["messages"]
    assert usage.tokenizer_loaded()
    assert usage.count_message_tokens(sent) <= 1024 - 200 - 102, "the prompt was shortened to fit"


class CountingEncoding:
    """The cl100k encoding, recording the length of every text it encodes."""

    def __init__(self, encoding):
        self.encoding, self.encoded = encoding, []

    def encode(self, text, **kwargs):
        self.encoded.append(len(text))
        return self.encoding.encode(text, **kwargs)


@pytest.fixture
def counting_encoder(fresh_tokenizer_state, monkeypatch):
    encoder = CountingEncoding(tiktoken.get_encoding("cl100k_base"))

    def loaded():
        return encoder

    loaded.cache_clear = lambda: None
    monkeypatch.setattr(usage, "cl100k_tokenizer", loaded)
    return encoder


RESULT_TEMPLATE = {
    "_target_": "aiflows.prompt_template.JinjaPrompt",
    "template": "Output:\n{{result}}\nQ: {{query}}",
    "input_variables": ["query", "result"],
}


def reading_chat(window):
    """A chat given a run's output as ``result``, whose window keeps the first exchange (where the output is)."""
    return ChatAtomicFlow.instantiate_from_default_config(
        name="Reader",
        context_window=window,
        announce_fitting=False,
        backend={"max_tokens": 200},
        previous_messages={"first_k": 1},
        init_human_message_prompt_template=RESULT_TEMPLATE,
        human_message_prompt_template=RESULT_TEMPLATE,
        input_interface_non_initialized=["query", "result"],
        input_interface_initialized=["query", "result"],
    )


def test_a_long_message_is_counted_once_not_at_every_later_call(counting_encoder, scripted_llm):
    output = "".join(f"line {i} of what the code printed\n" for i in range(4000))  # about 130 KB, it fits
    chat = reading_chat(100_000)
    scripted_llm.add("first", "second", "third", "fourth")
    chat.call({"query": "What did it print?", "result": output})
    for query in ("And then?", "Why?", "What next?"):
        chat.call({"query": query, "result": "short"})
    assert output in scripted_llm.calls[-1]["messages"][1]["content"], "the window still sends the output"
    big = [n for n in counting_encoder.encoded if n >= len(output)]
    assert len(big) == 1, f"the message holding the output was tokenized {len(big)} times in 4 calls"


def test_an_output_that_cannot_fit_is_cut_before_it_is_counted(counting_encoder, scripted_llm):
    output = "x" * 3_000_000  # 3 MB: 375,000 tokens at least, for a window of 2,048
    chat = reading_chat(2048)
    scripted_llm.add("ok")
    assert chat.call({"query": "What did it print?", "result": output}) == {"api_output": "ok"}
    assert max(counting_encoder.encoded) < 300_000, "the whole output was tokenized"
    sent = scripted_llm.calls[-1]["messages"]
    assert usage.count_message_tokens(sent) <= 2048 - 200 - 204 and "characters cut" in sent[-1]["content"]


def test_the_byte_bound_is_never_below_the_token_count():
    texts = [
        "",
        "plain English words",
        "日本語のテキスト",
        "🙂" * 10,
        "\x00\x01\x02",
        "<|endoftext|>",
        "a" * 500,
        "x = {'k': [1, 2, 3]}\n" * 20,
        "\ud800 lone surrogate",
    ]
    for text in texts:
        messages = [{"role": "user", "content": text}]
        assert usage.message_tokens_at_most(messages) >= usage.count_message_tokens(messages), repr(text)


def test_starting_a_run_loads_neither_the_tokenizer_nor_what_only_other_uses_need():
    """In a fresh process, up to a built Jarvis with aiflows' backends imported: litellm (and with it the cl100k
    tokenizer), aiflows' hub client (huggingface_hub), omegaconf, hydra and rich all wait until something uses them
    (and then work; litellm offline and quiet)."""
    script = (
        "import json, os, sys, tempfile\n"
        "import aiflows_jarvis.CoreFlowModule\n"
        "from aiflows.backends.api_info import ApiInfo\n"
        "from aiflows.backends.llm_lite import LiteLLMBackend\n"
        "from aiflows_jarvis.CoreFlowModule import RunContext\n"
        "from aiflows_jarvis.app import launcher\n"
        "with RunContext(backend_factory=lambda config, name: object()):\n"
        "    config = launcher.load_config(os.path.join('configs', 'jarvis.yaml'))\n"
        "    flow = launcher.instantiate(config, [{'backend_used': 'openai', 'api_key': 'k'}], tempfile.mkdtemp())\n"
        "state = {'executed': sorted(m for m in ('litellm', 'huggingface_hub', 'hydra.utils', 'rich', 'omegaconf')\n"
        "                            if m in sys.modules)}\n"
        "from aiflows import flow_verse\n"
        "state['sync'] = flow_verse.sync_dependencies.__module__\n"
        "state['hub_client_after_use'] = 'huggingface_hub' in sys.modules\n"
        "import hydra\n"
        "from aiflows.utils import rich_utils\n"
        "state['after_use'] = [hydra.utils.instantiate.__name__, rich_utils.rich.tree.Tree.__name__]\n"
        "from aiflows_jarvis.CoreFlowModule.startup.offline import import_litellm\n"
        "litellm = import_litellm()\n"
        "state['litellm'] = [litellm.telemetry, litellm.suppress_debug_info,\n"
        "                    len(litellm.utils.encoding.encode('hello world'))]\n"
        "from aiflows.base_flows import abstract\n"
        "state['omegaconf_when_used'] = abstract.OmegaConf.to_container("
        "abstract.OmegaConf.create({'a': '${b}', 'b': 1}),\n"
        "                                                              resolve=True)\n"
        "print(json.dumps(state))\n"
    )
    with network_guarded() as env:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state["executed"] == [], state
    assert state["sync"] == "aiflows.flow_verse.loading" and state["hub_client_after_use"], state
    assert state["after_use"] == ["instantiate", "Tree"], state
    assert state["litellm"] == [False, True, 2], "litellm, imported when used: offline and quiet"
    assert state["omegaconf_when_used"] == {"a": 1, "b": 1}, "aiflows' OmegaConf is imported when first used"


def test_a_plain_subflow_configuration_is_built_without_hydra(monkeypatch, scripted_llm):
    """Subflows are built by calling their target directly; hydra's errors are kept for a failing target, but a
    ConfigurationError (which names the key and what to do) comes as it is, whichever way the flow is built."""
    import hydra
    from hydra.errors import InstantiationException

    from aiflows_jarvis.CoreFlowModule import instantiate
    from aiflows_jarvis.CoreFlowModule.flows.instantiate import is_plain

    calls = []
    real = hydra.utils.instantiate
    monkeypatch.setattr(hydra.utils, "instantiate", lambda *a, **k: calls.append(a) or real(*a, **k))
    target = "aiflows_jarvis.ChatFlowModule.ChatAtomicFlow.instantiate_from_default_config"
    chat = instantiate(
        {"_target_": target, "name": "Direct", "backend": {"api_infos": [ApiInfo(backend_used="openai", api_key="k")]}}
    )
    assert isinstance(chat, ChatAtomicFlow) and chat.flow_config["name"] == "Direct" and not calls
    assert not is_plain({"_target_": target, "name": "${other}"}), "an interpolation goes through hydra"
    with pytest.raises(InstantiationException, match="Error in call to target 'posixpath.join'"):
        instantiate({"_target_": "os.path.join", "a": 1})
    for through_hydra in (False, True):
        bad = {
            "_target_": target,
            "system_message_prompt_template": 1,
            **({"_convert_": "all"} if through_hydra else {}),
        }
        with pytest.raises(ConfigurationError, match="A prompt template must be a JinjaPrompt"):
            instantiate(bad)
    assert len(calls) == 1, "only the configuration with a hydra key went through hydra"
    scripted_llm.add(command("noop"))
    assert chat.call({"query": "hi"}) == {"api_output": command("noop")}


@pytest.fixture
def tail_reads(monkeypatch):
    """How many times a log was read from its end (``logs._read_tail_of``), and the log views cleared first."""
    from aiflows_jarvis.CoreFlowModule.memory import logs

    logs._log_views.clear()
    calls = []
    real = logs._read_tail_of

    def counting(*args, **kwargs):
        calls.append(args[1:])
        return real(*args, **kwargs)

    monkeypatch.setattr(logs, "_read_tail_of", counting)
    yield calls
    logs._log_views.clear()


def _fresh_tail(path, entries, chars):
    """``read_log_tail`` as a first reader of the file gets it (no view kept)."""
    from aiflows_jarvis.CoreFlowModule.memory import logs

    kept = dict(logs._log_views)
    logs._log_views.clear()
    try:
        return logs.read_log_tail(path, entries, chars)
    finally:
        logs._log_views.clear()
        logs._log_views.update(kept)


def test_a_log_is_read_from_its_end_once_then_only_what_was_appended(tail_reads, tmp_path):
    from aiflows_jarvis.CoreFlowModule import append_log_entry, read_log_tail

    log = str(tmp_path / "logs.txt")
    tails = []
    for i in range(60):  # a round: the executor's entry appended, the next prompt's tail read
        assert append_log_entry(log, "count_words", {"text": f"round {i} ü"}, f"{i} words") == i + 1
        tails.append(read_log_tail(log, 20, 6000))
    assert len(tail_reads) == 1, "one read from the end; each later round takes in the entry appended"
    assert tails[-1].startswith("[40 earlier entries are in logs.txt; the last 20 follow]")
    assert tails[-1] == _fresh_tail(log, 20, 6000) and tails[5].count("--- [") == 6


def test_a_log_changed_otherwise_than_by_appending_is_read_again(tail_reads, tmp_path):
    from aiflows_jarvis.CoreFlowModule import (
        append_log_entry,
        atomic_write,
        last_log_number,
        read_log_tail,
        read_text,
    )

    log = str(tmp_path / "logs.txt")
    for i in range(5):
        append_log_entry(log, "step", {}, f"result {i}")
    read_log_tail(log, 20, 6000)
    # rewritten in place, as long as it was, its last entry changed
    text = read_text(log)
    with open(log, "r+") as f:
        f.write(text.replace("result 4", "RESULT 4"))
    assert "RESULT 4" in read_log_tail(log, 20, 6000)
    # replaced (a new file), shorter
    atomic_write(log, text.split("--- [3]")[0])
    assert read_log_tail(log, 20, 6000) == _fresh_tail(log, 20, 6000) and last_log_number(log) == 2
    # cut short by a kill in the middle of an entry, then appended to: the cut is repaired, numbers go on
    with open(log, "a") as f:
        f.write("--- [3] 2024-01-01 00:00:00 step ---\narguments: (no")
    assert append_log_entry(log, "step", {}, "after the cut") == 4
    assert read_log_tail(log, 20, 6000) == _fresh_tail(log, 20, 6000)
    assert len(tail_reads) >= 4, "each change that is not an append made the reader read the end again"


def test_the_kernel_starts_in_the_background_when_the_first_plan_goes_up_for_review(
    scripted_llm, user, quiet_console, monkeypatch, tmp_path, run_context
):
    """run_jarvis.py sets the warm-up (the tree's interpreters' prestart); the plan writer calls it when a draft is put
    up for review, once, before the user is asked; no kernel starts before the plan was written."""
    from aiflows_jarvis.InterpreterFlowModule import InterpreterAtomicFlow
    from aiflows_jarvis.PlanWriterFlowModule import InteractivePlanGenFlow

    started = []
    monkeypatch.setattr(
        InterpreterAtomicFlow,
        "prestart",
        lambda self, workspace=None: started.append((self.workspace, len(user.asked))),
    )
    config = launcher.load_config(os.path.join(ROOT, "configs", "jarvis.yaml"))
    jarvis = launcher.instantiate(config, [ApiInfo(backend_used="openai", api_key="sk-test")], str(tmp_path))
    launcher.prepare_memory(jarvis, str(tmp_path), resume=False)
    assert launcher.prestart_interpreters(jarvis) == 1 and started == [(str(tmp_path), 0)], (
        "the code runner's interpreter, in the memory folder (where the library is), as its first run would"
    )
    started.clear()

    planner = InteractivePlanGenFlow.instantiate_from_default_config()
    run_context.warm_up = lambda: launcher.prestart_interpreters(jarvis)
    try:
        scripted_llm.add("1. Do it.", "1. Do it.\n2. Check it.")
        user.add("add a check", "")  # a comment on the first draft, the second approved
        planner.call({"goal": "do it", "plan": ""})
        planner.call({"goal": "do it", "plan": "1. Do it.", "feedback": "add a check"})
        assert started == [(str(tmp_path), 0)], "started once, at the first draft, before the user was asked"
    finally:
        launcher.close_interpreters(jarvis)


def test_copy_config_copies_as_deepcopy_does_for_configurations_and_messages():
    from dataclasses import dataclass

    from aiflows_jarvis.CoreFlowModule import copy_config

    @dataclass
    class Info:
        keys: list

    original = {"a": [1, {"b": "x", "c": None}], "d": 2.5, "e": True, "info": Info(["k"]), "t": (1, [2])}
    copied = copy_config(original)
    assert copied == original
    copied["a"][1]["b"] = "changed"
    copied["info"].keys.append("more")
    copied["t"][1].append(3)
    assert original == {"a": [1, {"b": "x", "c": None}], "d": 2.5, "e": True, "info": Info(["k"]), "t": (1, [2])}, (
        "nothing of the original is shared but immutable values"
    )


def test_a_flow_state_does_not_share_what_it_was_given(scripted_llm):
    from flows_for_tests import WordCountFlow

    flow = WordCountFlow.instantiate_from_default_config()
    given = {"text": "a b", "extra": {"nested": ["x"]}}
    flow._state_update_dict(given)
    given["extra"]["nested"].append("y")
    assert flow.flow_state["extra"] == {"nested": ["x"]}
    assert flow._state_update_dict({"text": "a b", "extra": None}) is None, "equal and None values are no update"


def _word_count_rounds(rounds: int, tmp_path, scripted_llm, deepcopies: list) -> str:
    """Run a Controller -> Executor -> memory loop of ``rounds`` rounds; ``deepcopies`` gets the type of what each
    ``copy.deepcopy`` during the run copied."""
    import copy

    from fakes import finish
    from helpers import word_count_loop

    for i in range(rounds):
        scripted_llm.add(command("count_words", text=f"round {i} of a long task"))
    scripted_llm.add(finish("done"))
    flow = word_count_loop(rounds + 1)
    memory = {"plan": str(tmp_path / f"plan{rounds}.txt"), "logs": str(tmp_path / f"logs{rounds}.txt")}
    (tmp_path / f"plan{rounds}.txt").write_text("1. count words\n" + "a long plan line\n" * 200)
    real = copy.deepcopy

    def counting(value, *args, **kwargs):
        deepcopies.append(
            type(value).__name__ + (":" + ",".join(sorted(value))[:80] if isinstance(value, dict) else "")
        )
        return real(value, *args, **kwargs)

    copy.deepcopy = counting
    try:
        out = flow.call(
            {"goal": "count words", "memory_files": memory, "plan": open(memory["plan"]).read(), "logs": ""}
        )
    finally:
        copy.deepcopy = real
    return out["status"]


def test_a_round_deep_copies_nothing_the_state_and_the_replies_are_copied_as_plain_data(tmp_path, scripted_llm):
    """aiflows' KeyInterface deep-copies the whole state (memory files' contents included) at every subflow call,
    and CompositeFlow every subflow's output: the lean flows copy them as plain data (``copy_config``); what a round
    deep-copies does not grow with the rounds."""
    short, long = [], []
    assert _word_count_rounds(3, tmp_path, scripted_llm, short) == _word_count_rounds(9, tmp_path, scripted_llm, long)
    states = [copied for copied in long if "memory_files" in copied or "plan" in copied.split(":")[-1].split(",")]
    assert not states, f"the state was deep-copied: {states}"
    assert len(long) == len(short), (short, long)


def test_the_lean_key_interface_gives_what_aiflows_gives_and_leaves_the_state_alone():
    from aiflows.interfaces import KeyInterface

    from aiflows_jarvis.CoreFlowModule.flows.lean import LeanKeyInterface

    options = dict(
        keys_to_rename={"a": "renamed"},
        keys_to_set={"set": [1]},
        keys_to_select=["renamed", "b", "set", "nested"],
        keys_to_delete=["set"],
    )
    state = {"a": 1, "b": {"deep": ["x"]}, "nested": {"list": [1, 2]}, "unused": "big " * 1000}
    expected = KeyInterface(**options)(goal="g", src_flow=None, dst_flow=None, data_dict=state)
    got = LeanKeyInterface.of(KeyInterface(**options))(goal="g", src_flow=None, dst_flow=None, data_dict=state)
    assert got == expected
    got["nested"]["list"].append(3)
    got["b"]["deep"].append("y")
    assert state == {"a": 1, "b": {"deep": ["x"]}, "nested": {"list": [1, 2]}, "unused": "big " * 1000}


def test_messages_get_aiflows_identifiers_and_time_stamps_made_quicker():
    import re
    import uuid

    from aiflows.messages import InputMessage
    from aiflows.utils.general_helpers import get_current_datetime_ns

    from aiflows_jarvis.CoreFlowModule.flows.message_stamps import datetime_ns, unique_id

    ids = {unique_id() for _ in range(2000)}
    assert len(ids) == 2000
    for made in list(ids)[:50]:
        parsed = uuid.UUID(made)
        assert str(parsed) == made and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    taken = next(iter(ids))
    assert unique_id(existing_ids={taken}) != taken
    before, ours, after = get_current_datetime_ns(), datetime_ns(), get_current_datetime_ns()
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{9}$")
    assert stamp.match(ours) and before <= ours <= after, (before, ours, after)
    message = InputMessage.build(data_dict={}, src_flow="a", dst_flow="b")
    assert uuid.UUID(message.message_id).version == 4 and stamp.match(message.created_at)
    import aiflows.messages.abstract as messages

    assert messages.create_unique_id is unique_id and messages.get_current_datetime_ns is datetime_ns


def test_configurations_are_read_as_omegaconf_reads_them_without_importing_it():
    import glob

    import yaml
    from omegaconf._utils import get_yaml_loader

    from aiflows_jarvis.CoreFlowModule.flows.yaml_loader import load_yaml_text

    files = glob.glob(os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "**", "*.yaml"), recursive=True) + glob.glob(
        os.path.join(ROOT, "configs", "*.yaml")
    )
    assert len(files) > 20
    for path in files:
        text = open(path, encoding="utf-8").read()
        assert load_yaml_text(text) == yaml.load(text, Loader=get_yaml_loader()), path
    tricky = (
        "a: 1e3\nb: 1_000\nc: 2001-12-14\nd: .inf\ne: 6.8523015e+5\nf: 190:20:30.15\ng: -.5\nh: 1.\n"
        "i: !!python/object/apply:pathlib.Path [a, b]\nj: ${k}\n"
    )
    assert load_yaml_text(tricky) == yaml.load(tricky, Loader=get_yaml_loader())
    assert load_yaml_text(tricky)["c"] == "2001-12-14" and load_yaml_text(tricky)["a"] == 1000.0
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key a"):
        load_yaml_text("a: 1\na: 2\n")


def test_an_interface_that_sets_values_hands_out_copies_of_them():
    from aiflows.interfaces import KeyInterface

    from aiflows_jarvis.CoreFlowModule import LeanFlowMixin
    from aiflows_jarvis.CoreFlowModule.flows.lean import LeanKeyInterface

    interface = LeanKeyInterface.of(KeyInterface(keys_to_set={"items": []}, keys_to_select=["items"]))
    assert not interface.copies_all
    flow = type("Caller", (), {"flow_config": {"name": "caller"}, "name": "caller"})()
    destination = type("Callee", (), {"flow_config": {"name": "callee", "private_keys": []}})()
    first = interface(goal="g", src_flow=flow, dst_flow=destination, data_dict={})
    message = LeanFlowMixin._package_input_message(
        flow, payload=first, dst_flow=destination, fresh=interface.copies_all
    )
    message.data["items"].append("from call 1")
    assert interface(goal="g", src_flow=flow, dst_flow=destination, data_dict={}) == {"items": []}


def test_message_ids_do_not_follow_the_users_random_seed():
    import random

    from aiflows_jarvis.CoreFlowModule.flows.message_stamps import unique_id

    random.seed(7)
    first = unique_id()
    random.seed(7)
    assert unique_id() != first


def test_message_ids_of_a_forked_child_are_not_its_parents():
    from aiflows_jarvis.CoreFlowModule.flows.message_stamps import unique_id

    read, write = os.pipe()
    with warnings.catch_warnings():  # (Python 3.12+ warns of a fork in a process with threads: this child only writes)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent
        try:
            os.write(write, unique_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        child = os.read(read, 100).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    mine = unique_id()
    assert len(child) == len(mine) == 36 and child[:24] != mine[:24], (child, mine)


def test_a_line_that_fits_is_folded_as_textwrap_folds_it_without_calling_it():
    import random
    import textwrap

    from aiflows_jarvis.CoreFlowModule.console import interaction

    rng = random.Random(5)
    alphabet = ["a", "b", " ", "  ", "\t", "\xa0", "\u2003", "é", "-", "\x1f", "word", "x" * 15]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        if not text.strip():
            continue
        width = rng.randint(5, 40)
        expected = textwrap.wrap(text, max(10, width), break_long_words=True, break_on_hyphens=False) or [""]
        assert interaction._wrap_words(text, width) == expected, (text, width)
    calls = []
    real = textwrap.wrap
    textwrap.wrap = lambda *a, **k: calls.append(a) or real(*a, **k)
    try:
        assert interaction._wrap_words("count_words text: round 3", 100) == ["count_words text: round 3"]
    finally:
        textwrap.wrap = real
    assert calls == []
