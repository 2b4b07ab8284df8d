"""The model of the aiflows loop in the benchmark: a backend with the call shape of aiflows' ``LiteLLMBackend``
(``backend(messages=[...]) -> [{"role": "assistant", "content": ...}]``) that answers from ``CLOCK``."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

CLOCK: Optional[Any] = None  # a rounds.RoundClock, set by the script that runs the loop


class ScriptedBackend:
    def __init__(self, **params: Any):
        self.params = params

    def __call__(self, messages: List[Dict[str, Any]], **kwargs: Any) -> List[Dict[str, str]]:
        if CLOCK is None:
            raise RuntimeError("aiflows_loop.scripted.CLOCK is not set: the scripted backend has no replies")
        return [{"role": "assistant", "content": CLOCK.reply(messages)}]
