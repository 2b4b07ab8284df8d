"""What one command line declares: its flow, configuration, demo, words and extra options. Everything else (the
options they share, the run, exit codes, budgets, the end of the run, the report, resume, record/replay, the working
folder) is the application layer's, in ``run.py`` and the modules it uses."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# configs/ of the checkout the package runs from (absent from a wheel: then the flow's own defaults)
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(PACKAGE)), "configs")


@dataclass(frozen=True)
class App:
    """One command line.

    name: the app as the user reads it ("Jarvis"); entry_point / script: the installed command and the script
    (``jarvis`` / ``run_jarvis.py``); config: its configuration file; default_config: the configuration when that
    file is absent; demo: the demo's transcript; run_file: the run file's name in the memory folder (for --resume);
    report_name: the run report's name there (each app its own: two apps may share a memory folder);
    description / epilog: its --help; words: the texts it says (``Words``); add_options(parser): its own options;
    check_options(parser, args): refusals of its own; resumed: its own options a resumed run keeps (their dests);
    replayed: its own options a recording answers instead (refused with --demo and --replay); hooks: what it does
    at the steps of a run (``Hooks``).
    """

    name: str
    entry_point: str
    script: str
    config: str
    default_config: Dict[str, Any]
    demo: str
    run_file: str
    description: str
    epilog: str
    words: "Words"
    add_options: Optional[Callable[[Any], None]] = None
    check_options: Optional[Callable[[Any, Any], None]] = None
    resumed: Tuple[str, ...] = ()
    replayed: Tuple[str, ...] = ()
    hooks: "Hooks" = field(default_factory=lambda: Hooks())
    report_name: str = "report.html"

    @property
    def steps_file(self) -> str:
        """The run's step record in the memory folder (``jarvis_steps.jsonl``): its commands, arguments and
        results whole, for its report; it goes with the report when a new run archives it."""
        return f"{self.entry_point}_steps.jsonl"


@dataclass(frozen=True)
class Words:
    """The texts an app says, each naming only its own options.

    goal_help: the goal's --help; goal_example: a goal for the "give a goal" error; memory_help: what the memory
    folder holds (--memory-dir's help); yes_help: what --yes does; demo_help: what --demo does; demo_intro: shown
    when the demo starts ({memory_dir} is filled); closed_input: what a closed terminal says; kept: what the memory
    folder keeps ("Plans, logs and the library"); resume_does: what --resume goes on with; answer: the answer's
    title ("Final answer"); server_note: what a server must serve besides chats (for the no-LLM hint); new_run: what a
    new run does to the memory folder (" (the plans and logs are then archived)").
    """

    goal_help: str
    goal_example: str
    memory_help: str
    yes_help: str
    demo_help: str
    demo_intro: str
    closed_input: str
    kept: str
    resume_does: str
    answer: str = "Final answer"
    server_note: str = ""
    new_run: str = ""


@dataclass
class Hooks:
    """What an app does at the steps of a run; each takes the run's ``Session`` (see ``run.py``).

    requires: what the app needs installed, checked first, before anything is shown or written (raise
    ``BadInputError`` saying what to install); sources: after the LLM replies' source is set (replay or live): e.g.
    tools and embeddings; configure: the configuration before the flow is built (returns it); recorder_header: the
    transcript's extra header fields, with --record; check: the flow once built, before anything in the memory
    folder is moved or written (raise ``BadInputError`` to refuse the run); prepare: the flow once built and its
    memory prepared (``session.recorder`` is there to record more); memory_lines: the end of the run's lines about
    the memory folder. What they set in the run's context goes with it.
    """

    requires: Optional[Callable[[Any], None]] = None
    sources: Optional[Callable[[Any], None]] = None
    configure: Optional[Callable[[Any, Dict[str, Any]], Dict[str, Any]]] = None
    recorder_header: Optional[Callable[[Any], Dict[str, Any]]] = None
    prepare: Optional[Callable[[Any], None]] = None
    check: Optional[Callable[[Any], None]] = None
    memory_lines: Optional[Callable[[Any], List[str]]] = None
