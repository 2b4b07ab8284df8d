"""ControllerFlowModule: the one controller (commands from YAML, strict JSON protocol with corrections) and the
controller-executor loop every boss, plan writer and code writer is built on."""
dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ChatFlowModule", "revision": "main"},
]

from .commands import Command, InvalidReply, parse_command  # noqa: E402
from .ControllerAtomicFlow import ControllerAtomicFlow  # noqa: E402
from .ControllerExecutorFlow import ControllerExecutorFlow, format_branch_output  # noqa: E402
