from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import LeanSequentialFlow, current_flow_path, get_console
from aiflows_jarvis.CoreFlowModule import warm_up
from aiflows_jarvis.HumanStandardInputFlowModule.HumanReviewFlow import review_result


class InteractivePlanGenFlow(LeanSequentialFlow):
    """Drafts (or revises) a plan with an LLM, then shows it to the user to approve, comment on, or edit.

    A sequence of `PlanGenerator` (a ChatAtomicFlow; its chat history is kept between calls of one planning
    session, so it can revise its draft) and `UserReview` (a HumanReviewFlow over the `plan`).

    Plans have a budget, because the plan goes into every controller prompt. A draft over `max_plan_chars`, or cut
    off by the generator's `max_tokens`, is sent back with the limit (`max_plan_rewrites` times) without asking the
    user; one still too long is never shown for approval (not even with `--yes`): the flow returns `over_limit: true`
    with a `feedback` saying why. The generator's prompt gets `max_plan_chars` as a partial variable (0 when off).

    *Configuration Parameters*:
    - `max_plan_chars` (int): the longest plan, in characters (default 4000; 0 or null: no limit).
    - `max_plan_rewrites` (int): how many times a draft over the limit is sent back before giving up (default 2).
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
    - `over_limit` (bool): the generator's last draft stayed over the limit, so it was not shown for approval.
    - `result` (str): the review's outcome as the controller reads it (see HumanReviewFlow's `review_result`).
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        output = super().run(input_data)
        return {**output, "result": review_result(output, "plan", "plan")}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        generator = self.subflows.get("PlanGenerator")
        prompt = getattr(generator, "system_message_prompt_template", None)
        if prompt is not None and "max_plan_chars" in (prompt.partial_variables or {}):
            # One source for the limit: this flow's config, also what the generator's system prompt says.
            generator.system_message_prompt_template = prompt.partial(max_plan_chars=self.max_plan_chars)

    @property
    def max_plan_chars(self) -> int:
        return int(self.flow_config.get("max_plan_chars") or 0)

    def plan_problem(self, plan: str, generator: Any) -> Optional[Tuple[str, str]]:
        """Why a draft cannot be shown for approval, or None if it can: ``(what the generator is told, a short
        reason for the console and the feedback)``."""
        limit = self.max_plan_chars
        repetition = getattr(generator, "last_repetition", None)
        if repetition is not None:
            within = f" in at most {limit} characters" if limit else ""
            return (f"{repetition.describe('Your plan')} and was stopped there. Write the plan again{within}, "
                    "each step once: fewer, broader steps, and no line written twice.",
                    f"the plan generator's reply repeated itself ({repetition.count} times the same text)")
        if getattr(generator, "last_finish_reason", None) == "length":
            within = f", in at most {limit} characters" if limit else ""
            return (f"Your plan was cut off at the length limit (the most the reply may hold) before it ended. "
                    f"Rewrite it shorter{within}: fewer, broader steps, and no detail a step does not need.",
                    "the plan was cut off at the reply's length limit")
        length = len(str(plan or "").strip())
        if limit and length > limit:
            return (f"Your plan is {length} characters long; the limit is {limit}. Rewrite it shorter: fewer, broader "
                    f"steps, and no detail a step does not need, in at most {limit} characters.",
                    f"the plan is {length} characters long, over the limit of {limit}")
        return None

    def _call_flow_from_state(self, goal, input_interface, flow, output_interface):
        early_exit_key = self.flow_config.get("early_exit_key", "EARLY_EXIT")
        draft = str(self.flow_state.get("draft") or "").strip()
        if flow is self.subflows.get("PlanGenerator") and draft and not str(self.flow_state.get("plan") or "").strip():
            warm_up()
            return None, {"plan": draft, "over_limit": False, early_exit_key: False}  # written by code: reviewed as is
        message, output = super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        if flow is not self.subflows.get("PlanGenerator"):
            return message, output
        where = current_flow_path() or self.flow_config["name"]
        most = int(self.flow_config.get("max_plan_rewrites") or 0)
        rewrites = 0
        problem = self.plan_problem(output.get("plan"), flow)
        while problem and rewrites < most:
            rewrites += 1
            ask = "write it again without repeating" if getattr(flow, "last_repetition", None) else "shorten it"
            get_console().line("warning", f"{where}: {problem[1]}; the plan generator is asked to {ask} "
                                          f"(rewrite {rewrites} of {most})")
            # A normal next turn of the generator's chat: the draft, and the rewrite asked for.
            data = {**self.flow_state, "goal": problem[0], "plan": str(output.get("plan") or "")}
            message, output = self.call_subflow_with(data, goal, input_interface, flow, output_interface)
            problem = self.plan_problem(output.get("plan"), flow)
        if problem:
            tries = f" after {rewrites} rewrite{'s' if rewrites != 1 else ''}" if rewrites else ""
            get_console().line("warning", f"{where}: {problem[1]}{tries}; the plan is not shown for approval")
            limit = f" (at most {self.max_plan_chars} characters)" if self.max_plan_chars else ""
            feedback = (f"The plan was not shown to the user for approval: {problem[1]}{tries}. Call write_plan "
                        f"again and ask for a much shorter plan{limit}: fewer, broader steps.")
            return message, {"plan": output.get("plan", ""), "feedback": feedback, "approved": False,
                             "edited": False, "over_limit": True, early_exit_key: True}
        # A draft goes up for review: what the run needs next (the Python kernel) starts while the user reads it.
        warm_up()
        # Set both every time: the state is kept between the calls of one planning session.
        return message, {**output, "over_limit": False, early_exit_key: False}
