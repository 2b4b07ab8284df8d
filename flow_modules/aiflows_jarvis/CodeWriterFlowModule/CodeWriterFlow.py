from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.ControllerFlowModule import ControllerExecutorFlow
from aiflows_jarvis.CoreFlowModule import with_memory_files


class CodeWriterFlow(ControllerExecutorFlow):
    """Writes one function for the code library with the user, and tests it, until the code is accepted.

    A controller-executor loop whose commands (`commands` in CodeWriterFlow.yaml) have the function written or
    revised (the code LLM writes, the user approves, comments on or edits it), test it with the user, and ask the
    user. The first command, `write_code`, is made by code (no LLM call is spent choosing it). The latest code is
    kept in the loop's state, so the tests test it and the caller gets it.

    *Configuration Parameters*:
    - `memory_files` (dict, optional): used when the input has none; `code_library` is the library file.
    - `commands` (dict): each command with the flow that runs it (see ControllerExecutorFlow);
      `subflows_config.Executor.subflows_config.<command>` overrides a command's flow (`write_code`'s
      `CodeGenerator` is the code LLM).
    - `max_rounds` (int): the most controller rounds.

    *Input Interface*:
    - `goal` (str): what the function must do.
    - `memory_files` (dict): `code_library` is the library file.

    *Output Interface*:
    - `code` (str): the accepted code ("" if none).
    - `summary` (str), `status` (str): `finished`, or `stopped: <why>`.
    - `accepted` (bool): the code passed its last test and the user had nothing against the results (a finish
      without that, "it cannot be done", is not an acceptance).
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        input_data = with_memory_files(self, input_data)
        output = super().run(input_data)
        if output.get("status") == "finished" and not str(output.get("code") or "").strip():
            output["status"] = "stopped: the code writer finished without code"
        output["accepted"] = bool(self.flow_state.get("accepted")) and output.get("status") == "finished"
        return output

    def on_branch_output(self, branch: str, output: Dict[str, Any]) -> Dict[str, Any]:
        update = super().on_branch_output(branch, output)
        if branch == "test":  # the code as it is now passed its tests and the user had nothing against the results
            update["accepted"] = bool(output.get("passed")) and not str(output.get("feedback") or "").strip()
        elif branch == "write_code":  # new code: not tested yet
            update["accepted"] = False
        return update
