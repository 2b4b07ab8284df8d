"""HumanStandardInputFlowModule: the user in the loop (questions, approvals, reviews with an editor, drafts an LLM
writes for review)."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .HumanReviewFlow import HumanReviewFlow  # noqa: E402
from .HumanStandardInputFlow import HumanStandardInputFlow  # noqa: E402
from .InteractiveGenFlow import InteractiveGenFlow  # noqa: E402
