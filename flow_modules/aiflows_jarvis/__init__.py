"""Jarvis and its building blocks as aiflows 0.1.7 flow modules.

Importing this package points tiktoken at the cl100k tokenizer the package carries (unless ``TIKTOKEN_CACHE_DIR`` is
already set), so that litellm 1.0.0, which downloads it at import, works offline. It also copies the file where
tiktoken looks by default, so that on this machine a later process that imports ``aiflows.backends`` or ``litellm``
before ``aiflows_jarvis`` is offline too. Importing ``aiflows_jarvis`` first makes litellm's import quiet and skips its
price-list request.
"""
if __name__ != "aiflows_jarvis":  # e.g. flow_modules.aiflows_jarvis, from a checkout's root (docs/layout.md)
    raise ImportError(
        f"aiflows_jarvis was imported as {__name__!r}. Import it as aiflows_jarvis: its sources sit in flow_modules/, "
        "but a second name for them would make a second copy of every class and setting.")

from .CoreFlowModule.offline import ensure_offline_tokenizer as _ensure_offline_tokenizer

_ensure_offline_tokenizer()
