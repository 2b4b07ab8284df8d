"""AutoGPT's edges: a memory folder written with one vector store and run with the other, and a wiki that never
answers under --max-time. run_autogpt.py runs in a child process against the loopback server, which also serves
the embeddings and the wiki (pointed at by the key configs/autogpt.yaml documents)."""

from __future__ import annotations

import hashlib
import os

import yaml

from ..harness import ROOT, case
from ..support import PYTHON, LoopbackLLMServer, Run, command, handled_exit

RUN_AUTOGPT = os.path.join(ROOT, "run_autogpt.py")
GOAL = "When was the Eiffel Tower finished?"
EIFFEL = "The Eiffel Tower is a wrought-iron lattice tower in Paris, finished in 1889."


def autogpt(ctx, server: LoopbackLLMServer, *args: str, timeout: float = 150):
    """run_autogpt.py with configs/autogpt.yaml's wiki_search pointed at the loopback wiki, to its end."""
    with open(os.path.join(ROOT, "configs", "autogpt.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    config["flow"]["commands"]["wiki_search"]["flow"]["api_url"] = server.wiki_url
    path = ctx.path("autogpt.yaml")
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    argv = [PYTHON, RUN_AUTOGPT, "--config", str(path), "--api-base", server.url, "--yes", *args]
    return Run(ctx, argv=argv).start().finish(timeout)


def fingerprint(folder) -> dict:
    """Every file under ``folder`` with its content's hash."""
    found = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return found


@case(
    "memory_folder",
    "autogpt_store_of_another_kind",
    slow=True,
    handled="a folder written with Chroma, run with "
    "--store faiss: exit 2 before any LLM call, naming both kinds, --store chroma and --store faiss --migrate; "
    "then --migrate copies the memory across (the controller's first prompt holds it) and keeps the Chroma store",
    lost="the Chroma store is changed by the refused run, or its memory is in neither the migrated store nor the "
    "kept one",
)
def store_of_another_kind(ctx):
    store = ctx.path("memory", "vector_store")
    with LoopbackLLMServer(
        replies=[command("wiki_search", search_term="Eiffel Tower"), command("finish", answer="1889")]
    ) as server:
        server.wiki_pages["Eiffel Tower"] = EIFFEL
        first = autogpt(ctx, server, GOAL)
        if not ctx.expect(first.code == 0, f"the first run (Chroma) failed: {first.tail()}"):
            return
        before, calls = fingerprint(store), len(server.requests)
        refused = autogpt(ctx, server, "--store", "faiss", GOAL)
        handled_exit(
            ctx,
            refused,
            [2],
            says=["was written with --store chroma (Chroma)", "Run with --store chroma", "--store faiss --migrate"],
        )
        ctx.expect(len(server.requests) == calls, "the refused run called the LLM")
        ctx.keep(fingerprint(store) == before, "the refused run changed the Chroma store")
        server.add(command("finish", answer="1889, from memory"))
        migrated = autogpt(ctx, server, "--store", "faiss", "--migrate", GOAL)
        handled_exit(ctx, migrated, [0], says=["Copied 1 memory from the Chroma store into a FAISS store"])
        # the memories are in the prompt's head or its first message (the prefix-cache layout)
        prompt = "\n".join(m["content"] for m in server.requests[-1]["messages"][:2]) if server.requests[calls:] else ""
        ctx.keep(EIFFEL in prompt, "the migrated run's controller did not get the Chroma memory")
    ctx.keep(
        EIFFEL in " ".join(texts(ctx.path("memory", "vector_store.chroma"), "chroma")),
        "the kept Chroma store lost its memory",
    )
    ctx.keep(EIFFEL in " ".join(texts(store, "faiss")), "the migrated FAISS store does not hold the memory")


def texts(folder, kind: str) -> list:
    """The texts of the store in ``folder`` (opened without embedding anything; Chroma rewrites its files on
    opening, so the store is compared by what it holds, not byte for byte)."""
    from aiflows_jarvis.VectorStoreFlowModule.stores import open_store

    opened = open_store(kind, str(folder), "text-embedding-3-small")
    try:
        return [text for batch, _ in opened.items() for text in batch]
    finally:
        opened.close()


@case(
    "llm_outage",
    "autogpt_hanging_wiki_under_max_time",
    slow=True,
    handled="with a wiki that never answers "
    "(wiki_search's own timeout: 15 s) and --max-time 5, exit 3 saying the budget was reached during wiki_search, "
    "while the wiki still holds the request; the whole process within 15 s (start-up included)",
    lost="the run file for --resume is missing",
)
def hanging_wiki_under_max_time(ctx):
    with LoopbackLLMServer(replies=[command("wiki_search", search_term="Eiffel Tower")]) as server:
        server.wiki_hangs = True
        done = autogpt(ctx, server, "--store", "faiss", "--max-time", "5", GOAL)
        ctx.expect(server.wiki_held == 1, "the wiki's request was not held to the end: the run did not stop in it")
    ctx.figure("seconds", round(done.seconds, 1))
    handled_exit(
        ctx, done, [3], says=["The run reached its budget during AutoGPT/Executor/wiki_search: 5 s", "--resume"]
    )
    ctx.expect(
        done.seconds < 15,
        f"the process took {done.seconds:.0f} s in all (start-up included): the wiki's "
        "own 15 s timeout, not the budget, ended the wait",
    )
    ctx.keep(ctx.path("memory", "autogpt_run.json").is_file(), "autogpt_run.json is missing")
