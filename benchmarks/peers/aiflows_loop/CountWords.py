from __future__ import annotations

from typing import Any, Dict

from aiflows.base_flows import AtomicFlow


class CountWords(AtomicFlow):
    """Counts the words of ``text`` (the command the scripted controller issues every round)."""

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        return {"result": f"The text has {len(str(input_data['text']).split())} words."}
