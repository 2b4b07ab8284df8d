"""Checking staged modules: each in its own Python process that stands for another aiflows project (offline,
without this repository's package), and optionally in a fresh virtual environment."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

from .demos import DEMOS
from .source import PublishError, dependency_closure, flow_classes

# Runs first in every process that checks a staged module, so that the process sees what a separate aiflows project
# sees. `flow_modules` and everything under it resolve only from the project's own `flow_modules/` folder (where
# FlowVerse syncs, in the working directory): an installed copy of this repository is never consulted (an editable
# install's finder maps `aiflows_jarvis` to the source folder from any directory, and would hide staged code
# that still imports the source namespace). Connections other than loopback and Unix sockets are refused: the check
# is offline. `foreign_flow_modules` names what was loaded from elsewhere anyway.
ISOLATION = r'''
import importlib.machinery as _machinery
import os as _os
import socket as _socket
import sys as _sys

PROJECT = _os.path.realpath(_os.getcwd())


class _ProjectFlowModules:
    """Finds `flow_modules` in PROJECT only, and its submodules in their parent package's folders only;
    never this repository's `aiflows_jarvis`."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname == "aiflows_jarvis" or fullname.startswith("aiflows_jarvis."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (the source package is out of reach)",
                                      name=fullname)
        if fullname != "flow_modules" and not fullname.startswith("flow_modules."):
            return None
        spec = _machinery.PathFinder.find_spec(fullname, [PROJECT] if fullname == "flow_modules" else path)
        if spec is None:  # raise, not return None: the finders after this one (an editable install) get no say
            raise ModuleNotFoundError(f"No module named {fullname!r} in the project {PROJECT}", name=fullname)
        return spec


_sys.meta_path.insert(0, _ProjectFlowModules)
for _name in [n for n in _sys.modules if n.split(".")[0] in ("flow_modules", "aiflows_jarvis")]:
    del _sys.modules[_name]


def _loopback(address):
    host = address[0] if isinstance(address, tuple) and address else address
    host = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    return host in ("localhost", "::1", "0.0.0.0", "") or host.startswith(("127.", "::ffff:127."))


def _offline(real):
    def guarded(sock, address, *args):
        if sock.family in (_socket.AF_INET, _socket.AF_INET6) and not _loopback(address):
            raise ConnectionRefusedError(f"offline: no connection to {address!r} from this process")
        return real(sock, address, *args)
    return guarded


def _offline_getaddrinfo(host, *args, _real=_socket.getaddrinfo, **kwargs):
    if host is not None and not _loopback(host):
        raise _socket.gaierror(f"offline: {host!r} is not looked up from this process")
    return _real(host, *args, **kwargs)


_socket.socket.connect = _offline(_socket.socket.connect)
_socket.socket.connect_ex = _offline(_socket.socket.connect_ex)
_socket.getaddrinfo = _offline_getaddrinfo


def foreign_flow_modules(staged, namespace):
    """Loaded `flow_modules.*` modules whose files are neither under `staged` nor the sync root's own packages."""
    root = _os.path.join(PROJECT, "flow_modules")
    own = {root, _os.path.join(root, "__init__.py"), _os.path.join(root, namespace),
           _os.path.join(root, namespace, "__init__.py")}
    foreign = []
    for name, module in list(_sys.modules.items()):
        if name == "flow_modules" or name.startswith("flow_modules."):
            places = [module.__file__] if getattr(module, "__file__", None) else list(getattr(module, "__path__", []))
            for place in places:
                real = _os.path.realpath(place)
                if real not in own and not real.startswith(staged + _os.sep):
                    foreign.append(f"{name} ({real})")
    return foreign
