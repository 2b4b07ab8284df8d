"""Small real flows used as executor branches in tests and benchmarks."""
from __future__ import annotations

from typing import Any, Dict

from aiflows_jarvis.CoreFlowModule import LeanAtomicFlow


class WordCountFlow(LeanAtomicFlow):
    """Counts the words of `text`."""

    __default_flow_config = {
        "name": "count_words",
        "description": "Counts the words of a text.",
        "input_interface": ["text"],
        "output_interface": ["result"],
    }

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        return {"result": f"The text has {len(str(input_data['text']).split())} words."}
