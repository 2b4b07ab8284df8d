"""ControllerFlowModule: the one controller (commands from YAML; a JSON schema generated from them and sent as
``response_format``; lenient reading, then precise corrections) and the controller-executor loop every boss, plan
writer and code writer is built on."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ChatFlowModule", "revision": "main"},
]

from .commands import Command, InvalidReply, parse_command, read_command, reply_schema  # noqa: E402
from .ControllerAtomicFlow import ControllerAtomicFlow  # noqa: E402
from .ControllerExecutorFlow import ControllerExecutorFlow, format_branch_output  # noqa: E402
