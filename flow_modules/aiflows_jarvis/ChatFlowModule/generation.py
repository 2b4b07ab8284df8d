"""Waiting for a chat completion as long as the server writes it, and never sending it twice into a server's queue.

A local server (llama.cpp, llama-cpp-python, vLLM, Ollama) on a laptop writes some 15 tokens a second, one request at
a time: a plan of 1,500 tokens takes 100 s, and a request given up at a timeout is still written to its end before
the next one starts. So a request to an OpenAI-compatible server is streamed: ``request_timeout`` is the longest wait
for the first chunk and between two chunks, never for the whole reply. A stream that stalls is closed (on llama.cpp's
server a closed connection stops the generation) before it is asked again. A reply ends with its finish_reason or
``data: [DONE]``; a stream whose connection closes before either is cut off (``openai_http.StreamCutOff``): no
reply, asked again as a stalled one is.

A server that answers ``stream: true`` with one whole completion does not stream: that is learned at its first reply
(per server, for the run) and it is asked without streaming from then on, with a timeout that grows with
``max_tokens`` at the speed measured on its replies. When such a request times out anyway, the server may still be
writing it: the next attempt waits for about as long as that takes, and the warning says so.

With ``stream_options: {include_usage: true}`` the server counts the tokens (a server that refuses the option is
asked without it); where it does not, the chat counts them. The stream is read through a ``RepetitionGuard``: a reply
that repeats itself is stopped early and its connection closed. The run's ``max_time`` ends a stream still running.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import current_run, get_console, get_run_budget

from . import openai_http
from .repetition import RepetitionGuard
from .responses import ResponseInfo, StreamWatcher, response_info_of

GUESSED_TOKENS_PER_SECOND = 5.0  # a server's speed before one of its replies was measured (a CPU with a small model)
TIMEOUT_MARGIN = 1.5  # a whole reply is waited for this many times as long as its max_tokens take at that speed
DEFAULT_MAX_TOKENS = 1024  # what servers write at most when a request says no max_tokens
MIN_MEASURED_TOKENS = 32  # shorter replies say more about reading the prompt than about writing
_LOCK = threading.Lock()


@dataclass
class ServerPace:
    """What the run learned about how one server (its chat completions URL) answers."""

    url: str
    streams: Optional[bool] = None  # None until its first reply
    usage_option: bool = True  # it accepts stream_options
    tokens_per_second: Optional[float] = None  # measured on whole replies (reading the prompt included)
    announced: bool = False

    def whole_timeout(self, base: float, max_tokens: Optional[int]) -> float:
        """The timeout of a non-streamed request: ``base`` (request_timeout) plus the time ``max_tokens`` take at
        the server's speed, with a margin."""
        return base + TIMEOUT_MARGIN * self.writing_time(max_tokens)

    def writing_time(self, max_tokens: Optional[int]) -> float:
        return (max_tokens or DEFAULT_MAX_TOKENS) / (self.tokens_per_second or GUESSED_TOKENS_PER_SECOND)

    def measure(self, tokens: Optional[int], seconds: float) -> None:
        if not tokens or tokens < MIN_MEASURED_TOKENS or seconds <= 0:
            return
        speed = tokens / seconds
        self.tokens_per_second = speed if self.tokens_per_second is None else (self.tokens_per_second + speed) / 2


def pace_of(url: str) -> ServerPace:
    """The run's ``ServerPace`` of ``url`` (kept with what the run learned of its servers, ``RunContext.servers``)."""
    servers: Dict[Any, Any] = current_run().servers
    with _LOCK:
        pace = servers.get(("pace", url))
        if pace is None:
            pace = servers[("pace", url)] = ServerPace(url)
    return pace


def _run_end() -> Optional[float]:
    """When the run's ``max_time`` is up (``time.monotonic()``), or None."""
    budget = get_run_budget()
    remaining = budget.remaining_time() if budget is not None else None
    return None if remaining is None else time.monotonic() + max(0.0, remaining)


def _time_is_up() -> None:
    late = openai_http.APITimeoutError("the run's time (max_time) is up; the streamed reply was closed")
    late.explained = True
    raise late


