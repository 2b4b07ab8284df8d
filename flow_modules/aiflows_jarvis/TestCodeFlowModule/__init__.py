"""TestCodeFlowModule: checks library code (compiles, imports resolve) and runs the user's tests, with feedback."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/CodeLibraryFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/InterpreterFlowModule", "revision": "main"},
]

from .TestCodeAtomicFlow import TestCodeAtomicFlow  # noqa: E402
from .TestCodeFlow import TestCodeFlow  # noqa: E402
