"""Let the user edit a file (a plan, a function, a script) in their editor."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import List, Optional

from aiflows_jarvis.CoreFlowModule import EditorError, get_input_source


def resolve_editor(configured: Optional[str] = None) -> Optional[List[str]]:
    """The editor command as argv: the configured one (e.g. ``code --wait``), else ``$VISUAL``, else ``$EDITOR``."""
    for candidate in (configured, os.environ.get("VISUAL"), os.environ.get("EDITOR")):
        if candidate and str(candidate).strip():
            return shlex.split(str(candidate))
    return None


def editor_available(configured: Optional[str] = None) -> bool:
    """True if an editor is set and a human is there to use it (never in auto-approve mode)."""
    return get_input_source().interactive and resolve_editor(configured) is not None


def edit_file(path: str, configured: Optional[str] = None) -> bool:
    """Open ``path`` in the editor and wait for it to close; returns True if the file changed.

    If the editor fails (exit code other than 0), the file is put back as it was and EditorError says why.
    """
    command = resolve_editor(configured)
    if command is None:
        raise EditorError(
            "No editor is set: set $VISUAL or $EDITOR (e.g. `export EDITOR=nano`), or `editor:` in the config."
        )
    with open(path, "r", encoding="utf-8") as f:
        before = f.read()
    try:
        editor = subprocess.Popen(command + [path])
    except FileNotFoundError:
        raise EditorError(
            f"The editor command {command[0]!r} was not found. Set $VISUAL or $EDITOR to an installed editor."
        ) from None
    try:
        returncode = editor.wait()
    except BaseException:
        # Jarvis is ending (SIGTERM) or interrupted: ask the editor to quit, so that a terminal editor puts the
        # terminal back as it was (subprocess.run would SIGKILL it, leaving the terminal in raw mode)
        editor.terminate()
        try:
            editor.wait(timeout=5)
        except subprocess.TimeoutExpired:
            editor.kill()
        raise
    if returncode != 0:
        with open(path, "w", encoding="utf-8") as f:
            f.write(before)
        raise EditorError(
            f"The editor {' '.join(command)!r} exited with code {returncode}; the file was left unchanged."
        )
    with open(path, "r", encoding="utf-8") as f:
        return f.read() != before
