"""The run file: the goal and settings of the last run in a memory folder (``jarvis_run.json``,
``autogpt_run.json``), written when a run starts and read by ``--resume``."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from .spec import App

# The shared options a resumed run keeps unless given again (budgets are the run's own: a resumed run gets a fresh one)
RESUMED = ("model", "api_base", "context_window", "structured_output", "config", "workdir", "mcp_config")


def previous_run(run_file: str, memory_dir: str, report_name: str = "report.html") -> Dict[str, Any]:
    """The goal and settings of the run to resume, from the memory folder; BadInputError when there is none
    (``report_name``: the app's report, named when the run had finished)."""
    from aiflows_jarvis.CoreFlowModule import BadInputError, MemoryFileError, read_text

    if not os.path.lexists(run_file):
        raise BadInputError(
            f"Nothing to resume in {memory_dir}: no run was started there. Give a goal "
            "without --resume (or --memory-dir for another folder)."
        )
    try:  # never through a link: a memory folder from elsewhere could make its goal any file of the user's
        previous = json.loads(read_text(run_file) or "null")
        if not isinstance(previous, dict) or not isinstance(previous.get("goal"), str) or not previous["goal"].strip():
            raise ValueError("no goal in it")
    except (ValueError, OSError, MemoryFileError) as error:
        raise BadInputError(
            f"{run_file} is unreadable ({error}); it records the run to resume. Start a new "
            "run with a goal (without --resume)."
        ) from None
    if previous.get("ended") == "finished":
        raise BadInputError(
            f"The run in {memory_dir} had finished: there is nothing to resume (its answer and steps are in its "
            f"report, {os.path.join(memory_dir, report_name)}). To work on the goal again, or on another one, give "
            "the goal without --resume: the finished run's plans, logs and report are then archived."
        )
    return previous


def record_end(run_file: str, ended: str) -> None:
    """Note in the run file how the run ended (``finished``, ``stopped by Ctrl+C``, ...): --resume refuses a
    finished run. A run file that cannot be read or written is left as it is (the run is over)."""
    from aiflows_jarvis.CoreFlowModule import atomic_write, read_text

    try:
        record = json.loads(read_text(run_file) or "null")
        if isinstance(record, dict):
            record["ended"] = ended
            atomic_write(run_file, json.dumps(record))
    except Exception:  # noqa: BLE001 - the run's outcome stands without this note
        pass


def apply_previous(app: App, args: Any, previous: Dict[str, Any], memory_dir: str) -> None:
    """Give ``args`` what the resumed run had and this one does not say: its goal (another goal is refused), the
    shared settings, the app's own (``app.resumed``) and --yes (unless --yes or --no-yes is given)."""
    from aiflows_jarvis.CoreFlowModule import BadInputError

    from .launcher import goal_without_passwords

    # the goal given again may hold the passwords the run file keeps no copy of
    if args.goal and goal_without_passwords(args.goal.strip())[0] != previous["goal"].strip():
        raise BadInputError(
            f"--resume continues the run in {memory_dir}, whose goal was: {previous['goal']!r}. To work on "
            f"another goal, run without --resume{app.words.new_run}."
        )
    args.goal = args.goal.strip() if args.goal else previous["goal"]
    for name in RESUMED + app.resumed:
        setattr(args, name, getattr(args, name) or previous.get(name))
    if args.yes is None:  # neither --yes nor --no-yes: an unattended run stays unattended
        args.yes = previous.get("yes") is True


def run_record(app: App, args: Any, goal: str, started: float, workdir: str, previous: Optional[Dict[str, Any]]) -> str:
    """The run file's text for this run: what ``apply_previous`` gives back to the run that resumes it, and when the
    task started (a resumed run keeps its first run's start)."""
    from .launcher import goal_without_passwords

    # the goal without the passwords of its URLs (``launcher.goal_with_passwords`` takes them back on --resume)
    goal, urls = goal_without_passwords(goal)
    record = {
        "goal": goal,
        "started": started,
        "task_started": (previous.get("task_started") or previous.get("started") or started)
        if previous is not None
        else started,
    }
    if urls:
        record["goal_passwords"] = urls
    record.update({name: getattr(args, name) for name in RESUMED + app.resumed})
    # the URL of --api-base without its password (``launcher.api_base_with_password`` takes it back on --resume)
    if args.api_base:
        from aiflows_jarvis.CoreFlowModule import without_credentials

        record["api_base"], password = without_credentials(args.api_base)
        record["api_base_password"] = password is not None
    record["config"] = os.path.abspath(args.config) if args.config else None
    record["mcp_config"] = os.path.abspath(args.mcp_config) if args.mcp_config else None
    record["workdir"] = workdir
    record["yes"] = bool(args.yes)
    return json.dumps(record)
