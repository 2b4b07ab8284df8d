"""CoderFlowModule: a boss that reaches a goal with code (extend_library, run_code, ask_user, re_plan, update_plan)."""
dependencies = [
    {"url": "aiflows/AbstractBossFlowModule", "revision": "main"},
    {"url": "aiflows/ExtendLibraryFlowModule", "revision": "main"},
    {"url": "aiflows/MCPToolFlowModule", "revision": "main"},
    {"url": "aiflows/MemoryReadingFlowModule", "revision": "main"},
    {"url": "aiflows/RunCodeFlowModule", "revision": "main"},
]

from .CoderFlow import CoderFlow  # noqa: E402
