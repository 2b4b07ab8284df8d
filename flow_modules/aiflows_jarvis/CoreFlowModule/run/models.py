"""What is known about a model: its context window, its prices, and whether it takes a JSON schema as
``response_format``.

litellm 1.0.0's model map (``litellm.model_cost``) knows the models of late 2023 only (gpt-4: 8,192 tokens,
$0.03 / $0.06 per 1K); the few OpenAI models that came later and that users reach for first are added here, with the
figures OpenAI publishes. A model neither knows (every local model) has no price and an unknown context window: a
chat's `context_window` (or the command line's `--context-window N`) says it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional, Tuple

# name: (context window in tokens, $ per prompt token, $ per completion token)
_LATER_OPENAI_MODELS: Dict[str, Tuple[int, float, float]] = {
    "gpt-4o": (128_000, 2.5e-06, 1.0e-05),
    "gpt-4o-2024-05-13": (128_000, 5.0e-06, 1.5e-05),
    "gpt-4o-2024-08-06": (128_000, 2.5e-06, 1.0e-05),
    "gpt-4o-2024-11-20": (128_000, 2.5e-06, 1.0e-05),
    "gpt-4o-mini": (128_000, 1.5e-07, 6.0e-07),
    "gpt-4o-mini-2024-07-18": (128_000, 1.5e-07, 6.0e-07),
    "gpt-4.1": (1_047_576, 2.0e-06, 8.0e-06),
    "gpt-4.1-mini": (1_047_576, 4.0e-07, 1.6e-06),
    "gpt-4.1-nano": (1_047_576, 1.0e-07, 4.0e-07),
    "gpt-4-turbo": (128_000, 1.0e-05, 3.0e-05),
    "gpt-4-turbo-preview": (128_000, 1.0e-05, 3.0e-05),
    "gpt-4-0125-preview": (128_000, 1.0e-05, 3.0e-05),
    "gpt-4-1106-preview": (128_000, 1.0e-05, 3.0e-05),
    "gpt-3.5-turbo-0125": (16_385, 5.0e-07, 1.5e-06),
    "gpt-3.5-turbo-1106": (16_385, 1.0e-06, 2.0e-06),
}

# Models whose API takes {"type": "json_schema", ...} (OpenAI's structured outputs): the gpt-4o family from
# 2024-08-06 on, gpt-4.1, o1/o3/o4 and later. Matched on the name without provider prefix.
_JSON_SCHEMA_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_JSON_SCHEMA_EXCEPTIONS = ("gpt-4o-2024-05-13",)
# Models whose API takes only {"type": "json_object"}.
_JSON_OBJECT_MODELS = (
    "gpt-4-turbo",
    "gpt-4-1106-preview",
    "gpt-4-0125-preview",
    "gpt-3.5-turbo-1106",
    "gpt-3.5-turbo-0125",
    "gpt-4o-2024-05-13",
)


@dataclass(frozen=True)
class ModelInfo:
    name: str  # without provider prefix
    context_window: Optional[int] = None  # tokens, prompt and reply together
    prompt_cost: Optional[float] = None  # $ per prompt token
    completion_cost: Optional[float] = None  # $ per completion token

    @property
    def priced(self) -> bool:
        return self.prompt_cost is not None and self.completion_cost is not None


def bare_name(model: str) -> str:
    """``openai/gpt-4o`` -> ``gpt-4o``; ``azure/gpt-4`` -> ``gpt-4``."""
    model = str(model or "").strip()
    for prefix in ("openai/", "azure/", "custom_openai/"):
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


@lru_cache(maxsize=256)
def model_info(model: str) -> ModelInfo:
    """Context window and prices of ``model`` (litellm's map first, then the later OpenAI models above)."""
    name = bare_name(model)
    try:
        from ..startup.offline import litellm_model_cost

        cost_map = litellm_model_cost() or {}
    except Exception:  # pragma: no cover - litellm is a dependency; a broken install still runs without prices
        cost_map = {}
    entry = cost_map.get(str(model)) or cost_map.get(name)
    if isinstance(entry, dict):
        window = entry.get("max_input_tokens") or entry.get("max_tokens")
        return ModelInfo(
            name,
            int(window) if isinstance(window, (int, float)) and window > 0 else None,
            entry.get("input_cost_per_token"),
            entry.get("output_cost_per_token"),
        )
    if name in _LATER_OPENAI_MODELS:
        window, prompt_cost, completion_cost = _LATER_OPENAI_MODELS[name]
        return ModelInfo(name, window, prompt_cost, completion_cost)
    return ModelInfo(name)


def openai_response_format_support(model: str) -> str:
    """What OpenAI's (or Azure's) API takes as ``response_format`` for ``model``: ``json_schema``, ``json_object``
    or ``off`` (gpt-4 and gpt-3.5-turbo of 2023 refuse the parameter)."""
    name = bare_name(model)
    if name in _JSON_SCHEMA_EXCEPTIONS or any(name == m or name.startswith(m + "-") for m in _JSON_OBJECT_MODELS):
        return "json_object"
    if any(name == p or name.startswith(p + "-") or name.startswith(p + ".") for p in _JSON_SCHEMA_PREFIXES):
        return "json_schema"
    return "off"
