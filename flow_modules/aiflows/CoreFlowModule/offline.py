"""Make litellm 1.0.0 work without the network.

`import litellm` 1.0.0 downloads the cl100k tokenizer and a model price list at import time. This module ships the
tokenizer (``tiktoken_cache/``), points ``TIKTOKEN_CACHE_DIR`` at it before litellm is imported, and imports litellm
with its price-list download short-circuited to the copy litellm bundles, its telemetry thread off and its
"Give Feedback" banners silenced.

Only the standard library is imported at module level: this file runs before anything else of the package.
"""
from __future__ import annotations

import hashlib
import os
import sys
import warnings

TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiktoken_cache")
# tiktoken names a cached file sha1(url) and accepts it only if its sha256 matches.
TOKENIZER_FILE = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
TOKENIZER_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def ensure_offline_tokenizer() -> str:
    """Point tiktoken at the bundled cl100k file unless the user chose a cache; returns the cache directory used."""
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        os.environ["TIKTOKEN_CACHE_DIR"] = TOKENIZER_DIR
    return os.environ["TIKTOKEN_CACHE_DIR"]


def bundled_tokenizer_ok() -> bool:
    """True if the bundled tokenizer file is present and intact (used by tests and `--doctor`-style checks)."""
    path = os.path.join(TOKENIZER_DIR, TOKENIZER_FILE)
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest() == TOKENIZER_SHA256


def import_litellm():
    """Import litellm quietly and offline, once; returns the module.

    Call this before the first ``import aiflows.backends``. If litellm was imported already, only the quiet settings
    are applied.
    """
    ensure_offline_tokenizer()
    first_import = "litellm" not in sys.modules
    if first_import:
        import requests

        real_get = requests.get

        def no_price_list_download(url, *args, **kwargs):
            # litellm fetches its model price list with no timeout at import; its bundled copy is what we want.
            if "model_prices_and_context_window" in str(url):
                raise requests.exceptions.ConnectionError("offline: using litellm's bundled model price list")
            return real_get(url, *args, **kwargs)

        requests.get = no_price_list_download
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                import litellm
        finally:
            requests.get = real_get
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    # pydantic 2.x warns on every litellm response ("Expected `Usage`"): harmless and noisy.
    warnings.filterwarnings("ignore", message=r".*PydanticSerializationUnexpectedValue.*")
    warnings.filterwarnings("ignore", message=r".*Pydantic serializer warnings.*")
    return litellm
