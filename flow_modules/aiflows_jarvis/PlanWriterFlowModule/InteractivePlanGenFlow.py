from __future__ import annotations

from aiflows_jarvis.HumanStandardInputFlowModule import InteractiveGenFlow


class InteractivePlanGenFlow(InteractiveGenFlow):
    """Drafts (or revises) a plan with an LLM, then shows it to the user to approve, comment on, or edit.

    An InteractiveGenFlow (HumanStandardInputFlowModule: the loop it shares with InteractiveCodeGenFlow) over the
    `plan`: `PlanGenerator` (a ChatAtomicFlow; its chat is kept between the calls of one planning session, so it can
    revise its draft), then `UserReview` (a HumanReviewFlow). Plans have a budget, because the plan goes into every
    controller prompt: a draft over `max_plan_chars`, cut off by the generator's `max_tokens` or repeating itself is
    sent back (`max_plan_rewrites` times) without asking the user, and one still not right is never shown for
    approval. A plan written by code (`draft`) is reviewed as it is.

    *Configuration Parameters*:
    - `max_plan_chars` (int): the longest plan, in characters (default 4000; 0 or null: no limit); the generator's
      system prompt gets it as `max_plan_chars`.
    - `max_plan_rewrites` (int): how many times a draft that cannot be shown is sent back (default 2).
    - `rewrite_prompts`, `not_shown_advice`: what the generator and the controller are told (see InteractiveGenFlow).
    - `subflows_config.PlanGenerator`: the plan LLM (prompts, backend; its `max_tokens` fits a plan of
      `max_plan_chars` characters).
    - `subflows_config.UserReview`: the review step (`editor`, `open_editor`).

    *Input Interface*:
    - `goal` (str): what to plan for (first call) or how to revise the plan (later calls).
    - `plan` (str): the current plan, as the user may have edited it ("" at first).
    - `draft` (str, optional): a plan written by code (a goal of one step), shown for review instead of a first
      draft of the generator.

    *Output Interface*:
    - `plan` (str), `feedback` (str), `approved` (bool), `edited` (bool): see HumanReviewFlow.
    - `over_limit` (bool): the generator's last draft could not be shown, so it was not put up for approval.
    - `result` (str): the review's outcome as the controller reads it (see HumanReviewFlow's `review_result`).
    """
