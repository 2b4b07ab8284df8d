from __future__ import annotations

from typing import Any, Dict

from aiflows.base_flows import CircularFlow

from flow_modules.aiflows.CoreFlowModule import LeanSequentialFlow, get_console
from flow_modules.aiflows.CoreFlowModule.memory import (
    append_log_entry,
    last_log_number,
    memory_files_of,
    memory_path,
)


class AbstractBossFlow(LeanSequentialFlow):
    """A boss: reads its memory, writes a plan with the user, then carries the plan out.

    MemoryReading -> Planner -> CtrlExMem. Jarvis, Coder and ExtendLibrary are bosses that differ only in
    configuration (commands, branches, prompts, memories). A boss starts every run from a clean state, and resets
    fully when it finishes, so the chat histories of its controllers are dropped; its plan and logs stay in the
    memory files. It can be run again in the same process.

    *Configuration Parameters*:
    - `memory_files` (dict): memory name -> file path; at least `plan` and `logs` (and `code_library` for bosses
      that see the library). Memory files given in the input override these for that run.
      `set_memory_files(flow, memory_dir)` (CoreFlowModule.memory) sets it for every boss of a tree, from the
      `memory_file_names` each declares.
    - `resume` (bool): if the plan file already holds a plan, carry it out instead of writing a new one.
    - `subflows_config`: `MemoryReading`, `Planner` (a PlanWriterFlow), `CtrlExMem` (a CtrlExMemFlow).

    When a boss starts a task and its log file already has entries, it appends a `new_task` entry (or `resume`),
    so that its controller can tell earlier tasks' entries from its own.

    *Input Interface*:
    - `goal` (str): what to achieve.
    - `memory_files` (dict, optional): the memory files for this run, instead of the configured ones. (Not in the
      YAML's `input_interface`, so that a parent loop does not hand a sub-boss its own memory files.)

    *Output Interface*:
    - `summary` (str): what was done (the controller's summary at `finish`, or why the boss stopped).
    - `result` (str): the result of the last command.
    - `status` (str): `finished`, or `stopped: <why>`.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        for key in ("plan", "logs"):
            memory_path(self, input_data, key)  # a clear error if memory_files is not set, or lacks one
        memory_files = dict(memory_files_of(self, input_data))  # the input's, else the configured ones
        goal = str(input_data.get("goal") or "").strip()
        if not goal:
            return {"summary": f"{self.flow_config['name']} was called without a goal.", "result": "",
                    "status": "stopped: no goal was given"}
        get_console().show("flow", f"{self.flow_config['name']} starts on:", goal)
        self._mark_new_task(memory_files["logs"], goal)
        output = super().run({"goal": goal, "memory_files": memory_files})
        get_console().show("flow", f"{self.flow_config['name']} {output.get('status', '')}:", output.get("summary", ""))
        return output

    def _mark_new_task(self, logs: str, goal: str) -> None:
        """A line in the logs between tasks, so the controller does not take an earlier task's entries for its own."""
        if self.flow_config.get("resume"):
            append_log_entry(logs, "resume", {"goal": goal},
                             "The run was stopped and is resumed here. The Python session is new: variables "
                             "defined before are gone (files and the library are kept).")
        elif last_log_number(logs) > 0:
            append_log_entry(logs, "new_task", {"goal": goal},
                             "A new task starts here; the entries above belong to earlier tasks.")

    def _call_flow_from_state(self, goal, input_interface, flow, output_interface):
        if (flow is self.subflows.get("Planner") and self.flow_config.get("resume")
                and str(self.flow_state.get("plan") or "").strip()):
            get_console().show("plan", f"{self.flow_config['name']} resumes its plan:", self.flow_state["plan"])
            return None, {"plan": self.flow_state["plan"]}
        return super()._call_flow_from_state(goal, input_interface, flow, output_interface)

    @CircularFlow.output_msg_payload_processor
    def detect_planning_outcome(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        plan = str(output_payload.get("plan") or "").strip()
        status = output_payload.get("status", "")
        if status == "finished" and plan:
            return {"plan": plan}
        reason = status or "no plan was written"
        return {self.flow_config.get("early_exit_key", "EARLY_EXIT"): True,
                "summary": f"{self.flow_config['name']} stopped before carrying out a plan: {output_payload.get('summary') or reason}",
                "status": f"stopped: planning: {reason}"}
