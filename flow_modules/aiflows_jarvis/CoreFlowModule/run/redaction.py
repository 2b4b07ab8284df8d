"""The secrets this process knows, kept out of what a run writes and sends: ``[redacted: OPENAI_API_KEY]``.

Generated code never gets the secrets of the environment, but it can read them where the user keeps them (code that
prints ``~/.bashrc`` or ``~/.netrc``). What it prints goes into the next prompts, the logs, the report, the trace and
the recording. The process knows some secrets by value: the API keys of the backends it built, the values of the
variables the interpreter keeps from the code, the password of an ``--api-base``. Each is remembered here with its
name, and ``redact`` replaces each value found in a text by ``[redacted: NAME]``: the interpreter's output as it
comes back, then the requests to the LLM, the log entries, the trace and recording lines and the report, whatever
else put the value there.

A secret the process never saw cannot be recognised: a token that is only in a file (``~/.aws/credentials``, an SSH
key, another service's ``.env``), or a known one printed in another form (cut in two, encoded, reversed). Values
shorter than ``MIN_LENGTH`` characters are not remembered: they would redact ordinary words and numbers.

One kind of secret is the LLM's to use: a password in a URL of the goal (``to_llm``). It is kept out of what is
written and shown like the others, but not out of the requests (``redact(text, outgoing=True)``).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

#: Shorter values are not redacted: a variable ``DB_PASS=1`` must not turn every "1" into a redaction.
MIN_LENGTH = 8
_TOKEN_LENGTH = 20


@dataclass(frozen=True)
class _Secret:
    name: str
    shown_as: Optional[str]  # what replaces it (None: ``[redacted: name]``)
    to_llm: bool  # the requests to the LLM keep it


_lock = threading.Lock()
_secrets: Dict[str, _Secret] = {}  # value -> what it is, in the order remembered
# (form, replacement), the longest form first: a URL holding a password is replaced whole before its password alone.
# Replaced whole when a secret is added (readers take them without the lock): [0] every secret (what is written and
# shown), [1] those the LLM is not sent (the requests). The secrets are the process's, not one run's: a key known from
# an earlier run in the same process is still redacted, which can only keep more out.
_forms: List[Tuple[Tuple[str, str], ...]] = [(), ()]


def remember_secret(name: str, value: Optional[str], *, shown_as: Optional[str] = None, to_llm: bool = False) -> None:
    """Redact ``value`` from now on, as ``[redacted: name]``; a value already remembered keeps its first name (the
    environment variable it came from says more than the backend that used it), and is sent to the LLM from the
    moment one says so (``to_llm``). Also the password of a URL value, alone. Values shorter than ``MIN_LENGTH`` are
    ignored.

    :param name: what the redaction says (``OPENAI_API_KEY``, ``--api-base password``).
    :param value: the secret.
    :param shown_as: what replaces ``value`` itself (default ``[redacted: name]``): a URL can keep all but its secret.
    :param to_llm: the LLM is sent it (a password the goal gives it to use): kept out of what is written and shown,
        not out of the requests (``redact(..., outgoing=True)``).
    """
    if not isinstance(value, str):
        return
    values = [(value.strip(), shown_as)]
    password = url_password(value.strip())
    if password:
        values.append((password, None))
    with _lock:
        added = False
        for secret, shown in values:
            known = _secrets.get(secret)
            if len(secret) >= MIN_LENGTH and known is None:
                _secrets[secret] = _Secret(str(name), shown, bool(to_llm))
                added = True
            elif known is not None and to_llm and not known.to_llm:  # (the variable --resume took it from)
                _secrets[secret] = _Secret(known.name, known.shown_as, True)
                added = True
        if added:
            _forms[0] = _make_forms(_secrets)
            _forms[1] = _make_forms({value: secret for value, secret in _secrets.items() if not secret.to_llm})


def remember_secrets(secrets: Dict[str, str]) -> None:
    """``remember_secret`` for each ``name: value``."""
    for name, value in secrets.items():
        remember_secret(name, value)


def known_secret_names() -> List[str]:
    """The names of the secrets remembered (never their values)."""
    with _lock:
        return sorted({secret.name for secret in _secrets.values()})


def forget_secrets() -> None:
    """Forget every secret (a test's clean slate; a process that ran with a key keeps redacting it otherwise)."""
    with _lock:
        _secrets.clear()
        _forms[0] = _forms[1] = ()


def _make_forms(secrets: Dict[str, _Secret]) -> Tuple[Tuple[str, str], ...]:
    forms: Dict[str, str] = {}
    for value, secret in secrets.items():
        shown = secret.shown_as if secret.shown_as is not None else f"[redacted: {secret.name}]"
        # as written in a text, and as it appears inside a JSON string (the trace, the recording)
        for escape in (
            lambda text: text,
            lambda text: json.dumps(text, ensure_ascii=False)[1:-1],
            lambda text: json.dumps(text)[1:-1],
        ):
            forms.setdefault(escape(value), escape(shown))
    return tuple(sorted(forms.items(), key=lambda item: -len(item[0])))


def redact(text: str, outgoing: bool = False) -> str:
    """``text`` with every secret remembered replaced by ``[redacted: NAME]``; the very same string when it holds
    none. One substring search per secret: linear in the length of ``text``.

    :param outgoing: ``text`` goes to the LLM: the secrets it is sent (``to_llm``) stay."""
    forms = _forms[1 if outgoing else 0]
    if not forms or not isinstance(text, str):
        return text
    for form, replacement in forms:
        if form in text:
            text = text.replace(form, replacement)
    return text


def redact_data(value: Any, outgoing: bool = False) -> Any:
    """``value`` (a text, or a dict or list holding texts, at any depth) with every text redacted (``redact``); the
    very same object when nothing was remembered."""
    if not _forms[1 if outgoing else 0]:
        return value
    if isinstance(value, str):
        return redact(value, outgoing)
    if isinstance(value, dict):
        return {k: redact_data(v, outgoing) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v, outgoing) for v in value)
    return value


