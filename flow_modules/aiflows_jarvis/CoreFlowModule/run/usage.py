"""Counting LLM calls, tokens and dollars, per call, per flow and in total.

Tokens come from the API's ``usage`` when the server reports it (``reported=True``), else they are estimated with
the cl100k tokenizer, which is loaded (tens of MB) only then. Dollars come from litellm's price list
(``litellm.model_cost``: per-token prices of prompt and completion, see ``models``); a model it does not know (a local
server's, most often) counts tokens only.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Set, Tuple

from ..console.interaction import meaningful_parts
from .current import current_run

MAX_CALLS = 10_000


@functools.lru_cache(maxsize=None)
def cl100k_tokenizer():
    """The cl100k tokenizer (loaded once per process), or None if it cannot load."""
    try:
        from ..startup.offline import ensure_offline_tokenizer

        ensure_offline_tokenizer()
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # pragma: no cover - the tokenizer ships with the package
        return None


# Counts of the texts counted lately: a chat's prompt is fitted at every call, and its system prompt and earlier
# messages are the same texts each time (a message of megabytes took seconds to count again at every call). Keyed by
# length and hash, not by the text, so that a big text is not kept alive by the cache.
_COUNTS_KEPT = 512
_counts: "OrderedDict[Tuple[int, int], int]" = OrderedDict()
_counts_lock = threading.Lock()
_COUNT_CACHE_MIN_CHARS = 64  # shorter texts are counted faster than looked up


def count_tokens(text: str) -> int:
    """Tokens in ``text`` with the cl100k tokenizer (the package carries it); about len/4 if it cannot load. A text
    counted lately is not counted again."""
    cached = len(text) >= _COUNT_CACHE_MIN_CHARS
    if cached:
        key = (len(text), hash(text))
        with _counts_lock:
            count = _counts.get(key)
            if count is not None:
                _counts.move_to_end(key)
                return count
    encoding = cl100k_tokenizer()
    count = max(1, len(text) // 4) if encoding is None else len(encoding.encode(text, disallowed_special=()))
    if cached:
        with _counts_lock:
            _counts[key] = count
            while len(_counts) > _COUNTS_KEPT:
                _counts.popitem(last=False)
    return count


def tokenizer_loaded() -> bool:
    """Whether ``count_tokens`` has loaded the cl100k tokenizer in this process."""
    return cl100k_tokenizer.cache_info().currsize > 0 and cl100k_tokenizer() is not None


def count_message_tokens(messages: List[dict]) -> int:
    # OpenAI's accounting: about 4 tokens of framing per message plus 3 for the reply's priming.
    return sum(4 + count_tokens(str(m.get("content") or "")) for m in messages) + 3


def message_tokens_at_most(messages: List[dict]) -> int:
    """An upper bound of ``count_message_tokens(messages)`` that needs no tokenizer: a cl100k token is at least one
    byte of UTF-8, so a text has at most as many tokens as bytes."""
    return sum(4 + len(str(m.get("content") or "").encode("utf-8", "surrogatepass")) for m in messages) + 3


def price_of(model: Optional[str]) -> Optional[Tuple[float, float]]:
    """(dollars per prompt token, dollars per completion token) of ``model``, or None if it has no known price:
    litellm's price list, then the later OpenAI models it does not know (see ``models.py``). A provider prefix
    (``openai/``, ``azure/``) is dropped before the look-up."""
    if not model:
        return None
    from .models import model_info

    info = model_info(model)
    return (float(info.prompt_cost), float(info.completion_cost)) if info.priced else None


def cost_of(model: Optional[str], prompt_tokens: int, completion_tokens: int) -> Optional[float]:
    """Dollars for a call of ``model`` with these tokens, or None if the model has no known price."""
    price = price_of(model)
    if price is None:
        return None
    return prompt_tokens * price[0] + completion_tokens * price[1]


@dataclass
class FlowUsage:
    """Totals of one flow (or of the run): calls and tokens; ``cost`` in dollars over the calls whose model has a
    price (``priced``: at least one had; ``unpriced_calls``: how many had none); ``reported_calls``: calls whose
    tokens the API reported (the others are cl100k estimates); ``repairs`` (replies accepted after a lenient repair)
    and ``corrections`` (replies sent back to the model)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    retries: int = 0
    repairs: int = 0
    corrections: int = 0
    cost: float = 0.0
    priced: bool = False
    unpriced_calls: int = 0
    reported_calls: int = 0
    unpriced_models: Set[str] = field(default_factory=set)
    repair_kinds: Dict[str, int] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def estimated_calls(self) -> int:
        return self.calls - self.reported_calls

    def add(self, other: "FlowUsage") -> None:
        for name in (
            "calls",
            "prompt_tokens",
            "completion_tokens",
            "seconds",
            "retries",
            "repairs",
            "corrections",
            "cost",
            "unpriced_calls",
            "reported_calls",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.priced = self.priced or other.priced
        self.unpriced_models |= other.unpriced_models
        for kind, n in other.repair_kinds.items():
            self.repair_kinds[kind] = self.repair_kinds.get(kind, 0) + n


@dataclass(frozen=True)
class CallUsage:
    """One LLM call: which flow made it, its tokens, how long it took (retries included), how many retries, the
    model, whether the API reported the tokens, and its cost (None: the model has no known price)."""

    flow: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    retries: int = 0
    model: Optional[str] = None
    reported: bool = False
    cost: Optional[float] = None


@dataclass
class ToolUsage:
    """The calls of one tool server (an MCP server): how many, how many failed, the seconds waited."""

    calls: int = 0
    failed: int = 0
    seconds: float = 0.0


@dataclass
class UsageMeter:
    """LLM use: every call (``calls``), totals per flow path (``per_flow``) and overall; and the calls of each tool
    server (``per_tool_server``). Each run has its own (``current_run().usage``; ``USAGE`` stands for the current
    run's)."""

    per_flow: Dict[str, FlowUsage] = field(default_factory=dict)
    per_tool_server: Dict[str, ToolUsage] = field(default_factory=dict)
    # the last calls, one record each (a long run keeps the latest MAX_CALLS; the totals count every call)
    calls: Deque[CallUsage] = field(default_factory=lambda: deque(maxlen=MAX_CALLS))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(
        self,
        flow: str,
        prompt_tokens: int,
        completion_tokens: int,
        seconds: float,
        retries: int = 0,
        *,
        model: Optional[str] = None,
        reported: bool = False,
    ) -> CallUsage:
        """Count one call. ``reported``: the tokens are the API's ``usage`` (else cl100k estimates); ``model`` (the
        name litellm or the server gave) prices it from litellm's price list when the model has a price there."""
        prompt_tokens, completion_tokens = int(prompt_tokens or 0), int(completion_tokens or 0)
        cost = cost_of(model, prompt_tokens, completion_tokens)
        call = CallUsage(flow, prompt_tokens, completion_tokens, seconds, retries, model, bool(reported), cost)
        with self._lock:
            self.calls.append(call)
            usage = self.per_flow.setdefault(flow, FlowUsage())
            usage.calls += 1
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.seconds += seconds
            usage.retries += retries
            usage.reported_calls += bool(reported)
            if cost is None:
                usage.unpriced_calls += 1
                if model:
                    usage.unpriced_models.add(model)
            else:
                usage.cost += cost
                usage.priced = True
        return call

    def record_repair(self, flow: str, kind: str) -> None:
        """A reply accepted after a lenient repair (``kind``: "code fence", "prose", "python dict", ...)."""
        with self._lock:
            usage = self.per_flow.setdefault(flow, FlowUsage())
            usage.repairs += 1
            usage.repair_kinds[kind] = usage.repair_kinds.get(kind, 0) + 1

    def record_correction(self, flow: str) -> None:
        """A reply sent back to the model with a correction."""
        with self._lock:
            self.per_flow.setdefault(flow, FlowUsage()).corrections += 1

    def record_tool_call(self, server: str, seconds: float, failed: bool = False) -> None:
        """One call of a tool of ``server`` (an MCP server), how long it took, whether it failed (a tool error, a
        server that stopped or did not answer)."""
        with self._lock:
            usage = self.per_tool_server.setdefault(server, ToolUsage())
            usage.calls += 1
            usage.failed += bool(failed)
            usage.seconds += float(seconds or 0.0)

    def tool_lines(self) -> List[str]:
        """``MCP tool calls: fs 3 (1 failed, 0.4 s), web 1 (2.1 s).``, or nothing when no tool server was called."""
        with self._lock:
            servers = [(name, ToolUsage(u.calls, u.failed, u.seconds)) for name, u in self.per_tool_server.items()]
        if not servers:
            return []
        parts = [
            f"{name} {u.calls} ({f'{u.failed} failed, ' if u.failed else ''}{u.seconds:.1f} s)" for name, u in servers
        ]
        return [f"MCP tool calls: {', '.join(parts)}."]

    def total(self) -> FlowUsage:
        out = FlowUsage()
        with self._lock:
            for usage in self.per_flow.values():
                out.add(usage)
        return out

    def reset(self) -> None:
        with self._lock:
            self.per_flow.clear()
            self.calls.clear()
            self.per_tool_server.clear()

    def summary(self, brief: bool = False) -> str:
        """One line for the end of a run, e.g. "19 LLM calls, 24.7K tokens (21.0K prompt + 3.7K completion,
        reported by the API), $0.81; 3 replies repaired, 1 corrected, 4.2s waiting". ``brief``: without the
        tokens' split and source, which the table below it (``report``) shows."""
        t = self.total()
        if not t.calls:
            return "0 LLM calls" + (f"; {t.repairs} replies repaired" if t.repairs else "")
        line = f"{t.calls} LLM call{'s' if t.calls != 1 else ''}, {tokens_text(t.total_tokens)} tokens"
        if not brief:
            line += (
                f" ({tokens_text(t.prompt_tokens)} prompt + {tokens_text(t.completion_tokens)} completion, "
                f"{_source(t)})"
            )
        line += f", {_cost_summary(t)}"
        extras = []
        if t.repairs:
            extras.append(f"{t.repairs} repl{'ies' if t.repairs != 1 else 'y'} repaired")
        if t.corrections:
            extras.append(f"{t.corrections} corrected")
        if t.retries:
            extras.append(f"{t.retries} retr{'ies' if t.retries != 1 else 'y'}")
        extras.append(f"{t.seconds:.1f}s waiting")
        return f"{line}; {', '.join(extras)}"

    def columns(self) -> Tuple[tuple, List[str], List[tuple], FlowUsage]:
        """The table's parts: its header (``chat``, then the figures' columns: calls, prompt, completion, cost, and
        repaired and corrected only when there were some), the chats (flow paths), the figures of each chat then of
        the total (as text: ``~`` marks estimated tokens, ``-`` an unknown price), and the total."""
        with self._lock:
            rows = [(flow, _copy(usage)) for flow, usage in self.per_flow.items()]
        total = self.total()
        header = ("chat", "calls", "prompt", "completion", "cost", "repaired", "corrected")
        figures = [usage_row("", usage)[1:] for _, usage in rows] + [usage_row("", total)[1:]]
        kept = [i for i in range(len(header) - 1) if i < 4 or any(f[i] != "0" for f in figures)]
        return (
            (header[0],) + tuple(header[i + 1] for i in kept),
            [flow for flow, _ in rows],
            [tuple(f[i] for i in kept) for f in figures],
            total,
        )

    def report(self, width: Optional[int] = None) -> str:
        """A table: one row per chat (flow path) and the total: calls, prompt and completion tokens, cost ("-" when
        no price is known), repairs, corrections; and where the token counts come from.

        width: the columns the table may take (None: as wide as it needs); chat names are shortened to fit, and
        where even short names leave no room (a phone, a split pane) each chat is a name line and a figures line.
        """
        header, flows, figures, total = self.columns()
        rows = [(flow, None) for flow in flows]
        widths = [max(len(r[i]) for r in [header[1:]] + figures) for i in range(len(header) - 1)]
        room = _NAME_WIDTH if width is None else width - sum(widths) - 2 * len(widths)
        if room < _MIN_NAME_WIDTH:
            out = self._stacked([flow for flow, _ in rows], figures, header)
        else:
            names = short_paths([flow for flow, _ in rows], min(room, _NAME_WIDTH))
            table = [header] + [(name,) + f for name, f in zip(names + ["total"], figures)]
            name_width = max(len(r[0]) for r in table)

            def line(r):
                return "  ".join([r[0].ljust(name_width)] + [c.rjust(w) for c, w in zip(r[1:], widths)]).rstrip()

            out = [line(r) for r in table[:-1]]
            out.append("-" * len(line(table[-1])))
            out.append(line(table[-1]))
        note = legend(total)
        if note:
            out.append(note + ".")
        return "\n".join(out + self.tool_lines())

    @staticmethod
    def _stacked(flows: List[str], figures: List[tuple], header: tuple) -> List[str]:
        """The table for a narrow screen: per chat (and the total), its name, then its figures, named."""
        out = []
        for name, values in zip(short_paths(flows) + ["total"], figures):
            out += [name, "  " + ", ".join(f"{what} {value}" for value, what in zip(values, header[1:]))]
        return out


def legend(total: FlowUsage) -> str:
    """What the marks and columns of a usage table mean, each only when the table has it: ``~`` (tokens estimated),
    ``-`` (no price known), ``$`` (priced), repaired and corrected replies; "" when none applies."""
    said = []
    if total.estimated_calls:
        partial = f" for {total.estimated_calls} of {total.calls} calls" if total.reported_calls else ""
        said.append(f"~ estimated with cl100k{partial}")
    if total.unpriced_calls:
        models = sorted(total.unpriced_models)
        said.append(f"- no price for {', '.join(models) if models else 'an unnamed model'}")
    if total.priced:
        said.append("$ from litellm's price list")
    if total.repairs:
        said.append("repaired: replies read once their form was mended (a code fence, a Python dict)")
    if total.corrections:
        said.append("corrected: replies sent back to the model with what was wrong")
    return "; ".join(said)


def _copy(usage: FlowUsage) -> FlowUsage:
    out = FlowUsage()
    out.add(usage)
    return out


def tokens_text(n: int) -> str:
    """``950``, ``24.7K``, ``1.7M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}K"
    return f"{n / 1_000_000:.1f}M"


def dollars(cost: float) -> str:
    if cost == 0:
        return "$0.00"
    if cost < 0.01:
        return f"${cost:.4f}"
    return f"${cost:.2f}"


def _source(usage: FlowUsage) -> str:
    if usage.calls and not usage.estimated_calls:
        return "reported by the API"
    if usage.reported_calls:
        return f"estimated with cl100k for {usage.estimated_calls} of {usage.calls} calls"
    return "estimated with cl100k"


def _cost_summary(usage: FlowUsage) -> str:
    if not usage.priced:
        models = sorted(usage.unpriced_models)
        return f"no price known for {models[0]}" if len(models) == 1 else "cost unknown"
    if usage.unpriced_calls:
        return f"{dollars(usage.cost)} + {usage.unpriced_calls} unpriced call{'s' if usage.unpriced_calls != 1 else ''}"
    return dollars(usage.cost)


def usage_row(name: str, usage: FlowUsage) -> tuple:
    if not usage.priced:
        cost = "-"
    else:
        cost = dollars(usage.cost) + ("+" if usage.unpriced_calls else "")
    estimated = "~" if usage.estimated_calls else ""
    return (
        name,
        str(usage.calls),
        estimated + tokens_text(usage.prompt_tokens),
        estimated + tokens_text(usage.completion_tokens),
        cost,
        str(usage.repairs),
        str(usage.corrections),
    )


_NAME_WIDTH, _MIN_NAME_WIDTH = 52, 16  # the chat column: at most (as wide as needed), and at least (else stacked)


def short_paths(paths: List[str], width: int = _NAME_WIDTH) -> List[str]:
    """Flow paths made short enough for a table: the loop plumbing (CtrlExMem, Executor) and the prefix every path
    shares are dropped, then a path still too long keeps its last parts (".../Controller/ChatAtomicFlow")."""
    if not paths:
        return []
    split = [meaningful_parts(p) for p in paths]
    common = 0
    if len(paths) > 1:
        while all(len(s) > common + 2 for s in split) and len({s[common] for s in split}) == 1:  # 2 parts stay
            common += 1
    out = []
    for parts in split:
        parts = parts[common:]
        name = "/".join(parts)
        while len(name) > width and len(parts) > 1:
            parts = parts[1:]
            name = ".../" + "/".join(parts)
        if len(name) > width:
            name = "..." + name[-(width - 3) :]
        out.append(name)
    return out


class CurrentUsage:
    """The current run's ``UsageMeter`` under one name that modules can import once: every attribute is the meter's
    of ``current_run()`` at the time it is read (``USAGE.summary()``, ``USAGE.total()``, ``USAGE.reset()``)."""

    __slots__ = ()

    @staticmethod
    def _usage() -> "UsageMeter":
        return current_run().usage

    def __getattr__(self, name: str):
        return getattr(self._usage(), name)

    def __repr__(self) -> str:
        return f"USAGE (the current run's): {self._usage().summary()}"


USAGE = CurrentUsage()
