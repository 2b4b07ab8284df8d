"""VectorStoreFlow: the seed's read/write interface, Chroma and FAISS persisted and read back, embeddings through
litellm against the loopback server's /v1/embeddings (batched, retried, counted), clear errors."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
from aiflows.backends.api_info import ApiInfo
from loopback_llm import HTTPError, Malformed

from aiflows_jarvis.CoreFlowModule import USAGE, ConfigurationError, LLMCallError, current_run
from aiflows_jarvis.VectorStoreFlowModule import (
    HashEmbeddings,
    LiteLLMEmbeddings,
    VectorStoreError,
    VectorStoreFlow,
    embeddings_with_api_infos,
)

HAVE_CHROMA = importlib.util.find_spec("chromadb") is not None
HAVE_FAISS = importlib.util.find_spec("faiss") is not None
needs_chroma = pytest.mark.skipif(not HAVE_CHROMA, reason='chromadb is not installed (pip install -e ".[autogpt]")')
needs_faiss = pytest.mark.skipif(not HAVE_FAISS, reason='faiss-cpu is not installed (pip install -e ".[autogpt]")')
BACKENDS = [pytest.param("chroma", marks=needs_chroma), pytest.param("faiss", marks=needs_faiss)]

FACTS = [
    "The Eiffel Tower is in Paris and was finished in 1889.",
    "Bananas are rich in potassium.",
    "Mount Everest is the highest mountain on Earth.",
]


def loopback_embeddings(server, **config):
    """Every VectorStoreFlow of the test's run embeds through litellm against the loopback server."""
    current_run().embeddings_factory = embeddings_with_api_infos(
        [ApiInfo(backend_used="openai", api_key="sk-test", api_base=server.url)], **config
    )


def store(tmp_path, kind, **overrides):
    return VectorStoreFlow.instantiate_from_default_config(
        type=kind, persist_directory=str(tmp_path / f"store_{kind}"), **overrides
    )


@pytest.mark.parametrize("kind", BACKENDS)
def test_write_persist_and_read_back_through_the_loopback_embeddings(tmp_path, loopback, kind):
    loopback_embeddings(loopback)
    flow = store(tmp_path, kind, k=2)
    assert flow.call({"operation": "write", "content": FACTS}) == {"retrieved": ""}, "a write returns ''"
    flow.call({"operation": "write", "content": "Paris is the capital of France."})
    assert loopback.embedding_requests[0]["json"]["input"] == FACTS, "one batch for the three texts"
    assert loopback.embedding_requests[0]["json"]["model"] == "text-embedding-3-small"
    assert loopback.embedding_requests[0]["headers"]["authorization"] == "Bearer sk-test"
    flow.close()

    again = store(tmp_path, kind, k=2)  # a new flow (a new run): the store was persisted
    retrieved = again.call({"operation": "read", "content": "When was the Eiffel Tower in Paris finished?"})
    assert retrieved["retrieved"][0] == FACTS[0], retrieved
    assert len(retrieved["retrieved"]) == 2, "k documents"
    usage = USAGE.per_flow["VectorStoreFlow/embeddings"]
    assert usage.calls == 3 and usage.prompt_tokens > 0 and usage.reported_calls == 3, "each batch is counted"
    assert not loopback.errors


def test_embeddings_are_batched_and_retried_like_chat_calls(tmp_path, loopback):
    loopback.embedding_errors.extend([HTTPError(500, "busy"), Malformed("{oops")])
    embeddings = LiteLLMEmbeddings(
        api_infos=[ApiInfo(backend_used="openai", api_key="sk-test", api_base=loopback.url)],
        batch_size=2,
        retry={"initial_delay": 0.01, "max_delay": 0.02, "jitter": 0},
    )
    vectors = embeddings.embed(["a b", "c", "d e f"], where="Test")
    assert len(vectors) == 3 and len(vectors[0]) == loopback.embedding_dimension
    assert [len(r["json"]["input"]) for r in loopback.embedding_requests] == [2, 2, 2, 1], (
        "two failed attempts of the first batch, then the batches of 2 and 1"
    )
    assert USAGE.per_flow["Test/embeddings"].retries == 2


def test_an_embedding_error_that_retrying_cannot_fix_stops_at_once(loopback):
    loopback.embedding_errors.append(HTTPError(401))
    embeddings = LiteLLMEmbeddings(api_infos=[ApiInfo(backend_used="openai", api_key="sk-bad", api_base=loopback.url)])
    with pytest.raises(LLMCallError, match="Test/embeddings"):
        embeddings.embed(["x"], where="Test")
    assert len(loopback.embedding_requests) == 1, "a 401 is not retried"


