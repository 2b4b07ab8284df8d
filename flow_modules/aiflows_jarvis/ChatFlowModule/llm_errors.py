"""What went wrong in an LLM call, and whether trying again can help.

litellm 1.0.0 with openai 1.0.0 raises RateLimitError (429) and AuthenticationError (401) as such, but turns every
other HTTP error (400, 403, 404, 5xx) into ``TypeError: APIError.__init__() missing ... 'body'``; the status code
survives only on the ``OpenAIError`` in the exception's context chain. A malformed body surfaces as a raw
``JSONDecodeError`` (``UnicodeDecodeError`` when it is not UTF-8), a refused connection as ``httpx.ConnectError``, a
timeout as ``litellm.exceptions.Timeout``.

``classify`` sorts them into a ``kind`` (context_window, timeout, rate_limit, auth, bad_request, server, connection,
malformed, other) with the HTTP status and the server's own message; 400 and 422 (the validation error of FastAPI
servers: llama-cpp-python, vLLM) are bad requests, not retried. ``call_with_retries`` retries the transient ones
within a deadline for the whole call.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Dict, Optional, TypeVar
from urllib.parse import urljoin, urlsplit

from aiflows_jarvis.CoreFlowModule import JarvisError, LLMCallError

T = TypeVar("T")


class MalformedReply(Exception):
    """The backend answered, but not with a usable message; treated like a malformed body (retried)."""


@dataclass
class LLMErrorInfo:
    retryable: bool
    reason: str  # one line for the user
    retry_after: Optional[float] = None  # seconds the server asked us to wait (Retry-After), if it said
    kind: str = "other"  # one of KINDS
    status: Optional[int] = None  # the HTTP status, when there was one
    detail: str = ""  # the server's own message (its error body's `message`, FastAPI's `detail`, ...), if any


KINDS = ("context_window", "timeout", "rate_limit", "auth", "bad_request", "server", "connection", "malformed", "other")

Provider = Optional[Dict[str, Any]]  # {"model": ..., "api_base": ..., "backend_used": ...}


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _raw_messages(error: BaseException) -> str:
    """The exceptions' own texts along the chain (an error body's `code` is there, not in its message)."""
    return " ".join(str(getattr(e, "message", "") or e) for e in _chain(error))


_BODY_EXTRAS = ("n_prompt_tokens", "n_ctx", "max_model_len")  # llama.cpp's server adds its context size


def _body_message(body: Any) -> Optional[str]:
    """The human part of an error body: OpenAI's ``{"error": {"message"}}``, ``{"error": "..."}``, vLLM's
    ``{"object": "error", "message"}`` or FastAPI's ``{"detail": [{"loc", "msg"}]}`` (llama-cpp-python, vLLM)."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        text = str(error.get("message") or json.dumps(error))
        extras = [f"{k}: {error[k]}" for k in _BODY_EXTRAS if k in error]
        return f"{text} ({', '.join(extras)})" if extras else text
    if isinstance(error, str) and error:
        return error
    detail = body.get("detail")
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = ".".join(str(x) for x in item.get("loc") or [])
                parts.append(f"{loc}: {item.get('msg')}" if loc else str(item.get("msg")))
            else:
                parts.append(str(item))
        return "; ".join(parts) or None
    if isinstance(detail, str) and detail:
        return detail
    if isinstance(body.get("message"), str) and body["message"]:
        return body["message"]
    return None


def _server_message(error: BaseException, limit: int = 2000) -> str:
    """The server's own words along the chain (its error body's message when the body is JSON), else the first
    exception message; at most ``limit`` characters."""
    for e in _chain(error):
        message = getattr(e, "message", None)
        if isinstance(message, str) and message:
            start = message.find("{")  # litellm prefixes the body with "OpenAIException - "
            try:
                text = _body_message(json.loads(message[start:])) if start >= 0 else None
                if text:
                    return text[:limit]
            except (ValueError, TypeError, RecursionError):
                pass
            return message[:limit]
    return ""


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _retry_after(error: BaseException) -> Optional[float]:
    """The wait a server asked for in ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if any.

    litellm keeps the ``httpx.Response`` on its exceptions (``response``), so the headers survive the mapping.
    """
    for e in _chain(error):
        own = getattr(e, "retry_after", None)  # a sender that knows how long the server stays busy
        if isinstance(own, (int, float)) and not isinstance(own, bool):
            return max(0.0, float(own))
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


