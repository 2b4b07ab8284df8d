"""PlanWriterFlowModule: writes a step-by-step plan with the user (draft, approve / comment / edit, revise)."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ChatFlowModule", "revision": "main"},
    {"url": "aiflows/ControllerFlowModule", "revision": "main"},
    {"url": "aiflows/HumanStandardInputFlowModule", "revision": "main"},
]

from .InteractivePlanGenFlow import InteractivePlanGenFlow  # noqa: E402
from .PlanWriterFlow import PlanWriterFlow  # noqa: E402