def test_a_missing_key_is_a_clear_error(tmp_path):
    flow = store(tmp_path, "faiss")  # builds without credentials; the error comes at first use
    with pytest.raises(ConfigurationError, match="api_infos is not set"):
        flow.call({"operation": "write", "content": "x"})
    with pytest.raises(ConfigurationError, match="no API key"):
        LiteLLMEmbeddings(api_infos=[{"backend_used": "openai", "api_key": ""}])


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_store_written_with_another_model_or_dimension_is_refused(tmp_path, kind):
    flow = store(tmp_path, kind, embedding={"type": "hash", "hash_dimension": 64})
    flow.call({"operation": "write", "content": FACTS})
    flow.close()
    other_model = store(tmp_path, kind, embedding={"type": "hash", "hash_dimension": 32})
    with pytest.raises(VectorStoreError, match="hash-64"):
        other_model.call({"operation": "read", "content": "Paris"})


def test_vectors_of_another_dimension_are_refused(tmp_path):
    pytest.importorskip("faiss", reason='faiss-cpu is not installed (pip install -e ".[autogpt]")')
    from aiflows_jarvis.VectorStoreFlowModule.stores import FaissStore

    faiss_store = FaissStore(str(tmp_path / "s"), "m")
    faiss_store.add(["a"], [[1.0, 0.0, 0.0]])
    with pytest.raises(VectorStoreError, match="dimension 3"):
        faiss_store.add(["b"], [[1.0, 0.0]])


@needs_faiss
def test_a_corrupt_faiss_store_is_named(tmp_path):
    flow = store(tmp_path, "faiss", embedding={"type": "hash"})
    flow.call({"operation": "write", "content": FACTS})
    index = tmp_path / "store_faiss" / "memories" / "index.faiss"
    index.write_bytes(b"not an index")
    with pytest.raises(VectorStoreError, match="corrupt.*Move the folder away"):
        store(tmp_path, "faiss", embedding={"type": "hash"}).call({"operation": "read", "content": "x"})
    documents = tmp_path / "store_faiss" / "memories" / "documents.json"
    assert json.loads(documents.read_text())["embedding_model"] == "hash-256"


