"""The run the code is in: one ``ContextVar``, which only entering a ``RunContext`` sets.

Every flow, chat and tool of a run reads its collaborators from ``current_run()``: the innermost ``RunContext``
entered in this context (``with RunContext(...)``). Where none is entered (a script calling ``flow.call()`` on its
own, or a thread it starts), it is the process's run with the defaults (terminal input, a stdout console, the
backend each chat's configuration names, no budget, no trace), made at its first use and shared by every such call,
as in the last release (what its deprecated ``set_*`` functions change there, every thread sees). A thread started
with ``start_thread`` runs in a copy of the context that starts it: it sees that run, and the flow it works for. A
plain thread does not: a flow it calls while a run is entered elsewhere uses the defaults, said once (a warning).

This module imports nothing of the package: the console and the accounting read the run from here, and the run
(``context.py``) holds them.
"""

from __future__ import annotations

import contextvars
import threading
import warnings
from typing import Any, Callable, List, Optional

RUN: contextvars.ContextVar = contextvars.ContextVar("jarvis_run")  # no default
# What makes a run with the defaults: RunContext, which context.py registers when it is imported (the package's door
# imports it), as importing it here would make a cycle.
_DEFAULT_MAKER: List[Callable[[], Any]] = []
_DEFAULT: List[Any] = []  # the process's run with the defaults, made at its first use
_LOCK = threading.Lock()
_ENTERED = [0]  # how many RunContexts are entered, in every thread (see ``note_entered``)
_WARNED: List[bool] = []


def current_run() -> Any:
    """The ``RunContext`` entered innermost in this context, else the process's run with the defaults."""
    run = RUN.get(None)
    if run is not None:
        return run
    with _LOCK:
        if not _DEFAULT:
            _DEFAULT.append(_DEFAULT_MAKER[0]())
        if _ENTERED[0] and not _WARNED:
            _WARNED.append(True)
            warnings.warn(
                "a flow was called in a thread that is in no run while a RunContext is entered in another: it uses "
                "the defaults (the terminal, no budget, its own usage). Start the thread with "
                "aiflows_jarvis.CoreFlowModule.start_thread(...) to run it in the run that starts it.",
                RuntimeWarning,
                stacklevel=2,
            )
        return _DEFAULT[0]


def entered_run() -> Optional[Any]:
    """The ``RunContext`` this context is in, or None (nothing entered)."""
    return RUN.get(None)


def note_entered(change: int) -> None:
    """Count a ``RunContext`` entered (+1) or left (-1), in any thread (``context.py`` calls it)."""
    with _LOCK:
        _ENTERED[0] += change


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
