"""Jarvis's command line: ``jarvis "<goal>"`` or ``python run_jarvis.py "<goal>"`` (``--help`` for the options).

What Jarvis declares: its flow, configuration, demo, words and ``--editor``; the run is ``run.py``'s."""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional

from . import ending, launcher
from .options import parse_args as _parse_args
from .run import exit_codes_help
from .run import main as _main
from .spec import CONFIGS, PACKAGE, App, Hooks, Words

CONFIG = os.path.join(CONFIGS, "jarvis.yaml")
DEMO_TRANSCRIPT = os.path.join(PACKAGE, "JarvisFlowModule", "demo", "demo_transcript.jsonl")
RUN_FILE = "jarvis_run.json"  # in the memory folder: the goal and settings of the last run, for --resume

DESCRIPTION = """\
Jarvis writes a plan with you, then reaches your goal by writing reusable
functions into a code library (library/ in the memory folder) and running code
in a stateful Python interpreter. You approve every plan, function and script;
plans, logs and the library are kept in the memory folder and reused.

The LLM: OPENAI_API_KEY (OpenAI), AZURE_API_KEY + AZURE_API_BASE
(+ AZURE_API_VERSION) (Azure), or --api-base for any OpenAI-compatible server
(vLLM, llama.cpp, Ollama). No LLM at hand? Try --demo."""

EPILOG = """\
examples:
  python run_jarvis.py "Plot Tesla's stock prices for 2022 with yfinance"
  python run_jarvis.py --model gpt-4o-mini --yes "List the primes below 100"
  python run_jarvis.py --api-base http://localhost:11434/v1 --model llama3 "..."
  python run_jarvis.py --resume         (go on with the last run, from its plan)
  python run_jarvis.py --demo           (a recorded run, offline)

""" + exit_codes_help()


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--editor", metavar="CMD", help="the editor plans and code open in (default: $VISUAL/$EDITOR)")


def _sources(session: Any) -> None:
    """Embeddings for the memory readers configured with `retrieval.embedding: provider`: the run's provider when
    live, deterministic local vectors on a replay. The vector stores are imported only when one is asked for."""

    def factory(config: Dict[str, Any], flow_name: str) -> Any:
        from aiflows_jarvis.VectorStoreFlowModule import embeddings_with_api_infos, hash_embeddings_factory

        if session.transcript is not None:
            return hash_embeddings_factory(config, flow_name)
        return embeddings_with_api_infos(session.api_infos)(config, flow_name)

    session.run_settings["embeddings_factory"] = factory


def _prepare(session: Any) -> None:
    if session.args.editor:
        launcher.set_editor(session.flow, session.args.editor)


JARVIS = App(
    name="Jarvis",
    entry_point="jarvis",
    script="run_jarvis.py",
    config=CONFIG,
    default_config=launcher.DEFAULT_FLOW_CONFIG,
    demo=DEMO_TRANSCRIPT,
    run_file=RUN_FILE,
    description=DESCRIPTION,
    epilog=EPILOG,
    add_options=_add_options,
    resumed=("editor",),
    words=Words(
        goal_help="what Jarvis should achieve, in natural language",
        goal_example="Plot y = x^2 for x in 0..10",
        memory_help="plans, logs and the code library",
        yes_help="approve plans and code automatically; questions get 'use your best judgement'",
        demo_help="replay the recorded demo run (offline, auto-approve)",
        demo_intro="This is a REPLAY: the LLM replies are a recording, made for this goal; the rest runs for real, "
        "in {memory_dir}/. Plans and code are approved automatically.",
        closed_input="Jarvis needs your answer but the terminal input is closed. Run in a terminal, or pass --yes to "
        "approve plans and code automatically.",
        kept="Plans, logs and the library",
        resume_does="continue from the plan",
        new_run=" (the plans and logs are then archived)",
    ),
    hooks=Hooks(prepare=_prepare, sources=_sources, memory_lines=lambda session: ending.memory_lines(session.memory)),
)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    """Jarvis's options (exits on bad ones, as argparse does)."""
    return _parse_args(JARVIS, argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Runs Jarvis; the exit code is ``run.EXIT_CODES``'s."""
    return _main(JARVIS, argv)
