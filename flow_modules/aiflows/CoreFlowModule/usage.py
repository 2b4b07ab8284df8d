"""Counting LLM calls and tokens, per call, per flow and in total."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from collections import deque
from typing import Deque, Dict, List

_encoding = None
MAX_CALLS = 10_000


def count_tokens(text: str) -> int:
    """Tokens in ``text`` with the cl100k tokenizer (the package carries it); about len/4 if it cannot load."""
    global _encoding
    if _encoding is None:
        try:
            from .offline import ensure_offline_tokenizer

            ensure_offline_tokenizer()
            import tiktoken

            _encoding = tiktoken.get_encoding("cl100k_base")
        except Exception:  # pragma: no cover - the tokenizer ships with the package
            _encoding = False
    if _encoding is False:
        return max(1, len(text) // 4)
    return len(_encoding.encode(text, disallowed_special=()))


def count_message_tokens(messages: List[dict]) -> int:
    # OpenAI's accounting: about 4 tokens of framing per message plus 3 for the reply's priming.
    return sum(4 + count_tokens(str(m.get("content") or "")) for m in messages) + 3


@dataclass
class FlowUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    retries: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class CallUsage:
    """One LLM call: which flow made it, its tokens, how long it took (retries included) and how many retries."""

    flow: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    retries: int = 0


@dataclass
class UsageMeter:
    """LLM use: every call (``calls``), totals per flow path (``per_flow``) and overall. ``USAGE`` is the
    process-wide one."""

    per_flow: Dict[str, FlowUsage] = field(default_factory=dict)
    # the last calls, one record each (a long run keeps the latest MAX_CALLS; the totals count every call)
    calls: Deque[CallUsage] = field(default_factory=lambda: deque(maxlen=MAX_CALLS))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, flow: str, prompt_tokens: int, completion_tokens: int, seconds: float, retries: int = 0) -> None:
        with self._lock:
            self.calls.append(CallUsage(flow, prompt_tokens, completion_tokens, seconds, retries))
            usage = self.per_flow.setdefault(flow, FlowUsage())
            usage.calls += 1
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.seconds += seconds
            usage.retries += retries

    def total(self) -> FlowUsage:
        out = FlowUsage()
        for usage in self.per_flow.values():
            out.calls += usage.calls
            out.prompt_tokens += usage.prompt_tokens
            out.completion_tokens += usage.completion_tokens
            out.seconds += usage.seconds
            out.retries += usage.retries
        return out

    def reset(self) -> None:
        with self._lock:
            self.per_flow.clear()
            self.calls.clear()

    def summary(self) -> str:
        t = self.total()
        return (f"{t.calls} LLM calls, {t.total_tokens} tokens ({t.prompt_tokens} prompt + "
                f"{t.completion_tokens} completion, counted with cl100k), {t.seconds:.1f}s waiting"
                + (f", {t.retries} retries" if t.retries else ""))


USAGE = UsageMeter()
