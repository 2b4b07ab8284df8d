"""Jarvis and its building blocks as aiflows 0.1.7 flow modules.

Importing this package points tiktoken at the cl100k tokenizer the package carries (unless ``TIKTOKEN_CACHE_DIR`` is
already set), so that litellm 1.0.0, which downloads it at import, works offline. Import ``aiflows_jarvis``
(or any of its modules) before ``aiflows.backends`` or ``litellm``.
"""
from .CoreFlowModule.offline import ensure_offline_tokenizer as _ensure_offline_tokenizer

_ensure_offline_tokenizer()
