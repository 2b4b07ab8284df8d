"""AutoGPT's command line: ``autogpt "<goal>"`` or ``python run_autogpt.py "<goal>"`` (``--help`` for the options).

What AutoGPT declares: its flow, configuration, demo, words, its own options (the embedding model, the vector
store, run_code) and hooks (tools and embeddings from the recording or the server, the demo's own store); the run
is ``run.py``'s."""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any, Dict, List, Optional

from . import ending
from .options import parse_args as _parse_args
from .run import exit_codes_help
from .run import main as _main
from .spec import CONFIGS, PACKAGE, App, Hooks, Words

CONFIG = os.path.join(CONFIGS, "autogpt.yaml")
DEMO_TRANSCRIPT = os.path.join(PACKAGE, "AutoGPTFlowModule", "demo", "demo_transcript.jsonl")
DEMO_STORE = "autogpt_demo_store"  # in the memory folder: the demo's own vector store, started afresh each time
RUN_FILE = "autogpt_run.json"  # in the memory folder: the goal and settings of the last run, for --resume
REPORT_NAME = "autogpt_report.html"  # in the memory folder, beside Jarvis's report.html
DEFAULT_CONFIG = {
    "flow": {
        "_target_": "aiflows_jarvis.AutoGPTFlowModule.AutoGPTFlow.instantiate_from_default_config",
        "name": "AutoGPT",
    }
}

DESCRIPTION = """\
AutoGPT reaches a goal by searching (Wikipedia, DuckDuckGo) one command at a
time, remembering what it found in a vector store (the memory folder keeps it
for the next run) and asking for your feedback after each command (Enter: none;
q or stop: end the run). With --run-code it may also run Python and shell code
in the current folder.

The LLM: OPENAI_API_KEY (OpenAI), AZURE_API_KEY + AZURE_API_BASE (Azure), or
--api-base for any OpenAI-compatible server that also serves /v1/embeddings.
Needs the extra: pip install -e ".[autogpt]". No LLM at hand? Try --demo."""

EPILOG = """\
examples:
  python run_autogpt.py "When was the Eiffel Tower finished?"
  python run_autogpt.py --run-code --yes "How many lines does notes.txt have?"
  python run_autogpt.py --resume        (the same goal, with what it remembers)
  python run_autogpt.py --demo          (a recorded run, offline)

""" + exit_codes_help()


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedding-model", metavar="NAME", help="the embedding model (default: text-embedding-3-small)"
    )
    parser.add_argument("--store", choices=("chroma", "faiss"), help="the vector store (default: chroma)")
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="copy the memories of a vector store of the other kind into one of --store's (the old "
        "one is kept beside it)",
    )
    parser.add_argument(
        "--run-code",
        action="store_true",
        default=None,
        help="let the controller run Python (one persistent session) and shell code in the working "
        "folder, as it writes it: your feedback comes after (or `run_code: true` in the "
        "configuration)",
    )


def _check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.demo and args.run_code:
        parser.error("--demo replays its own recording: it does not go with --run-code")
    if args.migrate and (args.demo or args.replay):
        parser.error("--demo and --replay use a vector store of their own: --migrate does not go with them")


# The modules of the [autogpt] extra a run imports: its vector store's, and the search tools' (a replay answers
# the searches from its recording).
_STORE_MODULES = {"chroma": "chromadb", "faiss": "faiss"}
_TOOL_MODULES = ("langchain_community", "ddgs")


def _requires(session: Any) -> None:
    """The [autogpt] extra, checked before anything is shown or written: BadInputError naming what is missing and
    the command that installs it. Only whether the modules are there is looked at (nothing is imported)."""
    from importlib.util import find_spec

    from aiflows_jarvis.CoreFlowModule import BadInputError

    args = session.args
    store = args.store
    if not store:
        from . import launcher

        path = args.config or CONFIG
        config = launcher.load_config(path) if (args.config or os.path.exists(CONFIG)) else DEFAULT_CONFIG
        memory = (config["flow"].get("subflows_config") or {}).get("Memory") or {}
        store = memory.get("type") if isinstance(memory, dict) else None
    wanted = [_STORE_MODULES.get(str(store or "chroma"), "chromadb")]
    if not (args.demo or args.replay):
        wanted += list(_TOOL_MODULES)

    def missing(module: str) -> bool:
        try:
            return find_spec(module) is None
        except (ImportError, ValueError):
            return True

    absent = [module for module in wanted if missing(module)]
    if absent:
        raise BadInputError(
            f"AutoGPT needs the [autogpt] extra, which is not installed in this Python ({', '.join(absent)} "
            f'missing). Install it with: pip install -e ".[autogpt]" (in this repository), then run again.'
        )


def _sources(session: Any) -> None:
    """Embeddings: from the recording's run (local, deterministic vectors) or the server (tool results: run.py)."""
    from aiflows_jarvis.VectorStoreFlowModule import embeddings_with_api_infos, hash_embeddings_factory

    if session.transcript is not None:  # deterministic and offline: see the README
        session.run_settings["embeddings_factory"] = hash_embeddings_factory
    else:
        session.run_settings["embeddings_factory"] = embeddings_with_api_infos(
            session.api_infos, model_name=session.args.embedding_model
        )


