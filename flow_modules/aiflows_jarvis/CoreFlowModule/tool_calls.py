"""Tool calls that can be recorded and replayed, like LLM calls.

A flow that reaches the outside world through a tool (a web search, Wikipedia) runs it through ``run_tool``. With a
recorder installed (``run_autogpt.py --record``), every observation is written to the run's transcript next to the
LLM exchanges; with a replay installed (``--replay``, ``--demo``), the observation comes from the transcript and the
tool is not called, so a recorded run replays with no network. Errors the tool flow turns into observations are
recorded as such. They belong to the current run (``RunContext(tool_recorder=..., tool_replay=...)``), like the
backend factory.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from .run_context import current_run

Recorder = Callable[[str, Dict[str, Any], str], None]
Replay = Callable[[str, Dict[str, Any]], str]


def set_tool_recorder(recorder: Optional[Recorder]) -> Optional[Recorder]:
    """``recorder(flow_path, tool_input, observation)`` is called after every tool call of the current run; None
    stops. Returns the previous one."""
    run = current_run()
    previous, run.tool_recorder = run.tool_recorder, recorder
    return previous


def set_tool_replay(replay: Optional[Replay]) -> Optional[Replay]:
    """``replay(flow_path, tool_input) -> observation`` answers every tool call of the current run instead of the
    tool; None stops. Returns the previous one."""
    run = current_run()
    previous, run.tool_replay = run.tool_replay, replay
    return previous


def run_tool(where: str, tool_input: Dict[str, Any], call: Callable[[], str]) -> str:
    """The observation of a tool call: replayed, or ``call()`` (recorded when a recorder is installed)."""
    run = current_run()
    if run.tool_replay is not None:
        return run.tool_replay(where, tool_input)
    observation = call()
    if run.tool_recorder is not None:
        run.tool_recorder(where, tool_input, observation)
    return observation
