"""Plans as text: numbered steps, some marked "[done]".

A plan is what a boss's planner wrote (or what code wrote for a goal of one step) and what controllers read in
every prompt; the UpdatePlan flow, the loops that mark steps done themselves and the prompt layout all read it the
same way, here.
"""

from __future__ import annotations

import re
from typing import Iterable, List, Tuple

_STEP = re.compile(r"^\s*(\d+)[.)]\s+")
_DONE = re.compile(r"\[\s*done\s*\]|\(\s*done\s*\)", re.I)


def _step_lines(lines: List[str]) -> List[int]:
    """The indexes of the lines that start a step: the numbered lines least indented (a numbered list inside a step,
    more indented, is part of its text)."""
    numbered = [(i, len(line) - len(line.lstrip())) for i, line in enumerate(lines) if _STEP.match(line)]
    indent = min((spaces for _, spaces in numbered), default=0)
    return [i for i, spaces in numbered if spaces == indent]


def plan_steps(plan: str) -> List[Tuple[str, str]]:
    """The numbered steps of a plan: ``[(number, text)]``, a step's text running to the next step (see
    ``_step_lines``)."""
    lines = plan.splitlines()
    starts = _step_lines(lines) + [len(lines)]
    steps: List[Tuple[str, str]] = []
    for start, end in zip(starts, starts[1:]):
        match = _STEP.match(lines[start])
        text = " ".join(line.strip() for line in [lines[start][match.end() :]] + lines[start + 1 : end] if line.strip())
        steps.append((match.group(1), text))
    return steps


def is_done(text: str) -> bool:
    """Whether a step's text carries a done mark ("[done]", "(done)")."""
    return bool(_DONE.search(text))


def without_marks(text: str) -> str:
    return " ".join(_DONE.sub("", text).split())


def mark_steps_done(plan: str, numbers: Iterable[str]) -> str:
    """``plan`` with the steps ``numbers`` marked "[done]" at the end of their text, as controllers mark them; steps
    already marked, and the rest of the plan, are left as they are."""
    numbers = {str(n) for n in numbers}
    lines = plan.splitlines()
    starts = _step_lines(lines) + [len(lines)]
    for start, end in zip(starts, starts[1:]):
        number = _STEP.match(lines[start]).group(1)
        if number not in numbers or is_done(" ".join(lines[start:end])):
            continue
        last = max(i for i in range(start, end) if lines[i].strip())
        lines[last] = lines[last].rstrip() + " [done]"
    return "\n".join(lines) + ("\n" if plan.endswith("\n") else "")


def undone_steps(plan: str) -> List[str]:
    """The numbers of the plan's steps not marked done."""
    return [number for number, text in plan_steps(plan) if not is_done(text)]


def one_step_plan(goal: str) -> str:
    """The plan of a goal that is one step, written without a planner: "1. <goal>", its further lines indented so
    that a numbered list inside the goal stays part of the one step."""
    lines = [line.rstrip() for line in str(goal).strip().splitlines()] or [""]
    return "\n".join([f"1. {lines[0].strip()}"] + [f"   {line}" if line.strip() else "" for line in lines[1:]])


GOAL_STEP = "Reach the goal above."


def plan_as_shown(plan: str, goal: str) -> str:
    """The plan as a prompt that holds the goal shows it: a plan of one step that is the goal itself (see
    ``one_step_plan``) reads "1. Reach the goal above.", with its done mark, instead of the goal again."""
    if len(plan) > 2 * len(str(goal)) + 100:  # not the goal: a long plan is not parsed for nothing at every call
        return plan
    steps = plan_steps(plan)
    if len(steps) != 1 or without_marks(steps[0][1]) != " ".join(str(goal).split()):
        return plan
    return f"1. {GOAL_STEP}" + (" [done]" if is_done(steps[0][1]) else "")


def marks_changed(old_plan: str, new_plan: str) -> List[str]:
    """The steps newly marked done when ``new_plan`` differs from ``old_plan`` only in its done marks; [] when the
    plans differ otherwise (or not at all)."""
    old, new = plan_steps(old_plan), plan_steps(new_plan)
    if not new or [without_marks(t) for _, t in old] != [without_marks(t) for _, t in new]:
        return []
    old_done = {number for number, text in old if is_done(text)}
    return [number for number, text in new if is_done(text) and number not in old_done]


