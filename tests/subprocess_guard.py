"""The network guard for tests that start another Python process (run_jarvis.py, a scratch aiflows project).

The autouse guards of conftest patch this process only. A child Python gets the same protection from a
``sitecustomize`` module put first on its ``PYTHONPATH``: every connection and name lookup but loopback and AF_UNIX
fails at once and is recorded. The module also leaves a mark that it was loaded, so a test can tell "nothing tried
the network" from "the guard never ran".
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Dict, Iterator, Mapping, Optional, Tuple

SITECUSTOMIZE = """
import os, socket
_log = os.environ["NETWORK_ATTEMPTS_LOG"]
with open(_log + ".armed", "a") as _f:
    _f.write(str(os.getpid()) + "\\n")
def _record(what):
    with open(_log, "a") as f:
        f.write(str(what) + "\\n")
_LOOPBACK = ("127.", "::1", "localhost")
_real_connect = socket.socket.connect
def connect(self, address):
    if self.family not in (socket.AF_INET, socket.AF_INET6):
        return _real_connect(self, address)
    if not str(address[0]).startswith(_LOOPBACK):
        _record(address)
        raise OSError("network is unreachable (test)")
    return _real_connect(self, address)
socket.socket.connect = connect
_real_getaddrinfo = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if host not in (None, "", b"", "0.0.0.0", "::") and not str(host).startswith(_LOOPBACK):
        _record(host)
        raise socket.gaierror(-3, "Temporary failure in name resolution (test)")
    return _real_getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
"""


def guarded_environment(
    folder: str, env: Optional[Mapping[str, str]] = None, keep_pythonpath: bool = True
) -> Tuple[Dict[str, str], str]:
    """``env`` (default: this process's) with the guard installed from ``folder``; returns it and the attempts log."""
    site = os.path.join(folder, "site")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write(SITECUSTOMIZE)
    environment = dict(os.environ if env is None else env)
    paths = [site]
    if keep_pythonpath and environment.get("PYTHONPATH"):
        paths.append(environment["PYTHONPATH"])
    attempts = os.path.join(folder, "network_attempts.log")
    environment.update(PYTHONPATH=os.pathsep.join(paths), NETWORK_ATTEMPTS_LOG=attempts)
    return environment, attempts


def check_guarded_run(attempts: str) -> None:
    """Fail if the guard did not load in the child, or if the child tried the network."""
    assert os.path.exists(attempts + ".armed"), "the network guard did not load in the child process"
    if os.path.exists(attempts):
        with open(attempts) as f:
            raise AssertionError(f"the child process tried the network: {f.read()}")


@contextlib.contextmanager
def network_guarded(env: Optional[Mapping[str, str]] = None, keep_pythonpath: bool = True) -> Iterator[Dict[str, str]]:
    """An environment for a child Python with the guard; on exit, checks it loaded and nothing tried the network."""
    with tempfile.TemporaryDirectory(prefix="jarvis-test-guard-") as folder:
        environment, attempts = guarded_environment(folder, env, keep_pythonpath)
        yield environment
        check_guarded_run(attempts)
