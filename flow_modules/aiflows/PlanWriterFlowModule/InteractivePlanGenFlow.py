from __future__ import annotations

from flow_modules.aiflows.CoreFlowModule import LeanSequentialFlow


class InteractivePlanGenFlow(LeanSequentialFlow):
    """Drafts (or revises) a plan with an LLM, then shows it to the user to approve, comment on, or edit.

    A sequence of `PlanGenerator` (a ChatAtomicFlow; its chat history is kept between calls of one planning
    session, so it can revise its draft) and `UserReview` (a HumanReviewFlow over the `plan`).

    *Configuration Parameters*:
    - `subflows_config.PlanGenerator`: the plan LLM (prompts, backend).
    - `subflows_config.UserReview`: the review step (`editor`, `open_editor`).

    *Input Interface*:
    - `goal` (str): what to plan for (first call) or how to revise the plan (later calls).
    - `plan` (str): the current plan, as the user may have edited it ("" at first).

    *Output Interface*:
    - `plan` (str), `feedback` (str), `approved` (bool), `edited` (bool): see HumanReviewFlow.
    """
