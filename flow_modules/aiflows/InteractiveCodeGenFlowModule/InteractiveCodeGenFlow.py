from __future__ import annotations

import re
from typing import Any, Dict

from aiflows.base_flows import CircularFlow

from flow_modules.aiflows.CoreFlowModule import LeanSequentialFlow
from flow_modules.aiflows.CoreFlowModule.memory import with_memory_files

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

    *Configuration Parameters*:
    - `memory_files` (dict, optional): must hold `code_library` if the input has no `memory_files`.
    - `subflows_config.CodeGenerator`: the code LLM (prompts, backend).
    - `subflows_config.UserReview`: the review step (`editor`, `open_editor`).

    *Input Interface*:
    - `goal` (str): what the function must do (first call) or how to revise it (later calls).
    - `memory_files` (dict): memory name -> path; `code_library` is the library file.
    - `code` (str): the current code, as the user may have edited it ("" at first).

    *Output Interface*:
    - `code` (str): the function as the user left it.
    - `feedback` (str), `approved` (bool), `edited` (bool): see HumanReviewFlow.
    """

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        input_data = with_memory_files(self, input_data)
        return super().run(input_data)

    @CircularFlow.output_msg_payload_processor
    def code_from_reply(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        return {"code": extract_code(output_payload.get("api_output", ""))}
