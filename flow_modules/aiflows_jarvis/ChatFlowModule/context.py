"""Prompts that fit: a chat's prompt plus its reply's ``max_tokens`` within the model's context window.

The memory injected into prompts is read within character budgets, but a model with a small window (a local server
started with ``--n_ctx 4096``) or a long library can still overflow it. Before each call the prompt is counted
(cl100k, with a margin for other tokenizers; the tokenizer is loaded only for a prompt whose UTF-8 size does not
already prove it fits) and, if it does not fit, shortened in this order:

1. the inputs named in the chat's ``shrinkable_inputs``, in that order: log entries oldest first (a line says how
   many were left out), other texts cut to the share of the window they may take (at most halved at a time),
   keeping their head and tail, down to ``min_input_chars``. A text too long to fit whatever its tokens (more than
   128 UTF-8 bytes, the longest cl100k token, per token of the budget) is cut before it is counted;
2. the earlier messages of the chat's window (the last reply, kept short); a chat laid out in blocks
   (``layout.py``) first starts a new block, whose snapshot of the memory is then shortened as in 1;
3. the reply's ``max_tokens``, down to ``min_reply_tokens``.

A prompt that still does not fit is never sent: ``ContextOverflow`` says how long it is and what to do; when the goal
is what does not fit (the prompt would without it), it says so: a long text belongs in a file the goal names.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import (
    LLMCallError,
    count_message_tokens,
    count_tokens,
    get_console,
    message_tokens_at_most,
    shorten,
    split_log_entries,
)

DEFAULT_SHRINKABLE = ("logs", "code_library", "result", "last_result", "feedback", "plan")


class ContextOverflow(LLMCallError):
    """The prompt does not fit the model's context window even shortened: it is not sent."""


