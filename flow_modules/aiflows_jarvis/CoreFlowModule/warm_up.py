"""Work a run will need soon, started when the run waits anyway.

A launcher says what to start (``RunContext(warm_up=callback)`` or ``set_warm_up(callback)``; Jarvis's command line
starts the Python kernels of the flow tree); a flow calls ``warm_up()`` at a moment the run waits for the user or
follows a slow step: the plan writer calls it when a draft plan is put up for review, so that the kernel starts while
the user reads the plan and not when the first ``run_code`` asks for it. The callback runs once; with none set (a flow
used on its own, the tests), ``warm_up()`` does nothing.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

from .run_context import current_run

_lock = threading.Lock()  # two flows calling warm_up() at once: one of them runs the callback


def set_warm_up(callback: Optional[Callable[[], None]]) -> Optional[Callable[[], None]]:
    """``callback`` runs at the current run's next ``warm_up()`` (once; it must return at once); returns the one set
    before."""
    run = current_run()
    with _lock:
        previous, run.warm_up = run.warm_up, callback
    return previous


def warm_up() -> bool:
    """Run the current run's callback, if any (and forget it); whether one ran."""
    run = current_run()
    with _lock:
        callback, run.warm_up = run.warm_up, None
    if callback is None:
        return False
    callback()
    return True
