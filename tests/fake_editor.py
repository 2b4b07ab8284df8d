"""A scriptable "editor" for tests: ``python tests/fake_editor.py <file>`` edits <file> as the environment says.

Environment variables (all optional; with none set the file is left unchanged):

* ``FAKE_EDITOR_LOG``: a path; one line ``<file path>`` is appended per invocation (first, so failed runs count too);
* ``FAKE_EDITOR_WRITE``: replace the whole content with this text;
* ``FAKE_EDITOR_REPLACE``: ``"old=>new"``: replace the first occurrence of ``old`` (exit 2, message on stderr, file
  untouched, if ``old`` is absent or the value has no ``=>``);
* ``FAKE_EDITOR_APPEND``: append this text;
* ``FAKE_EDITOR_EXIT``: exit with this code after editing (default 0).

They are applied in that order (write, replace, append). Files are read and written as UTF-8 with newlines kept as is.
Tests set the editor command to :func:`editor_command` (``<python> <this file>``, shell-quoted for ``shlex.split``).
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import List, Optional

__all__ = ["editor_command", "editor_argv", "edit", "main", "ENV_VARS"]

ENV_VARS = ("FAKE_EDITOR_APPEND", "FAKE_EDITOR_REPLACE", "FAKE_EDITOR_WRITE", "FAKE_EDITOR_EXIT", "FAKE_EDITOR_LOG")

SCRIPT = os.path.abspath(__file__)


def editor_argv() -> List[str]:
    """The editor command as argv: ``[sys.executable, <path of this script>]``."""
    return [sys.executable, SCRIPT]


def editor_command() -> str:
    """The editor command string for the current interpreter (safe for ``shlex.split``)."""
    return " ".join(shlex.quote(part) for part in editor_argv())


def _read(path: str) -> str:
    with open(path, "r", encoding="utf-8", newline="") as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def edit(path: str, env: Optional[dict] = None) -> int:
    """Edit ``path`` as the FAKE_EDITOR_* variables in ``env`` (default os.environ) say; returns the exit code."""
    env = os.environ if env is None else env

    log = env.get("FAKE_EDITOR_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{path}\n")

    exit_value = env.get("FAKE_EDITOR_EXIT", "0") or "0"
    try:
        exit_code = int(exit_value)
    except ValueError:
        sys.stderr.write(f"fake_editor: FAKE_EDITOR_EXIT must be an integer, got {exit_value!r}\n")
        return 2

    content = _read(path) if os.path.exists(path) else ""
    new = content
    if "FAKE_EDITOR_WRITE" in env:
        new = env["FAKE_EDITOR_WRITE"]
    if "FAKE_EDITOR_REPLACE" in env:
        spec = env["FAKE_EDITOR_REPLACE"]
        if "=>" not in spec:
            sys.stderr.write(f"fake_editor: FAKE_EDITOR_REPLACE must look like 'old=>new', got {spec!r}\n")
            return 2
        old, replacement = spec.split("=>", 1)
        if old not in new:
            sys.stderr.write(f"fake_editor: {old!r} not found in {path}\n")
            return 2
        new = new.replace(old, replacement, 1)
    if "FAKE_EDITOR_APPEND" in env:
        new = new + env["FAKE_EDITOR_APPEND"]
    if new != content:
        _write(path, new)
    return exit_code


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.stderr.write("usage: fake_editor.py <file>\n")
        return 2
    return edit(argv[0])


if __name__ == "__main__":
    sys.exit(main())
