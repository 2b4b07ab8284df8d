"""AutoGPT's command line: ``autogpt "<goal>"`` or ``python run_autogpt.py "<goal>"`` (``--help`` for the options)."""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from typing import List, Optional

from .names import command_name

# The pieces of Jarvis's command line that AutoGPT's shares: option types, signals, deferred Ctrl+C, the usage report.
from .jarvis import (
    Terminated,
    _duration,
    _interrupts_deferred,
    _note,
    _on_sigterm,
    _positive_float,
    _positive_int,
    _show_usage,
)

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(os.path.dirname(os.path.dirname(PACKAGE)), "configs", "autogpt.yaml")
DEMO_TRANSCRIPT = os.path.join(PACKAGE, "AutoGPTFlowModule", "demo", "demo_transcript.jsonl")
DEMO_STORE = "autogpt_demo_store"  # in the memory folder: the demo's own vector store, started afresh each time
DEFAULT_CONFIG = {"flow": {
    "_target_": "aiflows_jarvis.AutoGPTFlowModule.AutoGPTFlow.instantiate_from_default_config",
    "name": "AutoGPT"}}

DESCRIPTION = """\
AutoGPT reaches a goal by searching (Wikipedia, DuckDuckGo) one command at a time, remembering what it found in a
vector store (the memory folder keeps it for the next run) and asking for your feedback after each command
(Enter: none; q or stop: end the run). With --run-code it may also run Python and shell code in the current folder.

The LLM: OPENAI_API_KEY (OpenAI), AZURE_API_KEY + AZURE_API_BASE (Azure), or --api-base for any OpenAI-compatible
server that also serves /v1/embeddings. Needs the extra: pip install -e ".[autogpt]". No LLM at hand? Try --demo."""


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=command_name("autogpt", "run_autogpt.py"), description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("goal", nargs="?", help="what AutoGPT should find out, in natural language")
    parser.add_argument("--model", help="the controller's model (default: gpt-4, as in configs/autogpt.yaml)")
    parser.add_argument("--embedding-model", metavar="NAME",
                        help="the embedding model (default: text-embedding-3-small)")
    parser.add_argument("--api-base", metavar="URL", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1")
    parser.add_argument("--config", metavar="FILE", help="the configuration (default: configs/autogpt.yaml)")
    parser.add_argument("--memory-dir", metavar="DIR", default="memory",
                        help="where the vector store lives (default: memory/)")
    parser.add_argument("--store", choices=("chroma", "faiss"), help="the vector store (default: chroma)")
    parser.add_argument("--yes", action="store_true", help="ask for no feedback (nobody is asked)")
    parser.add_argument("--run-code", action="store_true",
                        help="let the controller run Python (one persistent session) and shell code in the current "
                             "folder, as it writes it: your feedback comes after (or `run_code: true` in the "
                             "configuration)")
    parser.add_argument("--record", metavar="FILE", help="write every LLM exchange and tool result to a transcript")
    parser.add_argument("--replay", metavar="FILE", help="answer LLM calls and tools from a transcript")
    parser.add_argument("--demo", action="store_true", help="replay the recorded demo run (offline, no feedback)")
    parser.add_argument("--verbose", action="store_true", help="show aiflows' log")
    limits = parser.add_argument_group("budget (defaults in the configuration's `budget:`)")
    limits.add_argument("--max-calls", type=_positive_int, metavar="N", help="stop after N LLM calls")
    limits.add_argument("--max-tokens", type=_positive_int, metavar="N", help="stop after N tokens")
    limits.add_argument("--max-cost", type=_positive_float, metavar="USD", help="stop after this many dollars")
    limits.add_argument("--max-time", type=_duration, metavar="TIME", help="stop after this long (900, 15m, 2h)")
    args = parser.parse_args(argv)
    if args.demo and (args.replay or args.record or args.goal or args.run_code):
        parser.error("--demo replays its own recording: no goal, --replay, --record or --run-code")
    if args.replay and args.record:
        parser.error("--record and --replay do not go together")
    if (args.demo or args.replay) and (args.model or args.api_base or args.embedding_model):
        parser.error("--demo and --replay answer from a recording: --model, --embedding-model and --api-base "
                     "do not apply")
    if not (args.goal or "").strip() and not (args.demo or args.replay):
        parser.error('give a goal, e.g. run_autogpt.py "When was the Eiffel Tower finished?" (or --demo)')
    return args


def main(argv: Optional[List[str]] = None) -> int:
    """Runs AutoGPT; exit codes as run_jarvis.py: 0 finished, 1 stopped or failed, 2 bad input or no LLM, 3 budget
    reached, 130 Ctrl+C, 143 SIGTERM."""
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:
        previous = None
    try:
        return _main(argv)
    except KeyboardInterrupt:
        _note("\nStopped.")
        return 130
    except Terminated as stop:
        _note("\nTerminated.")
        return stop.code
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: Optional[List[str]]) -> int:
    args = parse_args(argv)
    with _interrupts_deferred():
        import aiflows_jarvis  # noqa: F401  (first: litellm's tokenizer is then found offline)
        from aiflows.utils import logging

        from aiflows_jarvis.ChatFlowModule import (
            Transcript,
            TranscriptRecorder,
            add_backend_wrapper,
            remove_backend_wrapper,
            replay_factory,
            set_backend_factory,
            with_api_infos,
        )
        from aiflows_jarvis.CoreFlowModule import (
            AutoApproveInput,
            JarvisError,
            TranscriptError,
            get_console,
            set_input_source,
        )
        from aiflows_jarvis.CoreFlowModule.budget import BudgetExceeded, RunBudget, set_run_budget
        from aiflows_jarvis.CoreFlowModule.errors import BadInputError, MemoryInUseError, describe
        from aiflows_jarvis.CoreFlowModule.locks import RunLock
        from aiflows_jarvis.CoreFlowModule.memory import set_memory_files
        from aiflows_jarvis.CoreFlowModule.tool_calls import set_tool_recorder, set_tool_replay
        from aiflows_jarvis.app import launcher
        from aiflows_jarvis.VectorStoreFlowModule import (
            embeddings_with_api_infos,
            hash_embeddings_factory,
            set_embeddings_factory,
        )

    logging.set_verbosity_info() if args.verbose else logging.set_verbosity_error()
    console = get_console()
    memory_dir = os.path.abspath(args.memory_dir)
    flow = recorder = transcript = run_lock = None
    try:
        with _interrupts_deferred():
            problem = launcher.check_run_paths(memory_dir)
            if problem:
                console.line("error", f"\n{problem}")
                return 2
            run_lock = RunLock(memory_dir).acquire()

            # ~~~ Where the LLM replies, the tool results and the embeddings come from ~~~
            if args.demo or args.replay:
                transcript = Transcript.load(DEMO_TRANSCRIPT if args.demo else args.replay)
                set_backend_factory(replay_factory(transcript))
                set_tool_replay(transcript.next_tool)
                set_embeddings_factory(hash_embeddings_factory)  # deterministic and offline: see the README
                api_infos = [{"backend_used": "openai", "api_key": "replay"}]
            else:
                api_infos = launcher.api_infos_from_environment(args.api_base)
                backend_used = api_infos[0].backend_used
                overrides = {}
                if args.model:
                    overrides["model_name"] = {backend_used: launcher.litellm_model_name(args.model, backend_used,
                                                                                          args.api_base)}
                set_backend_factory(with_api_infos(api_infos, only_missing=True, **overrides))
                set_embeddings_factory(embeddings_with_api_infos(api_infos, model_name=args.embedding_model))
            goal = (args.goal or "").strip() or (transcript.header.get("goal") if transcript else "") or ""
            problem = launcher.check_text("The goal", goal)
            if problem:
                raise BadInputError(problem)

            config = launcher.load_config(args.config or CONFIG) if (args.config or os.path.exists(CONFIG)) \
                else DEFAULT_CONFIG
            # run_code: --run-code, the configuration, or the recording replayed (its prompts list the command)
            if args.run_code or (transcript is not None and transcript.header.get("run_code")):
                config = {**config, "flow": {**config["flow"], "run_code": True}}
            if args.record:
                recorder = TranscriptRecorder(args.record, goal=goal, model=args.model or "configured",
                                              run_code=bool(config["flow"].get("run_code")))
                add_backend_wrapper(recorder.wrap)
                set_tool_recorder(recorder.record_tool)
            budget = RunBudget.from_config(config.get("budget"), max_calls=args.max_calls,
                                           max_tokens=args.max_tokens, max_cost=args.max_cost,
                                           max_time=args.max_time)
            launcher.reset_server_settings()
            flow = launcher.instantiate(config, api_infos, memory_dir, source=args.config or CONFIG)
            set_memory_files(flow, memory_dir)
            memory = flow.subflows["Memory"]
            if args.store:
                memory.flow_config["type"] = args.store
            if args.demo or args.replay:  # a store of its own: a replay embeds with local vectors
                store = os.path.join(memory_dir, DEMO_STORE)
                shutil.rmtree(store, ignore_errors=True)
                memory.flow_config["persist_directory"] = store
            if args.demo:
                console.show("flow", "AutoGPT demo",
                             "This is a REPLAY: the LLM replies and the search results are a recording, made for "
                             "this goal. The flows and the vector-store memory run for real (with deterministic "
                             f"local embeddings), in {memory_dir}. No feedback is asked.")
            for _, interpreter in launcher.interpreters(flow):
                console.line("warning", f"run_code is on: the code the controller writes runs in "
                                        f"{interpreter.workspace} as written; your feedback comes after.")
            if args.yes or args.demo:
                set_input_source(AutoApproveInput())

        budget.started = time.monotonic()
        set_run_budget(budget)
        output = flow.call({"goal": goal})
        if transcript is not None and transcript.unused():
            raise TranscriptError(f"The run finished with {transcript.unused()} recorded replies unused: it left "
                                  f"the recording {transcript.path}.")
    except BudgetExceeded as error:
        console.line("warning", f"\n{error}")
        return 3
    except KeyboardInterrupt:
        console.line("warning", f"\nStopped. The memories are in {memory_dir}.")
        return 130
    except JarvisError as error:
        console.line("error", f"\n{describe(error)}")
        return 2 if isinstance(error, (launcher.MissingCredentials, MemoryInUseError, BadInputError)) else 1
    finally:
        if recorder is not None:
            remove_backend_wrapper(recorder.wrap)
            set_tool_recorder(None)
            recorder.close()
        if flow is not None:
            launcher.close_interpreters(flow)
        set_tool_replay(None)
        set_embeddings_factory(None)
        set_run_budget(None)
        if run_lock is not None:
            run_lock.release()
    console.show("answer", f"\nAutoGPT {output.get('status', '')}. Answer:", str(output.get("answer") or "(none)"))
    console.line("info", f"Memories: {flow.subflows['Memory'].store_directory()}")
    _show_usage(console)
    return 0 if output.get("status") == "finished" else 1
