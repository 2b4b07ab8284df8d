from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow
from aiflows_jarvis.CoreFlowModule.memory import with_memory_files


class CodeWriterFlow(ControllerExecutorFlow):
    """Writes one function for the code library with the user, and tests it, until the code is accepted.

    A controller over `write_code` (an InteractiveCodeGenFlow: the code LLM writes or revises the function, the user
    approves, comments on or edits it), `test` (a TestCodeFlow: compiles, imports, the user's tests, feedback) and
    `ask_user`. The first command is always `write_code` (no LLM call is spent choosing it). The latest code is kept
    in the loop's state, so `test` tests it and the caller gets it.

    *Configuration Parameters*:
    - `memory_files` (dict, optional): used when the input has none; `code_library` is the library file.
    - `commands`: `write_code` (flow: an InteractiveCodeGenFlow, its `CodeGenerator` is the code LLM), `test`
      (TestCodeFlow), `ask_user` (HumanStandardInputFlow) and `finish`; the executor's branches are derived from
      them, and `subflows_config.Executor.subflows_config.<command>` overrides a command's flow.
    - `max_rounds` (int): the most controller rounds.

    *Input Interface*:
    - `goal` (str): what the function must do.
    - `memory_files` (dict): `code_library` is the library file.

    *Output Interface*:
    - `code` (str): the accepted code ("" if none).
    - `summary` (str), `status` (str): `finished`, or `stopped: <why>`.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        input_data = with_memory_files(self, input_data)
        output = super().run(input_data)
        if output.get("status") == "finished" and not str(output.get("code") or "").strip():
            output["status"] = "stopped: the code writer finished without code"
        return output
