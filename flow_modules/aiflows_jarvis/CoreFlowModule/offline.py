"""Make litellm 1.0.0 work without the network, and start quickly.

`import litellm` 1.0.0 downloads the cl100k tokenizer and a model price list at import time. This module ships the
tokenizer (``tiktoken_cache/``), points ``TIKTOKEN_CACHE_DIR`` at it before litellm is imported, and imports litellm
with its price-list download short-circuited to the copy litellm bundles, its telemetry thread off and its
"Give Feedback" banners silenced. What litellm 1.0.0 loads at import and a run may never use waits until it is
used: the cl100k tokenizer (42 MB, about 0.2 s; with servers that report ``usage`` nothing uses it), aiohttp (which
litellm 1.0.0 imports and never calls) and the TLS certificates of the three HTTP clients it makes (one context,
made at the first https request; a local server over http never needs it).

aiflows' backends (``aiflows.backends.llm_lite``, imported with ``ApiInfo``) are loaded without litellm: their ``from
litellm import completion, embedding`` gets stand-ins that import litellm at their first call. Chat completions to
OpenAI-compatible servers are sent without litellm (``ChatFlowModule/openai_http.py``), so a run that makes only
those never imports it.

``import aiflows`` imports its hub client (``aiflows.flow_verse``, and with it huggingface_hub: about 0.4 s) that a
run never uses; it is loaded when first used (``flow_verse.sync_dependencies``, ``flow_verse.loading.X``). So are
hydra (the lean flows build subflows without it, see ``instantiate``) and the rich console aiflows uses to print
a configuration at debug level.

Only the standard library (and tokenizer_seed.py, which imports nothing else) is imported at module level: this file
runs before anything else of the package.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.util
import os
import sys
import threading
import types
import warnings
from typing import Optional

# The bundled file, and its copy where tiktoken looks for it: tokenizer_seed.py, also run at interpreter start.
from .tokenizer_seed import TOKENIZER_DIR, TOKENIZER_FILE, TOKENIZER_SHA256, seed_default_tokenizer_cache  # noqa: F401


def ensure_offline_tokenizer() -> str:
    """Seed the folder tiktoken reads in a process of this environment (for processes that import litellm first: see
    tokenizer_seed.py), point this process's tiktoken at the bundled cl100k file unless the user chose a cache, and
    make litellm's first import offline and quiet; returns the tokenizer cache directory used. Called when the
    package is imported."""
    seed_default_tokenizer_cache()  # before TIKTOKEN_CACHE_DIR is set below: where the user's environment points
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        os.environ["TIKTOKEN_CACHE_DIR"] = TOKENIZER_DIR
    install_litellm_import_hook()
    install_flow_verse_import_hook()
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


class LazyObject:
    """Stands for the object ``make()`` returns until one of its attributes is used; it is then made (once) and used.
    ``what`` names it in ``repr``."""

    def __init__(self, make, what: str):
        self._make = make
        self._what = what
        self._object = None
        self._lock = threading.Lock()

    def loaded(self):
        with self._lock:
            if self._object is None:
                self._object = self._make()
            return self._object

    def __getattr__(self, attribute):
        return getattr(self.loaded(), attribute)

    def __repr__(self) -> str:
        return f"<lazy {self._what}>"


class _LazyTokenizers:
    """While litellm is first imported, ``tiktoken.get_encoding`` gives a LazyObject: litellm 1.0.0 loads cl100k at
    import (``encoding = tiktoken.get_encoding("cl100k_base")``, twice) and uses it only to count tokens itself."""

    def __enter__(self):
        import tiktoken

        self._tiktoken = tiktoken
        self._real = real = tiktoken.get_encoding
        tiktoken.get_encoding = lambda name: LazyObject(lambda: real(name), f"tiktoken encoding {name}")
        return self

    def __exit__(self, *exc):
        self._tiktoken.get_encoding = self._real
        return False


_lazy_lock = threading.RLock()
# What the import system reads of a module it finds in sys.modules (`import x` looks at x.__spec__): not a use.
_IMPORT_SYSTEM_ATTRIBUTES = frozenset({"__spec__", "__name__", "__class__", "__dict__"})


class _DeferredModule(types.ModuleType):
    """A module not executed yet: the first use of one of its attributes executes it (in place, so every reference
    to it sees the real module). ``importlib.util.LazyLoader`` does the same, but on Python 3.11 an ``import``
    statement naming the module already counts as a use."""

    def __getattribute__(self, attribute):
        if attribute in _IMPORT_SYSTEM_ATTRIBUTES:
            return types.ModuleType.__getattribute__(self, attribute)
        namespace = types.ModuleType.__getattribute__(self, "__dict__")
        if attribute == "__path__" and "__path__" not in namespace:  # `from m import f` asks if m is a package
            raise AttributeError(f"module {namespace.get('__name__')!r} has no attribute '__path__'")
        stubs = namespace.get("__deferred_stubs__") or {}
        if attribute in stubs:  # a function taken by name (`from m import f`): calling it executes the module
            return stubs[attribute]
        _execute(self)
        return getattr(self, attribute)

    def __setattr__(self, attribute, value):
        _execute(self)
        setattr(self, attribute, value)

    def __delattr__(self, attribute):
        _execute(self)
        delattr(self, attribute)


def _execute(module: types.ModuleType) -> None:
    with _lazy_lock:
        if type(module) is not _DeferredModule:
            return
        types.ModuleType.__setattr__(module, "__class__", types.ModuleType)
        spec = module.__spec__
        module.__dict__.pop("__deferred_stubs__", None)
        loader = module.__dict__.pop("__deferred_loader__", None) or spec.loader
        try:
            loader.exec_module(module)
        except BaseException:
            if sys.modules.get(spec.name) is module:
                del sys.modules[spec.name]
            raise


def lazy_module(name: str, path=None):
    """Put the module ``name`` (a submodule: with its package's ``path``) in ``sys.modules``, to be executed when an
    attribute of it is first used. Returns it; the module itself if it is imported already, None if it is not found
    on the path (it is then imported as usual, by whoever imports it)."""
    if name in sys.modules:
        return sys.modules[name]
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return None
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredModule
    sys.modules[name] = module
    return module


class _LazyHTTPClients:
    """While litellm is first imported: aiohttp is imported lazily, and the HTTP clients litellm makes at import share
    one TLS context, made when a connection first needs it (loading certifi's certificates takes about 30 ms a
    client)."""

    def __enter__(self):
        lazy_module("aiohttp")
        self._transports = None
        try:
            import httpx._transports.default as transports
        except ImportError:  # pragma: no cover - httpx is a dependency of litellm
            return self
        real = transports.create_ssl_context
        self._transports, self._real = transports, real
        shared = {}

        def create_ssl_context(verify=True, cert=None, trust_env=True, **kwargs):
            if verify is True and cert is None and trust_env and not kwargs:
                if "context" not in shared:
                    shared["context"] = LazyObject(lambda: real(verify=True, cert=None, trust_env=True),
                                                   "TLS context (certifi's certificates)")
                return shared["context"]
            return real(verify=verify, cert=cert, trust_env=trust_env, **kwargs)

        transports.create_ssl_context = create_ssl_context
        return self

    def __exit__(self, *exc):
        if self._transports is not None:
            self._transports.create_ssl_context = self._real
        return False


def _quiet(litellm) -> None:
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    # pydantic 2.x warns on every litellm response ("Expected `Usage`"): harmless and noisy.
    warnings.filterwarnings("ignore", message=r".*PydanticSerializationUnexpectedValue.*")
    warnings.filterwarnings("ignore", message=r".*Pydantic serializer warnings.*")


class _FirstImportHook(importlib.abc.MetaPathFinder):
    """A finder that changes how one module (``name``) is imported the first time, then steps aside."""

    name = ""

    def install(self) -> None:
        """No-op once the module is imported."""
        if self.name not in sys.modules and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        self.uninstall()
        return self.spec(fullname, path)

    def spec(self, fullname, path):
        raise NotImplementedError


class _LitellmImportHook(_FirstImportHook):
    """Whoever imports litellm first (aiflows.backends does), it is imported quietly and without the network."""

    name = "litellm"

    def spec(self, fullname, path):
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            with _PriceListBlocker(), _LazyTokenizers(), _LazyHTTPClients(), warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                real_exec(module)
            _quiet(module)

        spec.loader.exec_module = exec_module
        return spec


class _FlowVerseImportHook(_FirstImportHook, importlib.abc.Loader):
    """``aiflows.flow_verse`` as a package whose ``loading`` module (the hub client) is loaded on first use.

    The package's own ``__init__`` is only ``from .loading import sync_dependencies``; here ``loading`` is a module
    executed when first used (``lazy_module``) and ``sync_dependencies`` is looked up in it when asked for."""

    name = "aiflows.flow_verse"

    def spec(self, fullname, path):
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations:
            return spec
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=self,
                                                      submodule_search_locations=spec.submodule_search_locations)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        loading = lazy_module(f"{module.__name__}.loading", module.__path__)
        if loading is None:  # not aiflows 0.1.7's layout: execute the package as it comes
            with open(module.__file__, encoding="utf-8") as f:
                exec(compile(f.read(), module.__file__, "exec"), module.__dict__)
            return
        module.loading = loading

        def __getattr__(attribute):
            if attribute == "sync_dependencies":
                return loading.sync_dependencies
            raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}")

        module.__getattr__ = __getattr__


class _DeferringImportHook(_FirstImportHook, importlib.abc.Loader):
    """``import name`` gives a module executed at its first use. ``functions``: names of functions that can be taken
    from it (``from name import f``) without executing it; calling one does."""

    def __init__(self, name: str, functions=()):
        self.name = name
        self.functions = tuple(functions)
        self._loader = None

    def spec(self, fullname, path):
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module") \
                or spec.loader.create_module(spec) is not None:
            return spec
        self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        def forwarder(function):
            def call(*args, **kwargs):
                _execute(module)
                return getattr(module, function)(*args, **kwargs)

            call.__name__ = call.__qualname__ = function
            return call

        module.__dict__["__deferred_loader__"] = self._loader
        module.__dict__["__deferred_stubs__"] = {function: forwarder(function) for function in self.functions}
        module.__class__ = _DeferredModule


class _StandInImportHook(_DeferringImportHook):
    """Executes the module ``name`` with stand-ins for modules it takes names from (``from X import y``), so that X
    is not imported with it: what a stand-in hands out imports the real X at its first use. ``stand_ins``:
    ``{X: make()}``, ``make`` giving the stand-in module; ``after(module)`` runs once the module is executed. If X is
    imported already, or the module takes from X what its stand-in lacks, the module is executed as it comes."""

    def __init__(self, name: str, stand_ins, after=None):
        super().__init__(name)
        self.stand_ins = stand_ins
        self.after = after

    def spec(self, fullname, path):
        if any(name in sys.modules for name in self.stand_ins):
            import importlib.machinery

            return importlib.machinery.PathFinder.find_spec(fullname, path)
        return super().spec(fullname, path)

    def exec_module(self, module):
        module.__spec__.loader = self._loader  # what importlib.resources and reloads expect
        placed = {name: make() for name, make in self.stand_ins.items() if name not in sys.modules}
        sys.modules.update(placed)
        try:
            try:
                self._loader.exec_module(module)
            except ImportError:  # it takes more than the stand-ins have: the real modules, on a clean namespace
                _remove_stand_ins(placed)
                placed = {}
                for name in [name for name in module.__dict__ if not (name.startswith("__") and name.endswith("__"))]:
                    del module.__dict__[name]
                self._loader.exec_module(module)
                return
        finally:
            _remove_stand_ins(placed)
        if self.after is not None:
            self.after(module)


def _remove_stand_ins(placed) -> None:
    for name, stand_in in placed.items():
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]


def _real_module(name: str) -> types.ModuleType:
    """The module ``name`` itself, imported if needed (a stand-in left in ``sys.modules`` is removed first)."""
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__stand_in__", False):
        del sys.modules[name]
    return importlib.import_module(name)


def _stand_in(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name, f"what is taken from {name} by name, importing {name} at its first use")
    module.__stand_in__ = True
    module.__dict__.update(attributes)
    return module


# ~~~ litellm: aiflows.backends.llm_lite's `from litellm import completion, embedding` ~~~
def _litellm_function(function: str):
    def call(*args, **kwargs):
        return getattr(import_litellm(), function)(*args, **kwargs)

    call.__name__ = call.__qualname__ = function
    call.__doc__ = f"litellm.{function}, litellm imported (offline, quietly) at the first call."
    return call


def _litellm_stand_in() -> types.ModuleType:
    return _stand_in("litellm", **{function: _litellm_function(function) for function in ("completion", "embedding")})


# ~~~ omegaconf: aiflows' `from omegaconf import OmegaConf` (about 0.08 s to import) ~~~
def _lazy_omegaconf() -> LazyObject:
    return LazyObject(lambda: _real_module("omegaconf").OmegaConf, "omegaconf.OmegaConf")


def _omegaconf_stand_in() -> types.ModuleType:
    return _stand_in("omegaconf", OmegaConf=_lazy_omegaconf())


class _PlainDocument(dict):
    """A YAML document without interpolations, read by ``_LoggingOmegaConf.load``."""


class _LoggingOmegaConf:
    """What aiflows.utils.logging uses of OmegaConf when it is imported: its logger configuration (a YAML file
    without interpolations) loaded and turned into a dict; anything else is OmegaConf's own."""

    @staticmethod
    def load(file):
        if hasattr(file, "read"):
            text = file.read()
        else:
            with open(file, encoding="utf-8") as f:
                text = f.read()
        if "${" in text:
            import io

            return _real_module("omegaconf").OmegaConf.load(io.StringIO(text))
        from .yaml_loader import load_yaml_text

        return _PlainDocument(load_yaml_text(text) or {})

    @staticmethod
    def to_container(config, *args, **kwargs):
        if isinstance(config, _PlainDocument):  # read for this call only: nothing else holds it
            return dict(config)
        return _real_module("omegaconf").OmegaConf.to_container(config, *args, **kwargs)

    def __getattr__(self, attribute):  # the rest of OmegaConf, should the module use more at its import
        return getattr(_real_module("omegaconf").OmegaConf, attribute)


def _after_logging(module) -> None:
    module.OmegaConf = _lazy_omegaconf()


# aiflows' backends (and ApiInfo with them) without litellm; aiflows itself without omegaconf (the lean flows read
# YAML with config_cache, hydra is deferred).
_stand_in_imports = (
    _StandInImportHook("aiflows.backends.llm_lite", {"litellm": _litellm_stand_in}),
    _StandInImportHook("aiflows.utils.logging", {"omegaconf": lambda: _stand_in("omegaconf", OmegaConf=_LoggingOmegaConf())},
                       after=_after_logging),
    _StandInImportHook("aiflows.utils.general_helpers", {"omegaconf": _omegaconf_stand_in}),
    _StandInImportHook("aiflows.base_flows.abstract", {"omegaconf": _omegaconf_stand_in}),
)
_hook = _LitellmImportHook()
_flow_verse_hook = _FlowVerseImportHook()
# aiflows imports hydra (about 0.1 s) to build flows, which the lean flows do without it, and rich (about 0.1 s) for
# a configuration tree printed only at debug level; httpx (litellm's HTTP client) and litellm import their command
# lines, with click, rich and pygments (about 0.1 s).
_deferred_imports = (_DeferringImportHook("hydra"),
                     _DeferringImportHook("aiflows.utils.rich_utils", functions=("print_config_tree",)),
                     _DeferringImportHook("httpx._main", functions=("main",)),
                     _DeferringImportHook("litellm.proxy.proxy_cli", functions=("run_server",)))


def install_litellm_import_hook() -> None:
    """Make the first import of litellm, by anyone, offline and quiet (no-op if litellm is imported already)."""
    _hook.install()


def uninstall_litellm_import_hook() -> None:
    _hook.uninstall()


def install_flow_verse_import_hook() -> None:
    """Make ``import aiflows`` leave its hub client unloaded until used (no-op once aiflows is imported), and the
    other imports above until they are used."""
    _flow_verse_hook.install()
    for hook in _stand_in_imports:
        hook.install()
    for hook in _deferred_imports:
        hook.install()


def litellm_model_cost() -> dict:
    """litellm's model map (context windows, prices): litellm's own once it is imported, else the copy it bundles
    (what it uses offline), read without importing litellm (about 40 MB and half a second), which a run whose LLM is
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