def _configure(session: Any, config: Dict[str, Any]) -> Dict[str, Any]:
    """run_code: --run-code, the configuration, or the recording replayed (its prompts list the command)."""
    transcript = session.transcript
    if session.args.run_code or (transcript is not None and transcript.header.get("run_code")):
        config = {**config, "flow": {**config["flow"], "run_code": True}}
    return config


def _recorder_header(session: Any) -> Dict[str, Any]:
    return {"run_code": bool(session.config["flow"].get("run_code"))}


def _check_store(session: Any) -> None:
    """The store kind (--store) against the one the memory folder holds, before anything in it is written: a
    mismatch is refused, or with --migrate the memories are copied across (a replay's store is its own)."""
    from aiflows_jarvis.CoreFlowModule import BadInputError, set_memory_files
    from aiflows_jarvis.VectorStoreFlowModule import StoreKindMismatch
    from aiflows_jarvis.VectorStoreFlowModule.store_folder import name

    args, memory = session.args, session.flow.subflows["Memory"]
    if args.store:
        memory.flow_config["type"] = args.store
    if session.transcript is not None:
        return
    memory.flow_config["migrate"] = bool(args.migrate)
    set_memory_files(memory, session.memory_dir)
    try:
        note = memory.prepare_store()
    except StoreKindMismatch as mismatch:
        wanted = f"--store {mismatch.wanted}"
        if len(mismatch.found) > 1:
            raise BadInputError(
                f"The memory folder's vector store ({mismatch.path}) holds both a {name(mismatch.found[0])} and a "
                f"{name(mismatch.found[1])} store (written before the folder recorded its kind). Run with {wanted} "
                f"--migrate to copy them all into one {name(mismatch.wanted)} store (the folder as it is is kept in "
                f"{mismatch.kept}), or move the files of the store you do not want out of the folder."
            ) from None
        found = mismatch.found[0]
        raise BadInputError(
            f"The memory folder's vector store ({mismatch.path}) was written with --store {found} "
            f"({name(found)}); this run uses {wanted} ({name(mismatch.wanted)}), which would show none of its "
            f"memories. Run with --store {found} to use them, or with {wanted} --migrate to copy them into a "
            f"{name(mismatch.wanted)} store (the {name(found)} store is kept in {mismatch.kept})."
        ) from None
    if note:
        session.console.line("info", note)
    elif args.migrate:
        session.console.line(
            "info",
            f"--migrate: the vector store in {memory.store_directory()} holds no store of "
            "another kind; nothing to copy.",
        )


def _prepare(session: Any) -> None:
    """The goal on screen, the vector store, and the warning that code will run."""
    from . import launcher

    console, flow = session.console, session.flow
    console.show("flow", "AutoGPT's goal:", session.goal)
    memory = flow.subflows["Memory"]
    if session.transcript is not None:  # a store of its own: a replay embeds with local vectors
        store = os.path.join(session.memory_dir, DEMO_STORE)
        shutil.rmtree(store, ignore_errors=True)
        memory.flow_config["persist_directory"] = store
        for path, files in list(session.memory.items()):  # the store is the run's memory, not a file it made
            if "vector_store" in files:
                session.memory[path] = {**files, "vector_store": store}
    for _, interpreter in launcher.interpreters(flow):
        interpreter.flow_config["workspace"] = session.workdir
        console.line(
            "warning",
            f"run_code is on: the code the controller writes runs in "
            f"{interpreter.workspace} as written; your feedback comes after.",
        )


def _memory_lines(session: Any) -> List[str]:
    store = session.flow.subflows["Memory"].store_directory()
    return [f"memories: {ending.shown(store)}"] + ending.memory_lines(session.memory)


AUTOGPT = App(
    name="AutoGPT",
    entry_point="autogpt",
    script="run_autogpt.py",
    config=CONFIG,
    default_config=DEFAULT_CONFIG,
    demo=DEMO_TRANSCRIPT,
    run_file=RUN_FILE,
    report_name=REPORT_NAME,
    description=DESCRIPTION,
    epilog=EPILOG,
    add_options=_add_options,
    check_options=_check_options,
    resumed=("embedding_model", "store", "run_code"),
    replayed=("--embedding-model",),
    words=Words(
        goal_help="what AutoGPT should find out, in natural language",
        goal_example="When was the Eiffel Tower finished?",
        memory_help="the vector store of memories",
        yes_help="ask for no feedback (nobody is asked)",
        demo_help="replay the recorded demo run (offline, no feedback)",
        demo_intro="This is a REPLAY: the LLM replies and the search results are a recording, made for this goal. "
        "The flows and the vector-store memory run for real (with deterministic local embeddings), in "
        "{memory_dir}/. No feedback is asked.",
        closed_input="AutoGPT asks for your feedback but the terminal input is closed. Run in a terminal, or pass "
        "--yes to ask for no feedback.",
        kept="The memories",
        resume_does="go on with the same goal and what the memories kept",
        answer="Answer",
        server_note=" that also serves /v1/embeddings",
    ),
    hooks=Hooks(
        requires=_requires,
        sources=_sources,
        configure=_configure,
        recorder_header=_recorder_header,
        check=_check_store,
        prepare=_prepare,
        memory_lines=_memory_lines,
    ),
)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    """AutoGPT's options (exits on bad ones, as argparse does)."""
    return _parse_args(AUTOGPT, argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Runs AutoGPT; the exit code is ``run.EXIT_CODES``'s."""
    return _main(AUTOGPT, argv)
