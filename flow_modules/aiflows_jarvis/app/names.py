"""The name a command was started by, so that its help and hints name what the user typed."""

from __future__ import annotations

import os
import sys


def command_name(entry_point: str, script: str) -> str:
    """``entry_point`` (``jarvis``) when the process was started by that installed command, else ``script``
    (``run_jarvis.py``): the README's way, and a program that calls ``main()`` itself."""
    started = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return entry_point if started == entry_point else script


def command_line(entry_point: str, script: str) -> str:
    """What the user types to run the command again, for hints: ``jarvis`` after ``jarvis``, else
    ``python run_jarvis.py`` (the README's way)."""
    name = command_name(entry_point, script)
    return name if name == entry_point else f"python {name}"