def describe_update(old_plan: str, new_plan: str) -> str:
    """What an update did to a plan, for the controller: the steps newly marked done, how many are done, the next
    one; and a warning when more than the done marks changed (that is what re_plan is for)."""
    old, new = plan_steps(old_plan), plan_steps(new_plan)
    if not new:
        return "The plan was updated (it has no numbered steps)."
    old_done = {number for number, text in old if is_done(text)}
    new_done = {number for number, text in new if is_done(text)}
    added, removed = new_done - old_done, old_done - new_done  # once: not for every step (a plan of 100,000)
    marked = [number for number, _ in new if number in added]
    unmarked = [number for number, _ in old if number in removed]
    said = f"{_steps(marked)} now marked done" if marked else "no step newly marked done"
    if unmarked:
        said += f"; {_steps(unmarked)} no longer marked done"
    summary = f"The plan was updated: {said} ({progress(new_plan)})."
    if old and [without_marks(t) for _, t in old] != [without_marks(t) for _, t in new]:
        summary += (
            " Note: the steps themselves changed too, not only their done marks. update_plan is for marking "
            "steps done; to change the plan, use re_plan."
        )
    return summary


def describe_marks(old_plan: str, new_plan: str) -> str:
    """What an update of done marks did, in a few words for the screen: ``step 1 done; next: step 2: ...``,
    ``steps 2, 3 done; all 3 steps are done``."""
    new, old = plan_steps(new_plan), plan_steps(old_plan)
    old_done = {number for number, text in old if is_done(text)}
    new_done = {number for number, text in new if is_done(text)}
    added, removed = new_done - old_done, old_done - new_done
    marked = [number for number, _ in new if number in added]
    unmarked = [number for number, _ in old if number in removed]
    said = "; ".join(
        ([f"{_steps(marked)} done"] if marked else []) + ([f"{_steps(unmarked)} no longer done"] if unmarked else [])
    )
    pending = [(number, text) for number, text in new if not is_done(text)]
    if pending:
        return f"{said}; next: step {pending[0][0]}: {pending[0][1]}"
    return f"{said} (its only step)" if len(new) == 1 else f"{said}; all {len(new)} steps are done"


def progress(plan: str) -> str:
    """``2 of 4 steps done; next: step 3: ...`` (or ``all 4 steps are done``)."""
    steps = plan_steps(plan)
    pending = [(number, text) for number, text in steps if not is_done(text)]
    if not pending:
        return f"all {len(steps)} steps are done" if len(steps) > 1 else "the plan's one step is done"
    number, text = pending[0]
    short = text if len(text) <= 100 else text[:97] + "..."
    return f"{len(steps) - len(pending)} of {len(steps)} steps done; next: step {number}: {short}"


def _steps(numbers: List[str]) -> str:
    """``step 2``, ``steps 2, 4``, ``steps 1 to 9, 12``: three or more numbers in a row as a range, so that the
    steps of a long plan marked at once make a short text."""
    runs: List[List[int]] = []
    for number in numbers:
        value = int(number) if str(number).isdigit() else None
        if value is not None and runs and runs[-1][1] + 1 == value:
            runs[-1][1] = value
        else:
            runs.append([value, value] if value is not None else [number, number])
    said = [
        f"{a} to {b}"
        if isinstance(a, int) and b - a >= 2
        else f"{a}, {b}"
        if isinstance(a, int) and b == a + 1
        else str(a)
        for a, b in runs
    ]
    return f"step{'s' if len(numbers) > 1 else ''} {', '.join(said)}"


def changed_beyond_marks(old_plan: str, new_plan: str) -> bool:
    """Whether two plans differ in more than their done marks and their spacing."""
    return without_marks(old_plan) != without_marks(new_plan)


def dropped_steps(old_plan: str, new_plan: str) -> List[Tuple[str, str]]:
    """The steps of ``old_plan`` whose text (done marks aside) is in no step of ``new_plan``: ``[(number, text)]``.
    A step renumbered or newly marked done is not dropped; a step reworded is (its old text is gone)."""
    kept = {without_marks(text) for _, text in plan_steps(new_plan)}
    return [(number, text) for number, text in plan_steps(old_plan) if without_marks(text) not in kept]
