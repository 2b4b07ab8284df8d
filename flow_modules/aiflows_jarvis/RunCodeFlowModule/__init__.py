"""RunCodeFlowModule: runs the controller's code with the user in the loop (file, edit, interpreter, feedback)."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/CodeLibraryFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/InterpreterFlowModule", "revision": "main"},
]

from .RunCodeFlow import RunCodeFlow  # noqa: E402