def classify(error: BaseException, provider: Provider = None) -> LLMErrorInfo:
    """Sort an exception from a backend call into retryable (transient) or not, with a reason a user understands.

    ``provider`` (``{"model", "api_base", "backend_used"}``) makes the advice fit the server (e.g. for a prompt
    longer than the context window: restart a local server with a larger context, or pick another OpenAI model).
    """
    info = _classify(error, provider)
    if info.retryable:
        info.retry_after = _retry_after(error)
    return info


_TIMEOUTS = {"Timeout", "APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout", "TimeoutError"}

# How servers say the prompt (plus the reply's max_tokens) does not fit: OpenAI and vLLM ("This model's maximum
# context length is N tokens"; code context_length_exceeded), llama.cpp's server ("the request exceeds the available
# context size"), llama-cpp-python ("Requested tokens (N) exceed context window of M"), Ollama ("the input length
# exceeds the context length"), LM Studio, TGI, Anthropic-style ("prompt is too long").
_CONTEXT_OVERFLOW = re.compile(
    r"maximum context length|context[_ ]length[_ ]exceeded|exceeds? the available context size"
    r"|requested tokens \(\d+\) exceeds? (?:the )?context window|exceeds? (?:the )?context (?:window|length|size)"
    r"|prompt is too long|greater than the context length|context overflow"
    r"|inputs` tokens \+ `max_new_tokens` must be",
    re.I,
)
_STATED_WINDOW = re.compile(
    r"(?:maximum context length is|context window of|context (?:size|length) (?:is|of)"
    r"|n_ctx\W{0,4}|max_model_len\W{0,4})\s*(\d{3,7})",
    re.I,
)


def _provider_kind(provider: Provider) -> str:
    """ "openai", "azure", "other" (a server of someone else's: local llama.cpp, vLLM, Ollama, ...) or "unknown"."""
    if not provider:
        return "unknown"
    model = str(provider.get("model") or "")
    api_base = str(provider.get("api_base") or "")
    if provider.get("backend_used") == "azure" or model.startswith("azure/") or ".azure.com" in api_base:
        return "azure"
    if not api_base or "api.openai.com" in api_base:
        return "openai"
    return "other"


_SHRINK = "or lower max_log_chars / max_result_chars in the configuration"


def context_window_advice(provider: Provider = None, detail: str = "") -> str:
    """What the user can do about a prompt longer than the context window, for this provider."""
    match = _STATED_WINDOW.search(detail or "")
    window = int(match.group(1)) if match else None
    said = f" ({window} tokens, says the server)" if window else ""
    kind = _provider_kind(provider)
    if kind == "other":
        where = f"the server at {provider.get('api_base')}"
        keep = (
            (
                f"; or, to keep the server as it is, set `context_window: {window}` (--context-window {window}) so "
                "prompts are shortened to fit it"
            )
            if window
            else ""
        )
        return (
            f"the prompt is longer than the model's context window{said}. Restart {where} with a larger "
            f"context (llama.cpp: --ctx-size N; llama-cpp-python: --n_ctx N; vLLM: --max-model-len N; "
            f"Ollama: the num_ctx option) and set the chat's `context_window` to match it (command line: "
            f"--context-window N){keep}; "
            f"{_SHRINK}"
        )
    if kind == "azure":
        return (
            f"the prompt is longer than the model's context window{said}. Use an Azure deployment of a model "
            f"with a larger context window, {_SHRINK}"
        )
    if kind == "openai":
        return (
            f"the prompt is longer than the model's context window{said}. Use a model with a larger context "
            f"window (e.g. `model_name: gpt-4o`; command line: --model gpt-4o), {_SHRINK}"
        )
    return (
        f"the prompt is longer than the model's context window{said}. Use a model with a larger context window "
        "(a local server: restart it with a larger context, e.g. llama.cpp --ctx-size N, and set the chat's "
        f"`context_window` to match it; command line: --context-window N), {_SHRINK}"
    )


_VALIDATION_ERROR = re.compile(r"validation error.*'loc'|literal_error|Input should be", re.S)
_REDIRECTS = {
    301: "Moved Permanently",
    302: "Found",
    303: "See Other",
    307: "Temporary Redirect",
    308: "Permanent Redirect",
}
_COMPLETIONS_PATH = "/chat/completions"


