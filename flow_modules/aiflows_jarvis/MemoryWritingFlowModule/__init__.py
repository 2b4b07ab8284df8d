"""MemoryWritingFlowModule: appends one entry per executed command to the logs memory file."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .MemoryWritingAtomicFlow import MemoryWritingAtomicFlow  # noqa: E402
