"""What a completion said besides its text: token usage, why it ended, the model that answered, for replies whole
or streamed (``StreamWatcher``, which also tells the run's listener each piece of a streamed reply and stops one that
repeats itself)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .openai_http import StreamCutOff


@dataclass
class ResponseInfo:
    """The API's account of one completion: token usage (None when the server did not report it), why the reply
    ended (``"stop"``, ``"length"``: cut by ``max_tokens``, ...; None if unknown) and the model that answered."""

    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    finish_reason: Optional[str] = None
    model: Optional[str] = None

    @property
    def has_usage(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


class Replies(list):
    """A backend's reply messages, with the API's account of the completion (``info``): what a completion said besides
    its text travels with the reply, through whatever wraps the backend (a recorder passes the list on)."""

    def __init__(self, messages: Any = (), info: Optional[ResponseInfo] = None):
        super().__init__(messages)
        self.info = info


def response_info(replies: Any) -> Optional[ResponseInfo]:
    """The ``ResponseInfo`` a backend's reply carries (``Replies``), None when it carries none (a scripted backend, a
    replay: the tokens are then counted)."""
    return getattr(replies, "info", None) if isinstance(replies, Replies) else None


def _field(obj: Any, key: str) -> Any:
    """``obj[key]`` or ``obj.key`` (litellm objects and plain dicts alike), None if absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    try:
        return getattr(obj, key, None)
    except Exception:  # noqa: BLE001 - an odd object has no such field
        return None


def _int_or_none(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _usage_of(response: Any) -> tuple:
    """(prompt_tokens, completion_tokens) from a response's ``usage``, (None, None) if the server sent none.

    litellm 1.0.0's Usage drops zero counts (``if prompt_tokens: ...``): a usage with some counts means the missing
    ones were 0.
    """
    usage = _field(response, "usage")
    counts = [_int_or_none(_field(usage, key)) for key in ("prompt_tokens", "completion_tokens", "total_tokens")]
    prompt, completion, total = counts
    if prompt is None and completion is None and total is None:
        return None, None
    if prompt is None:
        prompt = max(0, (total or 0) - (completion or 0))
    if completion is None:
        completion = max(0, (total or 0) - prompt) if total is not None else 0
    return prompt, completion


def _first_choice_finish_reason(response: Any) -> Optional[str]:
    choices = _field(response, "choices") or []
    for choice in choices:
        if _int_or_none(_field(choice, "index")) in (None, 0):
            reason = _field(choice, "finish_reason")
            return str(reason) if reason else None
    return None


def response_info_of(response: Any) -> ResponseInfo:
    """The ResponseInfo of a non-streamed completion (a litellm ModelResponse or a plain dict)."""
    prompt, completion = _usage_of(response)
    model = _field(response, "model")
    return ResponseInfo(prompt, completion, _first_choice_finish_reason(response), str(model) if model else None)


# Who is told each piece of text a streaming server sends (the console's status line, --stream): set for the time
# of a call by the chat that makes it, in its context (two runs in two threads have their own); a stream takes the
# listener of the call that opens it, so whatever thread then reads it tells that one.
_STREAM_LISTENER: ContextVar = ContextVar("stream_listener", default=None)


@contextmanager
def listening_to_streams(listener: Optional[Callable[[str], None]]):
    """While the body runs, ``listener(text)`` gets each piece of reply text a server streams for a call made in
    this context."""
    token = _STREAM_LISTENER.set(listener)
    try:
        yield
    finally:
        _STREAM_LISTENER.reset(token)


def _delta_text(chunk: Any) -> str:
    for choice in _field(chunk, "choices") or []:
        if _int_or_none(_field(choice, "index")) in (None, 0):
            delta = _field(choice, "delta")
            text = _field(delta, "content") if delta is not None else None
            return str(text) if text else ""
    return ""


class StreamWatcher:
    """Passes a stream's chunks through and notes the model, the first choice's finish_reason and the usage.

    The *first* finish_reason is kept: litellm 1.0.0 appends a chunk of its own with ``finish_reason="stop"`` after
    the server's last one, which would hide a ``"length"``. With a ``guard`` (a ``RepetitionGuard``), a reply that
    repeats itself is stopped: no more chunks are read, the stream is closed (its connection with it, which stops
    the generation on servers that stop on a closed connection) and the finish_reason is ``"repetition"``. With
    ``stop_at`` (a ``time.monotonic()`` time: the run's end), a stream still running then is closed and
    ``on_late()`` raises.

    A chunk of None (litellm 1.0.0's stream for an error reading the body) is a stream cut off
    (``openai_http.StreamCutOff``); with ``ends_with_finish_reason`` (litellm's streams, which give ``data: [DONE]``
    a finish_reason of their own), so is a stream that ends without a finish_reason. (``openai_http.stream`` sees
    the end of its streams itself.)
    """

    def __init__(
        self,
        chunks: Any,
        guard: Any = None,
        stop_at: Optional[float] = None,
        on_late: Optional[Callable[[], None]] = None,
        ends_with_finish_reason: bool = False,
    ):
        self._chunks = chunks
        self.ends_with_finish_reason = ends_with_finish_reason
        self.guard, self.stop_at, self.on_late = guard, stop_at, on_late
        self.finish_reason: Optional[str] = None
        self.model: Optional[str] = None
        self.prompt_tokens: Optional[int] = None
        self.completion_tokens: Optional[int] = None
        self.whole = False  # a whole completion came instead of chunks: the server does not stream
        self.pieces = 0  # chunks that carried text of the first choice
        self.first_piece_at: Optional[float] = None
        self.last_piece_at: Optional[float] = None
        self.listener: Optional[Callable[[str], None]] = _STREAM_LISTENER.get()  # the call's, wherever it is read

    def __iter__(self):
        try:
            for chunk in self._chunks:
                if chunk is None:  # litellm's stream swallowed an error reading the body
                    raise StreamCutOff(
                        "the streamed reply was cut off: the connection was lost after "
                        f"{self.pieces} piece{'s' if self.pieces != 1 else ''} of it"
                    )
                if _field(chunk, "object") == "chat.completion":
                    self.whole = True
                if self.model is None and _field(chunk, "model"):
                    self.model = str(_field(chunk, "model"))
                if self.finish_reason is None:
                    self.finish_reason = _first_choice_finish_reason(chunk)
                prompt, completion = _usage_of(chunk)  # a server sending usage in its last chunk (stream_options)
                if prompt is not None:
                    self.prompt_tokens, self.completion_tokens = prompt, completion
                text = _delta_text(chunk)
                if text:
                    self.pieces += 1
                    self.last_piece_at = time.monotonic()
                    if self.first_piece_at is None:
                        self.first_piece_at = self.last_piece_at
                    if self.listener is not None:
                        self.listener(text)
                yield chunk
                if text and self.guard is not None and self.guard.feed(text) is not None:
                    self.finish_reason = "repetition"
                    return
                if self.stop_at is not None and self.on_late is not None and time.monotonic() > self.stop_at:
                    self.on_late()
            if self.finish_reason is None and self.ends_with_finish_reason:
                raise StreamCutOff(
                    f"the streamed reply was cut off: it ended after {self.pieces} piece"
                    f"{'s' if self.pieces != 1 else ''} of it, before its end (no finish_reason)"
                )
        finally:
            close = getattr(self._chunks, "close", None)
            if callable(close):  # a stream left before its end: its connection is closed, not left half read
                close()

    def info(self) -> ResponseInfo:
        return ResponseInfo(self.prompt_tokens, self.completion_tokens, self.finish_reason, self.model)
