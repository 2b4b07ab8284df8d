"""The package works with no network and no tokenizer cache anywhere but its own (checked in a fresh process)."""

from __future__ import annotations

import filecmp
import glob
import hashlib
import os
import subprocess
import sys
import tempfile
import textwrap
import zipfile

import pytest
from helpers import pip
from linked_venv import linked_venv
from subprocess_guard import check_guarded_run, guarded_environment

from aiflows_jarvis.CoreFlowModule.startup import tokenizer_seed
from aiflows_jarvis.CoreFlowModule.startup.offline import bundled_tokenizer_ok
from aiflows_jarvis.CoreFlowModule.startup.tokenizer_seed import (
    OPT_OUT,
    TOKENIZER_DIR,
    TOKENIZER_FILE,
    TOKENIZER_SHA256,
    TOKENIZER_SIZE,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import importlib, os, pkgutil
import aiflows_jarvis as package
assert os.environ["TIKTOKEN_CACHE_DIR"].endswith("tiktoken_cache"), os.environ["TIKTOKEN_CACHE_DIR"]
names = [m.name for m in pkgutil.iter_modules(package.__path__) if m.name.endswith("Module")]
for name in names:
    importlib.import_module("aiflows_jarvis." + name)
from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
flow = ChatAtomicFlow.instantiate_from_default_config(
    backend={"api_infos": [{"backend_used": "openai", "api_key": "sk-test"}]})
import litellm, tiktoken
from aiflows.backends.llm_lite import LiteLLMBackend
assert isinstance(flow.backend, LiteLLMBackend), type(flow.backend)
assert litellm.telemetry is False and litellm.suppress_debug_info is True
assert tiktoken.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
print("OK", len(names), "modules")
"""


def test_the_bundled_tokenizer_is_intact():
    assert bundled_tokenizer_ok(), f"{TOKENIZER_DIR}/{TOKENIZER_FILE} is missing or corrupt"


USER_SCRIPT = """
import aiflows_jarvis  # a user's own script: the package first, then aiflows' backends directly
from aiflows.backends.api_info import ApiInfo
from aiflows.backends.llm_lite import LiteLLMBackend
import litellm
assert litellm.telemetry is False and litellm.suppress_debug_info is True
LiteLLMBackend(api_infos=[ApiInfo(backend_used="openai", api_key="sk-test")], model_name="gpt-4")
print("OK")
"""


def offline_environment(tmp_path, pythonpath=os.path.join(ROOT, "flow_modules")):
    """An environment whose Python records (and refuses) every connection but loopback, with no tokenizer cache;
    ``pythonpath``: this repository (its package ahead of any installed one), or None."""
    empty_tmp = tmp_path / "tmp"
    empty_tmp.mkdir(parents=True)
    unset = ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "PYTHONPATH", "TEMP", "TMP", OPT_OUT)
    base = {k: v for k, v in os.environ.items() if k not in unset}
    base.update(TMPDIR=str(empty_tmp), HOME=str(tmp_path))
    if pythonpath:
        base.update(PYTHONPATH=pythonpath)
    env, attempts = guarded_environment(str(tmp_path / "guard"), base)
    return env, attempts, empty_tmp


def tokenizer_downloads(attempts):
    """The connections the guarded child tried to the host of the tokenizer files (tiktoken's download); litellm's
    price list, which it falls back from to its own copy, may be among the other attempts."""
    if not os.path.exists(attempts):
        return []
    with open(attempts) as f:
        return [line for line in f.read().splitlines() if "openaipublic" in line or "blob.core.windows.net" in line]


@pytest.mark.parametrize("script", [SCRIPT, USER_SCRIPT], ids=["every-module", "user-script"])
def test_import_and_build_a_chat_flow_with_the_network_down(tmp_path, script):
    env, attempts, empty_tmp = offline_environment(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("OK")
    check_guarded_run(attempts)
    # tiktoken's default cache holds the bundled file only (seeded for processes that import litellm first)
    assert os.listdir(empty_tmp / "data-gym-cache") == [TOKENIZER_FILE], "tiktoken downloaded into its cache"
    assert filecmp.cmp(
        empty_tmp / "data-gym-cache" / TOKENIZER_FILE, os.path.join(TOKENIZER_DIR, TOKENIZER_FILE), shallow=False
    )
    assert not (tmp_path / ".flow_cache").exists(), "no disk cache is opened by the package's flows"


def test_the_command_line_needs_no_network_to_start(tmp_path):
    env, attempts, _ = offline_environment(tmp_path)
    env = {k: v for k, v in env.items() if k not in ("OPENAI_API_KEY", "AZURE_API_KEY")}
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_jarvis.py"), "a goal"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 2 and "OPENAI_API_KEY" in done.stdout, done.stdout + done.stderr
    check_guarded_run(attempts)


LITELLM_FIRST = """
from aiflows.backends.api_info import ApiInfo  # the aiflows authors' order: litellm is imported first
import litellm
assert litellm.utils.encoding.encode("hello world") == [15339, 1917]
print("OK")
"""


def test_litellm_imported_before_the_package_finds_the_tokenizer_once_the_package_ran_here(tmp_path):
    env, attempts, empty_tmp = offline_environment(tmp_path)
    first = subprocess.run(
        [sys.executable, "-c", "import aiflows_jarvis"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    check_guarded_run(attempts)
    done = subprocess.run(
        [sys.executable, "-c", LITELLM_FIRST], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0 and done.stdout.startswith("OK"), done.stderr[-3000:]
    assert not tokenizer_downloads(attempts)


# --- The seed: CoreFlowModule/startup/tokenizer_seed.py ---

TOKENIZER_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@pytest.fixture
def seed_environment(tmp_path, monkeypatch):
    """This process with no tokenizer cache variable, no opt-out and TMPDIR an empty folder (tempfile's choice
    forgotten); gives tiktoken's default cache folder there (not made yet). All put back afterwards."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "TEMP", "TMP", OPT_OUT):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp_path / "tmp" / "data-gym-cache"


def tiktoken_reads_it_offline() -> bool:
    """tiktoken's own cache lookup, in this process (network guarded), finds the tokenizer file."""
    from tiktoken.load import read_file_cached

    assert hashlib.sha1(TOKENIZER_URL.encode()).hexdigest() == TOKENIZER_FILE  # the name tiktoken gives the file
    return len(read_file_cached(TOKENIZER_URL, TOKENIZER_SHA256)) == TOKENIZER_SIZE


def test_the_seed_copies_the_tokenizer_where_tiktoken_looks_and_then_only_looks(seed_environment, monkeypatch):
    folder = seed_environment
    assert tokenizer_seed.tiktoken_cache_dir() == str(folder)
    tokenizer_seed.seed_default_tokenizer_cache()
    assert os.listdir(folder) == [TOKENIZER_FILE], "the file, and no temporary copy left"
    assert filecmp.cmp(folder / TOKENIZER_FILE, os.path.join(TOKENIZER_DIR, TOKENIZER_FILE), shallow=False)
    assert tiktoken_reads_it_offline()
    before = os.stat(folder / TOKENIZER_FILE)
    tokenizer_seed.seed_default_tokenizer_cache()  # the file is there: one stat, no copy
    after = os.stat(folder / TOKENIZER_FILE)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_the_seed_replaces_a_truncated_copy(seed_environment):
    folder = seed_environment
    folder.mkdir()
    (folder / TOKENIZER_FILE).write_bytes(b"half a file")
    assert tokenizer_seed.seed_default_tokenizer_cache() == str(folder / TOKENIZER_FILE)
    assert filecmp.cmp(folder / TOKENIZER_FILE, os.path.join(TOKENIZER_DIR, TOKENIZER_FILE), shallow=False)


@pytest.mark.parametrize("variable", ["DATA_GYM_CACHE_DIR", "TIKTOKEN_CACHE_DIR"])
def test_the_seed_follows_tiktokens_cache_variables(seed_environment, tmp_path, monkeypatch, variable):
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path / "data-gym"))
    if variable == "TIKTOKEN_CACHE_DIR":  # it comes first
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    chosen = tmp_path / ("tiktoken" if variable == "TIKTOKEN_CACHE_DIR" else "data-gym")
    tokenizer_seed.seed_default_tokenizer_cache()
    assert os.listdir(chosen) == [TOKENIZER_FILE] and tiktoken_reads_it_offline()
    assert sorted(os.listdir(tmp_path)) == sorted(["tmp", chosen.name]), "only the folder tiktoken reads"
    assert not seed_environment.exists()
    monkeypatch.setenv(variable, "")  # tiktoken's cache off: it always downloads, nothing to seed
    assert tokenizer_seed.tiktoken_cache_dir() is None and tokenizer_seed.seed_default_tokenizer_cache() is None


