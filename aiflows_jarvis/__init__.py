"""Jarvis and its building blocks as aiflows 0.1.7 flow modules.

Importing this package points tiktoken at the cl100k tokenizer the package carries (unless ``TIKTOKEN_CACHE_DIR`` is
already set), so that litellm 1.0.0, which downloads it at import, works offline; installed with pip, the start-up
hook ``aiflows_jarvis_tokenizer_seed.pth`` copies the file where tiktoken looks for it at every interpreter start, so
that importing ``aiflows.backends`` or ``litellm`` first works offline too. Importing ``aiflows_jarvis`` (or any of
its modules) first still makes litellm's import quiet and skips its price-list request.
"""
from .CoreFlowModule.offline import ensure_offline_tokenizer as _ensure_offline_tokenizer

_ensure_offline_tokenizer()
