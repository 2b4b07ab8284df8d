"""What ``import aiflows`` loads and a run never uses waits until it is used.

Installed when the package is imported (``offline.ensure_offline_tokenizer``), before aiflows is; each is a no-op for
a module already imported. Each one shortens the time to a run's first request or lowers its peak memory:

* ``aiflows.flow_verse``: aiflows imports its hub client (and huggingface_hub) at import; its ``loading`` module is
  executed at its first use (``flow_verse.sync_dependencies``, ``flow_verse.loading.X``).
* ``aiflows.backends.llm_lite`` (imported with ``ApiInfo``): executed with a stand-in for its ``from litellm import
  completion, embedding`` whose functions import litellm at their first call, so a run whose requests go through
  ``ChatFlowModule/openai_http.py`` never imports litellm.
* ``omegaconf``: aiflows imports it for its logger configuration at import and, by name, in two modules that use
  it only in functions the lean flows replace; those three are executed with a stand-in ``omegaconf`` whose
  ``OmegaConf`` imports the real one at its first use (the logger configuration, a YAML file without
  interpolations, is read with ``yaml_loader.py``).
* ``hydra`` (the lean flows build subflows without it, see ``instantiate``): executed at its first use.
* ``aiflows.utils.rich_utils`` (a configuration tree printed at debug level only): executed when its function is
  called.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types

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
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return None
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredModule
    sys.modules[name] = module
    return module


class FirstImportHook(importlib.abc.MetaPathFinder):
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


class _FlowVerseImportHook(FirstImportHook, importlib.abc.Loader):
    """``aiflows.flow_verse`` as a package whose ``loading`` module (the hub client) is loaded on first use.

    The package's own ``__init__`` is only ``from .loading import sync_dependencies``; here ``loading`` is a module
    executed when first used (``lazy_module``) and ``sync_dependencies`` is looked up in it when asked for."""

    name = "aiflows.flow_verse"

    def spec(self, fullname, path):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations:
            return spec
        return importlib.util.spec_from_file_location(
            fullname, spec.origin, loader=self, submodule_search_locations=spec.submodule_search_locations
        )

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


class _DeferringImportHook(FirstImportHook, importlib.abc.Loader):
    """``import name`` gives a module executed at its first use. ``functions``: names of functions that can be taken
    from it (``from name import f``) without executing it; calling one does."""

    def __init__(self, name: str, functions=()):
        self.name = name
        self.functions = tuple(functions)
        self._loader = None

    def spec(self, fullname, path):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if (
            spec is None
            or spec.loader is None
            or not hasattr(spec.loader, "exec_module")
            or spec.loader.create_module(spec) is not None
        ):
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
# How a stand-in function imports litellm at its first call: what install() is given (offline.py's import_litellm:
# quiet and offline), else importlib.
_litellm_importer = [lambda: importlib.import_module("litellm")]


def _litellm_function(function: str):
    def call(*args, **kwargs):
        return getattr(_litellm_importer[0](), function)(*args, **kwargs)

    call.__name__ = call.__qualname__ = function
    call.__doc__ = f"litellm.{function}, litellm imported (offline, quietly) at the first call."
    return call


def _litellm_stand_in() -> types.ModuleType:
    return _stand_in("litellm", **{function: _litellm_function(function) for function in ("completion", "embedding")})


# ~~~ omegaconf: aiflows' `from omegaconf import OmegaConf` ~~~
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
        from ..flows.yaml_loader import load_yaml_text

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


_hooks = (
    _FlowVerseImportHook(),
    _StandInImportHook("aiflows.backends.llm_lite", {"litellm": _litellm_stand_in}),
    _StandInImportHook(
        "aiflows.utils.logging",
        {"omegaconf": lambda: _stand_in("omegaconf", OmegaConf=_LoggingOmegaConf())},
        after=_after_logging,
    ),
    _StandInImportHook("aiflows.utils.general_helpers", {"omegaconf": _omegaconf_stand_in}),
    _StandInImportHook("aiflows.base_flows.abstract", {"omegaconf": _omegaconf_stand_in}),
    _DeferringImportHook("hydra"),
    _DeferringImportHook("aiflows.utils.rich_utils", functions=("print_config_tree",)),
)


def install(import_litellm=None) -> None:
    """Install the hooks above (each a no-op if its module is imported already).

    :param import_litellm: imports litellm for the stand-in of ``aiflows.backends.llm_lite`` (default: importlib).
    """
    if import_litellm is not None:
        _litellm_importer[0] = import_litellm
    for hook in _hooks:
        hook.install()