def test_the_seed_can_be_turned_off_and_a_folder_it_cannot_write_is_left_alone(seed_environment, tmp_path, monkeypatch):
    monkeypatch.setenv(OPT_OUT, "1")
    assert tokenizer_seed.seed_default_tokenizer_cache() is None and not seed_environment.exists()
    monkeypatch.setenv(OPT_OUT, "0")
    assert tokenizer_seed.seed_default_tokenizer_cache() == str(seed_environment / TOKENIZER_FILE)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path / "a-file" / "cache"))  # cannot be made
    assert tokenizer_seed.seed_default_tokenizer_cache() is None


LITELLM_FIRST_INSTALLED = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "import aiflows_jarvis"], check=True)  # the package ran once on this machine
from aiflows.backends.api_info import ApiInfo  # then a script that imports litellm first
import litellm
assert "aiflows_jarvis" not in sys.modules
assert litellm.utils.encoding.encode("hello world") == [15339, 1917]
import aiflows_jarvis
print(aiflows_jarvis.__file__)
"""


def check_installed_package_runs_offline(python, folder, package_folder):
    """In ``folder``, offline with an empty temporary folder: the package imports from ``package_folder``, and once
    it ran, a script importing litellm first finds the tokenizer."""
    env, attempts, empty_tmp = offline_environment(folder, pythonpath=None)
    done = subprocess.run(
        [python, "-c", LITELLM_FIRST_INSTALLED], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert os.path.dirname(done.stdout.strip()) == str(package_folder), done.stdout
    assert not tokenizer_downloads(attempts) and os.listdir(empty_tmp / "data-gym-cache") == [TOKENIZER_FILE]


def test_a_wheel_holds_the_package_alone_and_runs_offline(tmp_path, project_copy):
    python, site = linked_venv(tmp_path / "venv")
    pip(python, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(project_copy))
    [wheel] = glob.glob(str(tmp_path / "dist" / "aiflows_jarvis-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        entry_points = archive.read("aiflows_jarvis-0.1.0.dist-info/entry_points.txt").decode()
    assert tops == {"aiflows_jarvis", "aiflows_jarvis-0.1.0.dist-info"}, tops
    assert "jarvis = aiflows_jarvis.app.jarvis:main" in entry_points, entry_points
    pip(python, "install", "--no-deps", "--ignore-installed", wheel)
    (tmp_path / "run").mkdir()
    check_installed_package_runs_offline(python, tmp_path / "run", os.path.join(site, "aiflows_jarvis"))
    for command in ("jarvis", "autogpt"):
        done = subprocess.run(
            [os.path.join(os.path.dirname(python), command), "--help"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and f"usage: {command}" in done.stdout, done.stdout + done.stderr
    pip(python, "uninstall", "-y", "aiflows-jarvis")
    assert not os.path.exists(os.path.join(site, "aiflows_jarvis"))


def test_an_editable_install_imports_the_checkouts_sources(tmp_path, project_copy):
    python, site = linked_venv(tmp_path / "venv")
    pip(python, "install", "--no-deps", "--no-build-isolation", "--ignore-installed", "-e", str(project_copy))
    (tmp_path / "run").mkdir()
    check_installed_package_runs_offline(
        python, tmp_path / "run", os.path.join(str(project_copy), "flow_modules", "aiflows_jarvis")
    )
    pip(python, "uninstall", "-y", "aiflows-jarvis")


def test_litellm_in_this_process_was_imported_quietly():
    """conftest imports aiflows_jarvis before anything that imports litellm (`# isort: split` keeps that order when
    imports are sorted); litellm imported first would send telemetry on every error, which the network guard
    reports only in the tests that make one."""
    import litellm

    assert litellm.telemetry is False and litellm.suppress_debug_info is True
