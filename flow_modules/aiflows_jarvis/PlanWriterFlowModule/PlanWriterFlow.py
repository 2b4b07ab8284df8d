from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow
from aiflows_jarvis.CoreFlowModule import atomic_write, memory_path


class PlanWriterFlow(ControllerExecutorFlow):
    """Writes a step-by-step plan with the user, then stores it in the `plan` memory file.

    A controller-executor loop whose commands (`commands` in PlanWriterFlow.yaml) have the plan drafted or revised
    (an LLM drafts, the user reviews) and ask the user. No LLM call is spent on the obvious: the first command,
    `write_plan`, is made by code, and an approved draft is final at once (`finish_on_approval`), so the controller
    LLM only acts on the user's comments. A draft over the
    plan budget (InteractivePlanGenFlow's `max_plan_chars`) is never final: a `finish` while the last draft is over
    the limit stops the plan writer without writing the plan file.

    *Configuration Parameters*:
    - `finish_on_approval` (bool): finish as soon as the user approves a draft (with `bookkeeping_by_code`, the
      default; without it the controller finishes, as in the seed).
    - `commands` (dict): each command with the flow that runs it (see ControllerExecutorFlow);
      `subflows_config.Executor.subflows_config.<command>` overrides a command's flow (`write_plan`'s
      `PlanGenerator` is the plan LLM).
    - `subflows_config.Controller`: the controller.
    - `max_rounds` (int): the most controller rounds.

    *Input Interface*:
    - `goal` (str): what the plan is for.
    - `memory_files` (dict): must hold `plan`, the file the plan is written to.
    - `plan` (str, optional): an existing plan (the replanner revises it).
    - `draft` (str, optional): a plan written by code, shown to the user as the first draft (see AbstractBossFlow's
      `one_step_plan`).

    *Output Interface*:
    - `plan` (str): the final plan.
    - `summary` (str), `status` (str): `finished`, or `stopped: <why>`.
    """

    def on_branch_output(self, branch: str, output: Dict[str, Any]) -> Dict[str, Any]:
        over_limit = bool(output.get("over_limit"))
        output = {k: v for k, v in output.items() if k != "over_limit"}  # the feedback says it to the controller
        update = super().on_branch_output(branch, output)  # keeps `plan` (keep_from_branches in the YAML)
        if branch == "write_plan":
            update["plan_over_limit"] = over_limit
            if output.get("approved") and self.flow_config.get("finish_on_approval", True) and self._bookkeeping():
                update.update(
                    {
                        self.flow_config.get("early_exit_key", "EARLY_EXIT"): True,
                        "summary": "The user approved the plan.",
                        "status": "finished",
                    }
                )
        return update

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        output = super().run(input_data)
        plan = str(self.flow_state.get("plan") or "").strip()
        if output.get("status") == "finished":
            if not plan:
                output["status"] = "stopped: the plan writer finished without a plan"
            elif self.flow_state.get("plan_over_limit"):
                output["status"] = "stopped: the plan writer finished without a plan within the length limit"
            else:
                self.store_plan(memory_path(self, self.flow_state, self.flow_config.get("plan_key", "plan")), plan)
        output["plan"] = plan
        return output

    def store_plan(self, path: str, plan: str) -> None:
        """Write the final plan to the plan file (ReplanningFlow keeps the plan it replaces first)."""
        atomic_write(path, plan + "\n")
