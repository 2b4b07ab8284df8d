#!/usr/bin/env python
"""Run AutoGPT on a goal: python run_autogpt.py "<goal>" (--help for the options)."""
import os
import sys

# From a checkout, its own sources (flow_modules/aiflows_jarvis) are the ones run, installed or not.
_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flow_modules")
if os.path.isdir(os.path.join(_SOURCES, "aiflows_jarvis")) and _SOURCES not in sys.path:
    sys.path.insert(0, _SOURCES)

from aiflows_jarvis.app.autogpt import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
