from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Iterator

from aiflows.base_flows import CircularFlow

from aiflows_jarvis.CoreFlowModule import (
    LeanSequentialFlow,
    MemoryFileError,
    append_log_entry,
    atomic_write,
    current_flow_path,
    get_console,
    last_log_number,
    memory_files_of,
    memory_path,
    one_step_plan,
    read_text,
    redact,
    without_marks,
)

# How a boss gets its plan (`one_step_plan`): its planner writes it (`off`); or code writes the goal as a plan of one
# step, which the user approves or has the planner rewrite (`review`), or which is taken as it is (`silent`).
ONE_STEP_PLAN_MODES = ("off", "review", "silent")
GOAL_LINES = 10  # a longer goal is shown folded (its first lines, and how much more there is)


def task_record_path(logs: str) -> str:
    """The file where a boss keeps the task it is working on, beside its log: ``logs_coder.txt`` ->
    ``.logs_coder.task.json``. It exists while a task is under way (a task stopped by Ctrl+C, a budget or an error
    leaves it), so that a resumed run can tell the interrupted task from a new one."""
    folder, name = os.path.split(logs)
    return os.path.join(folder, f".{os.path.splitext(name)[0]}.task.json")


def read_task_record(logs: str) -> Dict[str, Any]:
    """The task record of the log ``logs`` (see ``task_record_path``), or {} if there is none or it is unreadable
    (a record cut by a kill, a link: the task is then taken for a new one, which loses nothing)."""
    try:
        record = json.loads(read_text(task_record_path(logs)) or "{}")
    except (ValueError, MemoryFileError):
        return {}
    return record if isinstance(record, dict) else {}


def same_goal(first: Any, second: Any) -> bool:
    """Whether two goals are the same task (spacing aside)."""
    return " ".join(str(first or "").split()) == " ".join(str(second or "").split())


