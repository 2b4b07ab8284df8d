"""InterpreterFlowModule: runs Python in a persistent Jupyter kernel and shell code in bash, in a workspace."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .InterpreterAtomicFlow import InterpreterAtomicFlow  # noqa: E402
