"""ReplanningFlowModule: rewrites the plan when something went wrong, and tells the controller it changed."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/PlanWriterFlowModule", "revision": "main"},
    {"url": "aiflows/UpdatePlanFlowModule", "revision": "main"},
]

from .ReplanningFlow import ReplanningFlow  # noqa: E402
