from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow, MemoryFileError, get_console
from aiflows_jarvis.CoreFlowModule.memory import archive_copy, atomic_write, memory_path, read_text


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
        text = " ".join(line.strip() for line in [lines[start][match.end():]] + lines[start + 1:end] if line.strip())
        steps.append((match.group(1), text))
    return steps


def mark_steps_done(plan: str, numbers: List[str]) -> str:
    """``plan`` with the steps ``numbers`` marked "[done]" at the end of their text, as controllers mark them; steps
    already marked, and the rest of the plan, are left as they are."""
    lines = plan.splitlines()
    starts = _step_lines(lines) + [len(lines)]
    for start, end in zip(starts, starts[1:]):
        number = _STEP.match(lines[start]).group(1)
        if number not in numbers or _is_done(" ".join(lines[start:end])):
            continue
        last = max(i for i in range(start, end) if lines[i].strip())
        lines[last] = lines[last].rstrip() + " [done]"
    return "\n".join(lines) + ("\n" if plan.endswith("\n") else "")


def _is_done(text: str) -> bool:
    return bool(_DONE.search(text))


def _without_marks(text: str) -> str:
    return " ".join(_DONE.sub("", text).split())


def describe_update(old_plan: str, new_plan: str) -> str:
    """What an update did to a plan, for the controller: the steps newly marked done, how many are done, the next
    one; and a warning when more than the done marks changed (that is what re_plan is for)."""
    old, new = plan_steps(old_plan), plan_steps(new_plan)
    if not new:
        return "The plan was updated (it has no numbered steps)."
    old_done = {number for number, text in old if _is_done(text)}
    new_done = {number for number, text in new if _is_done(text)}
    marked = [number for number, _ in new if number in new_done - old_done]
    unmarked = [number for number, _ in old if number in old_done - new_done]
    done = len(new_done)

    def steps(numbers: List[str]) -> str:
        return f"step{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}"

    said = f"{steps(marked)} now marked done" if marked else "no step newly marked done"
    if unmarked:
        said += f"; {steps(unmarked)} no longer marked done"
    pending = [(number, text) for number, text in new if not _is_done(text)]
    if pending:
        number, text = pending[0]
        short = text if len(text) <= 100 else text[:97] + "..."
        progress = f"{done} of {len(new)} steps done; next: step {number}: {short}"
    else:
        progress = f"all {len(new)} steps are done"
    summary = f"The plan was updated: {said} ({progress})."
    if old and [_without_marks(t) for _, t in old] != [_without_marks(t) for _, t in new]:
        summary += (" Note: the steps themselves changed too, not only their done marks. update_plan is for marking "
                    "steps done; to change the plan, use re_plan.")
    return summary


def changed_beyond_marks(old_plan: str, new_plan: str) -> bool:
    """Whether two plans differ in more than their done marks and their spacing."""
    return _without_marks(old_plan) != _without_marks(new_plan)


def dropped_steps(old_plan: str, new_plan: str) -> List[Tuple[str, str]]:
    """The steps of ``old_plan`` whose text (done marks aside) is in no step of ``new_plan``: ``[(number, text)]``.
    A step renumbered or newly marked done is not dropped; a step reworded is (its old text is gone)."""
    kept = {_without_marks(text) for _, text in plan_steps(new_plan)}
    return [(number, text) for number, text in plan_steps(old_plan) if _without_marks(text) not in kept]


def keep_replaced_plan(path: str, old_plan: str, new_plan: str) -> Optional[str]:
    """Copy ``old_plan`` (what the plan file ``path`` holds, approved by the user) to ``archive/`` beside it before a
    new plan replaces it, unless the new plan only changes done marks; returns the copy's path, or None."""
    if not old_plan.strip() or not changed_beyond_marks(old_plan, new_plan):
        return None
    try:
        return archive_copy(path, old_plan if old_plan.endswith("\n") else old_plan + "\n")
    except OSError as error:  # archive/ cannot be made: the plan is not replaced either
        raise MemoryFileError(f"Cannot keep a copy of the plan {path} before replacing it: {error}") from error


def _dropped_note(dropped: List[Tuple[str, str]], old_count: int, copy: str) -> str:
    def short(text: str) -> str:
        return text if len(text) <= 80 else text[:77] + "..."

    shown = "; ".join(f"{number}. {short(text)}" for number, text in dropped[:10])
    more = f"; and {len(dropped) - 10} more" if len(dropped) > 10 else ""
    which = f"all {old_count} steps" if len(dropped) == old_count and old_count > 1 else \
        f"{len(dropped)} step{'s' if len(dropped) > 1 else ''}"
    return (f" Warning: {which} of the previous plan {'is' if len(dropped) == 1 else 'are'} no longer in it: "
            f"{shown}{more}. The previous plan is kept in "
            f"{copy}. If that was a mistake, call update_plan again with the whole plan, those steps "
            "included.")


class UpdatePlanAtomicFlow(LeanAtomicFlow):
    """Writes the updated plan (the same plan with finished steps marked done) to the plan file.

    Called by a controller when it sees that one or more steps are done. The plan file is replaced atomically; the
    next memory read gives the new plan to the controller, in its next message. An update that changes more than done
    marks (a step reworded, added or dropped; a reply such as "ok" instead of the plan) first copies the plan it
    replaces, which the user approved, to `archive/` beside the plan file; the result says where, and which steps of
    the previous plan are gone, so that the controller can put them back.

    *Configuration Parameters*:
    - `plan_key` (str): the memory name of the plan file in `memory_files` (default `plan`).

    *Input Interface*:
    - `updated_plan` (str): the full plan with the finished steps marked.
    - `memory_files` (dict): memory name -> file path.

    *Output Interface*:
    - `result` (str): what changed, for the controller: the steps newly marked done, how many are done and the next
      one, and a note if the steps themselves changed (rewriting the plan is `re_plan`'s job), with the steps dropped
      and where the previous plan is kept.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        updated_plan = str(input_data.get("updated_plan") or "").strip()
        path = memory_path(self, input_data, self.flow_config.get("plan_key", "plan"))
        if not updated_plan:
            return {"result": "The plan was NOT updated: `updated_plan` was empty. Send the whole plan with the "
                              "finished steps marked as done."}
        previous = read_text(path).strip()
        if previous == updated_plan:
            return {"result": "The plan file already held this plan; nothing changed."}
        copy = keep_replaced_plan(path, previous, updated_plan)
        atomic_write(path, updated_plan + "\n")
        get_console().show("plan", "Plan updated:", updated_plan)
        result = describe_update(previous, updated_plan)
        if copy:
            dropped = dropped_steps(previous, updated_plan)
            if dropped:
                result += _dropped_note(dropped, len(plan_steps(previous)), copy)
                get_console().line("warning", f"The plan update dropped {len(dropped)} step(s) of the previous plan; "
                                              f"the previous plan is kept in {copy}.")
            else:
                result += f" The previous plan is kept in {copy}."
        return {"result": result}
