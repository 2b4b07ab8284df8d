"""MemoryReadingFlowModule: reads plan, logs (their last entries) and the code library (signatures + docstrings);
beyond their budgets, the entries relevant to the task; and searches them for the controller."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/CodeLibraryFlowModule", "revision": "main"},
]

from .MemoryReadingAtomicFlow import MemoryReadingAtomicFlow  # noqa: E402
from .MemorySearchAtomicFlow import MemorySearchAtomicFlow  # noqa: E402
