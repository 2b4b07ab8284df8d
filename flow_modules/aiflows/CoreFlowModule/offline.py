"""Make litellm 1.0.0 work without the network.

`import litellm` 1.0.0 downloads the cl100k tokenizer and a model price list at import time. This module ships the
tokenizer (``tiktoken_cache/``), points ``TIKTOKEN_CACHE_DIR`` at it before litellm is imported, and imports litellm
with its price-list download short-circuited to the copy litellm bundles, its telemetry thread off and its
"Give Feedback" banners silenced.

Only the standard library is imported at module level: this file runs before anything else of the package.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
import warnings

TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiktoken_cache")
# tiktoken names a cached file sha1(url) and accepts it only if its sha256 matches.
TOKENIZER_FILE = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
TOKENIZER_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def ensure_offline_tokenizer() -> str:
    """Point tiktoken at the bundled cl100k file unless the user chose a cache, and make litellm's first import
    offline and quiet; returns the tokenizer cache directory used. Called when the package is imported."""
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        os.environ["TIKTOKEN_CACHE_DIR"] = TOKENIZER_DIR
    install_litellm_import_hook()
    return os.environ["TIKTOKEN_CACHE_DIR"]


def bundled_tokenizer_ok() -> bool:
    """True if the bundled tokenizer file is present and intact (used by tests and `--doctor`-style checks)."""
    path = os.path.join(TOKENIZER_DIR, TOKENIZER_FILE)
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest() == TOKENIZER_SHA256


class _PriceListBlocker:
    """While litellm is first imported, its model price list request fails at once (it then uses its bundled copy)."""

    def __enter__(self):
        import requests

        self._requests = requests
        self._real_get = requests.get

        def no_price_list_download(url, *args, **kwargs):
            if "model_prices_and_context_window" in str(url):
                raise requests.exceptions.ConnectionError("offline: using litellm's bundled model price list")
            return self._real_get(url, *args, **kwargs)

        requests.get = no_price_list_download
        return self

    def __exit__(self, *exc):
        self._requests.get = self._real_get
        return False


def _quiet(litellm) -> None:
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    # pydantic 2.x warns on every litellm response ("Expected `Usage`"): harmless and noisy.
    warnings.filterwarnings("ignore", message=r".*PydanticSerializationUnexpectedValue.*")
    warnings.filterwarnings("ignore", message=r".*Pydantic serializer warnings.*")


class _LitellmImportHook(importlib.abc.MetaPathFinder):
    """Whoever imports litellm first (aiflows.backends does), it is imported quietly and without the network."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "litellm":
            return None
        uninstall_litellm_import_hook()
        spec = importlib.util.find_spec("litellm")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            with _PriceListBlocker(), warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                real_exec(module)
            _quiet(module)

        spec.loader.exec_module = exec_module
        return spec


_hook = _LitellmImportHook()


def install_litellm_import_hook() -> None:
    """Make the first import of litellm, by anyone, offline and quiet (no-op if litellm is imported already)."""
    if "litellm" not in sys.modules and _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)


def uninstall_litellm_import_hook() -> None:
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)


def import_litellm():
    """Import litellm quietly and offline (once); returns the module. Safe to call at any time."""
    ensure_offline_tokenizer()
    install_litellm_import_hook()
    import litellm

    _quiet(litellm)
    return litellm
