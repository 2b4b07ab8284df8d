"""The start-up hook: run at every start of a Python of an environment aiflows-jarvis is installed in.

``aiflows_jarvis_tokenizer_seed.pth``, which pip puts at the root of site-packages with the package (``pip install``
and ``pip install -e`` alike; ``pip uninstall`` removes it), imports this module. It copies the cl100k tokenizer file
the package carries where tiktoken will look for it, if it is not there yet, so that a script that imports litellm
1.0.0 before ``aiflows_jarvis`` (``from aiflows.backends.api_info import ApiInfo`` first) works offline on a machine
where the package was never imported, or after a reboot emptied the temporary folder. Everything it does is in
``aiflows_jarvis/CoreFlowModule/tokenizer_seed.py`` (``seed_at_start``), loaded here by its path: importing it by
name would execute the package's ``__init__``, which is heavy. ``AIFLOWS_JARVIS_NO_TOKENIZER_SEED=1`` turns it off.

It must never be in the way of a Python's start: nothing but ``os`` and ``sys`` (loaded at every start) is imported,
every exception is caught and nothing is printed.
"""
import os
import sys


def _seed() -> None:
    try:
        try:  # importlib.machinery's own class, which the interpreter has loaded at start (importlib has not)
            from _frozen_importlib_external import SourceFileLoader
        except ImportError:  # another Python than CPython
            from importlib.machinery import SourceFileLoader
        path = os.path.join(os.path.dirname(__file__), "aiflows_jarvis", "CoreFlowModule", "tokenizer_seed.py")
        name = f"{__name__}.tokenizer_seed"  # a module of its own, not in sys.modules: the package's copy is separate
        module = type(sys)(name)
        module.__file__ = path
        SourceFileLoader(name, path).exec_module(module)
        module.seed_at_start()
    except Exception:  # noqa: BLE001 - never in the way of a Python's start
        pass


_seed()
