"""The benchmark's peers that are not dependencies of this package get a virtual environment of their own.

``smolagents_python(peers_dir)`` returns the interpreter of ``<peers_dir>/smolagents-venv`` with smolagents (and
the ``openai`` extra its OpenAIServerModel needs) installed, installing it the first time: smolagents 1.26 if pip
can get it, else the newest version pip finds. Nothing is installed into the project's own environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Callable, Optional, Tuple

DEFAULT_PEERS_DIR = os.path.join(os.path.expanduser("~"), ".cache", "jarvis-bench")
SMOLAGENTS_SPECS = ("smolagents[openai]==1.26.*", "smolagents[openai]")
PROBE = "import openai, smolagents; print(smolagents.__version__)"


class PeerUnavailable(Exception):
    """A peer that cannot be run here; the message says why (the benchmark prints it and goes on)."""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _version(python: str) -> Optional[str]:
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def smolagents_python(
    peers_dir: str = DEFAULT_PEERS_DIR, say: Callable[[str], None] = lambda text: None
) -> Tuple[str, str]:
    """``(python, smolagents version)``; raises PeerUnavailable saying why not (a failed venv or pip install)."""
    venv = os.path.join(os.path.abspath(os.path.expanduser(peers_dir)), "smolagents-venv")
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python):
        version = _version(python)
        if version:
            return python, version
    say(f"installing smolagents into {venv} (once; pip, about half a minute)")
    base = getattr(sys, "_base_executable", None) or sys.executable
    try:
        os.makedirs(os.path.dirname(venv), exist_ok=True)
        made = subprocess.run([base, "-m", "venv", "--clear", venv], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PeerUnavailable(f"could not create {venv}: {error}") from None
    if made.returncode != 0:
        raise PeerUnavailable(f"could not create {venv}: {_last_line(made.stderr or made.stdout)}")
    problem = ""
    for spec in SMOLAGENTS_SPECS:
        try:
            done = subprocess.run(
                [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", spec],
                capture_output=True,
                text=True,
                timeout=900,
            )
        except subprocess.TimeoutExpired:
            problem = f"pip install {spec} took more than 15 minutes"
            continue
        if done.returncode == 0:
            version = _version(python)
            if version:
                return python, version
            problem = f"pip installed {spec}, but smolagents does not import"
        else:
            problem = f"pip install {spec} failed: {_last_line(done.stderr or done.stdout)}"
    raise PeerUnavailable(problem)