@needs_chroma
def test_a_corrupt_chroma_store_is_named(tmp_path):
    folder = tmp_path / "store_chroma"
    folder.mkdir()
    (folder / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(VectorStoreError, match="cannot be opened"):
        store(tmp_path, "chroma", embedding={"type": "hash"}).call({"operation": "read", "content": "x"})


@needs_faiss
def test_reading_an_empty_store_returns_nothing_without_embedding(tmp_path, loopback):
    loopback_embeddings(loopback)
    flow = store(tmp_path, "faiss")
    assert flow.call({"operation": "read", "content": "anything"}) == {"retrieved": []}
    assert not loopback.embedding_requests, "an empty store needs no query vector"


def test_bad_operations_and_contents_are_refused(tmp_path):
    flow = store(tmp_path, "faiss", embedding={"type": "hash"})
    with pytest.raises(ConfigurationError, match="operation"):
        flow.call({"operation": "delete", "content": "x"})
    with pytest.raises(ConfigurationError, match="must be a string"):
        flow.call({"operation": "read", "content": ["x"]})
    with pytest.raises(ConfigurationError, match="string or a list of strings"):
        flow.call({"operation": "write", "content": [1, 2]})


def test_hash_embeddings_are_deterministic_and_near_for_shared_words():
    embeddings = HashEmbeddings(dimension=128)
    a, b, c = embeddings.embed(["the eiffel tower in paris", "eiffel tower height", "bananas and potassium"])
    assert a == embeddings.embed(["the eiffel tower in paris"])[0], "deterministic"

    def cosine(x, y):
        return sum(p * q for p, q in zip(x, y))

    assert cosine(a, b) > cosine(a, c)
    assert embeddings.model == "hash-128"


def test_the_folder_comes_from_memory_files_when_no_persist_directory(tmp_path):
    from aiflows_jarvis.CoreFlowModule import set_memory_files

    flow = VectorStoreFlow.instantiate_from_default_config(embedding={"type": "hash"})
    with pytest.raises(ConfigurationError, match="no folder"):
        flow.store_directory()
    set_memory_files(flow, str(tmp_path))
    assert flow.store_directory() == os.path.join(str(tmp_path), "vector_store")


# ~~~ The store's kind, recorded in its folder; another kind refused or migrated ~~~
KINDS = [
    pytest.param("chroma", "faiss", marks=[needs_chroma, needs_faiss], id="chroma-to-faiss"),
    pytest.param("faiss", "chroma", marks=[needs_chroma, needs_faiss], id="faiss-to-chroma"),
]


def written(tmp_path, kind, record=True):
    """A store of ``kind`` holding FACTS (hash embeddings); without ``record``, as written before store.json."""
    flow = at(tmp_path / "vs", kind)
    flow.call({"operation": "write", "content": FACTS})
    flow.close()
    if not record:
        (tmp_path / "vs" / "store.json").unlink()
    return tmp_path / "vs"


def at(folder, kind, **overrides):
    return VectorStoreFlow.instantiate_from_default_config(
        type=kind, persist_directory=str(folder), embedding={"type": "hash"}, **overrides
    )


def files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("record", [True, False], ids=["recorded", "found-from-files"])
@pytest.mark.parametrize("old,new", KINDS)
def test_a_store_of_another_kind_is_refused_naming_both_and_left_as_it_is(tmp_path, old, new, record):
    from aiflows_jarvis.VectorStoreFlowModule import StoreKindMismatch
    from aiflows_jarvis.VectorStoreFlowModule.store_folder import NAMES

    folder = written(tmp_path, old, record=record)
    before = files(folder)
    other = at(folder, new)
    with pytest.raises(StoreKindMismatch) as refused:
        other.call({"operation": "read", "content": "Eiffel"})
    message = str(refused.value)
    assert f"is a {NAMES[old]} store" in message and f"configured for {NAMES[new]}" in message, message
    assert "migrate: true" in message and f"{folder}.{old}" in message, "it says what to do and what is kept"
    assert ("recorded in its store.json" if record else "found from its files") in message
    assert files(folder) == before, "nothing of the other kind is created beside the store"


@pytest.mark.parametrize("old,new", KINDS)
def test_migrate_copies_the_memories_into_the_other_kind_and_keeps_the_old_store(tmp_path, old, new, loopback):
    folder = written(tmp_path, old, record=False)  # an older folder: its kind is found from its files
    loopback_embeddings(loopback)  # not used: the vectors are copied, not embedded again
    migrated = at(folder, new, migrate=True)
    assert migrated.read("When was the Eiffel Tower finished?", 1) == [FACTS[0]]
    assert migrated._set_up_retriever().count() == 3
    migrated.close()
    assert json.loads((folder / "store.json").read_text()) == {"type": new}
    kept = tmp_path / f"vs.{old}"
    assert kept.is_dir() and not (tmp_path / f"vs.migrating-{new}").exists()
    old_store = at(kept, old)
    assert old_store.read("bananas potassium", 1) == [FACTS[1]], "the old store is kept whole and still opens"
    again = at(folder, new)
    assert again.read("Mount Everest", 1) == [FACTS[2]], "a later run (no migrate) opens the new store"
    assert not loopback.embedding_requests


@needs_chroma
@needs_faiss
def test_a_folder_holding_both_kinds_is_refused_then_merged_by_migrate(tmp_path):
    import shutil

    from aiflows_jarvis.VectorStoreFlowModule import StoreKindMismatch

    folder = written(tmp_path, "chroma", record=False)  # then an older version opened it as FAISS and wrote
    at(tmp_path / "elsewhere", "faiss").call({"operation": "write", "content": "Paris is the capital of France."})
    shutil.copytree(tmp_path / "elsewhere" / "memories", folder / "memories")
    for kind in ("chroma", "faiss"):
        with pytest.raises(StoreKindMismatch, match="holds both a Chroma and a FAISS store"):
            at(folder, kind).prepare_store()
    merged = at(folder, "faiss", migrate=True)
    assert merged.read("capital of France", 1) == ["Paris is the capital of France."]
    assert merged._set_up_retriever().count() == 4 and (tmp_path / "vs.chroma+faiss").is_dir()


@needs_chroma
@needs_faiss
def test_a_migration_killed_between_its_two_renames_is_finished_by_the_next_run(tmp_path, monkeypatch):
    """The old folder was moved aside and the new store, whole, not yet put in place: the next open puts it there
    instead of starting an empty store."""
    from aiflows_jarvis.VectorStoreFlowModule import store_folder

    folder = written(tmp_path, "chroma")
    real_rename = os.rename

    def killed_at_the_second(source, target):
        if source.endswith(".migrating-faiss"):
            raise KeyboardInterrupt  # the process ends here: the second rename never happens
        real_rename(source, target)

    monkeypatch.setattr(store_folder.os, "rename", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        at(folder, "faiss", migrate=True).prepare_store()
    monkeypatch.setattr(store_folder.os, "rename", real_rename)
    assert not folder.exists() and (tmp_path / "vs.migrating-faiss").is_dir()
    reopened = at(folder, "faiss")  # a later run, without --migrate
    assert reopened.read("When was the Eiffel Tower finished?", 1) == [FACTS[0]]
    assert json.loads((folder / "store.json").read_text()) == {"type": "faiss"}
    assert (tmp_path / "vs.chroma").is_dir(), "the folder as it was is still kept"
