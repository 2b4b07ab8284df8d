"""HumanStandardInputFlowModule: the user in the loop (questions, approvals, reviews with an editor)."""
dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .HumanStandardInputFlow import HumanStandardInputFlow  # noqa: E402
from .HumanReviewFlow import HumanReviewFlow  # noqa: E402
