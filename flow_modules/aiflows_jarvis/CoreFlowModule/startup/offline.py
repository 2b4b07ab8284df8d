"""Make litellm 1.0.0 work without the network, and quietly.

`import litellm` 1.0.0 downloads the cl100k tokenizer and a model price list at import time. The package ships the
tokenizer (``tiktoken_cache/``): importing it points ``TIKTOKEN_CACHE_DIR`` at that folder, unless the user chose a
cache, and copies the file where tiktoken looks by default (``tokenizer_seed.py``, which also says its limit).

Whoever imports litellm first after that (``aiflows.backends`` does, at its first call), a first-import hook imports
it with its price-list request failing at once, so that it uses the copy it bundles (litellm 1.0.0 sends that
request without a timeout), its telemetry off and its "Give Feedback" banners silenced. The hook is for being
offline, not for speed: requests that go through ``ChatFlowModule/openai_http.py`` never import litellm.

What else waits until it is used at import is in ``deferred_imports.py``. Only the standard library (and this
package's tokenizer_seed.py and deferred_imports.py, which import nothing else) is imported at module level: this
file runs before anything else of the package.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import warnings
from typing import Optional

from . import deferred_imports
from .tokenizer_seed import TOKENIZER_DIR, TOKENIZER_FILE, TOKENIZER_SHA256, seed_default_tokenizer_cache  # noqa: F401


def ensure_offline_tokenizer() -> str:
    """Seed the folder tiktoken reads in a process of this environment (for processes that import litellm first: see
    tokenizer_seed.py), point this process's tiktoken at the bundled cl100k file unless the user chose a cache, make
    litellm's first import offline and quiet, and install the deferred imports; returns the tokenizer cache directory
    used. Called when the package is imported."""
    seed_default_tokenizer_cache()  # before TIKTOKEN_CACHE_DIR is set below: where the user's environment points
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        os.environ["TIKTOKEN_CACHE_DIR"] = TOKENIZER_DIR
    install_litellm_import_hook()
    deferred_imports.install(import_litellm)
    return os.environ["TIKTOKEN_CACHE_DIR"]


def bundled_tokenizer_ok() -> bool:
    """True if the bundled tokenizer file is present and intact (its sha256 checked; tests/test_offline.py uses it)."""
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


class _LitellmImportHook(deferred_imports.FirstImportHook):
    """Whoever imports litellm first (aiflows.backends does), it is imported quietly and without the network."""

    name = "litellm"

    def spec(self, fullname, path):
        spec = importlib.util.find_spec(fullname)
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
    _hook.install()


def litellm_model_cost() -> dict:
    """litellm's model map (context windows, prices): litellm's own once it is imported, else the copy it bundles
    (what it uses offline), read without importing litellm (large and slow to import), which a run whose LLM is
    scripted or replayed never needs."""
    litellm = sys.modules.get("litellm")
    if isinstance(getattr(litellm, "model_cost", None), dict):
        return litellm.model_cost
    bundled = _bundled_model_cost()
    if bundled is None:  # not litellm 1.0.0's layout: ask litellm itself
        return getattr(import_litellm(), "model_cost", {}) or {}
    return bundled


@functools.lru_cache(maxsize=None)
def _bundled_model_cost() -> Optional[dict]:
    """The model map litellm 1.0.0 bundles, read once per process; None if it is not where 1.0.0 keeps it."""
    import importlib.machinery
    import json

    spec = importlib.machinery.PathFinder.find_spec("litellm")  # not through the import hooks: nothing imported
    try:
        path = os.path.join(os.path.dirname(spec.origin), "model_prices_and_context_window_backup.json")
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (AttributeError, TypeError, OSError, ValueError):
        return None


def import_litellm():
    """Import litellm quietly and offline (once); returns the module. Safe to call at any time."""
    ensure_offline_tokenizer()
    install_litellm_import_hook()
    import litellm

    _quiet(litellm)
    return litellm