def _header(error: BaseException, name: str) -> Optional[str]:
    """A header of the server's answer along the chain (``response.headers``), if any."""
    for e in _chain(error):
        headers = getattr(getattr(e, "response", None), "headers", None)
        try:
            value = headers.get(name) if headers is not None else None
        except (AttributeError, TypeError):
            value = None
        if value:
            return str(value)
    return None


def _api_base(provider: Provider) -> str:
    return str((provider or {}).get("api_base") or "").rstrip("/")


def redirect_reason(status: int, location: Optional[str], provider: Provider = None, url: str = "") -> str:
    """What to say of a redirect from the LLM server: it is never followed (the request carries the API key), so
    the user is told where the server points and which ``--api-base`` that means."""
    api_base = _api_base(provider)
    asked = url or (api_base + _COMPLETIONS_PATH if api_base else "")
    what = f"HTTP {status} {_REDIRECTS.get(status, 'redirect')}"
    where = f"the server at {api_base}" if api_base else "the LLM server"
    if not location:
        return (
            f"{where} answered with a redirect ({what}) that names no new address; it was not followed. "
            "Check the API base URL (--api-base): its scheme (https), host and path"
        )
    target = urljoin(asked, location) if asked else location
    base = target[: -len(_COMPLETIONS_PATH)] if target.rstrip("/").endswith(_COMPLETIONS_PATH) else None
    old, new = urlsplit(asked), urlsplit(target)
    if old.scheme == "http" and new.scheme == "https" and old.hostname == new.hostname:
        advice = f"the server wants https: use --api-base {base or api_base.replace('http://', 'https://', 1)}"
    elif base:
        advice = f"use --api-base {base.rstrip('/')} (api_base in a configuration)"
    else:
        advice = (
            "check the API base URL (--api-base): it should be the address that ends before "
            f"{_COMPLETIONS_PATH} (often .../v1)"
        )
    return (
        f"{where} redirects the request ({what}) to {_short(target, 200)}; it was not followed, as it would "
        f"send the API key to another address. {advice[0].upper()}{advice[1:]}"
    )


def _sent_url_credentials(error: BaseException, provider: Provider = None) -> bool:
    """Whether the request carried the user and password of the API base (HTTP Basic authentication, sent in place
    of the API key by Jarvis's transport and by litellm's httpx alike), not the key."""
    if any(getattr(e, "sent_credentials", False) is True for e in _chain(error)):
        return True
    try:
        return "@" in urlsplit(_api_base(provider)).netloc
    except ValueError:
        return False


def _refused(error: BaseException) -> bool:
    """The connection was refused: nothing listens at that host and port, and asking again will not change that."""
    for e in _chain(error):
        if isinstance(e, ConnectionRefusedError):
            return True
        if re.search(r"connection refused|errno 111\b|\[winerror 10061\]", str(e), re.I):
            return True
    return False