class AbstractBossFlow(LeanSequentialFlow):
    """A boss: reads its memory, writes a plan with the user, then carries the plan out.

    MemoryReading -> Planner -> CtrlExMem. Jarvis, Coder and ExtendLibrary are bosses that differ only in
    configuration (commands, branches, prompts, memories). Every run starts from a clean state and the boss resets
    fully when it finishes, so its controllers' chats are dropped while its plan and logs stay in the memory files.

    *Configuration Parameters*:
    - `memory_files` (dict): memory name -> file path; at least `plan` and `logs` (and `code_library` for bosses
      that see the library). Memory files given in the input override these for that run.
      `set_memory_files(flow, memory_dir)` (CoreFlowModule.memory) sets it for every boss of a tree.
    - `resume` (bool): the run is resumed (`--resume` sets it on the top boss): this boss continues its task from
      its plan file instead of writing a new plan, and every boss below it resumes the task it was interrupted in.
    - `resume_note` (str): what this boss's controller must know after a resume (e.g. the Python session is new),
      written in the log's `resume` entry, or in its `new_task` entry when the first task after a resume is another.
    - `one_step_plan` (str): `off` (the planner writes the plan), `review` (the plan is the goal as one step, written
      by code and shown to the user, whose comment has the planner write it) or `silent` (that plan, not shown).
      A sub-boss's goal usually is one step of its caller's plan, so writing it again costs an LLM call for nothing.
      `bookkeeping_by_code: false` makes it `off`. The boss's state then says `plan_by_code`, which its loop's
      decisions may depend on.
    - `bookkeeping_by_code` (bool, default true): see ControllerExecutorFlow; false also turns `one_step_plan` off.
    - `subflows_config`: `MemoryReading`, `Planner` (a PlanWriterFlow), `CtrlExMem` (a CtrlExMemFlow).

    So that its controller can tell which log entries are its task's, a boss writes a `new_task` entry when it
    starts a task on a log that has entries, and a `resume` entry when a resumed run continues the task it was
    stopped in (the same goal, its task record still there): that task keeps its plan and log entries, and
    `on_resume` may bring its memory up to date. The task record (`task_record_path`) exists while a task is under
    way and is left behind when the run is stopped inside it (Ctrl+C, a budget, an error).

    *Input Interface*:
    - `goal` (str): what to achieve; and any other key the boss's `input_interface` names (ExtendLibrary's
      `module`), which its loop's state then holds.
    - `memory_files` (dict, optional): the memory files for this run, instead of the configured ones. (Not in the
      YAML's `input_interface`, so that a parent loop does not hand a sub-boss its own memory files.)

    *Output Interface*:
    - `summary` (str): what was done (the controller's summary at `finish`, or why the boss stopped).
    - `result` (str): the result of the last command.
    - `status` (str): `finished`, or `stopped: <why>`.
    """

    # Set on the bosses below a resumed one: the first task each is given may be the one the run was stopped in.
    _run_resumed = False
    # Whether the task under way continues an interrupted one (its plan is then carried out, not written anew).
    _resuming = False

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        for key in ("plan", "logs"):
            memory_path(self, input_data, key)  # a clear error if memory_files is not set, or lacks one
        memory_files = dict(memory_files_of(self, input_data))  # the input's, else the configured ones
        goal = str(input_data.get("goal") or "").strip()
        if not goal:
            return {
                "summary": f"{self.flow_config['name']} was called without a goal.",
                "result": "",
                "status": "stopped: no goal was given",
            }
        if not current_flow_path().count("/"):  # the top boss; a boss below is given its goal in a step line
            get_console().show("flow", f"{self.flow_config['name']}'s goal:", goal, folded=GOAL_LINES)
        run_resumed = bool(self.flow_config.get("resume")) or self._run_resumed
        self._run_resumed = False  # only the first task after a resume can be the interrupted one
        if self.flow_config.get("resume"):
            for boss in self._bosses_below():
                boss._run_resumed = True
        self._resuming = self._start_task(memory_files, goal, run_resumed)
        extra = {k: input_data[k] for k in self.flow_config.get("input_interface") or [] if k in input_data}
        output = super().run({**extra, "goal": goal, "memory_files": memory_files})
        self._end_task(memory_files["logs"])
        summary, status = str(output.get("summary", "")), str(output.get("status", ""))
        if status != "finished" or not get_console().was_shown(summary):  # the finish step showed it, else here
            get_console().show(
                "flow" if status == "finished" else "warning", f"{self.flow_config['name']} {status}:", summary
            )
        return output

    # ~~~ Tasks: new, or resumed ~~~
    def _start_task(self, memory_files: Dict[str, str], goal: str, run_resumed: bool) -> bool:
        """Marks the start of a task in the log (`new_task`, `resume` or nothing) and keeps the task record; returns
        whether the task continues an interrupted one."""
        logs = memory_files["logs"]
        record = read_task_record(logs)
        note = str(self.flow_config.get("resume_note") or "").strip()
        interrupted = bool(record) and same_goal(record.get("goal"), redact(goal))  # kept redacted
        if run_resumed and (interrupted or self.flow_config.get("resume")):
            if not interrupted:
                record = self._new_record(memory_files, goal)
            first, last = int(record.get("first_entry") or 0), last_log_number(logs)
            own = f" Entries [{first}] to [{last}] above are this task's." if 0 < first <= last else ""
            updates = self.on_resume(memory_files, record)
            text = " ".join(
                part
                for part in (f"The run was stopped during this task and is resumed here.{own}", note, updates)
                if part
            )
            append_log_entry(logs, "resume", {"goal": goal}, text)
            atomic_write(task_record_path(logs), redact(json.dumps(record)))
            return True
        if last_log_number(logs) > 0:
            text = "A new task starts here; the entries above belong to earlier tasks."
            if run_resumed:
                text += f" The run was stopped and resumed before this task. {note}".rstrip()
            append_log_entry(logs, "new_task", {"goal": goal}, text)
        atomic_write(task_record_path(logs), redact(json.dumps(self._new_record(memory_files, goal))))
        return False

    def _new_record(self, memory_files: Dict[str, str], goal: str) -> Dict[str, Any]:
        return {
            "goal": goal,
            "started": time.time(),
            "first_entry": last_log_number(memory_files["logs"]) + 1,
            **self.task_record(memory_files),
        }

    @staticmethod
    def _end_task(logs: str) -> None:
        try:
            os.remove(task_record_path(logs))
        except FileNotFoundError:
            pass

    def _bosses_below(self) -> Iterator["AbstractBossFlow"]:
        stack = list(getattr(self, "subflows", {}).values())
        while stack:
            flow = stack.pop()
            if isinstance(flow, AbstractBossFlow):
                yield flow
            stack.extend(getattr(flow, "subflows", {}).values())

    # ~~~ Hooks for bosses that keep more than a plan and a log ~~~
    def task_record(self, memory_files: Dict[str, str]) -> Dict[str, Any]:
        """What else to keep in the task record when a task starts (JSON values), for ``on_resume``."""
        return {}

    def on_resume(self, memory_files: Dict[str, str], record: Dict[str, Any]) -> str:
        """Brings the memory up to date when an interrupted task is resumed (e.g. marks plan steps done whose work
        was saved before the run stopped); returns what changed, for the controller ('' if nothing)."""
        return ""

    # ~~~ Topology ~~~
    def one_step_plan_mode(self) -> str:
        mode = str(self.flow_config.get("one_step_plan") or "off")
        if mode not in ONE_STEP_PLAN_MODES:
            from aiflows_jarvis.CoreFlowModule import ConfigurationError

            raise ConfigurationError(
                f"{self.flow_config['name']}.one_step_plan: {mode!r} is not one of {', '.join(ONE_STEP_PLAN_MODES)}"
            )
        return mode if self.flow_config.get("bookkeeping_by_code", True) else "off"

    def shows_goal_whole(self) -> bool:
        """Whether this boss shows its goal whole before it works on it (the plan of one step it puts up for review),
        so that the step line of its caller need not."""
        return self.one_step_plan_mode() == "review"

    def _call_flow_from_state(self, goal, input_interface, flow, output_interface):
        if flow is not self.subflows.get("Planner"):
            return super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        if self._resuming and str(self.flow_state.get("plan") or "").strip():
            plan = str(self.flow_state["plan"])
            get_console().show("plan", f"{self.flow_config['name']} resumes its plan:", plan)
            by_code = without_marks(plan) == without_marks(one_step_plan(self.flow_state.get("goal") or ""))
            return None, {"plan": plan, "plan_by_code": by_code}
        mode = self.one_step_plan_mode()
        if mode == "off":
            return super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        draft = one_step_plan(self.flow_state.get("goal") or "")
        if mode == "silent":
            atomic_write(memory_path(self, self.flow_state, "plan"), draft + "\n")
            return None, {"plan": draft, "plan_by_code": True}
        message, output = self.call_subflow_with(
            {**self.flow_state, "draft": draft}, goal, input_interface, flow, output_interface
        )
        return message, {**output, "plan_by_code": str(output.get("plan") or "").strip() == draft.strip()}

    @CircularFlow.output_msg_payload_processor
    def detect_planning_outcome(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        plan = str(output_payload.get("plan") or "").strip()
        status = output_payload.get("status", "")
        if status == "finished" and plan:
            return {"plan": plan}
        reason = status or "no plan was written"
        return {
            self.flow_config.get("early_exit_key", "EARLY_EXIT"): True,
            "summary": f"{self.flow_config['name']} stopped before carrying out a plan: "
            f"{output_payload.get('summary') or reason}",
            "status": f"stopped: planning: {reason}",
        }
