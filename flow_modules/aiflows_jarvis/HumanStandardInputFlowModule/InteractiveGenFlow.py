from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import jinja2

from aiflows_jarvis.CoreFlowModule import (
    ConfigurationError,
    LeanSequentialFlow,
    StrictJinjaPrompt,
    current_flow_path,
    get_console,
    warm_up,
)

from .HumanReviewFlow import review_result

# Why a draft cannot be put up for review, as `rewrite_prompts` names what the generator is told.
REPEATED, CUT_OFF, TOO_LONG = "repeated", "cut_off", "too_long"
# What the texts of the configuration (`rewrite_prompts`, `not_shown_advice`) may use.
TEXT_VARIABLES = ("repeated", "length", "limit")


class InteractiveGenFlow(LeanSequentialFlow):
    """An LLM writes a draft (a plan, a function) and the user reviews it; a draft that cannot be shown is first
    asked for again.

    The one loop of InteractivePlanGenFlow and InteractiveCodeGenFlow (each its YAML: the generator, the review, the
    texts); it has no configuration of its own to run with. A draft (the generator's `<draft_key>` output) is not put
    up for review when the reply repeated itself (ChatAtomicFlow's `last_repetition`: the reply was stopped there),
    was cut off at the generator's `max_tokens`, or is longer than `max_<draft_key>_chars`: it is sent back with what
    to fix, `max_<draft_key>_rewrites` times, without asking the user. A draft still not right is never shown for
    approval (not even with `--yes`): the flow returns `approved: false` with a `feedback` saying why, for the
    controller. A `draft` in the input (written by code) is reviewed as it is. When a draft goes up for review, the
    run's warm-up starts (the kernel starts while the user reads).

    *Configuration Parameters*:
    - `draft_key` (str): the draft's key in the input, the state and the output (`plan`, `code`).
    - `generator` (str): the subflow that writes the draft; its system prompt gets `max_<draft_key>_chars` as a
      partial variable of that name when it has one.
    - `max_<draft_key>_chars` (int): the longest draft, in characters (0 or null: no limit).
    - `max_<draft_key>_rewrites` (int): how many times a draft that cannot be shown is asked for again.
    - `rewrite_prompts` (dict): what the generator is told, by problem (`repeated`, `cut_off`, `too_long`).
    - `not_shown_advice` (str): what the controller is told to do about a draft not shown.
      Both are Jinja templates of `repeated` (e.g. 'Your plan repeated "..." 9 times'), `length` (the draft's, in
      characters) and `limit` (`max_<draft_key>_chars`), checked when the flow is built.
    - `fence` (str): the draft in the controller's `result` is in a fenced block of this language ("": no fence).
    - `subflows_config`: the generator, `UserReview` (a HumanReviewFlow over the draft), and any step before them.

    *Input Interface*:
    - `goal` (str): what to write (first call) or how to revise the draft (later calls).
    - `<draft_key>` (str): the current draft, as the user may have edited it ("" at first).
    - `draft` (str, optional): a draft written by code, reviewed instead of a first draft of the generator.

    *Output Interface*:
    - `<draft_key>` (str), `feedback` (str), `approved` (bool), `edited` (bool): see HumanReviewFlow.
    - `over_limit` (bool; in the state, and in the output where the writer's `output_interface` lists it): the
      generator's last draft could not be shown, so it was not put up for approval.
    - `result` (str): the review's outcome as the controller reads it (see HumanReviewFlow's `review_result`).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._texts = self._checked_texts()
        generator = self.subflows[self.flow_config["generator"]]
        prompt = getattr(generator, "system_message_prompt_template", None)
        limit_variable = f"max_{self.draft_key}_chars"
        if prompt is not None and limit_variable in (prompt.partial_variables or {}):
            # One source for the limit: this flow's config, also what the generator's system prompt says.
            generator.system_message_prompt_template = prompt.partial(**{limit_variable: self.max_chars})

    def _checked_texts(self) -> Dict[str, StrictJinjaPrompt]:
        """The configuration's texts as prompts, by their place in it (`rewrite_prompts.cut_off`); a mistake in the
        configuration raises a ConfigurationError here, not when a draft first goes wrong."""
        config, name = self.flow_config, self.flow_config.get("name", type(self).__name__)
        key, generator = config.get("draft_key"), config.get("generator")
        if not isinstance(key, str) or not key.isidentifier() or key == "draft":
            raise ConfigurationError(
                f"{name}: `draft_key` must name the draft's key in the input and the output "
                f"(plan, code; not `draft`, the key of a draft written by code), got {key!r}"
            )
        if generator not in self.subflows:
            raise ConfigurationError(
                f"{name}: `generator` must name the subflow that writes the {key}, one of "
                f"{sorted(self.subflows)}; got {generator!r}"
            )
        prompts = config.get("rewrite_prompts") or {}
        texts = {f"rewrite_prompts.{p}": prompts.get(p) for p in (REPEATED, CUT_OFF, TOO_LONG)}
        texts["not_shown_advice"] = config.get("not_shown_advice", "")
        checked = {}
        for where, text in texts.items():
            problem = None
            if not isinstance(text, str):
                problem = "is not set" if text is None else f"must be a text, got {type(text).__name__}"
            else:
                try:
                    prompt = StrictJinjaPrompt(template=text, input_variables=list(TEXT_VARIABLES))
                    unknown = prompt.undeclared()
                    if unknown:
                        problem = f"uses {', '.join(sorted(unknown))}, which it is not given"
                except jinja2.TemplateSyntaxError as error:
                    problem = f"is not a valid Jinja template ({error.message}, line {error.lineno})"
            if problem:
                raise ConfigurationError(f"{name}: `{where}` {problem}; it may use {', '.join(TEXT_VARIABLES)}")
            checked[where] = prompt
        return checked

    @property
    def draft_key(self) -> str:
        return self.flow_config["draft_key"]

    @property
    def max_chars(self) -> int:
        return int(self.flow_config.get(f"max_{self.draft_key}_chars") or 0)

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        output = super().run(input_data)
        fence = str(self.flow_config.get("fence") or "")
        return {**output, "result": review_result(output, self.draft_key, self.draft_key, fence=fence)}

    def draft_problem(self, draft: str, generator: Any) -> Optional[Tuple[str, str]]:
        """Why a draft cannot be put up for review, or None if it can: ``(what the generator is told, a short
        reason for the console and the feedback)``."""
        what, limit = self.draft_key, self.max_chars
        repetition = getattr(generator, "last_repetition", None)
        length = len(str(draft or "").strip())
        if repetition is not None:
            problem = REPEATED
            reason = f"the {what} generator's reply repeated itself ({repetition.count} times the same text)"
        elif getattr(generator, "last_finish_reason", None) == "length":
            problem, reason = CUT_OFF, f"the {what} was cut off at the reply's length limit"
        elif limit and length > limit:
            problem, reason = TOO_LONG, f"the {what} is {length} characters long, over the limit of {limit}"
        else:
            return None
        repeated = repetition.describe(f"Your {what}") if repetition is not None else ""
        return self._texts[f"rewrite_prompts.{problem}"].format(repeated=repeated, length=length, limit=limit), reason

    def _call_flow_from_state(self, goal, input_interface, flow, output_interface):
        early_exit_key = self.flow_config.get("early_exit_key", "EARLY_EXIT")
        key, generator = self.draft_key, self.subflows[self.flow_config["generator"]]
        draft = str(self.flow_state.get("draft") or "").strip()
        if flow is generator and draft and not str(self.flow_state.get(key) or "").strip():
            warm_up()
            return None, {key: draft, "over_limit": False, early_exit_key: False}  # written by code: reviewed as is
        message, output = super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        if flow is not generator:
            return message, output
        where = current_flow_path() or self.flow_config["name"]
        most = int(self.flow_config.get(f"max_{key}_rewrites") or 0)
        rewrites = 0
        problem = self.draft_problem(output.get(key), flow)
        while problem and rewrites < most:
            rewrites += 1
            ask = "write it again without repeating" if getattr(flow, "last_repetition", None) else "shorten it"
            get_console().line(
                "warning",
                f"{where}: {problem[1]}; the {key} generator is asked to {ask} (rewrite {rewrites} of {most})",
            )
            # A normal next turn of the generator's chat: the draft, and the rewrite asked for.
            data = {**self.flow_state, "goal": problem[0], key: str(output.get(key) or "")}
            message, output = self.call_subflow_with(data, goal, input_interface, flow, output_interface)
            problem = self.draft_problem(output.get(key), flow)
        if problem:
            tries = f" after {rewrites} rewrite{'s' if rewrites != 1 else ''}" if rewrites else ""
            get_console().line("warning", f"{where}: {problem[1]}{tries}; the {key} is not shown for approval")
            advice = self._texts["not_shown_advice"].format(
                repeated="", length=len(str(output.get(key) or "").strip()), limit=self.max_chars
            )
            feedback = f"The {key} was not shown to the user for approval: {problem[1]}{tries}. {advice}".rstrip()
            return message, {
                key: output.get(key, ""),
                "feedback": feedback,
                "approved": False,
                "edited": False,
                "over_limit": True,
                early_exit_key: True,
            }
        warm_up()  # a draft goes up for review: what the run needs next starts while the user reads it
        # Set both every time: the state is kept between the calls of one session.
        return message, {**output, "over_limit": False, early_exit_key: False}
