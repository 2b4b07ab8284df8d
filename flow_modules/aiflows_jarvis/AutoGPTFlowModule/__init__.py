"""AutoGPTFlowModule: AutoGPT (seed 004) - vector-store memory, a controller, search tools and the user's feedback."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ControllerFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/InterpreterFlowModule", "revision": "main"},
    {"url": "aiflows/LCToolFlowModule", "revision": "main"},
    {"url": "aiflows/MCPToolFlowModule", "revision": "main"},
    {"url": "aiflows/VectorStoreFlowModule", "revision": "main"},
    {"url": "aiflows/WikiSearchFlowModule", "revision": "main"},
]

from .AutoGPTFlow import AutoGPTFlow, format_memories, without_disabled_commands  # noqa: E402
from .HumanFeedbackFlow import HumanFeedbackFlow  # noqa: E402
