"""Tool calls that can be recorded and replayed, like LLM calls.

A flow that reaches the outside world through a tool (a web search, Wikipedia) runs it through ``run_tool``. With a
recorder installed (``run_autogpt.py --record``), every observation is written to the run's transcript next to the
LLM exchanges; with a replay installed (``--replay``, ``--demo``), the observation comes from the transcript and the
tool is not called, so a recorded run replays with no network. Errors the tool flow turns into observations are
recorded as such. Process-wide, like the backend factory.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

Recorder = Callable[[str, Dict[str, Any], str], None]
Replay = Callable[[str, Dict[str, Any]], str]

_recorder: Optional[Recorder] = None
_replay: Optional[Replay] = None


def set_tool_recorder(recorder: Optional[Recorder]) -> Optional[Recorder]:
    """``recorder(flow_path, tool_input, observation)`` is called after every tool call; None stops."""
    global _recorder
    previous, _recorder = _recorder, recorder
    return previous


def set_tool_replay(replay: Optional[Replay]) -> Optional[Replay]:
    """``replay(flow_path, tool_input) -> observation`` answers every tool call instead of the tool; None stops."""
    global _replay
    previous, _replay = _replay, replay
    return previous


def run_tool(where: str, tool_input: Dict[str, Any], call: Callable[[], str]) -> str:
    """The observation of a tool call: replayed, or ``call()`` (recorded when a recorder is installed)."""
    if _replay is not None:
        return _replay(where, tool_input)
    observation = call()
    if _recorder is not None:
        _recorder(where, tool_input, observation)
    return observation
