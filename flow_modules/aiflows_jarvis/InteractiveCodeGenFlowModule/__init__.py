"""InteractiveCodeGenFlowModule: an LLM writes a library function; the user approves, comments on or edits it."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ChatFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/MemoryReadingFlowModule", "revision": "main"},
]

from .InteractiveCodeGenFlow import InteractiveCodeGenFlow, extract_code  # noqa: E402
