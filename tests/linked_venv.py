"""Clean virtual environments for tests, made offline in a second or two.

``linked_venv``: ``venv --without-pip``, and a .pth line that reaches this test environment's site-packages for
aiflows and its pins, pip and setuptools (installing them again would need the package index and minutes). The .pth
files of this environment are not run there (a .pth's directory lines only extend ``sys.path``), so neither is this
repository's editable install nor its start-up hook: what the clean environment holds of the package is what a test
puts into its own site-packages. ``copy_repository`` copies this repository's files (tracked, and untracked but not
ignored), so a test can build or install from a copy without writing into the checkout (``build/``, egg-info).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from typing import Iterable, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def linked_venv(folder) -> Tuple[str, str]:
    """Make the virtual environment ``folder``; returns its python and its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = os.path.join(str(folder), "bin", "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(site, "test-environment.pth"), "w") as f:
        f.write("".join(f"{p}\n" for p in sorted(ours)))
    return python, site


def copy_repository(destination, paths: Iterable[str] = (), strip: str = "") -> None:
    """Copy this repository's files under ``paths`` (all of them by default) to ``destination``, in the same
    layout less the leading ``strip`` (``"flow_modules/"``: the package as an install lays it out)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    )
    for rel in listed.stdout.splitlines():
        if os.path.isfile(os.path.join(ROOT, rel)):
            target = os.path.join(str(destination), rel[len(strip) :] if strip and rel.startswith(strip) else rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), target)
