from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Optional

from aiflows.base_flows import CircularFlow

from aiflows_jarvis.CoreFlowModule import (
    LeanCircularFlow,
    RunStopped,
    current_flow_path,
    get_console,
    get_input_source,
)
from aiflows_jarvis.CoreFlowModule.interaction import breadcrumb
from aiflows_jarvis.CoreFlowModule.lean import config_key_path
from aiflows_jarvis.CoreFlowModule.memory import shorten

from .command_config import derive_commands

# Keys of a branch's output shown first when it is turned into the controller's `result`.
_RESULT_ORDER = ("summary", "result", "status", "human_input", "feedback")

# Commands whose branch shows their arguments whole (the plan writer shows the goal's plan, run_code its code,
# update_plan the plan, the answers the answer): the step line names the command only, so nothing is shown twice.
_SHOWN_BY_BRANCH = ("write_plan", "run_code", "update_plan", "final_answer", "intermediate_answer")

# State keys of the stuck-loop guard: a digest of the last (command, arguments), how many times in a row the
# controller issued it, and the user's answer when a repeated command is not to be executed.
_REPEAT_SIGNATURE = "repeat_signature"
_REPEAT_COUNT = "repeat_count"
_NOT_EXECUTED_NOTE = "not_executed_note"


def command_signature(command: str, args: Dict[str, Any]) -> str:
    """A short digest of a command and its arguments (canonical JSON): equal for the same call, whatever the key
    order; its size does not depend on the arguments'."""
    canonical = json.dumps([command, args], sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _user_reply(answer: Any) -> str:
    answer = str(answer or "").strip()
    return f"The user replied: {answer}" if answer else "The user replied with an empty answer (no objection)."


def format_branch_output(output: Dict[str, Any]) -> str:
    """A branch's output as the text the controller reads next."""
    if not output:
        return "(the command returned nothing)"
    if set(output) == {"result"}:
        return str(output["result"])
    if set(output) == {"human_input"}:
        return _user_reply(output["human_input"])
    keys = [k for k in _RESULT_ORDER if k in output] + sorted(k for k in output if k not in _RESULT_ORDER)
    lines = []
    for key in keys:
        value = output[key]
        if key == "human_input":
            lines.append(_user_reply(value))
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        lines.append(f"{key}: {text if text.strip() else '(none)'}")
    return "\n".join(lines)


class ControllerExecutorFlow(LeanCircularFlow):
    """A controller-executor loop: Controller -> Executor (one branch per command) until the controller calls finish.

    The loop every boss, plan writer and code writer is built on. Each command is declared once, under `commands`,
    with the flow that runs it; the controller's commands and the executor's branches are derived from that when the
    loop is built (`command_config`), and `finish` is run by the loop itself. The loop always ends with a status: at
    `max_rounds`, when the controller gives up on invalid replies, or when it is stuck (the same command with the
    same arguments `max_repeats` times in a row: the command is not run again, the user's answer to "what instead?"
    is its result, and with no answer or no one to ask the loop stops). Ctrl+C during a command stops that command
    and asks the user what the controller should do instead.

    Each branch receives the controller's arguments plus the keys of its own `input_interface` that the loop's state
    holds (e.g. `memory_files`, `plan`). The YAML's topology may add nodes after the Executor (CtrlExMemFlow does).

    *Configuration Parameters*:
    - `commands` (dict): `name: {description, input_args, optional_args, arg_types, flow}`; `flow` is the
      configuration of the subflow that runs the command (`_target_` and its overrides); `finish` has none (its
      default declaration is the controller's). `subflows_config.Executor.subflows_config.<name>` is merged over the
      flow of `<name>`, and `subflows_config.Controller.commands.<name>` over its declaration.
    - `max_rounds` (int): the most Controller -> Executor rounds before stopping.
    - `max_repeats` (int): the same command with the same arguments this many times in a row is a stuck loop
      (default 3; 0 or null: not checked).
    - `subflows_config`: `Controller` (a ControllerAtomicFlow) and `Executor` (a branching flow whose branches are
      derived from `commands`).
    - `topology`: the nodes of the loop (see the YAML).
    - `reset_before_run` (bool): start every run from a clean state (chat histories included).
    - `max_result_chars` (int): what the controller reads of a command's output, at most (head and tail kept).
    - `arguments_shown_by_branch` (list, optional): commands whose arguments the step line on screen leaves out,
      because their branch shows them whole (default: write_plan, run_code, update_plan, the answers).
    - `bookkeeping_commands` (list): commands whose result is not the loop's final `result` (e.g. update_plan).
    - `keep_from_branches` (dict): branch -> output keys copied into the loop's state (later branches can take them
      as input, e.g. `write_code: [code]` so that `save_code` saves the code written).

    *Input Interface*:
    - `goal` (str), and what the controller's prompts need (`plan`, `logs`, `memory_files`, ...).

    *Output Interface*:
    - `summary` (str): the controller's summary at `finish`, or why the loop stopped.
    - `result` (str): the result of the last command executed.
    - `status` (str): `finished`, or `stopped: <why>`.
    """

    # The commands the loop runs itself, without a flow.
    LOOP_COMMANDS = ("finish",)

    @classmethod
    def derived_config(cls, config: Dict[str, Any], where: Optional[str] = None, check: bool = True) -> Dict[str, Any]:
        """``config`` with the controller's commands and the executor's branches derived from ``commands`` (see
        ``command_config.derive_commands``); ``where`` is its key path in messages (default: where it is being
        built)."""
        return derive_commands(config, where or config_key_path(config), cls.LOOP_COMMANDS, check)

    @classmethod
    def instantiate_from_config(cls, config: Dict[str, Any]):
        return super().instantiate_from_config(cls.derived_config(config))

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        for key in (_REPEAT_SIGNATURE, _REPEAT_COUNT, _NOT_EXECUTED_NOTE):
            self.flow_state.pop(key, None)  # a run starts with no repeats counted (also without reset_before_run)
        return super().run(input_data)

    # ~~~ When the loop runs out of rounds ~~~
    def _on_reach_max_rounds(self):
        rounds = self.flow_config.get("max_rounds")
        reason = f"stopped: reached max_rounds ({rounds}) before the controller called finish"
        get_console().line("warning", f"{self.flow_config['name']}: {reason}")
        self._state_update_dict({"status": reason, "summary": f"{self.flow_config['name']} {reason}."})

    # ~~~ Hooks for subclasses ~~~
    def on_branch_output(self, branch: str, output: Dict[str, Any]) -> Dict[str, Any]:
        """State updates after a branch ran: the output, as text, becomes the controller's `result`; the keys that
        `keep_from_branches` names for this branch are copied into the state (e.g. the code `write_code` wrote)."""
        update = {"result": shorten(format_branch_output(output), int(self.flow_config.get("max_result_chars", 3000)))}
        if branch not in (self.flow_config.get("bookkeeping_commands") or []):
            update["last_work_result"] = update["result"]
        for key in (self.flow_config.get("keep_from_branches") or {}).get(branch, []):
            if key in output:
                update[key] = output[key]
        return update

    def on_finish(self, command_args: Dict[str, Any]) -> Dict[str, Any]:
        """State updates when the controller calls finish: its summary, and as `result` the result of the last
        command that did work (not of a `bookkeeping_commands` one such as update_plan)."""
        return {"summary": str(command_args.get("summary", "")), "status": "finished",
                "result": self.flow_state.get("last_work_result", self.flow_state.get("result", ""))}

    def on_interrupted(self, branch: str, note: str) -> Dict[str, Any]:
        return {"result": f"The user interrupted `{branch}` with Ctrl+C and said: {note}"}

    def on_not_executed(self, command: str, count: int, note: str) -> Dict[str, Any]:
        """State updates when a repeated command is not executed: the controller reads why, and the user's answer."""
        return {"result": f"`{command}` was NOT executed: you issued it {count} times in a row with the same "
                          f"arguments. The user says what to do instead: {note}"}

    # ~~~ Topology interfaces ~~~
    @CircularFlow.output_msg_payload_processor
    def detect_finish_or_continue(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        early_exit_key = self.flow_config.get("early_exit_key", "EARLY_EXIT")
        if output_payload.get("controller_error"):
            reason = output_payload["controller_error"]
            get_console().line("error", f"{self._shown_where()}: {reason}")
            return {early_exit_key: True, "status": f"stopped: {reason}",
                    "summary": f"{self.flow_config['name']} stopped: {reason}"}
        command, args = output_payload["command"], output_payload.get("command_args") or {}
        where = current_flow_path() or self.flow_config["name"]
        quiet = command in (self.flow_config.get("arguments_shown_by_branch") or _SHOWN_BY_BRANCH)
        get_console().step(where, command, args, quiet=quiet)
        if command == "finish":
            return {early_exit_key: True, "command": command, "command_args": args, **self.on_finish(args)}
        count = self._count_repeats(command, args)
        limit = self.flow_config.get("max_repeats")
        if limit and count >= int(limit):
            note = self._ask_when_stuck(command, count)
            if not note:
                reason = f"stuck: {command} issued {count} times in a row with the same arguments"
                get_console().line("warning", f"{self._shown_where()}: stopped: {reason}")
                return {early_exit_key: True, "status": f"stopped: {reason}",
                        "summary": f"{self.flow_config['name']} stopped: its controller issued `{command}` {count} "
                                   f"times in a row with the same arguments, so it was stuck."}
            self.flow_state[_NOT_EXECUTED_NOTE] = note
        return {"command": command, "command_args": args}

    def _shown_where(self) -> str:
        """This loop as the user reads it on the screen: ``Jarvis > Coder > ExtendLibrary``."""
        return breadcrumb(current_flow_path() or self.flow_config["name"])

    # ~~~ Stuck loops ~~~
    def _count_repeats(self, command: str, args: Dict[str, Any]) -> int:
        """How many times in a row (this one included) the controller has issued this command with these arguments.
        The state holds one digest and one number, whatever the number of rounds."""
        signature = command_signature(command, args)
        if self.flow_state.get(_REPEAT_SIGNATURE) == signature:
            count = int(self.flow_state.get(_REPEAT_COUNT) or 0) + 1
        else:
            count = 1
        self.flow_state[_REPEAT_SIGNATURE] = signature
        self.flow_state[_REPEAT_COUNT] = count
        return count

    def _ask_when_stuck(self, command: str, count: int) -> Optional[str]:
        """What the user wants the controller to do instead of repeating ``command``; None to stop this loop (Enter,
        or no one to ask). Ctrl+C at the question stops the whole run."""
        source = get_input_source()
        if not source.interactive:
            return None
        where = self._shown_where()
        try:
            answer = source.ask(f"The controller of {where} issued `{command}` with the same arguments {count} times "
                                f"in a row. What should it do instead? (Enter to stop this loop)", kind="question")
        except KeyboardInterrupt:
            raise RunStopped from None
        return answer.strip() or None

    @CircularFlow.input_msg_payload_builder
    def prepare_executor_input(self, data_dict: Dict[str, Any], dst_flow) -> Dict[str, Any]:
        command = data_dict["command"]
        branch_input = dict(data_dict.get("command_args") or {})
        branch = dst_flow.subflows.get(command) if hasattr(dst_flow, "subflows") else None
        wanted = branch.flow_config.get("input_interface") if branch is not None else None
        if isinstance(wanted, (list, tuple)):
            for key in wanted:
                if key not in branch_input and key in data_dict:
                    branch_input[key] = data_dict[key]
        return {"branch": command, "branch_input_data": branch_input}

    @CircularFlow.output_msg_payload_processor
    def process_executor_output(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        branch = self.flow_state.get("command", "")
        return self.on_branch_output(branch, output_payload.get("branch_output_data") or {})

    # ~~~ Ctrl+C during a command; a repeated command not executed ~~~
    def _call_flow_from_state(self, goal, input_interface, flow, output_interface):
        if flow is not self.subflows.get("Executor"):
            return super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        note = self.flow_state.pop(_NOT_EXECUTED_NOTE, None)
        if note:  # the user said what to do instead of a command the controller keeps repeating
            return None, self.on_not_executed(self.flow_state.get("command", "?"),
                                              int(self.flow_state.get(_REPEAT_COUNT) or 0), note)
        try:
            return super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        except RunStopped:
            raise  # the user chose to stop the run at a deeper level: do not ask again
        except KeyboardInterrupt:
            branch = self.flow_state.get("command", "?")
            note = self._ask_after_interrupt(branch)
            if branch in getattr(flow, "subflows", {}):
                flow.subflows[branch].reset(full_reset=True, recursive=True)
            return None, self.on_interrupted(branch, note)

    def _ask_after_interrupt(self, branch: str) -> str:
        """What the user wants this loop's controller to do instead of the interrupted command; RunStopped if they
        want the run to stop (Enter, another Ctrl+C, or no human to ask)."""
        source = get_input_source()
        if not source.interactive:
            raise RunStopped
        where = self._shown_where()
        get_console().line("warning", f"\nInterrupted `{branch}` (in {where}).")
        try:
            note = source.ask(f"What should the controller of {where} do instead? (Enter to stop the whole run)",
                              kind="question")
        except KeyboardInterrupt:
            raise RunStopped from None
        if not note.strip():
            raise RunStopped
        return note.strip()
