"""A budget for a whole run: LLM calls, tokens, dollars and time.

Every chat checks the budget before it calls its LLM (``check_budget``); a tool waits at most the time the run has
left (``tool_timeout``, then ``check_time`` when the wait failed). A run that reaches a limit stops the way
Ctrl+C stops it: ``BudgetExceeded`` is a ``RunStopped``, which every level lets through without asking, so the
memory files keep everything done so far and a resumed run (``--resume``) continues with a fresh budget.

The budget is the current run's (``RunContext(budget=...)``); with none (the default of a flow
used outside Jarvis's command line), nothing is limited.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from ..errors import ConfigurationError, RunStopped
from .current import current_run

_LIMITS = ("max_calls", "max_tokens", "max_cost", "max_time")


class BudgetExceeded(RunStopped):
    """The run reached one of its limits; ``str(e)`` says which, and how to go on."""

    def __init__(self, message: str, limit: str = ""):
        super().__init__(message)
        self.message = message
        self.limit = limit

    def __str__(self) -> str:
        return self.message


@dataclass
class RunBudget:
    """Limits for one run (None: no limit). ``max_cost`` is in dollars, counted for models with a known price;
    ``max_time`` in seconds from ``started``."""

    max_calls: Optional[int] = None
    max_tokens: Optional[int] = None
    max_cost: Optional[float] = None
    max_time: Optional[float] = None
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def from_config(cls, config: Optional[Dict[str, Any]], **overrides: Any) -> "RunBudget":
        """From a ``budget:`` section (``max_calls``, ``max_tokens``, ``max_cost``, ``max_time``) and overrides
        (e.g. the command line's); 0 or a negative value means no limit."""
        values: Dict[str, Any] = {}
        config = dict(config or {})
        unknown = sorted(set(config) - set(_LIMITS))
        if unknown:
            raise ConfigurationError(f"budget: unknown setting(s) {unknown}; the settings are {list(_LIMITS)}")
        for key in _LIMITS:
            value = overrides.get(key) if overrides.get(key) is not None else config.get(key)
            if value is None:
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise ConfigurationError(f"budget.{key} must be a number, got {value!r}") from None
            if number > 0:
                values[key] = int(number) if key in ("max_calls", "max_tokens") else number
        return cls(**values)

    def remaining_time(self) -> Optional[float]:
        if self.max_time is None:
            return None
        return self.max_time - (time.monotonic() - self.started)

    def describe(self) -> str:
        parts = []
        if self.max_calls is not None:
            parts.append(f"{self.max_calls} LLM calls")
        if self.max_tokens is not None:
            parts.append(f"{self.max_tokens:,} tokens")
        if self.max_cost is not None:
            parts.append(f"${self.max_cost:.2f}")
        if self.max_time is not None:
            parts.append(_duration(self.max_time))
        return ", ".join(parts) if parts else "no limit"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def get_run_budget() -> Optional[RunBudget]:
    return current_run().budget


_FLAGS = {"max_calls": "--max-calls", "max_tokens": "--max-tokens", "max_cost": "--max-cost", "max_time": "--max-time"}


def check_budget(where: str = "") -> None:
    """Raise BudgetExceeded if the run has used up one of its limits (checked before every LLM call)."""
    run = current_run()
    budget = run.budget
    if budget is None:
        return
    total = run.usage.total()
    reached = None
    if budget.max_calls is not None and total.calls >= budget.max_calls:
        reached = ("max_calls", f"{total.calls} LLM calls (the limit is {budget.max_calls})")
    elif budget.max_tokens is not None and total.total_tokens >= budget.max_tokens:
        reached = ("max_tokens", f"{total.total_tokens:,} tokens (the limit is {budget.max_tokens:,})")
    elif budget.max_cost is not None and (total.cost or 0.0) >= budget.max_cost:
        reached = ("max_cost", f"${total.cost:.2f} (the limit is ${budget.max_cost:.2f})")
    elif budget.max_time is not None and (budget.remaining_time() or 0.0) <= 0:
        reached = ("max_time", f"{_duration(budget.max_time)} of running time (the limit)")
    if reached is None:
        return
    raise _exceeded(*reached, f" before a call of {where}" if where else "")


def tool_timeout(timeout: Optional[float], where: str = "") -> Optional[float]:
    """How long a tool may wait: its own ``timeout`` (None or 0: no limit of its own), cut to the time the run's
    ``max_time`` leaves, so that a tool that hangs cannot outlive the run. Raises BudgetExceeded when no time is
    left; ``where`` names the tool in the message."""
    budget = get_run_budget()
    remaining = budget.remaining_time() if budget is not None else None
    if remaining is None:
        return float(timeout) if timeout else None
    if remaining <= 0:
        check_time(where)
    return min(float(timeout), remaining) if timeout else remaining


def check_time(where: str = "") -> None:
    """Raise BudgetExceeded if the run's ``max_time`` is used up. A tool whose wait failed calls it: a wait the budget
    cut short stops the run, rather than telling the controller that the tool timed out."""
    budget = get_run_budget()
    if budget is None or budget.max_time is None or (budget.remaining_time() or 0.0) > 0:
        return
    raise _exceeded(
        "max_time", f"{_duration(budget.max_time)} of running time (the limit)", f" during {where}" if where else ""
    )


def _exceeded(key: str, what: str, place: str) -> BudgetExceeded:
    return BudgetExceeded(
        f"The run reached its budget{place}: {what}. It stopped; the memory files keep everything done so far. "
        f"Run again with --resume to continue with a fresh budget ({_FLAGS[key]} sets this limit).",
        key,
    )
