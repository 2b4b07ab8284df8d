from __future__ import annotations

import re
from typing import Any, Dict

from aiflows.base_flows import CircularFlow

from aiflows_jarvis.CoreFlowModule import with_memory_files
from aiflows_jarvis.HumanStandardInputFlowModule import InteractiveGenFlow

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)\n?```", re.S)


def extract_code(reply: str) -> str:
    """The code in an LLM reply: the first fenced block (preferring a python one), else the whole reply."""
    blocks = _FENCE.findall(reply or "")
    if blocks:
        python = [code for language, code in blocks if language.lower() in ("python", "py", "python3")]
        return (python[0] if python else blocks[0][1]).strip("\n")
    return (reply or "").strip()


class InteractiveCodeGenFlow(InteractiveGenFlow):
    """Writes one function for the code library with an LLM; the user approves it, comments on it or edits it.

    An InteractiveGenFlow (HumanStandardInputFlowModule: the loop it shares with InteractivePlanGenFlow) over the
    `code`: `MemoryReading` (the library's signatures and docstrings, so the new function can use and does not
    duplicate what exists), `CodeGenerator` (a ChatAtomicFlow; its chat is kept between the calls of one writing
    session so it can revise its code; the code is taken from its reply's fenced block), then `UserReview` (a
    HumanReviewFlow over the `code`, edited as a `.py` file). A reply cut off by the generator's `max_tokens` or
    repeating itself is not shown for review: it is asked for again (`max_code_rewrites` times); if it is still not
    right, the flow returns `approved: false` with feedback saying why, so the controller can split the work.

    *Configuration Parameters*:
    - `memory_files` (dict, optional): must hold `code_library` if the input has no `memory_files`.
    - `max_code_rewrites` (int): how many times code that cannot be shown is asked for again (default 1).
    - `max_code_chars` (int): the longest function, in characters (default 0: no limit).
    - `rewrite_prompts`, `not_shown_advice`: what the generator and the controller are told (see InteractiveGenFlow).
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
        return super().run(with_memory_files(self, input_data))

    @CircularFlow.output_msg_payload_processor
    def code_from_reply(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        return {"code": extract_code(output_payload.get("api_output", ""))}
