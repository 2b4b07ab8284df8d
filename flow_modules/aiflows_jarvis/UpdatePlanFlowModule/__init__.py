"""UpdatePlanFlowModule: writes the plan with finished steps marked done to the plan file."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .UpdatePlanAtomicFlow import UpdatePlanAtomicFlow  # noqa: E402