def send(request: openai_http.DirectRequest, n: int = 1) -> Tuple[List[dict], ResponseInfo]:
    """Send a chat completion the way its server answers best; returns the messages (one per choice) and the
    ``ResponseInfo``. Errors are ``openai_http``'s."""
    pace = pace_of(request.url)
    if pace.streams is False:
        return _whole(request, pace)
    return _streamed(request, pace, n)


def _streamed(request: openai_http.DirectRequest, pace: ServerPace, n: int) -> Tuple[List[dict], ResponseInfo]:
    body = {**request.body, "stream": True}
    if pace.usage_option:
        body["stream_options"] = {"include_usage": True}
    started = time.monotonic()
    watcher = StreamWatcher(
        openai_http.stream(dataclasses.replace(request, body=body)),
        guard=RepetitionGuard(),
        stop_at=_run_end(),
        on_late=_time_is_up,
    )
    try:
        messages = openai_http.merged_stream_messages(watcher, n)
    except openai_http.APIStatusError as error:
        if error.status_code in (400, 422) and pace.usage_option and "stream_options" in error.message:
            pace.usage_option = False  # an older server that validates its fields: asked again without it
            return _streamed(request, pace, n)
        raise
    info = watcher.info()
    if watcher.whole:
        pace.streams = False
        pace.measure(info.completion_tokens, time.monotonic() - started)
    else:
        pace.streams = True
    _announce(pace, request)
    return messages, info


def _whole(request: openai_http.DirectRequest, pace: ServerPace) -> Tuple[List[dict], ResponseInfo]:
    body = {key: value for key, value in request.body.items() if key not in ("stream", "stream_options")}
    max_tokens = body.get("max_tokens")
    timeout = pace.whole_timeout(request.timeout, max_tokens)
    end = _run_end()
    if end is not None:
        timeout = min(timeout, max(1.0, end - time.monotonic()))
    started = time.monotonic()
    try:
        reply = openai_http.complete(dataclasses.replace(request, body=body, timeout=timeout))
    except openai_http.APITimeoutError as error:
        # The server may still be writing the reply given up on (a closed connection does not stop a non-streamed
        # request everywhere): the next attempt waits as long as writing it takes, not queued behind it.
        # It is slower than thought: at most max_tokens / elapsed; taken at half that, the wait and the next
        # attempt's timeout double at each such timeout.
        elapsed = time.monotonic() - started
        faster = max_tokens / elapsed if max_tokens and elapsed > 0 else GUESSED_TOKENS_PER_SECOND
        pace.tokens_per_second = min(pace.tokens_per_second or GUESSED_TOKENS_PER_SECOND, faster) / 2
        error.retry_after = pace.writing_time(max_tokens)
        error.message = (
            f"no reply within {timeout:.0f} s; the server may still be writing it (it does not stream, "
            "so it cannot be stopped), so the next attempt waits for it to finish"
        )
        error.args, error.explained = (error.message,), True
        raise
    info = response_info_of(reply)
    pace.measure(info.completion_tokens, time.monotonic() - started)
    return [choice["message"] for choice in reply["choices"]], info


def _announce(pace: ServerPace, request: openai_http.DirectRequest) -> None:
    """With --verbose, one line per server at its first reply: how its replies are waited for."""
    with _LOCK:
        if pace.announced:
            return
        pace.announced = True
    from aiflows.utils import logging

    if logging.get_verbosity() > logging.INFO:
        return
    server = request.url[: -len("/chat/completions")] if request.url.endswith("/chat/completions") else request.url
    if pace.streams:
        text = (
            f"The LLM server at {server} streams its replies: each is waited for as long as tokens come (at most "
            f"{request.timeout:g} s without one)."
        )
    else:
        speed = (
            f"{pace.tokens_per_second:.1f} tokens/s measured"
            if pace.tokens_per_second
            else f"{GUESSED_TOKENS_PER_SECOND:g} tokens/s assumed"
        )
        text = (
            f"The LLM server at {server} does not stream: a reply is waited for {request.timeout:g} s plus "
            f"{TIMEOUT_MARGIN:g} times as long as its max_tokens take at {speed}."
        )
    get_console().line("info", text)
