"""The run the code is in: one ``ContextVar``, which only entering a ``RunContext`` sets.

Every flow, chat and tool of a run reads its collaborators from ``current_run()``: the innermost ``RunContext``
entered in this context (``with RunContext(...)``). Where none is entered (a script calling ``flow.call()`` on its
own), the first read makes a run with the defaults (terminal input, a stdout console, the backend each chat's
configuration names, no budget, no trace) for this context, so that what follows in it sees the same run; a thread
starts with none of it, unless it is started with ``start_thread``, which runs it in a copy of the context that
starts it (it sees the run, and the flow it works for).

This module imports nothing of the package: the console and the accounting read the run from here, and the run
(``context.py``) holds them.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any, Callable, List, Optional

RUN: contextvars.ContextVar = contextvars.ContextVar("jarvis_run")  # no default
# What makes a run with the defaults: RunContext, which context.py registers when it is imported (the package's door
# imports it), as importing it here would make a cycle.
_DEFAULT_MAKER: List[Callable[[], Any]] = []


def current_run() -> Any:
    """The ``RunContext`` entered innermost in this context, else this context's run with the defaults."""
    try:
        return RUN.get()
    except LookupError:
        run = _DEFAULT_MAKER[0]()
        RUN.set(run)
        return run


def entered_run() -> Optional[Any]:
    """The ``RunContext`` this context is in, or None (nothing entered, and no default made yet)."""
    return RUN.get(None)


def register_default_maker(make: Callable[[], Any]) -> None:
    """How ``current_run()`` makes a run with the defaults (``context.py`` registers ``RunContext``)."""
    _DEFAULT_MAKER[:] = [make]


def start_thread(target: Callable[[], Any], name: str, daemon: bool = True) -> threading.Thread:
    """Start a thread that runs ``target`` in a copy of this context: it sees the run (its console, budget, usage)
    and the flow it works for, as the code that started it does.

    :param target: what the thread runs.
    :param name: the thread's name.
    :param daemon: whether the process may end without waiting for it.
    """
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target,), name=name, daemon=daemon)
    thread.start()
    return thread
