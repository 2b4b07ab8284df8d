from __future__ import annotations

import copy
import json
from typing import Any, Dict, List

from aiflows.base_flows import CircularFlow

from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow
from aiflows_jarvis.CoreFlowModule import STOPPED_BY_USER, get_console, shorten

# Commands a switch of the same name turns on (`run_code: true`); off, the command and its branch are dropped.
OPTIONAL_COMMANDS = ("run_code",)


def without_disabled_commands(config: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of an AutoGPTFlow configuration without the optional commands it does not turn on: the command goes
    with its flow (and with what the override points say of either), so the controller never offers a command
    nobody runs."""
    config = copy.deepcopy(config)
    subflows = config.get("subflows_config") or {}
    places = (
        config.get("commands"),
        (subflows.get("Controller") or {}).get("commands"),
        (subflows.get("Executor") or {}).get("subflows_config"),
    )
    for name in OPTIONAL_COMMANDS:
        if not config.get(name):
            for place in places:
                if isinstance(place, dict):
                    place.pop(name, None)
    return config


def format_memories(retrieved: Any, max_chars: int) -> str:
    """The retrieved memories as the controller reads them: one block each, the whole at most ``max_chars``."""
    if isinstance(retrieved, str):
        retrieved = [retrieved] if retrieved.strip() else []
    memories: List[str] = [str(m).strip() for m in retrieved or [] if str(m).strip()]
    if not memories:
        return "(no memories yet)"
    per_memory = max(200, max_chars // len(memories))
    return shorten("\n\n".join(f"[memory {i}]\n{shorten(m, per_memory)}" for i, m in enumerate(memories, 1)), max_chars)


class AutoGPTFlow(ControllerExecutorFlow):
    """AutoGPT (the seed's circular flow): Memory (read) -> Controller -> Executor -> HumanFeedback -> Memory (write),
    until the controller calls `finish` or the user says `q`/`stop`.

    The controller's system prompt holds the goal and the commands; the memories a VectorStoreFlow retrieves for the
    goal and the last observation come in its messages (those not shown before), and its chat is rebuilt once per
    block of calls, so its prompt stays within the same bounds however long the run. After each command the user's
    feedback is appended to the observation and the round is written to the vector store. The interpreter's kernel
    (with `run_code: true`) belongs to the flow: the caller shuts it down (`close()` on the interpreter), else it
    ends with the process.

    Subflows: `Memory` (VectorStoreFlow), `Controller` (ControllerAtomicFlow), `Executor` (one branch per command:
    a Wikipedia search, a DuckDuckGo search through LangChain, the interpreter with `run_code: true`),
    `HumanFeedback`. A branch's observation is the keys of its `output_interface`. The loop inherits
    ControllerExecutorFlow's `max_rounds`, stuck-loop guard and Ctrl+C handling.

    *Configuration Parameters*:
    - `max_rounds` (int), `max_repeats` (int), `max_result_chars` (int): as in ControllerExecutorFlow.
    - `max_memory_chars` (int): what the controller reads of the retrieved memories, at most.
    - `max_query_chars` (int): the size of the memory query (the goal and the last observation).
    - `commands` (dict): each command with the flow that runs it (see ControllerExecutorFlow; AutoGPTFlow.yaml
      declares them); the executor's branches are derived from them.
    - `run_code` (bool): whether the controller may run code (default false: the `run_code` command of the YAML is
      dropped when the flow is built).
    - `subflows_config`: `Memory`, `Controller`, `Executor`, `HumanFeedback`.

    *Input Interface*:
    - `goal` (str): what AutoGPT should find out or do.

    *Output Interface*:
    - `answer` (str): the controller's answer at `finish` ("" if it did not finish).
    - `status` (str): `finished`, or `stopped: <why>` (the user stopped it, max_rounds, ...).
    """

    @classmethod
    def instantiate_from_config(cls, config: Dict[str, Any]):
        return super().instantiate_from_config(without_disabled_commands(config))

    # ~~~ The controller's view of a branch's output and of finish ~~~
    def on_branch_output(self, branch: str, output: Dict[str, Any]) -> Dict[str, Any]:
        output = self._declared_output(branch, output)
        update = super().on_branch_output(branch, output)
        if len(output) == 1:  # one observation (observation, wiki_content, ...): the text itself, not "key: text"
            value = next(iter(output.values()))
            update["result"] = shorten(
                value if isinstance(value, str) else json.dumps(value, default=str),
                int(self.flow_config.get("max_result_chars", 3000)),
            )
        update["observation"] = update["result"]
        return update

    def _declared_output(self, branch: str, output: Dict[str, Any]) -> Dict[str, Any]:
        """The keys of ``output`` that the branch's `output_interface` lists (the whole output when it lists none
        of them)."""
        flow = self.branch_flow(branch)
        declared = flow.flow_config.get("output_interface") if flow is not None else None
        kept = {key: output[key] for key in declared or [] if key in output}
        return kept or output

    def on_finish(self, command_args: Dict[str, Any]) -> Dict[str, Any]:
        return {"answer": str(command_args.get("answer", "")), "status": "finished"}

    # ~~~ Memory ~~~
    @CircularFlow.input_msg_payload_builder
    def prepare_memory_read(self, data_dict: Dict[str, Any], dst_flow) -> Dict[str, Any]:
        query = data_dict["goal"]
        if data_dict.get("result"):
            query = f"{query}\n{data_dict['result']}"
        return {"operation": "read", "content": shorten(query, int(self.flow_config.get("max_query_chars", 2000)))}

    @CircularFlow.output_msg_payload_processor
    def process_memory_read(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        return {
            "memory": format_memories(
                output_payload.get("retrieved"), int(self.flow_config.get("max_memory_chars", 3000))
            )
        }

    @CircularFlow.input_msg_payload_builder
    def prepare_memory_write(self, data_dict: Dict[str, Any], dst_flow) -> Dict[str, Any]:
        args = json.dumps(data_dict.get("command_args") or {}, ensure_ascii=False, default=str)
        record = (
            f"Goal: {data_dict['goal']}\nCommand: {data_dict.get('command')} {args}\n"
            f"Observation: {data_dict.get('observation', data_dict.get('result', ''))}"
        )
        if data_dict.get("human_feedback"):
            record += f"\nUser feedback: {data_dict['human_feedback']}"
        return {"operation": "write", "content": record}

    @CircularFlow.output_msg_payload_processor
    def process_memory_write(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        return {"memories_written": int(self.flow_state.get("memories_written") or 0) + 1}

    # ~~~ The user's feedback ~~~
    @CircularFlow.input_msg_payload_builder
    def prepare_feedback_input(self, data_dict: Dict[str, Any], dst_flow) -> Dict[str, Any]:
        return {
            "command": data_dict.get("command", ""),
            "command_args": data_dict.get("command_args") or {},
            "result": data_dict.get("result", ""),
        }

    @CircularFlow.output_msg_payload_processor
    def process_feedback(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        early_exit_key = self.flow_config.get("early_exit_key", "EARLY_EXIT")
        feedback = str(output_payload.get("human_feedback") or "").strip()
        if output_payload.get(early_exit_key):
            status = f"{STOPPED_BY_USER} {feedback!r}"
            get_console().line("warning", f"{self.flow_config['name']} {status}.")
            return {early_exit_key: True, "human_feedback": feedback, "status": status}
        update: Dict[str, Any] = {"human_feedback": feedback}
        if feedback:  # the seed: the feedback is appended to the observation
            update["result"] = f"{self.flow_state.get('result', '')}\n\nThe user's feedback: {feedback}"
        return update
