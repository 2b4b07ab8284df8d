from __future__ import annotations

from typing import Any, Dict, Optional

from aiflows_jarvis.CoreFlowModule import read_text
from aiflows_jarvis.PlanWriterFlowModule import PlanWriterFlow
from aiflows_jarvis.UpdatePlanFlowModule.UpdatePlanAtomicFlow import keep_replaced_plan


class ReplanningFlow(PlanWriterFlow):
    """Rewrites the current plan from what went wrong, with the user, and stores the new plan in the plan file.

    The same loop as PlanWriterFlow; its plan generator starts from the old plan and the controller's account of
    what went wrong. Its `result` tells the calling controller, in a message, that the plan changed and what it now
    is, so that the controller notices the change. The plan it replaces (approved
    by the user) is first copied to `archive/` beside the plan file, unless the new plan differs from it only in done
    marks; the result says where.

    *Configuration Parameters*: as PlanWriterFlow.

    *Input Interface*:
    - `goal` (str): what went wrong and what the new plan must achieve (the controller's `re_plan` argument).
    - `plan` (str): the current plan.
    - `memory_files` (dict): must hold `plan`.

    *Output Interface*:
    - `result` (str): for the calling controller: the plan changed, and the new plan.
    - `status` (str): `finished`, or `stopped: <why>` (the old plan is then kept).
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        old_plan = str(input_data.get("plan") or "")
        self._replaced_copy: Optional[str] = None
        output = super().run(input_data)
        if output.get("status") == "finished":
            kept = f" (the previous plan is kept in {self._replaced_copy})" if self._replaced_copy else ""
            result = (
                f"The plan has been rewritten (this replaces the plan you followed so far){kept}. The new "
                f"plan:\n{output['plan']}\nContinue with the first step of the new plan that is not done."
            )
        else:
            result = f"Re-planning did not finish ({output.get('status')}); the plan is unchanged:\n{old_plan}"
        return {"result": result, "status": output.get("status", "")}

    def store_plan(self, path: str, plan: str) -> None:
        self._replaced_copy = keep_replaced_plan(path, read_text(path), plan)
        super().store_plan(path, plan)
