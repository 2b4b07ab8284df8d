from __future__ import annotations

from typing import Any, Dict

from flow_modules.aiflows.CoreFlowModule import LeanAtomicFlow, get_console
from flow_modules.aiflows.CoreFlowModule.memory import atomic_write, memory_path, read_text


class UpdatePlanAtomicFlow(LeanAtomicFlow):
    """Writes the updated plan (the same plan with finished steps marked done) to the plan file.

    Called by a controller when it sees that one or more steps are done. The plan file is replaced atomically; the
    next memory read puts the new plan into the controller's system prompt.

    *Configuration Parameters*:
    - `plan_key` (str): the memory name of the plan file in `memory_files` (default `plan`).

    *Input Interface*:
    - `updated_plan` (str): the full plan with the finished steps marked.
    - `memory_files` (dict): memory name -> file path.

    *Output Interface*:
    - `result` (str): what was done, for the controller.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        updated_plan = str(input_data.get("updated_plan") or "").strip()
        path = memory_path(self, input_data, self.flow_config.get("plan_key", "plan"))
        if not updated_plan:
            return {"result": "The plan was NOT updated: `updated_plan` was empty. Send the whole plan with the "
                              "finished steps marked as done."}
        unchanged = read_text(path).strip() == updated_plan
        atomic_write(path, updated_plan + "\n")
        get_console().show("plan", "Plan updated:", updated_plan)
        if unchanged:
            return {"result": "The plan file already held this plan; nothing changed."}
        return {"result": "The plan was updated; the plan in your system prompt is now the updated one."}