def margin(window: int) -> int:
    """Tokens kept free: cl100k counts are estimates, and other models' tokenizers differ (about 10%)."""
    return max(32, window // 10)


def shrink_logs(text: str) -> Optional[str]:
    """The logs with the older half of their entries left out (a line says how many), or None if one entry is left."""
    entries = split_log_entries(text)
    if len(entries) <= 1:
        return None
    keep = entries[len(entries) // 2 :]
    left_out = keep[0][0] - 1
    return f"[{left_out} earlier entries are left out to fit the model's context window]\n" + "\n".join(
        entry for _, entry in keep
    )


def shrink_text(text: str, floor: int, target: Optional[int] = None) -> Optional[str]:
    """``text`` cut to ``target`` characters, at most half of it (head and tail kept), or None when it is already at
    ``floor`` characters or fewer."""
    if len(text) <= floor:
        return None
    size = len(text) // 2 if target is None else min(len(text) // 2, target)
    smaller = shorten(text, max(floor, size))
    return smaller if len(smaller) < len(text) else None  # the "[... cut ...]" line must not make it grow


MAX_TOKEN_BYTES = 128  # the longest cl100k token, in UTF-8 bytes: a text has at least len(bytes) / 128 tokens


def bound_before_counting(data: Dict[str, Any], keys: List[str], budget: int, floor: int) -> List[str]:
    """Cut the inputs of ``keys`` that could not fit ``budget`` tokens whatever their tokens (a run's output of
    megabytes): tokenizing them whole would take seconds and hundreds of megabytes. Returns the keys cut."""
    limit = max(floor, budget * MAX_TOKEN_BYTES)
    cut = []
    for key in keys:
        text = data.get(key)
        if isinstance(text, str) and len(text) > limit and len(text.encode("utf-8", "surrogatepass")) > limit:
            data[key] = shorten(text, limit)
            cut.append(key)
    return cut


def _share(text: str, messages: List[dict], tokens: int, budget: int) -> int:
    """The characters of ``text`` to keep for the prompt (``messages``, ``tokens`` long) to come within ``budget``,
    with a tenth to spare: its tokens are taken as its share of the prompt's characters (counting them would take
    as long again)."""
    total = sum(len(str(m.get("content") or "")) for m in messages) or 1
    own = tokens * min(1.0, len(text) / total)
    keep = own - (tokens - budget)
    return int(len(text) * max(0.0, keep) / max(1.0, own) * 0.9)


def fit_to_context(flow: Any, user_message: str, extra: List[dict]) -> Tuple[List[dict], Optional[int]]:
    """The messages to send for this turn, and the reply's ``max_tokens`` if it had to be lowered (else None).

    ``flow`` is a ChatAtomicFlow that prepared the turn (``prepare_turn``): its pending input and system message.
    Updates the flow's pending system message and fitted user message when they were shortened.
    """
    config = flow.flow_config
    system = flow._pending_system_message
    messages = flow._assemble(system, user_message, extra)
    if config.get("fit_to_context") is False:
        return messages, None
    window = flow._context_window()
    reply_tokens = flow.reply_tokens()
    budget = window - reply_tokens - margin(window)
    most = message_tokens_at_most(messages)
    if most <= budget:  # fits for sure: no need to load the tokenizer
        return messages, None
    data: Dict[str, Any] = dict(flow._pending_input or {})
    floor = int(config.get("min_input_chars") or 200)
    keys = list(config.get("shrinkable_inputs") or DEFAULT_SHRINKABLE)
    shortened: List[str] = bound_before_counting(data, keys, budget, floor)
    if shortened:
        system, user_message, messages = _render(flow, data, system, extra)
    tokens = count_message_tokens(messages)
    rebuild = getattr(flow, "rebuild_to_fit", None)
    if tokens > budget and rebuild is not None and rebuild(data):
        # a chat laid out in blocks starts a new one: its memory is then in this turn, and can be shortened
        user_message = flow._fitted_user_message
        messages = flow._assemble(system, user_message, extra)
        tokens = count_message_tokens(messages)
    if tokens <= budget and not shortened:
        return messages, None

    # (a prompt cut before it was counted was at least this long: a token is at most MAX_TOKEN_BYTES bytes)
    first_tokens = max(tokens, most // MAX_TOKEN_BYTES) if shortened else tokens
    at_least = "at least " if shortened else ""
    for key in keys:
        while tokens > budget and isinstance(data.get(key), str):
            smaller = shrink_logs(data[key]) if key == "logs" else None
            smaller = (
                smaller
                if smaller is not None
                else shrink_text(data[key], floor, _share(data[key], messages, tokens, budget))
            )
            if smaller is None:
                break
            data[key] = smaller
            if key not in shortened:
                shortened.append(key)
            system, user_message, messages = _render(flow, data, system, extra)
            tokens = count_message_tokens(messages)
    for limit in (2000, 500):
        if tokens <= budget:
            break
        messages = flow._assemble(system, user_message, extra, earlier_limit=limit)
        tokens = count_message_tokens(messages)
        if "earlier messages" not in shortened:
            shortened.append("earlier messages")

    flow._pending_system_message = system
    flow._fitted_user_message = user_message
    where = flow._where()
    max_tokens = None
    if tokens > budget:
        room = window - margin(window) - tokens
        minimum = int(config.get("min_reply_tokens") or 256)
        if room < minimum:
            server = flow._server()
            goal = data.get("goal")
            goal_tokens = _goal_tokens(goal, messages)
            if goal_tokens and tokens - goal_tokens <= window - margin(window) - minimum:
                raise ContextOverflow(
                    f"{where}: the goal itself ({len(goal):,} characters, about {goal_tokens:,} tokens in the prompt) "
                    f"is what does not fit {server.label}'s context window of {window} tokens, with the rest of the "
                    f"prompt and a reply of at least {minimum} tokens, so it was not sent. Shorten the goal: put the "
                    'long text in a file and name the file in the goal ("Summarise notes.txt"), where the code can '
                    "read it.",
                    flow=where,
                )
            raise ContextOverflow(
                f"{where}: the prompt ({tokens} tokens, shortened from {at_least}{first_tokens}) and a reply of at "
                f"least {minimum} tokens do not fit {server.label}'s context window of {window} tokens, so it was not "
                f"sent. {overflow_advice(server)}",
                flow=where,
            )
        max_tokens = room
        shortened.append(f"the reply's max_tokens ({reply_tokens} -> {room})")
    if config.get("announce_fitting", True):
        get_console().line(
            "info",
            f"{where}: the prompt was {at_least}{first_tokens} tokens; shortened to {tokens} to "
            f"fit the context window of {window} (shortened: {', '.join(shortened)}).",
        )
    return messages, max_tokens


def _goal_tokens(goal: Any, messages: List[dict]) -> int:
    """The tokens the goal takes in ``messages`` (each time it is in them), 0 when it is not one of its texts."""
    if not isinstance(goal, str) or len(goal) < 2:
        return 0
    times = sum(str(m.get("content") or "").count(goal) for m in messages)
    return times * count_tokens(goal) if times else 0


def _render(flow: Any, data: Dict[str, Any], system: str, extra: List[dict]) -> Tuple[str, str, List[dict]]:
    """The system message, the user message and the messages for the (shortened) input ``data``."""
    if flow._system_from_input:
        system = flow._render_system_message(data)
    user_message = flow._render_user_message(data)
    return system, user_message, flow._assemble(system, user_message, extra)


def overflow_advice(server: Any) -> str:
    """What to do about a prompt too long for the model, for this kind of server."""
    from .llm_errors import context_window_advice

    return context_window_advice(server.provider())
