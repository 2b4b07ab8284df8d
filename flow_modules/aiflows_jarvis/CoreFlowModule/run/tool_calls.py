"""Tool calls that can be recorded and replayed, like LLM calls.

A flow that reaches the outside world through a tool (a web search, Wikipedia) runs it through ``run_tool``. With a
recorder installed (``run_autogpt.py --record``), every observation is written to the run's transcript next to the
LLM exchanges; with a replay installed (``--replay``, ``--demo``), the observation comes from the transcript and the
tool is not called, so a recorded run replays with no network. Errors the tool flow turns into observations are
recorded as such. They belong to the current run (``RunContext(tool_recorder=..., tool_replay=...)``), like the
backend factory.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from .current import current_run

Recorder = Callable[[str, Dict[str, Any], str], None]
Replay = Callable[[str, Dict[str, Any]], str]


def run_tool(where: str, tool_input: Dict[str, Any], call: Callable[[], str]) -> str:
    """The observation of a tool call: replayed, or ``call()`` (recorded when a recorder is installed)."""
    run = current_run()
    if run.tool_replay is not None:
        return run.tool_replay(where, tool_input)
    observation = call()
    if run.tool_recorder is not None:
        run.tool_recorder(where, tool_input, observation)
    return observation
