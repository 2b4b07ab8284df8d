"""aiflows' message ids and time stamps, made quicker, for every aiflows message of the process.

Every aiflows message gets a uuid4 identifier (``os.urandom`` and a ``uuid.UUID`` each) and a time stamp formatted
anew (``aiflows.messages.abstract``), and a controller round makes a dozen messages or more. Importing this module
(``CoreFlowModule/__init__.py`` does) gives that module equivalents that make strings of the same formats: a uuid4
whose random part is drawn once per process and whose last group counts, and the time stamp's seconds formatted once
per second.
"""

from __future__ import annotations

import itertools
import os
import time


def unique_id(existing_ids=None) -> str:
    """aiflows' ``create_unique_id``: an id in ``str(uuid.uuid4())``'s format, not in ``existing_ids``. Its first
    five groups (74 random bits, the version and variant set as a uuid4's) are drawn once per process (again in a
    forked child) from ``os.urandom``; its last group counts the ids made. Message ids need to be unique, not secret:
    a counter is unique within the process, the random part across processes, and neither needs a system call or a
    ``uuid.UUID`` per message (nor follows the user's ``random.seed()``)."""
    while True:
        made = "%s%012x" % (_id_prefix[0], next(_id_counter))
        if not existing_ids or made not in existing_ids:
            return made


def _new_id_prefix() -> str:
    bits = int.from_bytes(os.urandom(10), "big")  # 80 bits, 74 of them used
    text = "%020x" % bits
    variant = "89ab"[bits & 3]
    return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-{variant}{text[17:20]}-"


_id_prefix = [_new_id_prefix()]  # one entry, replaced in place in a forked child
_id_counter = itertools.count(1)


def _reseed_ids_in_child() -> None:
    _id_prefix[0] = _new_id_prefix()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_ids_in_child)


_formatted_second = [(None, "")]  # (the second, its text): one entry, replaced in place


def datetime_ns() -> str:
    """aiflows' ``get_current_datetime_ns``: ``"%Y-%m-%d %H:%M:%S.<nanoseconds, 9 digits>"`` in UTC, with the
    seconds formatted once per second."""
    now = time.time_ns()
    second = now // 1_000_000_000
    cached = _formatted_second[0]
    if cached[0] != second:
        cached = _formatted_second[0] = (second, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{now % 1_000_000_000:09d}"


def use_quick_message_stamps() -> None:
    """Make every aiflows message of this process take its id and time stamp from the functions above."""
    import aiflows.messages.abstract as messages

    messages.create_unique_id = unique_id
    messages.get_current_datetime_ns = datetime_ns


use_quick_message_stamps()
