from __future__ import annotations

from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow


class CtrlExMemFlow(ControllerExecutorFlow):
    """Carries out a plan: Controller -> Executor -> MemoryWriting -> MemoryReading, until the controller calls finish.

    The memory is re-read after every command, so the controller's next message tells it what changed (a plan changed
    by `update_plan` or `re_plan`, functions a sub-boss saved, log entries), while its chat, rebuilt once per block
    of calls, stays short. What a round costs does not grow with the round number (see CoreFlowModule/flows/lean.py
    and MemoryReading's `max_log_entries`).

    *Configuration Parameters*:
    - `max_rounds` (int): the most rounds before the loop stops with a status saying so.
    - `commands` (dict): each command once, with the flow that runs it (see ControllerExecutorFlow); the
      controller's commands and the executor's branches are derived from it. The YAML declares the commands every
      boss has; a boss's configuration adds its own (listed first), changes what differs in one, or leaves one out
      (`name: null`).
    - `subflows_config`: `Controller`, `Executor` (a branching flow, one branch per command with a flow; its
      `subflows_config.<command>` overrides that flow), `MemoryWriting`, `MemoryReading` (its `output_interface` =
      the memories the controller sees).

    *Input Interface*:
    - `goal` (str), `memory_files` (dict), `plan` (str), `logs` (str), and any other memory (`code_library`).

    *Output Interface*:
    - `summary` (str), `result` (str), `status` (str): see ControllerExecutorFlow.
    """
