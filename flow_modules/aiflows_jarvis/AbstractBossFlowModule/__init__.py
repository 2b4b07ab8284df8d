"""AbstractBossFlowModule: the boss (MemoryReading -> Planner -> CtrlExMem) that Jarvis, Coder and ExtendLibrary are."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ControllerFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
    {"url": "aiflows/MemoryReadingFlowModule", "revision": "main"},
    {"url": "aiflows/MemoryWritingFlowModule", "revision": "main"},
    {"url": "aiflows/PlanWriterFlowModule", "revision": "main"},
    {"url": "aiflows/ReplanningFlowModule", "revision": "main"},
    {"url": "aiflows/UpdatePlanFlowModule", "revision": "main"},
]

from .AbstractBossFlow import AbstractBossFlow  # noqa: E402
from .CtrlExMemFlow import CtrlExMemFlow  # noqa: E402
