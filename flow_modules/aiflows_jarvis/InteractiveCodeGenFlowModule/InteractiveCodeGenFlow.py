from __future__ import annotations

import re
from typing import Any, Dict

from aiflows.base_flows import CircularFlow

from aiflows_jarvis.CoreFlowModule import LeanSequentialFlow, current_flow_path, get_console
from aiflows_jarvis.CoreFlowModule import with_memory_files
from aiflows_jarvis.HumanStandardInputFlowModule.HumanReviewFlow import review_result

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)\n?```", re.S)


def extract_code(reply: str) -> str:
    """The code in an LLM reply: the first fenced block (preferring a python one), else the whole reply."""
    blocks = _FENCE.findall(reply or "")
    if blocks:
        python = [code for language, code in blocks if language.lower() in ("python", "py", "python3")]
        return (python[0] if python else blocks[0][1]).strip("\n")
    return (reply or "").strip()


class InteractiveCodeGenFlow(LeanSequentialFlow):
    """Writes one function for the code library with an LLM; the user approves it, comments on it or edits it.

    A sequence of `MemoryReading` (the library's signatures and docstrings, so the new function can use and does not
    duplicate what exists), `CodeGenerator` (a ChatAtomicFlow; its chat is kept between calls of one writing session
    so it can revise its code) and `UserReview` (a HumanReviewFlow over the `code`, edited as a `.py` file).

    A reply cut off by the generator's `max_tokens` is not shown for review: the generator is asked again for a
    shorter version (`max_code_rewrites` times); if it is still cut, the flow returns `approved: false` with feedback
    saying why, so the controller can split the work.

    *Configuration Parameters*:
    - `memory_files` (dict, optional): must hold `code_library` if the input has no `memory_files`.
    - `max_code_rewrites` (int): how many times code cut off at the length limit is asked for again (default 1).
    - `subflows_config.CodeGenerator`: the code LLM (prompts, backend).
    - `subflows_config.UserReview`: the review step (`editor`, `open_editor`).

    *Input Interface*:
    - `goal` (str): what the function must do (first call) or how to revise it (later calls).
    - `memory_files` (dict): memory name -> path; `code_library` is the library file.
    - `code` (str): the current code, as the user may have edited it ("" at first).

    *Output Interface*:
    - `code` (str): the function as the user left it.
    - `feedback` (str), `approved` (bool), `edited` (bool): see HumanReviewFlow.
    - `result` (str): the review's outcome as the controller reads it (see HumanReviewFlow's `review_result`).
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        input_data = with_memory_files(self, input_data)
        output = super().run(input_data)
        return {**output, "result": review_result(output, "code", "code", fence="python")}

    def _call_flow_from_state(self, goal, input_interface, flow, output_interface):
        message, output = super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        if flow is not self.subflows.get("CodeGenerator"):
            return message, output
        early_exit_key = self.flow_config.get("early_exit_key", "EARLY_EXIT")
        where = current_flow_path() or self.flow_config["name"]
        most = int(self.flow_config.get("max_code_rewrites", 1) or 0)
        rewrites = 0
        while getattr(flow, "last_finish_reason", None) == "length" and rewrites < most:
            rewrites += 1
            get_console().line("warning", f"{where}: the code was cut off at the reply's length limit; the code "
                                          f"generator is asked for a shorter version (rewrite {rewrites} of {most})")
            instruction = ("Your reply was cut off at the length limit (the most a reply may hold) before the code "
                           "ended. Write it again, shorter: the one function asked for, a concise docstring, no "
                           "comments a reader does not need; if it cannot be short, write only its first part as a "
                           "complete function.")
            data = {**self.flow_state, "goal": instruction, "code": output.get("code", "")}
            message, output = self.call_subflow_with(data, goal, input_interface, flow, output_interface)
        if getattr(flow, "last_finish_reason", None) == "length":
            get_console().line("warning", f"{where}: the code was cut off at the reply's length limit again; it is "
                                          "not shown for review")
            feedback = ("The code was not shown to the user: the code generator's reply was cut off at the length "
                        "limit (max_tokens) before the code ended. Ask for a smaller function, or split the work into "
                        "several functions written one at a time.")
            return message, {"code": output.get("code", ""), "feedback": feedback, "approved": False,
                             "edited": False, early_exit_key: True}
        return message, {**output, early_exit_key: False}

    @CircularFlow.output_msg_payload_processor
    def code_from_reply(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        return {"code": extract_code(output_payload.get("api_output", ""))}
