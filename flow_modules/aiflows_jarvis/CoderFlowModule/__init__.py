"""CoderFlowModule: a boss that reaches a goal with code: it extends the code library and runs code, with the user."""

dependencies = [
    {"url": "aiflows/AbstractBossFlowModule", "revision": "main"},
    {"url": "aiflows/ExtendLibraryFlowModule", "revision": "main"},
    {"url": "aiflows/MCPToolFlowModule", "revision": "main"},
    {"url": "aiflows/MemoryReadingFlowModule", "revision": "main"},
    {"url": "aiflows/RunCodeFlowModule", "revision": "main"},
]

from .CoderFlow import CoderFlow  # noqa: E402
