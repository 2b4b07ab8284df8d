"""The ``set_*`` functions of earlier releases, kept one release as deprecated aliases.

Each changes a setting of the current run (the context entered, else this context's run with the defaults) and
returns what it was. A run is now configured once, when it is built: ``with RunContext(input_source=...,
backend_factory=..., budget=...) as run: flow.call(...)``; nothing in the package calls these.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Callable, Optional, Tuple

from ..console.interaction import CLOSED_INPUT_HINT, Console, InputSource, TerminalInput
from ..flows.lean import RunTrace, step_message
from .current import current_run


def deprecated_setting(
    alias: str,
    attribute: str,
    value: Any = None,
    change: Optional[Callable[[Any], Any]] = None,
    stacklevel: int = 3,
) -> Tuple[Any, Any]:
    """Set ``attribute`` of the current run for the deprecated function ``alias`` (warning once per place it is called
    from); returns (what it was, the run).

    :param alias: the deprecated function's name, for the warning (``set_backend_factory``).
    :param attribute: the ``RunContext`` setting it changes (``backend_factory``).
    :param value: the new value;
    :param change: or how the new value is made from the old one.
    :param stacklevel: the caller's frame counted from here (4 from a ``@contextmanager`` generator): Python shows
        the warning only when it points at the user's script.
    """
    warnings.warn(
        f"{alias}() is deprecated and goes in the next release: build the run with what it needs instead, "
        f"`with RunContext({attribute}=...):` (aiflows_jarvis.CoreFlowModule)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    run = current_run()
    previous = getattr(run, attribute)
    setattr(run, attribute, change(previous) if change is not None else value)
    return previous, run


def set_input_source(source: Optional[InputSource]) -> InputSource:
    """Deprecated: ``RunContext(input_source=...)``. None restores the terminal."""
    return deprecated_setting("set_input_source", "input_source", source if source is not None else TerminalInput())[0]


@contextmanager
def using_input_source(source: InputSource):
    """Deprecated: ``with RunContext(input_source=...)``."""
    previous, run = deprecated_setting("using_input_source", "input_source", source, stacklevel=4)
    try:
        yield source
    finally:
        run.input_source = previous


def set_console(console: Optional[Console]) -> Console:
    """Deprecated: ``RunContext(console=...)``. None: a new console on stdout."""
    return deprecated_setting("set_console", "console", console if console is not None else Console())[0]


def set_closed_input_hint(text: Optional[str]) -> str:
    """Deprecated: ``RunContext(closed_input_hint=...)``; returns the hint that was in effect."""
    return deprecated_setting("set_closed_input_hint", "closed_input_hint", text)[0] or CLOSED_INPUT_HINT


def set_run_budget(budget: Any) -> Any:
    """Deprecated: ``RunContext(budget=RunBudget(...))``."""
    return deprecated_setting("set_run_budget", "budget", budget)[0]


def set_warm_up(callback: Optional[Callable[[], None]]) -> Optional[Callable[[], None]]:
    """Deprecated: ``RunContext(warm_up=callback)``."""
    previous, run = deprecated_setting("set_warm_up", "warm_up", callback)
    run.warmed = False
    return previous


def set_tool_recorder(recorder: Optional[Callable]) -> Optional[Callable]:
    """Deprecated: ``RunContext(tool_recorder=...)``."""
    return deprecated_setting("set_tool_recorder", "tool_recorder", recorder)[0]


def set_tool_replay(replay: Optional[Callable]) -> Optional[Callable]:
    """Deprecated: ``RunContext(tool_replay=...)``."""
    return deprecated_setting("set_tool_replay", "tool_replay", replay)[0]


def set_trace_file(path: Optional[str]) -> Optional[RunTrace]:
    """Deprecated: ``RunContext(trace_file=...)``. Opens the trace now; None closes it."""
    _, run = deprecated_setting("set_trace_file", "trace_file", path or None)
    if run.trace is not None:
        run.trace.close()
    run.trace = RunTrace(path) if path else None
    run.trace_checked = True
    return run.trace


def set_step_record(path: Optional[str]) -> Optional[RunTrace]:
    """Deprecated: ``RunContext(step_record=...)``. Opens the record now; None closes it."""
    _, run = deprecated_setting("set_step_record", "step_record", path or None)
    if run.steps is not None:
        run.steps.close()
    run.steps = RunTrace(path, only=step_message) if path else None
    return run.steps
