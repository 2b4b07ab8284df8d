"""The sources under flow_modules/, one import name for them (docs/layout.md)."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_sources_sit_under_flow_modules_which_is_no_package():
    assert os.path.isfile(os.path.join(ROOT, "flow_modules", "aiflows_jarvis", "__init__.py"))
    assert not os.path.exists(os.path.join(ROOT, "flow_modules", "__init__.py")), \
        "flow_modules/__init__.py would make flow_modules.aiflows_jarvis a second name for the package"


def test_a_second_import_name_for_the_package_is_refused_with_what_to_do():
    done = subprocess.run([sys.executable, "-c", "import flow_modules.aiflows_jarvis"], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "ImportError: aiflows_jarvis was imported as 'flow_modules.aiflows_jarvis'" in done.stderr
    assert "Import it as aiflows_jarvis" in done.stderr
