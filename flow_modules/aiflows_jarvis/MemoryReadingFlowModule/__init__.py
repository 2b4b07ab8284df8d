"""MemoryReadingFlowModule: reads plan, logs (their last entries) and the code library (signatures + docstrings)."""
dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .MemoryReadingAtomicFlow import MemoryReadingAtomicFlow  # noqa: E402
