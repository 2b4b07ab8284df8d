"""Work a run will need soon, started when the run waits anyway.

A launcher says what to start (``RunContext(warm_up=callback)``; Jarvis's command line
starts the Python kernels of the flow tree); a flow calls ``warm_up()`` at a moment the run waits for the user or
follows a slow step: the plan writer calls it when a draft plan is put up for review, so that the kernel starts while
the user reads the plan and not when the first ``run_code`` asks for it. The callback runs once; with none set (a flow
used on its own, the tests), ``warm_up()`` does nothing.
"""

from __future__ import annotations

import threading

from .current import current_run

_lock = threading.Lock()  # two flows calling warm_up() at once: one of them runs the callback


def warm_up() -> bool:
    """Run the current run's callback, if it has one and it has not run yet; whether it ran now."""
    run = current_run()
    with _lock:
        if run.warm_up is None or run.warmed:
            return False
        run.warmed = True
    run.warm_up()
    return True