def _classify(error: BaseException, provider: Provider = None) -> LLMErrorInfo:
    names = {type(e).__name__ for e in _chain(error)}
    status = next(
        (getattr(e, "status_code") for e in _chain(error) if isinstance(getattr(e, "status_code", None), int)), None
    )
    detail = _server_message(error)
    short = _short(detail)
    suffix = f": {short}" if short else ""

    def info(retryable: bool, reason: str, kind: str) -> LLMErrorInfo:
        return LLMErrorInfo(retryable, reason, kind=kind, status=status, detail=detail)

    # Jarvis's own HTTP client says what happened (a stalled stream, a server still writing, a cut stream): its words
    own = next(
        (
            e.message
            for e in _chain(error)
            if getattr(e, "explained", False) is True and isinstance(getattr(e, "message", None), str)
        ),
        None,
    )
    if "ContextWindowExceededError" in names or _CONTEXT_OVERFLOW.search(f"{detail} {_raw_messages(error)}"):
        return info(False, context_window_advice(provider, detail), "context_window")
    if names & _TIMEOUTS:  # before the status: litellm gives its Timeout a status_code of 408
        return info(True, own or "the request timed out", "timeout")
    if status is not None:
        if status in (401,) and _sent_url_credentials(error, provider):
            return info(
                False,
                f"authentication failed (HTTP 401){suffix}. The server refused the user name and "
                "password in the API base URL (http://USER:PASSWORD@host/..., sent as HTTP Basic "
                "authentication): check them (with --resume the password comes from "
                "JARVIS_API_BASE_PASSWORD)",
                "auth",
            )
        if status in (401,):
            return info(
                False,
                f"authentication failed (HTTP 401){suffix}. Check the API key "
                "(OPENAI_API_KEY, or AZURE_API_KEY for Azure)",
                "auth",
            )
        if status == 403:
            return info(False, f"permission denied (HTTP 403){suffix}", "auth")
        if status == 404:
            return info(
                False, f"not found (HTTP 404){suffix}. Check the model name and the API base URL", "bad_request"
            )
        if status == 429 and "insufficient_quota" in f"{detail} {_raw_messages(error)}":
            return info(
                False,
                f"the account has no quota left (HTTP 429){suffix}. Check the plan and "
                "billing of the API key; waiting will not help",
                "rate_limit",
            )
        if status in (501, 505):
            return info(
                False,
                f"the server does not support this request (HTTP {status}){suffix}. Check the API base URL",
                "server",
            )
        if status >= 500 and _VALIDATION_ERROR.search(detail):
            # llama-cpp-python's server answers a request it cannot validate (e.g. a response_format it does not
            # take) with HTTP 500 and pydantic's message: the request is wrong, and asking again will not help.
            return info(False, f"the request was rejected (HTTP {status}){suffix}", "bad_request")
        if status in (408, 409, 425, 429) or status >= 500:
            if status == 429:
                return info(True, f"rate limited (HTTP 429){suffix}", "rate_limit")
            if status >= 500:
                return info(True, f"server error (HTTP {status}){suffix}", "server")
            return info(True, f"temporary error (HTTP {status}){suffix}", "timeout" if status == 408 else "server")
        if 400 <= status < 500:  # 400, 422 (FastAPI servers' validation error), ...: the request itself is wrong
            return info(False, f"the request was rejected (HTTP {status}){suffix}", "bad_request")
        if 300 <= status < 400:  # never followed: the request carries the API key
            url = next(
                (
                    getattr(getattr(e, "response", None), "url", "")
                    for e in _chain(error)
                    if isinstance(getattr(getattr(e, "response", None), "url", None), str)
                ),
                "",
            )
            return info(False, redirect_reason(status, _header(error, "location"), provider, url), "bad_request")
    if _refused(error):
        api_base = _api_base(provider)
        where = f"at {api_base}" if api_base else "at the API base URL"
        return info(
            False,
            f"cannot connect to the LLM server: nothing is listening {where} (connection refused). "
            "Start the server, or check the host and port of --api-base",
            "connection",
        )
    if names & {
        "ConnectError",
        "APIConnectionError",
        "ConnectionError",
        "RemoteProtocolError",
        "ReadError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "StreamCutOff",
    }:
        return info(True, own or f"cannot connect to the LLM server ({error})", "connection")
    decode = next((e for e in _chain(error) if isinstance(e, UnicodeDecodeError)), None)
    if decode is not None:  # a body that is not UTF-8: a proxy's error page, a server's glitch; transient like a 502
        byte = decode.object[decode.start : decode.start + 1].hex() if isinstance(decode.object, bytes) else "?"
        return info(
            True,
            f"the server sent a response that is not valid UTF-8 (byte 0x{byte} at position {decode.start})",
            "malformed",
        )
    encode = next((e for e in _chain(error) if isinstance(e, UnicodeEncodeError)), None)
    if encode is not None:  # the request: text with lone surrogates (bytes a terminal or file gave that are not UTF-8)
        bad = encode.object[encode.start : encode.end]
        return info(
            False,
            f"the prompt holds characters that cannot be sent ({bad!r} at position {encode.start}: "
            "text that was not valid UTF-8 where it came from)",
            "bad_request",
        )
    if "RecursionError" in names or "maximum recursion depth" in _raw_messages(error):
        return info(True, "the server sent a reply nested too deeply to be read (not a chat completion)", "malformed")
    if names & {"JSONDecodeError", "ResponseNotRead", "MalformedReply"}:
        return info(True, "the server sent a malformed response", "malformed")
    if "RateLimitError" in names:
        return info(True, f"rate limited{suffix}", "rate_limit")
    if "AuthenticationError" in names:
        return info(False, f"authentication failed{suffix}. Check the API key", "auth")
    text = str(error)
    if "LLM Provider NOT provided" in text:
        return info(
            False,
            "litellm 1.0.0 does not know this model name; for an OpenAI-compatible server "
            "write it as 'openai/<model>' (the command line's --model does this for you)",
            "bad_request",
        )
    return info(False, f"{type(error).__name__}: {text[:300]}", "other")


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    initial_delay: float = 2.0
    max_delay: float = 30.0
    backoff: float = 2.0
    jitter: float = 0.2
    max_retry_after: float = 120.0  # the longest wait a server's Retry-After is honoured for
    call_deadline: float = 300.0  # seconds for one call, retries and waits included (0: no deadline)

    @classmethod
    def from_config(cls, config: Optional[dict]) -> "RetryPolicy":
        known = {k: v for k, v in (config or {}).items() if k in cls.__dataclass_fields__}
        policy = cls(**known)
        policy.max_attempts = max(1, int(policy.max_attempts))
        policy.call_deadline = float(policy.call_deadline or 0.0)
        return policy

    def delay(self, attempt: int, retry_after: Optional[float] = None) -> float:
        """The wait before attempt ``attempt + 1``: exponential backoff with jitter, or longer if the server asked."""
        base = min(self.max_delay, self.initial_delay * self.backoff ** (attempt - 1))
        wait = max(0.0, base * (1 + random.uniform(-self.jitter, self.jitter)))
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:g}"


