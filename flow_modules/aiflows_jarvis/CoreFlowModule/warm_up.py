"""Work a run will need soon, started when the run waits anyway.

A launcher says what to start (``set_warm_up(callback)``; Jarvis's command line starts the Python kernels of the flow
tree); a flow calls ``warm_up()`` at a moment the run waits for the user or follows a slow step: the plan writer calls it
when a draft plan is put up for review, so that the kernel starts (about a second) while the user reads the plan and
not when the first ``run_code`` asks for it. The callback runs once; with none set (a flow used on its own, the
tests), ``warm_up()`` does nothing.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

_callback: Optional[Callable[[], None]] = None
_lock = threading.Lock()


def set_warm_up(callback: Optional[Callable[[], None]]) -> Optional[Callable[[], None]]:
    """``callback`` runs at the next ``warm_up()`` (once; it must return at once); returns the one set before."""
    global _callback
    with _lock:
        previous, _callback = _callback, callback
    return previous


def warm_up() -> bool:
    """Run the callback set, if any (and forget it); whether one ran."""
    global _callback
    with _lock:
        callback, _callback = _callback, None
    if callback is None:
        return False
    callback()
    return True
