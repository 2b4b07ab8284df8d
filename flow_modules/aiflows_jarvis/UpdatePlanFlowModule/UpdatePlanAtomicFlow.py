from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import (
    LeanAtomicFlow,
    MemoryFileError,
    archive_copy,
    atomic_write,
    changed_beyond_marks,
    current_flow_path,
    describe_marks,
    describe_update,
    dropped_steps,
    get_console,
    mark_steps_done,
    marks_changed,
    memory_path,
    plan_steps,
    read_text,
)


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
    which = (
        f"all {old_count} steps"
        if len(dropped) == old_count and old_count > 1
        else f"{len(dropped)} step{'s' if len(dropped) > 1 else ''}"
    )
    return (
        f" Warning: {which} of the previous plan {'is' if len(dropped) == 1 else 'are'} no longer in it: "
        f"{shown}{more}. The previous plan is kept in "
        f"{copy}. If that was a mistake, call update_plan again with the whole plan, those steps "
        "included."
    )


class UpdatePlanAtomicFlow(LeanAtomicFlow):
    """Writes the updated plan (the same plan with finished steps marked done) to the plan file.

    Called by a controller when it sees that one or more steps are done, or by its loop when the command that carries
    a step has succeeded. `done_steps` (the numbers of the steps done) is the short way: the steps are marked
    "[done]" in the plan as it stands. `updated_plan` (the whole plan, those steps marked) is the seed's way. The plan
    file is replaced atomically; the next memory read gives the new plan to the controller, in its next message. An
    update that changes more than done marks (a step reworded, added or dropped; a reply such as "ok" instead of the
    plan) first copies the plan it replaces, which the user approved, to `archive/` beside the plan file; the result
    says where, and which steps of the previous plan are gone, so that the controller can put them back.

    *Configuration Parameters*:
    - `plan_key` (str): the memory name of the plan file in `memory_files` (default `plan`).

    *Input Interface*:
    - `done_steps` (list of int, optional): the numbers of the steps to mark done (`all`: every step).
    - `updated_plan` (str, optional): the full plan with the finished steps marked (used when `done_steps` is not
      given).
    - `memory_files` (dict): memory name -> file path.

    *Output Interface*:
    - `result` (str): what changed, for the controller: the steps newly marked done, how many are done and the next
      one, and a note if the steps themselves changed (rewriting the plan is `re_plan`'s job), with the steps dropped
      and where the previous plan is kept.
    """

    # Its step is said here, in one line when only done marks change (its loop shows no line of its own for it).
    says_its_step = True

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        where = current_flow_path() or self.flow_config["name"]
        path = memory_path(self, input_data, self.flow_config.get("plan_key", "plan"))
        previous = read_text(path).strip()
        numbers, problem = _step_numbers(input_data.get("done_steps"), previous)
        if problem:
            get_console().step(where, "", note=f"not updated: {problem}")
            return {"result": f"The plan was NOT updated: {problem}"}
        if numbers:
            updated_plan = mark_steps_done(previous, numbers).strip()
        else:
            updated_plan = str(input_data.get("updated_plan") or "").strip()
        if not updated_plan:
            get_console().step(where, "", note="not updated: no step numbers given")
            return {
                "result": "The plan was NOT updated: give `done_steps`, the numbers of the steps that are done "
                "(e.g. [2, 3])."
            }
        if previous == updated_plan:
            get_console().step(where, "", note="nothing changed")
            return {"result": "The plan file already held this plan; nothing changed."}
        copy = keep_replaced_plan(path, previous, updated_plan)
        atomic_write(path, updated_plan + "\n")
        result = describe_update(previous, updated_plan)
        if marks_changed(previous, updated_plan):  # only done marks: one line, not the plan again
            get_console().step(where, "", note=describe_marks(previous, updated_plan))
        else:
            get_console().step(where, "")
            get_console().show("plan", "Plan updated:", updated_plan)
        if copy:
            dropped = dropped_steps(previous, updated_plan)
            if dropped:
                result += _dropped_note(dropped, len(plan_steps(previous)), copy)
                get_console().line(
                    "warning",
                    f"The plan update dropped {len(dropped)} step(s) of the previous plan; "
                    f"the previous plan is kept in {copy}.",
                )
            else:
                result += f" The previous plan is kept in {copy}."
        return {"result": result}


def _step_numbers(value: Any, plan: str) -> Tuple[List[str], str]:
    """The step numbers ``done_steps`` gives (a list, one number, or "2, 3"), and what is wrong with them ('' if
    nothing): a number the plan has no step of is refused, so that a typo does not pass silently."""
    if value is None or value == "" or value == []:
        return [], ""
    if str(value).strip().lower() == "all":
        return [number for number, _ in plan_steps(plan)], ""
    items = value if isinstance(value, (list, tuple)) else str(value).replace(",", " ").split()
    numbers: List[str] = []
    for item in items:
        text = str(item).strip().strip("[]").strip()
        if not text.isdigit():
            return [], f"`done_steps` must be step numbers (e.g. [2, 3]), not {str(item)[:40]!r}."
        numbers.append(str(int(text)))
    known = [number for number, _ in plan_steps(plan)]
    have = set(known)  # a plan of 100,000 steps, all marked at a finish: not a list looked through for each
    unknown = [n for n in numbers if n not in have]
    if unknown:
        have = f"its steps are {', '.join(known)}" if known else "it has no numbered steps"
        return [], f"the plan has no step {', '.join(unknown)} ({have})."
    return numbers, ""
