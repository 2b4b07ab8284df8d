"""Jarvis and its building blocks as aiflows 0.1.7 flow modules.

Hazard: litellm 1.0.0 downloads the cl100k tokenizer at import. Importing this package first points tiktoken at the
copy the package carries (unless ``TIKTOKEN_CACHE_DIR`` is set) and copies it where tiktoken looks by default, so
litellm works offline, its import is quiet and skips its price-list request; later processes that import litellm
first are offline too.
"""

if __name__ != "aiflows_jarvis":  # e.g. flow_modules.aiflows_jarvis, from a checkout's root (docs/layout.md)
    raise ImportError(
        f"aiflows_jarvis was imported as {__name__!r}. Import it as aiflows_jarvis: its sources sit in flow_modules/, "
        "but a second name for them would make a second copy of every class and setting."
    )

from aiflows_jarvis.CoreFlowModule import ensure_offline_tokenizer as _ensure_offline_tokenizer

_ensure_offline_tokenizer()
