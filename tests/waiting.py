"""Waiting for an event in a test, not for a duration.

A test waits for what it needs (a process gone, a file written, a server's request count). The deadline only guards
against a hang: it is long enough for a machine busy with other work, so a test that passes never comes near it, and
when it expires the failure says what was waited for.
"""

from __future__ import annotations

import time
from typing import Any, Callable

HANG_GUARD = 120.0  # seconds: far beyond any event a test waits for, even on a loaded machine


def wait_until(condition: Callable[[], Any], what: str, timeout: float = HANG_GUARD, poll: float = 0.02) -> Any:
    """Return the first true value of ``condition()``; fail, naming ``what``, if none came within ``timeout`` s.

    condition: called every ``poll`` seconds until it returns something true.
    what: the event, as the failure should name it ("the kernel's marker file").
    """
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"waited {timeout:.0f} s for {what}; it did not happen")
        time.sleep(poll)


def eventually(condition: Callable[[], Any], timeout: float = HANG_GUARD, poll: float = 0.02) -> bool:
    """True as soon as ``condition()`` is; False if it is still false after ``timeout`` s (for tests that word their
    own failure)."""
    try:
        wait_until(condition, "", timeout, poll)
        return True
    except AssertionError:
        return False
