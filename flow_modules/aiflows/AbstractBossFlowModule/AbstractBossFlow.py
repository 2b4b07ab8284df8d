from __future__ import annotations

from typing import Any, Dict

from aiflows.base_flows import CircularFlow

from flow_modules.aiflows.CoreFlowModule import ConfigurationError, LeanSequentialFlow, get_console


class AbstractBossFlow(LeanSequentialFlow):
    """A boss: reads its memory, writes a plan with the user, then carries the plan out.

    MemoryReading -> Planner -> CtrlExMem. Jarvis, Coder and ExtendLibrary are bosses that differ only in
    configuration (commands, branches, prompts, memories). A boss starts every run from a clean state, and resets
    fully when it finishes, so the chat histories of its controllers are dropped; its plan and logs stay in the
    memory files. It can be run again in the same process.

    *Configuration Parameters*:
    - `memory_files` (dict): memory name -> file path; at least `plan` and `logs` (and `code_library` for bosses
      that see the library). Set by the launcher (see `set_memory_files` in JarvisFlowModule's launcher helpers).
    - `resume` (bool): if the plan file already holds a plan, carry it out instead of writing a new one.
    - `subflows_config`: `MemoryReading`, `Planner` (a PlanWriterFlow), `CtrlExMem` (a CtrlExMemFlow).

    *Input Interface*:
    - `goal` (str): what to achieve.

    *Output Interface*:
    - `summary` (str): what was done (the controller's summary at `finish`, or why the boss stopped).
    - `result` (str): the result of the last command.
    - `status` (str): `finished`, or `stopped: <why>`.
    """

    def memory_files(self) -> Dict[str, str]:
        memory_files = self.flow_config.get("memory_files")
        if not isinstance(memory_files, dict) or not memory_files:
            raise ConfigurationError(
                f"{self.flow_config['name']}: `memory_files` is not set (it is {memory_files!r}). Set it to a mapping "
                "such as {plan: memory/plan.txt, logs: memory/logs.txt}; run_jarvis.py and set_memory_files() do."
            )
        missing = [k for k in ("plan", "logs") if k not in memory_files]
        if missing:
            raise ConfigurationError(f"{self.flow_config['name']}: memory_files has no {missing}")
        return dict(memory_files)

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        memory_files = self.memory_files()
        goal = str(input_data.get("goal") or "").strip()
        if not goal:
            return {"summary": f"{self.flow_config['name']} was called without a goal.", "result": "",
                    "status": "stopped: no goal was given"}
        get_console().show("flow", f"{self.flow_config['name']} starts on:", goal)
        output = super().run({"goal": goal, "memory_files": memory_files})
        get_console().show("flow", f"{self.flow_config['name']} {output.get('status', '')}:", output.get("summary", ""))
        return output

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