'''

_CHECK = r"""
import importlib, json, traceback
namespace, staged, module = _sys.argv[1], _os.path.realpath(_sys.argv[2]), _sys.argv[3]
classes = json.loads(_sys.argv[4])
here = _os.path.join(staged, module)
try:
    from aiflows import flow_verse
    flow_verse.sync_dependencies([{"url": f"{namespace}/{module}", "revision": here}])
    imported = importlib.import_module(f"flow_modules.{namespace}.{module}")
    if _os.path.isdir(_os.path.join(PROJECT, "flow_modules", namespace, "ChatFlowModule")):  # it has LLM chats
        from aiflows.backends.api_info import ApiInfo
        chat = importlib.import_module(f"flow_modules.{namespace}.ChatFlowModule")
        chat.set_backend_factory(chat.with_api_infos([ApiInfo(backend_used="openai", api_key="sk-check")]))
    for name in classes:
        cls = getattr(imported, name)
        origin = _os.path.realpath(_sys.modules[cls.__module__].__file__)
        if not origin.startswith(here + _os.sep):
            raise ImportError(f"{name} was loaded from {origin}, not from the staged {module}")
        flow = cls.instantiate_from_default_config()
        if hasattr(flow, "close"):
            flow.close()
    foreign = foreign_flow_modules(staged, namespace)
    if foreign:
        raise ImportError("loaded from outside the staged folder: " + ", ".join(foreign))
    result = "ok"
except BaseException:
    result = traceback.format_exc(limit=-8)  # the innermost frames: where it failed
print("\n" + json.dumps({"check": result}))
"""


def project_env() -> Dict[str, str]:
    """The environment of a process that stands for another project: no PYTHONPATH into this repository, and no
    tokenizer cache chosen by this repository's package (the staged CoreFlowModule must provide its own)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TIKTOKEN_CACHE_DIR")}


def project_python(code: str, python: Optional[str] = None) -> List[str]:
    """The command that runs ``code`` after ISOLATION, as a separate aiflows project whose folder is the working
    directory would (append the script's arguments; run it with ``env=project_env()``)."""
    return [python or sys.executable, "-c", ISOLATION + "\n" + code]


def check_module(staged_namespace_dir: str, namespace: str, module: str, python: Optional[str] = None) -> str:
    """Check one staged module in its own process, started in a fresh project folder: "ok", or what went wrong."""
    command = project_python(_CHECK, python) + [
        namespace,
        staged_namespace_dir,
        module,
        json.dumps(flow_classes(module)),
    ]
    with tempfile.TemporaryDirectory(prefix="publish_check_") as project:
        try:
            done = subprocess.run(
                command,
                cwd=project,
                env=project_env(),
                capture_output=True,
                text=True,
                timeout=600,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return "the check did not finish within 600 s"
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"check": ')]
    if not lines:
        return f"the check process failed (exit status {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(lines[-1])["check"]


def check_staged(staged_namespace_dir: str, namespace: str, modules: List[str]) -> Dict[str, str]:
    """Import each staged module and instantiate its flow classes from their default configurations. Each module is
    checked in its own process (a dependency one module fails to declare is not hidden by another module loaded
    earlier), a few at a time."""
    # the biggest trees first: they take longest, and the small ones fill the gaps at the end
    order = sorted(modules, key=lambda m: -len(dependency_closure([m])))
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        results = dict(zip(order, pool.map(lambda m: check_module(staged_namespace_dir, namespace, m), order)))
    return {m: results[m] for m in modules}


def fresh_venv(folder: str, requirements_file: str) -> str:
    """A new virtual environment in ``folder`` with only aiflows 0.1.7 and ``requirements_file`` installed by pip
    (which must reach a package index); returns its python. Raises PublishError if pip fails."""
    venv = os.path.join(folder, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
    python = os.path.join(venv, "Scripts" if os.name == "nt" else "bin", "python")
    install = [python, "-m", "pip", "install", "-q", "aiflows==0.1.7", "-r", requirements_file]
    done = subprocess.run(install, capture_output=True, text=True)
    if done.returncode != 0:
        raise PublishError(f"pip failed: {done.stderr[-1000:]}")
    return python


def run_demo(python: str, module_dir: str) -> str:
    """Run a staged module's `run.py --yes` in its folder, isolated like a separate project: "ok" or the error."""
    code = "import runpy\n_sys.argv = ['run.py', '--yes']\nrunpy.run_path('run.py', run_name='__main__')"
    # what the demo makes, removed after it; a folder of the module's own (CoreFlowModule/memory/, code) is kept
    made = [name for name in ("flow_modules", "memory") if not os.path.lexists(os.path.join(module_dir, name))]
    try:
        done = subprocess.run(
            project_python(code, python),
            cwd=module_dir,
            env=project_env(),
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return "run.py did not finish within 300 s"
    finally:
        for leftover in made:
            shutil.rmtree(os.path.join(module_dir, leftover), ignore_errors=True)
    return "ok" if done.returncode == 0 else f"run.py failed: {done.stderr[-1500:]}"


def verify_venv(staged_namespace_dir: str, namespace: str, modules: List[str], say=print) -> Dict[str, str]:
    """For each module, in a fresh virtual environment holding only aiflows and the module's pip_requirements.txt:
    the check of check_staged, then the demo (`run.py --yes`) of a module that needs no LLM. Give it a --local
    staging: dependencies are then synced from the staged folders, never from the hub."""
    report = {}
    for module in modules:
        module_dir = os.path.join(staged_namespace_dir, module)
        with tempfile.TemporaryDirectory(prefix="publish_venv_") as folder:
            try:
                python = fresh_venv(folder, os.path.join(module_dir, "pip_requirements.txt"))
            except (PublishError, subprocess.CalledProcessError, OSError) as error:
                report[module] = f"no virtual environment: {error}"
            else:
                report[module] = check_module(staged_namespace_dir, namespace, module, python)
                if report[module] == "ok" and not (
                    DEMOS.get(module, {}).get("llm") or DEMOS.get(module, {}).get("network")
                ):
                    report[module] = run_demo(python, module_dir)
        say(f"{module}: {report[module] if report[module] == 'ok' else 'FAILED'} in a fresh virtual environment")
    return report
