"""The memory's search index and the prompts' choice of entries: relevant entries beyond the budgets, said so, stable
between rounds; the library's index caught up with the package entry by entry; a log's index rebuilt when missing,
stale or torn (a kill -9 in the middle of its update); a large library's index kept between runs, built again when
its file does not read; the local ranking by default, offline; a goal reached by
reusing a function buried among 2,000 others."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from fakes import command, finish
from waiting import wait_until

from aiflows_jarvis.CoreFlowModule import append_log_entry, atomic_write, count_tokens, read_text, set_memory_files
from aiflows_jarvis.ExtendLibraryFlowModule import SaveCodeAtomicFlow
from aiflows_jarvis.MemoryReadingFlowModule import MemoryReadingAtomicFlow, MemorySearchAtomicFlow, search_index
from aiflows_jarvis.MemoryReadingFlowModule.search_index import index_path_of, library_index, log_index

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from synthetic_library import library_source, make_library, make_tasks  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_indexes():
    """Each test reads its indexes from disk, as a new process would."""
    search_index.forget_cached_indexes()
    yield
    search_index.forget_cached_indexes()


def a_library(tmp_path, count):
    functions = make_library(count)
    path = tmp_path / "library.py"
    path.write_text(library_source(functions))
    return str(path), functions


def reader(**overrides):
    return MemoryReadingAtomicFlow.instantiate_from_default_config(
        output_interface=["logs", "code_library"], **overrides
    )


# ~~~ The offline default: a large library's relevant entries, said so ~~~
def test_a_library_over_its_budget_shows_the_entries_a_task_needs_and_says_what_is_left_out(tmp_path):
    library, functions = a_library(tmp_path, 500)
    files = {"code_library": library, "logs": str(tmp_path / "logs.txt")}
    task, needed = make_tasks(functions, 1, seed=3)[0]
    flow = reader()
    assert flow.flow_config["retrieval"]["embedding"] == "local", "the default needs no model and no network"
    shown = flow.run({"memory_files": files, "goal": task, "result": ""})["code_library"]
    assert f"def {needed}(" in shown, f"the function {task!r} needs is in the prompt"
    structure, _, entries = shown.partition("\n\n")
    assert structure.startswith("The library is the package `library`") and "\n- data: " in structure, (
        "the package's modules come first, one line each"
    )
    note = entries.split("\n")[0]
    left_out = 500 - shown.count("\ndef ")
    assert "the library defines 500 functions" in note and f"{left_out} are left out" in note
    assert "search_library" in note, "the prompt says how to see the others"
    module = next(
        m
        for m in os.listdir(tmp_path / "library")
        if m.endswith(".py") and f"def {needed}(" in (tmp_path / "library" / m).read_text()
    )
    assert f"# library/{module}\n" in shown.split(f"def {needed}(")[0], "under its module's header"
    assert len(shown) <= flow.flow_config["max_library_chars"]
    SaveCodeAtomicFlow.instantiate_from_default_config().run(
        {
            "code": "def tide_height(hour):\n    '''Height of the tide at an hour.'''\n    return hour\n",
            "memory_files": files,
        }
    )
    again = flow.run({"memory_files": files, "goal": task, "result": "Saved tide_height"})["code_library"]
    assert "def tide_height(" in again and f"def {needed}(" in again, "the last function saved is always shown"


def test_a_library_within_its_budget_reads_whole_and_builds_no_index(tmp_path):
    library, functions = a_library(tmp_path, 5)
    out = reader().run({"memory_files": {"code_library": library, "logs": str(tmp_path / "l.txt")}, "goal": "x"})
    assert out["code_library"].startswith("The library is the package") and out["code_library"].count("\ndef ") == 5
    assert "(the library" not in out["code_library"]
    assert not search_index._indexes, "no index is built for a library that fits"


def test_recall_over_paraphrased_tasks_at_2000_functions(tmp_path):
    library, functions = a_library(tmp_path, 2000)
    flow = reader()
    found = 0
    tasks = make_tasks(functions, 50)
    for task, name in tasks:
        flow.flow_state["picked"] = {}
        shown = flow.run({"memory_files": {"code_library": library, "logs": str(tmp_path / "l.txt")}, "goal": task})[
            "code_library"
        ]
        found += f"def {name}(" in shown
    assert found / len(tasks) >= 0.9, f"recall {found / len(tasks):.2f} over {len(tasks)} paraphrased tasks"


def test_the_pick_stays_the_same_between_rounds_when_nothing_relevant_changed(tmp_path):
    library, functions = a_library(tmp_path, 800)
    task, _ = make_tasks(functions, 1, seed=5)[0]
    flow = reader()
    files = {"code_library": library, "logs": str(tmp_path / "l.txt")}
    first = flow.run({"memory_files": files, "goal": task, "result": "The plan was updated."})["code_library"]
    again = flow.run({"memory_files": files, "goal": task, "result": "Ran the code: 42"})["code_library"]
    assert again == first, "an irrelevant new result does not reshuffle the library's entries"


# ~~~ Logs ~~~
def test_a_long_log_keeps_its_last_entries_and_brings_back_an_early_relevant_one(tmp_path):
    logs = str(tmp_path / "logs.txt")
    append_log_entry(logs, "run_code", {"code": "fetch_tide_tables('brest')"}, "tide tables saved in tides.csv")
    for i in range(60):
        append_log_entry(logs, "run_code", {"code": f"x = {i}"}, f"result {i}")
    flow = reader(max_log_entries=20)
    out = flow.run(
        {
            "memory_files": {"logs": logs, "code_library": str(tmp_path / "library.py")},
            "goal": "plot the tide tables of Brest",
            "result": "",
        }
    )["logs"]
    assert "tides.csv" in out, "the early entry relevant to the goal is shown"
    assert "result 59" in out and "result 45" in out, "the last entries are kept"
    assert out.startswith("[46 earlier entries are in logs.txt: the 1 most relevant"), out[:200]
    assert "45 are left out" in out and "search_logs" in out, "how many are left out, and how to see them"
    short = str(tmp_path / "short.txt")
    append_log_entry(short, "ask_user", {"question": "q"}, "a")
    from aiflows_jarvis.CoreFlowModule import read_log_tail

    assert flow.run({"memory_files": {"logs": short, "code_library": str(tmp_path / "library.py")}, "goal": "q"})[
        "logs"
    ] == read_log_tail(short, 20, 6000), "a short log reads as before"


def test_search_commands_answer_from_the_index(tmp_path):
    library, functions = a_library(tmp_path, 300)
    logs = str(tmp_path / "logs.txt")
    append_log_entry(logs, "run_code", {"code": "print(1)"}, "the harbour volcano erupted")
    files = {"code_library": library, "logs": logs}
    search = MemorySearchAtomicFlow.instantiate_from_default_config()
    target = functions[123]
    answer = search.run({"query": target.docstring.split("\n")[0], "memory_files": files})["result"]
    assert f"def {target.name}(" in answer.split("\n\n")[1], "the best match first"
    logs_search = MemorySearchAtomicFlow.instantiate_from_default_config(memory="logs")
    assert "volcano" in logs_search.run({"query": "volcano", "memory_files": files})["result"]
    assert "query is empty" in search.run({"query": " ", "memory_files": files})["result"]


# ~~~ Updates, staleness, torn journals ~~~
def test_the_library_index_takes_a_save_entry_by_entry_and_a_module_edited_by_hand(tmp_path, monkeypatch):
    library, functions = a_library(tmp_path, 50)
    index = library_index(library)
    assert len(index) == 50 and all("." in key for key in index.texts), "keys are module.name"
    assert not os.path.exists(tmp_path / ".index"), "no journal: the package's own index is the source"
    indexed = []
    real_features = search_index.features
    monkeypatch.setattr(search_index, "features", lambda text: indexed.append(text) or real_features(text))
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    save.run(
        {
            "code": "def tide_height(hour):\n    '''Height of the tide at an hour.'''\n    return hour\n",
            "memory_files": {"code_library": library},
        }
    )
    assert library_index(library) is index
    assert indexed == ['def tide_height(hour):\n    """Height of the tide at an hour."""'], (
        "only the saved function is indexed again"
    )
    assert library_index(library).search("tide height", 1)[0][0] == "dates.tide_height"
    with open(tmp_path / "library" / "dates.py", "a") as f:  # edited by hand: the package indexes it again
        f.write("\n\ndef lunar_calendar(year):\n    '''The moon phases of a year.'''\n    return year\n")
    assert library_index(library).search("moon phases", 1)[0][0] == "dates.lunar_calendar"
    search_index.forget_cached_indexes()
    assert list(library_index(library).texts) == list(index.texts), "a new process finds the same entries, in order"


# ~~~ A large library's index, kept between runs ~~~
def counting_features(monkeypatch):
    """The texts the index tokenizes from now on (what a run pays for)."""
    indexed = []
    real_features = search_index.features
    monkeypatch.setattr(search_index, "features", lambda text: indexed.append(text) or real_features(text))
    return indexed


def test_a_large_library_keeps_its_index_for_the_next_run_which_puts_only_what_changed(tmp_path, monkeypatch):
    monkeypatch.setattr(search_index, "_CACHE_FROM", 40)
    monkeypatch.setattr(search_index, "_RECACHE_EVERY", 5)
    library, functions = a_library(tmp_path, 60)
    cache = tmp_path / "library" / "_index" / "search.bin"
    from aiflows_jarvis.CodeLibraryFlowModule import migrate_library

    migrate_library(str(tmp_path / "library"))
    assert not cache.exists(), "the migration (a writer) leaves the index to its reader"
    library_index(library)
    assert cache.is_file(), "reading a library of 60 entries (over _CACHE_FROM) indexed it and kept it"
    search_index.forget_cached_indexes()
    built = library_index(library)
    query = functions[17].docstring.split("\n")[0]
    expected = built.search(query, 5)
    search_index.forget_cached_indexes()  # a new run
    indexed = counting_features(monkeypatch)
    index = library_index(library)
    assert index.search(query, 5) == expected and list(index.texts) == list(built.texts)
    assert indexed == [query], "the next run tokenizes no entry of the library (only the query)"
    save = SaveCodeAtomicFlow.instantiate_from_default_config()
    save.run(
        {
            "code": "def tide_height(hour):\n    '''Height of the tide at an hour.'''\n    return hour\n",
            "memory_files": {"code_library": library},
        }
    )
    search_index.forget_cached_indexes()
    indexed.clear()
    assert library_index(library).search("tide height", 1)[0][0] == "dates.tide_height"
    assert indexed == ['def tide_height(hour):\n    """Height of the tide at an hour."""', "tide height"], (
        "a run after a save puts the saved function only: the cache is a catch-up away"
    )
    for place in ("oslo", "lima", "kyoto", "cairo", "perth", "quito"):
        save.run(
            {
                "code": f"def ebb_{place}(hour):\n    '''The ebb at {place}.'''\n    return hour\n",
                "memory_files": {"code_library": library},
            }
        )
        library_index(library)
    search_index.forget_cached_indexes()
    indexed.clear()
    assert library_index(library).search("ebb kyoto", 1)[0][0].endswith(".ebb_kyoto")
    # tide_height and four ebbs made _RECACHE_EVERY changes: the cache was written again then, and a new run puts the
    # two saved after it only
    assert [text.split("(")[0] for text in indexed] == ["def ebb_perth", "def ebb_quito", "ebb kyoto"]


@pytest.mark.parametrize("damage", ["cut", "flipped", "other_rules", "link", "folder"])
def test_a_library_cache_that_does_not_read_is_built_again(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(search_index, "_CACHE_FROM", 40)
    library, functions = a_library(tmp_path, 50)
    cache = tmp_path / "library" / "_index" / "search.bin"
    expected = library_index(library).search("temperature", 5)
    data = cache.read_bytes()
    cache.unlink()
    if damage == "cut":
        cache.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        cache.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    elif damage == "other_rules":  # a cache an older Jarvis made with other stems
        monkeypatch.setattr(search_index, "_CACHE_RULES", "0 0 00000000")
        cache.write_bytes(data)
    elif damage == "link":
        (tmp_path / "elsewhere.bin").write_bytes(data)
        cache.symlink_to(tmp_path / "elsewhere.bin")
    else:
        cache.mkdir()
    search_index.forget_cached_indexes()
    indexed = counting_features(monkeypatch)
    index = library_index(library)
    assert len(indexed) == 50, "built again from the package's entries"
    assert index.search("temperature", 5) == expected
    if damage == "link":
        assert not cache.is_symlink() and (tmp_path / "elsewhere.bin").read_bytes() == data, (
            "the link is replaced by the rebuilt cache; what it pointed to is never written"
        )
    if damage in ("cut", "flipped", "other_rules", "link"):
        search_index.forget_cached_indexes()
        indexed.clear()
        library_index(library)
        assert indexed == [], "the rebuilt index was kept in place of the bad one"


def test_a_name_defined_twice_in_a_module_is_indexed_by_its_last_definition_whatever_the_cache_held(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(search_index, "_CACHE_FROM", 40)
    library, _ = a_library(tmp_path, 50)
    library_index(library)
    with open(tmp_path / "library" / "dates.py", "a") as f:  # edited by hand: one name, two definitions
        f.write(
            "\n\ndef tide(x):\n    '''The zebra crossing.'''\n    return x\n"
            "\n\ndef tide(x):\n    '''The giraffe crossing.'''\n    return x\n"
        )
    for when in ("caught up", "after another change", "in a new run, from the cache"):
        index = library_index(library)
        assert [key for key, _ in index.search("giraffe", 3)] == ["dates.tide"], when
        assert index.search("zebra", 3) == [], (
            f"{when}: the first definition is not what `from library import tide` gets"
        )
        if when == "caught up":
            with open(tmp_path / "library" / "text.py", "a") as f:
                f.write("\n\ndef lunar_calendar(year):\n    return year\n")
        if when == "after another change":
            search_index.forget_cached_indexes()


def test_a_cache_of_the_wrong_shape_with_a_right_checksum_is_built_again(tmp_path, monkeypatch):
    import marshal
    import zlib

    monkeypatch.setattr(search_index, "_CACHE_FROM", 40)
    library, _ = a_library(tmp_path, 50)
    index = library_index(library)
    cache = tmp_path / "library" / "_index" / "search.bin"
    postings = dict(index._postings, zebra={"nowhere.held": 1})  # a posting of an entry the index does not hold
    payload = marshal.dumps((index.source, index.texts, index._lengths, index._terms, postings, index._total))
    cache.write_bytes(
        search_index._CACHE_MAGIC
        + f"{search_index._CACHE_RULES} {zlib.crc32(payload):08x} {len(payload)}\n".encode("ascii")
        + payload
    )
    search_index.forget_cached_indexes()
    indexed = counting_features(monkeypatch)
    assert library_index(library).search("zebra", 3) == [] and len(indexed) == 51, "built again"


def test_a_fifo_in_place_of_the_cache_does_not_block_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(search_index, "_CACHE_FROM", 40)
    library, _ = a_library(tmp_path, 50)
    expected = library_index(library).search("temperature", 5)
    cache = tmp_path / "library" / "_index" / "search.bin"
    cache.unlink()
    os.mkfifo(cache)
    search_index.forget_cached_indexes()
    assert library_index(library).search("temperature", 5) == expected  # (a blocking open would hang here)
    assert cache.is_file(), "the rebuilt index is kept in the FIFO's place"


def test_a_small_library_keeps_no_index_on_disk(tmp_path):
    library, _ = a_library(tmp_path, 50)
    library_index(library)
    assert not os.path.exists(tmp_path / "library" / "_index" / "search.bin")


def test_a_log_rewritten_shorter_is_reindexed(tmp_path):
    logs = str(tmp_path / "logs.txt")
    for i in range(5):
        append_log_entry(logs, "run_code", {"code": f"x = {i}"}, f"zebra {i}" if i == 3 else f"r {i}")
    assert [key for key, _ in log_index(logs).search("zebra", 3)] == ["4"]
    atomic_write(logs, "")  # a new run archived the log
    append_log_entry(logs, "run_code", {"code": "y"}, "giraffe")
    search_index.forget_cached_indexes()
    index = log_index(logs)
    assert index.search("zebra", 3) == [] and [key for key, _ in index.search("giraffe", 3)] == ["1"]


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_torn_journal_is_detected_and_rebuilt(tmp_path, damage):
    logs = str(tmp_path / "logs.txt")
    for i in range(40):
        append_log_entry(logs, "run_code", {"code": f"x = {i}"}, f"Computes {i}")
    path = index_path_of(logs)
    log_index(logs)  # built whole by its first reader: one line per entry
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2] if damage == "cut" else data.replace(b"Computes", b"Cumputes", 1))
    search_index.forget_cached_indexes()
    index = log_index(logs)
    assert len(index) == 40 and list(index.texts) == [str(n) for n in range(1, 41)]
    assert open(path, "rb").read() == data, "rebuilt as it was"


# A child that appends a log entry and searches the log, its index torn in the middle of catching up: half the line
# is written, a file says so, and the child waits to be killed. (The library has no journal; a save killed midway:
# test_library_package.py.)
KILLED_CHILD = textwrap.dedent("""
    import os, sys, time
    from aiflows_jarvis.CoreFlowModule import append_log_entry
    from aiflows_jarvis.MemoryReadingFlowModule import search_index
    memory_file, ready = sys.argv[1:3]
    real_append = search_index.append_text
    def torn_append(path, text):
        if path.endswith(".idx"):
            real_append(path, text[:len(text) // 2])
            open(ready, "w").close()
            time.sleep(600)
        real_append(path, text)
    search_index.append_text = torn_append
    append_log_entry(memory_file, "run_code", {"code": "tide()"}, "the tide is high")
    search_index.log_index(memory_file)
""")


def test_kill_9_during_an_index_update_leaves_an_index_that_is_rebuilt(tmp_path):
    memory_file = str(tmp_path / "logs.txt")
    for i in range(10):
        append_log_entry(memory_file, "run_code", {"code": f"x = {i}"}, f"r {i}")
    log_index(memory_file)  # the journal the child's search catches up
    ready = tmp_path / "ready"
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, memory_file, str(ready)], cwd=tmp_path)
    try:
        wait_until(lambda: ready.exists() or child.poll() is not None, "the child's torn write of the index")
        assert child.poll() is None, "the child ended before it was killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    journal = open(index_path_of(memory_file), "rb").read()
    assert not journal.endswith(b"\n"), "the kill left the journal torn"
    search_index.forget_cached_indexes()
    index = log_index(memory_file)
    assert index.search("tide high", 1)[0][0] == "11", "the memory written before the kill is in the rebuilt index"
    assert open(index_path_of(memory_file), "rb").read().endswith(b"\n")
    assert "the tide is high" in read_text(memory_file)


# ~~~ End to end: a function buried among 2,000 others is found and reused ~~~
def coder_policy(target: str, calls: list):
    """A scripted model: it plans to call ``target`` and calls it with run_code when it sees it in its prompt, else
    looks for it with search_library; it finishes once the function ran."""
    from aiflows_jarvis.CoreFlowModule import current_flow_path

    def reply(messages):
        where = current_flow_path() or ""
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        calls.append((where, count_tokens(prompt)))
        sees = f"def {target}(" in prompt
        if "Planner" in where:
            return f"1. Run {target} on the rows.\n2. Finish." if sees else "1. Find a function for it.\n2. Finish."
        if "RESULT=" in str(messages[-1].get("content", "")):
            return finish("ran it")
        if sees:
            return command(
                "run_code",
                language="python",
                code=f"from library import {target}\nprint('RESULT=', {target}([{{'x': 1}}], key='x'))",
            )
        return command("search_library", query="the function the goal needs")

    return reply


@pytest.mark.parametrize("size", [1, 2000])
def test_a_goal_reuses_a_function_buried_among_2000_others(tmp_path, scripted_llm, size, run_context):
    from aiflows_jarvis.CoderFlowModule import CoderFlow
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput

    functions = make_library(2000)
    task, target = make_tasks(functions, 1, seed=19)[0]
    chosen = [f for f in functions if f.name == target] if size == 1 else functions
    (tmp_path / "library.py").write_text(library_source(chosen))
    run_context.input_source = AutoApproveInput()
    flow = CoderFlow.instantiate_from_default_config()
    set_memory_files(flow, str(tmp_path))
    calls: list = []
    scripted_llm.add(*[coder_policy(target, calls)] * 12)
    try:
        out = flow.call({"goal": task})
    finally:
        scripted_llm.replies.clear()
        flow.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"].close()
    assert out["status"] == "finished", out
    assert max(tokens for _, tokens in calls) <= 8000, calls
    assert [where.split("/")[-1] for where, _ in calls] == ["Controller", "Controller"]
    assert len(calls) == 2, f"run_code, finish (the plan is the goal): {calls}"  # the same with one function


# ~~~ The provider's embeddings, when configured ~~~
def test_the_provider_embeddings_rerank_when_configured_and_a_failure_leaves_the_words_order(tmp_path, run_context):
    from aiflows_jarvis.VectorStoreFlowModule import Embeddings, hash_embeddings_factory

    library, functions = a_library(tmp_path, 500)
    task, needed = make_tasks(functions, 1, seed=3)[0]
    files = {"code_library": library, "logs": str(tmp_path / "l.txt")}
    asked = []

    def counting_factory(config, flow_name):
        embeddings = hash_embeddings_factory(config, flow_name)
        real = embeddings.embed
        embeddings.embed = lambda texts, where="": asked.append(len(texts)) or real(texts, where)
        return embeddings

    class Failing(Embeddings):
        model = "down"

        def embed(self, texts, where=""):
            raise ConnectionError("the provider is down")

    run_context.embeddings_factory = counting_factory
    flow = reader(retrieval={"embedding": "provider"})
    shown = flow.run({"memory_files": files, "goal": task})["code_library"]
    assert f"def {needed}(" in shown and asked, "the provider's embeddings were asked and the entry shown"
    flow.run({"memory_files": files, "goal": task, "result": "Ran it: 42"})
    assert len(asked) == 2 and asked[1] < asked[0] / 4, "vectors are kept: the new query and new candidates only"
    run_context.embeddings_factory = lambda config, flow_name: Failing()
    shown = reader(retrieval={"embedding": "provider"}).run({"memory_files": files, "goal": task})["code_library"]
    assert f"def {needed}(" in shown, "a failing provider leaves the lexical ranking"
    with pytest.raises(Exception, match="retrieval.embedding must be"):
        reader(retrieval={"embedding": "nearest"}).run({"memory_files": files, "goal": task})


def test_jarvis_gives_the_memory_readers_the_servers_embeddings_and_a_replay_local_ones(loopback):
    """`retrieval.embedding: provider` under the command line: the run's embeddings come from the configured server
    (the same credentials as its chats); a replay's from local vectors, so it needs no server."""
    from types import SimpleNamespace

    from aiflows.backends.api_info import ApiInfo

    from aiflows_jarvis.app.jarvis import JARVIS
    from aiflows_jarvis.VectorStoreFlowModule.embeddings import HashEmbeddings

    live = SimpleNamespace(
        transcript=None,
        run_settings={},
        api_infos=[ApiInfo(backend_used="openai", api_key="sk-test", api_base=loopback.url)],
    )
    JARVIS.hooks.sources(live)
    embeddings = live.run_settings["embeddings_factory"]({"model_name": "text-embedding-3-small"}, "MemoryReading")
    vectors = embeddings.embed(["count the words of a file"])
    assert len(vectors) == 1 and loopback.embedding_requests, "the server's /v1/embeddings was asked"
    replay = SimpleNamespace(transcript=object(), api_infos=[], run_settings={})
    JARVIS.hooks.sources(replay)
    replayed = replay.run_settings["embeddings_factory"]({"model_name": "text-embedding-3-small"}, "MemoryReading")
    assert isinstance(replayed, HashEmbeddings)


def test_a_search_of_the_library_answers_from_the_index_and_shows_in_the_logs_and_the_report(
    tmp_path, scripted_llm, run_context
):
    """The controller asks search_library; the answer names the function (from the index), goes into Coder's log
    like any result, and the run's report shows the command and its answer."""
    from aiflows_jarvis.app import run_report
    from aiflows_jarvis.CoderFlowModule import CoderFlow
    from aiflows_jarvis.CoreFlowModule import AutoApproveInput, current_flow_path

    functions = make_library(300)
    task, target = make_tasks(functions, 1, seed=7)[0]
    (tmp_path / "library.py").write_text(library_source(functions))
    run_context.input_source = AutoApproveInput()
    flow = CoderFlow.instantiate_from_default_config()
    set_memory_files(flow, str(tmp_path))
    searched = []

    def reply(messages):
        where, last = current_flow_path() or "", str(messages[-1].get("content", ""))
        if "Planner" in where:
            return "1. Find the function the goal needs.\n2. Finish."
        if not searched:
            searched.append(True)
            return command("search_library", query=task)
        return finish(f"found {target}") if f"def {target}(" in last else finish("not found")

    scripted_llm.add(*[reply] * 8)
    try:
        out = flow.call({"goal": task})
    finally:
        scripted_llm.replies.clear()
        flow.subflows["CtrlExMem"].subflows["Executor"].subflows["run_code"].subflows["Interpreter"].close()
    assert out["status"] == "finished" and target in str(out), out
    logs = read_text(str(tmp_path / "logs_coder.txt"))
    assert "search_library" in logs and f"def {target}(" in logs, "the search and its answer are in the log"
    layout = {"Coder": {"plan": str(tmp_path / "plan_coder.txt"), "logs": str(tmp_path / "logs_coder.txt")}}
    page = run_report.build_report(str(tmp_path), layout, outcome={"status": "finished", "answer": "found"})
    assert "search_library" in page and target in page, "the report shows the search and what it found"
