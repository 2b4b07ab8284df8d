"""ReplanningFlowModule: rewrites the plan when something went wrong, and tells the controller it changed."""
dependencies = [
    {"url": "aiflows/PlanWriterFlowModule", "revision": "main"},
]

from .ReplanningFlow import ReplanningFlow  # noqa: E402