def _deadline_error(
    flow: str, deadline: float, attempts: int, error: BaseException, last: LLMErrorInfo
) -> LLMCallError:
    info = LLMErrorInfo(
        True, f"no reply within {_seconds(deadline)} s", kind="timeout", status=last.status, detail=last.detail
    )
    failure = LLMCallError(
        f"{flow}: no reply within {_seconds(deadline)} s (the call's deadline, retries included); "
        f"{attempts} attempt{'s' if attempts != 1 else ''}, last error: {last.reason}. Check that the LLM server is "
        "running and answering; if it is just slow, raise `retry.call_deadline` (seconds) in the chat's YAML, "
        "or `request_timeout` in its backend for a single attempt.",
        flow=flow,
        cause=error,
        retryable=True,
    )
    failure.info = info
    return failure


def call_with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    flow: str,
    on_retry: Optional[Callable[[int, float, LLMErrorInfo], None]] = None,
    sleep: Callable[[float], None] = time.sleep,
    *,
    deadline: Optional[float] = None,
    provider: Provider = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple:
    """Run ``call``; retry transient failures with exponential backoff. Returns ``(result, retries)``.

    ``deadline``: seconds for the whole call, attempts and waits included (None: ``policy.call_deadline``; 0: none).
    No wait runs past it: when the next attempt could not start before it, the call gives up at once. Each
    attempt's own timeout is the caller's (``request_timeout``). ``provider`` (``{"model", "api_base", ...}``) makes
    the advice of an error fit the server. ``sleep`` and ``clock`` are for tests.

    Raises LLMCallError naming ``flow`` and the cause (its ``.info`` is the LLMErrorInfo), at once for errors that
    retrying cannot fix, after the last attempt, or when the deadline has passed.
    """
    if deadline is None:
        deadline = policy.call_deadline
    deadline = float(deadline) if deadline and deadline > 0 else None
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            return call(), attempt - 1
        except (KeyboardInterrupt, JarvisError):  # ours already say what happened (e.g. a replay ran out)
            raise
        except Exception as error:  # noqa: BLE001 - classified below
            info = classify(error, provider)
            if not info.retryable:
                failure = LLMCallError(f"{flow}: the LLM call failed: {info.reason}", flow=flow, cause=error)
                failure.info = info
                raise failure from error
            if attempt >= policy.max_attempts:
                advice = (
                    "The server answers, but not with a valid response: check its log (or the proxy in front "
                    "of it), and that the API base URL is an OpenAI-compatible endpoint."
                    if info.kind == "malformed"
                    else "Check that the LLM server is reachable and try again later."
                )
                failure = LLMCallError(
                    f"{flow}: the LLM call failed {attempt} times; last error: {info.reason}. {advice}",
                    flow=flow,
                    cause=error,
                    retryable=True,
                )
                failure.info = info
                raise failure from error
            delay = policy.delay(attempt, info.retry_after)
            if deadline is not None:
                left = deadline - (clock() - started)
                if left <= 0 or delay >= left:  # no attempt could start before the deadline
                    raise _deadline_error(flow, deadline, attempt, error, info) from error
            if on_retry is not None:
                on_retry(attempt, delay, info)
            sleep(delay)
