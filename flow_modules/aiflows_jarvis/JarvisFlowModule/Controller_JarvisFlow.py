from __future__ import annotations

from aiflows_jarvis.ControllerFlowModule import ControllerAtomicFlow


class Controller_JarvisFlow(ControllerAtomicFlow):
    """The controller of JarvisFlow: from the plan, the logs of previous commands and the last result (or the user's
    feedback), it decides which executor to call next, or to finish.

    *Configuration Parameters*:
    - `commands` (dict): the commands it can call (name, description, input arguments), injected into the system
      prompt. They are declared once, with their flows, in the `commands` of its loop (CtrlExMem_JarvisFlow.yaml,
      merged over CtrlExMemFlow.yaml), which gives them to it.
    - `system_message_prompt_template` (dict): the head, with the goal and the commands; the same on every call. The
      plan, its file's location and the logs come in messages (ControllerAtomicFlow's `memory_message_prompt_template`
      and `memory_updates`), appended to and rebuilt once per block (`prompt_blocks`).

    *Input Interface Non Initialized*:
    - `goal` (str), `memory_files` (dict), `plan` (str), `logs` (str).

    *Input Interface Initialized*:
    - `result` (str): the result of the previous command; and `goal`, `memory_files`, `plan`, `logs`.

    *Output Interface*:
    - `command` (str), `command_args` (dict).
    """
