#!/usr/bin/env python
"""Run AutoGPT on a goal: python run_autogpt.py "<goal>" (--help for the options)."""

import os
import signal
import sys


def _stop_now(signum, frame):
    """A signal while Python still imports (before main() runs): nothing has started, so nothing is to keep; the
    run ends with the code main() would give (130 Ctrl+C, 143 SIGTERM, 129 SIGHUP) instead of a traceback."""
    print("\nStopped." if signum == signal.SIGINT else "\nTerminated.", file=sys.stderr, flush=True)
    os._exit(128 + signum)


for _signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    if signal.getsignal(_signum) is not signal.SIG_IGN:  # what the shell ignores (nohup, `&`) stays ignored
        signal.signal(_signum, _stop_now)

# From a checkout, its own sources (flow_modules/aiflows_jarvis) are the ones run, installed or not.
_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flow_modules")
if os.path.isdir(os.path.join(_SOURCES, "aiflows_jarvis")) and _SOURCES not in sys.path:
    sys.path.insert(0, _SOURCES)

from aiflows_jarvis.app.autogpt import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
