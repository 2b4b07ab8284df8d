"""Every file is formatted and linted as pyproject.toml's [tool.ruff] says: `ruff format` and `ruff check` (installed
with the test extra) would change nothing. To fix what this finds: `ruff format . && ruff check --fix .`."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_format_would_change_no_file():
    done = ruff("format", "--check")
    found = f"{done.stdout[-3000:]}{done.stderr[-2000:]}"
    assert done.returncode == 0, f"{found}\nrun `ruff format .` to format them"


def test_ruff_check_finds_nothing():
    done = ruff("check", "--output-format", "concise")
    found = f"{done.stdout[-3000:]}{done.stderr[-2000:]}"
    assert done.returncode == 0, f"{found}\nrun `ruff check --fix .`, then fix the rest by hand"
