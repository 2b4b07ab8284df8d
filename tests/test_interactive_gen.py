"""The loop in which an LLM drafts and the user reviews (HumanStandardInputFlowModule's InteractiveGenFlow), as both of
its writers run it: InteractivePlanGenFlow (a plan) and InteractiveCodeGenFlow (a library function).

A draft that cannot be shown (the reply repeated itself, was cut off at max_tokens, is over the length limit) is
asked for again without asking the user; one still not right is never put up for approval, and the feedback says
why; a draft put up for review starts the run's warm-up. The same for a plan and for code.
"""

from __future__ import annotations

import pytest

from aiflows_jarvis.CoreFlowModule import ConfigurationError

LOOP_LINE = "Compute the first primes and write them to the file."


class Plan:
    key, generator, rewrites = "plan", "PlanGenerator", 2  # max_plan_rewrites

    @staticmethod
    def build(tmp_path, **overrides):
        from aiflows_jarvis.PlanWriterFlowModule import InteractivePlanGenFlow

        return InteractivePlanGenFlow.instantiate_from_default_config(**overrides)

    @staticmethod
    def reply(text: str) -> str:
        return text

    good = "1. Do it.\n2. Check it."
    looping = "".join(f"{i}. {LOOP_LINE}\n" for i in range(1, 40))


class Code:
    key, generator, rewrites = "code", "CodeGenerator", 1  # max_code_rewrites

    @staticmethod
    def build(tmp_path, **overrides):
        from aiflows_jarvis.InteractiveCodeGenFlowModule import InteractiveCodeGenFlow

        return InteractiveCodeGenFlow.instantiate_from_default_config(
            memory_files={"code_library": str(tmp_path / "library.py")}, **overrides
        )

    @staticmethod
    def reply(text: str) -> str:
        return f"```python\n{text}\n```"

    good = "def f(x):\n    return x + 20"
    looping = "def f(x):\n" + f"    x = x + 1  # {LOOP_LINE}\n" * 40


WRITERS = [pytest.param(Plan, id="plan"), pytest.param(Code, id="code")]


def last_user_message(messages):
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def cut_off_always(generator, monkeypatch):
    """Every reply of ``generator`` ends at its max_tokens (finish_reason "length")."""
    original = generator.call_llm

    def call_llm(messages):
        reply = original(messages)
        generator.last_finish_reason = "length"
        return reply

    monkeypatch.setattr(generator, "call_llm", call_llm)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_draft_that_repeats_itself_is_asked_for_again_before_the_user_sees_it(
    writer, tmp_path, scripted_llm, user, quiet_console
):
    flow = writer.build(tmp_path)
    scripted_llm.add(writer.reply(writer.looping), writer.reply(writer.good))
    user.add("")  # approves what is shown

    out = flow.call({"goal": "do it", writer.key: ""})

    assert out["approved"] and out[writer.key] == writer.good
    assert len(user.asked) == 1, "only the draft that did not repeat itself was up for review"
    told = last_user_message(scripted_llm.calls[1]["messages"])
    assert told.count(LOOP_LINE) == 1, "the draft given back was cut after the first copy"
    assert f"Your {writer.key} repeated" in told and "no line written twice" in told
    assert (
        f"the {writer.key} generator's reply repeated itself" in quiet_console.text
        and f"is asked to write it again without repeating (rewrite 1 of {writer.rewrites})" in quiet_console.text
    )


@pytest.mark.parametrize("writer", WRITERS)
def test_a_draft_still_cut_off_after_its_rewrites_is_not_shown_and_the_feedback_says_why(
    writer, tmp_path, monkeypatch, scripted_llm, user, quiet_console
):
    flow = writer.build(tmp_path)
    cut_off_always(flow.subflows[writer.generator], monkeypatch)
    scripted_llm.add(*[writer.reply("1. Start.\n2. Then")] * (1 + writer.rewrites))

    out = flow.call({"goal": "do it", writer.key: ""})  # the user has no answer scripted: a review would fail

    assert out["approved"] is False and out["edited"] is False and user.asked == []
    assert flow.flow_state["over_limit"] is True
    tries = f"{writer.rewrites} rewrite{'s' if writer.rewrites != 1 else ''}"
    assert out["feedback"].startswith(
        f"The {writer.key} was not shown to the user for approval: the {writer.key} "
        f"was cut off at the reply's length limit after {tries}. "
    )
    assert f"the {writer.key} is not shown for approval" in quiet_console.text


@pytest.mark.parametrize("writer", WRITERS)
def test_a_draft_put_up_for_review_starts_the_runs_warm_up(
    writer, tmp_path, scripted_llm, user, quiet_console, run_context
):
    flow = writer.build(tmp_path)
    questions_before_the_warm_up = []
    run_context.warm_up = lambda: questions_before_the_warm_up.append(len(user.asked))
    scripted_llm.add(writer.reply(writer.good))
    user.add("")

    assert flow.call({"goal": "do it", writer.key: ""})["approved"]

    assert questions_before_the_warm_up == [0], "the warm-up starts once, while the user reads the draft"


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    "key, template, says",
    [
        ("rewrite_prompts", {"cut_off": "Shorter, in {{limt}} characters."}, "rewrite_prompts.cut_off"),
        ("rewrite_prompts", {"too_long": "Shorter, {% if limit %}please."}, "rewrite_prompts.too_long"),
        ("not_shown_advice", "Ask for {{less}}.", "not_shown_advice"),
    ],
)
def test_a_mistake_in_a_writers_texts_is_caught_when_the_flow_is_built(
    writer, key, template, says, tmp_path, scripted_llm
):
    with pytest.raises(ConfigurationError) as caught:
        writer.build(tmp_path, **{key: template})
    assert says in str(caught.value) and "repeated, length, limit" in str(caught.value)
