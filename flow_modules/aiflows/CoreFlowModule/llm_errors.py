"""What went wrong in an LLM call, and whether trying again can help.

litellm 1.0.0 with openai 1.0.0 raises RateLimitError (429) and AuthenticationError (401) as such, but turns every
other HTTP error (400, 403, 404, 5xx) into ``TypeError: APIError.__init__() missing ... 'body'``; the status code
survives only on the ``OpenAIError`` in the exception's context chain. A malformed body surfaces as a raw
``JSONDecodeError``, a refused connection as ``httpx.ConnectError``, a timeout as ``litellm.exceptions.Timeout``.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Callable, Optional, TypeVar

from .errors import JarvisError, LLMCallError

T = TypeVar("T")


class MalformedReply(Exception):
    """The backend answered, but not with a usable message; treated like a malformed body (retried)."""


@dataclass
class LLMErrorInfo:
    retryable: bool
    reason: str  # one line for the user
    retry_after: Optional[float] = None  # seconds the server asked us to wait (Retry-After), if it said


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _raw_messages(error: BaseException) -> str:
    """The exceptions' own texts along the chain (an error body's `code` is there, not in its message)."""
    return " ".join(str(getattr(e, "message", "") or e) for e in _chain(error))


def _server_message(error: BaseException) -> str:
    for e in _chain(error):
        message = getattr(e, "message", None)
        if isinstance(message, str) and message:
            start = message.find("{")  # litellm prefixes the body with "OpenAIException - "
            try:
                body = json.loads(message[start:]) if start >= 0 else None
                if isinstance(body, dict) and isinstance(body.get("error"), dict):
                    return str(body["error"].get("message") or message)[:300]
            except (ValueError, TypeError):
                pass
            return message[:300]
    return ""


def _retry_after(error: BaseException) -> Optional[float]:
    """The wait a server asked for in ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if any.

    litellm keeps the ``httpx.Response`` on its exceptions (``response``), so the headers survive the mapping.
    """
    for e in _chain(error):
        headers = getattr(getattr(e, "response", None), "headers", None)
        if headers is None:
            continue
        try:
            if headers.get("retry-after-ms"):
                return max(0.0, float(headers["retry-after-ms"]) / 1000)
            value = headers.get("retry-after")
            if value:
                try:
                    return max(0.0, float(value))
                except ValueError:
                    return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError, OverflowError):
            continue
    return None


def classify(error: BaseException) -> LLMErrorInfo:
    """Sort an exception from a backend call into retryable (transient) or not, with a reason a user understands."""
    info = _classify(error)
    if info.retryable:
        info.retry_after = _retry_after(error)
    return info


_TIMEOUTS = {"Timeout", "APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout", "TimeoutError"}


def _classify(error: BaseException) -> LLMErrorInfo:
    names = {type(e).__name__ for e in _chain(error)}
    status = next((getattr(e, "status_code") for e in _chain(error)
                   if isinstance(getattr(e, "status_code", None), int)), None)
    detail = _server_message(error)
    suffix = f": {detail}" if detail else ""
    if "ContextWindowExceededError" in names or "maximum context length" in f"{detail} {error}":
        return LLMErrorInfo(False, "the prompt is longer than the model's context window. Use a model with a "
                                   "larger context (e.g. --model gpt-4-1106-preview), or lower max_log_chars / "
                                   "max_result_chars in the configuration")
    if names & _TIMEOUTS:  # before the status: litellm gives its Timeout a status_code of 408
        return LLMErrorInfo(True, "the request timed out")
    if status is not None:
        if status in (401,):
            return LLMErrorInfo(False, f"authentication failed (HTTP 401){suffix}. Check the API key "
                                       "(OPENAI_API_KEY, or AZURE_API_KEY for Azure)")
        if status == 403:
            return LLMErrorInfo(False, f"permission denied (HTTP 403){suffix}")
        if status == 404:
            return LLMErrorInfo(False, f"not found (HTTP 404){suffix}. Check the model name and the API base URL")
        if status == 429 and "insufficient_quota" in f"{detail} {_raw_messages(error)}":
            return LLMErrorInfo(False, f"the account has no quota left (HTTP 429){suffix}. Check the plan and "
                                       "billing of the API key; waiting will not help")
        if status in (501, 505):
            return LLMErrorInfo(False, f"the server does not support this request (HTTP {status}){suffix}. "
                                       "Check the API base URL")
        if status in (408, 409, 425, 429) or status >= 500:
            label = "rate limited" if status == 429 else "server error" if status >= 500 else "temporary error"
            return LLMErrorInfo(True, f"{label} (HTTP {status}){suffix}")
        if 400 <= status < 500:
            return LLMErrorInfo(False, f"the request was rejected (HTTP {status}){suffix}")
    if names & {"ConnectError", "APIConnectionError", "ConnectionError", "RemoteProtocolError", "ReadError",
                "ConnectionRefusedError", "ConnectionResetError"}:
        return LLMErrorInfo(True, f"cannot connect to the LLM server ({error})")
    if names & {"JSONDecodeError", "ResponseNotRead", "MalformedReply"}:
        return LLMErrorInfo(True, "the server sent a malformed response")
    if "RateLimitError" in names:
        return LLMErrorInfo(True, f"rate limited{suffix}")
    if "AuthenticationError" in names:
        return LLMErrorInfo(False, f"authentication failed{suffix}. Check the API key")
    text = str(error)
    if "LLM Provider NOT provided" in text:
        return LLMErrorInfo(False, "litellm 1.0.0 does not know this model name; for an OpenAI-compatible server "
                                   "write it as 'openai/<model>' (run_jarvis.py --model does this for you)")
    return LLMErrorInfo(False, f"{type(error).__name__}: {text[:300]}")


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    initial_delay: float = 2.0
    max_delay: float = 30.0
    backoff: float = 2.0
    jitter: float = 0.2
    max_retry_after: float = 120.0  # the longest wait a server's Retry-After is honoured for

    @classmethod
    def from_config(cls, config: Optional[dict]) -> "RetryPolicy":
        known = {k: v for k, v in (config or {}).items() if k in cls.__dataclass_fields__}
        policy = cls(**known)
        policy.max_attempts = max(1, int(policy.max_attempts))
        return policy

    def delay(self, attempt: int, retry_after: Optional[float] = None) -> float:
        """The wait before attempt ``attempt + 1``: exponential backoff with jitter, or longer if the server asked."""
        base = min(self.max_delay, self.initial_delay * self.backoff ** (attempt - 1))
        wait = max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter)))
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait


def call_with_retries(call: Callable[[], T], policy: RetryPolicy, flow: str,
                      on_retry: Optional[Callable[[int, float, LLMErrorInfo], None]] = None,
                      sleep: Callable[[float], None] = time.sleep) -> tuple:
    """Run ``call``; retry transient failures with exponential backoff. Returns ``(result, retries)``.

    Raises LLMCallError naming ``flow`` and the cause, at once for errors that retrying cannot fix, or after the
    last attempt.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return call(), attempt - 1
        except (KeyboardInterrupt, JarvisError):  # ours already say what happened (e.g. a replay ran out)
            raise
        except Exception as error:  # noqa: BLE001 - classified below
            info = classify(error)
            if not info.retryable:
                raise LLMCallError(f"{flow}: the LLM call failed: {info.reason}", flow=flow, cause=error) from error
            if attempt >= policy.max_attempts:
                raise LLMCallError(
                    f"{flow}: the LLM call failed {attempt} times; last error: {info.reason}. "
                    "Check that the LLM server is reachable and try again later.",
                    flow=flow, cause=error, retryable=True,
                ) from error
            delay = policy.delay(attempt, info.retry_after)
            if on_retry is not None:
                on_retry(attempt, delay, info)
            sleep(delay)
