"""CodeWriterFlowModule: writes and tests one library function with the user, until the code is accepted."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ControllerFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/InteractiveCodeGenFlowModule", "revision": "main"},
    {"url": "aiflows/TestCodeFlowModule", "revision": "main"},
]

from .CodeWriterFlow import CodeWriterFlow  # noqa: E402
