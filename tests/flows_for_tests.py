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


class EchoToolFlow(LeanAtomicFlow):
    """Stands for MCPToolFlow in a loop's `tools`: says which tool it ran, and with what."""

    __default_flow_config = {
        "name": "tools",
        "description": "Runs a tool of the run.",
        "input_interface": ["tool", "arguments"],
        "output_interface": ["result", "failed"],
    }

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        import json

        return {
            "result": f"ran {input_data['tool']} with {json.dumps(input_data['arguments'], sort_keys=True)}",
            "failed": False,
        }