def url_password(url: str) -> Optional[str]:
    """The secret in a URL's user part: its password (``http://user:PASSWORD@host``), or the user part itself when
    it has no password and is as long as a token (``https://TOKEN@host``, 20 characters or more: the interpreter's
    rule too); None when there is none (or the text is no URL)."""
    if "@" not in url or "://" not in url:
        return None
    try:
        parts = urlsplit(url)
        password, username = parts.password, parts.username
    except ValueError:
        return None
    if password:
        return unquote(password)
    if username and len(username) >= _TOKEN_LENGTH:
        return unquote(username)
    return None


def without_credentials(url: str) -> Tuple[str, Optional[str]]:
    """``url`` without the secret of its user part, and that secret (None when there is none): ``http://user:pw@
    host/v1`` gives ``http://user@host/v1`` and ``pw``; ``https://TOKEN@host`` gives ``https://host`` and ``TOKEN``."""
    secret = url_password(url)
    if secret is None:
        return url, None
    parts = urlsplit(url)
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0] if parts.password else ""
    netloc = f"{user}@{host}" if user else host
    return parts._replace(netloc=netloc).geturl(), secret


def with_credentials(url: str, secret: str) -> str:
    """``url`` (as ``without_credentials`` left it) with ``secret`` put back: as the password after its user, or
    as the user part when it has no user."""
    from urllib.parse import quote

    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    userinfo = f"{user}:{quote(secret, safe='')}" if at else quote(secret, safe="")
    return parts._replace(netloc=f"{userinfo}@{host if at else parts.netloc}").geturl()


# A URL with a user part: a scheme, ://, a user part (no /, ?, # or blank) and its @, up to a blank or a quote. The
# scheme and the user part are bounded, so that finding them stays linear in a goal of megabytes.
_URL_WITH_USER = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s/?#@\"'<>]{1,500}@[^\s\"'<>]*")
_SENTENCE_END = ".,;:!?)]}"


def urls_with_secrets(text: str) -> List[str]:
    """The URLs in ``text`` whose user part holds a secret (``url_password``), each once, in order; the punctuation
    that ends a sentence after one is not part of it."""
    if "://" not in text or "@" not in text:
        return []
    found: List[str] = []
    for match in _URL_WITH_USER.finditer(text):
        url = match.group(0).rstrip(_SENTENCE_END)
        if url not in found and url_password(url):
            found.append(url)
    return found


def url_shown_without_secret(url: str, name: str) -> str:
    """``url`` with ``[redacted: name]`` in place of the secret of its user part: ``https://bob:[redacted: password
    in the goal]@example.com/data.csv``."""
    parts = urlsplit(url)
    userinfo, _, host = parts.netloc.rpartition("@")
    shown = f"{userinfo.split(':', 1)[0]}:[redacted: {name}]" if parts.password else f"[redacted: {name}]"
    return url.replace(f"{userinfo}@{host}", f"{shown}@{host}", 1)
