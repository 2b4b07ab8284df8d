"""The package works with no network and no tokenizer cache anywhere but its own (checked in a fresh process)."""
from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import textwrap

import pytest

from aiflows_jarvis.CoreFlowModule.offline import TOKENIZER_DIR, TOKENIZER_FILE, bundled_tokenizer_ok
from subprocess_guard import check_guarded_run, guarded_environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = '''
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
'''


def test_the_bundled_tokenizer_is_intact():
    assert bundled_tokenizer_ok(), f"{TOKENIZER_DIR}/{TOKENIZER_FILE} is missing or corrupt"


USER_SCRIPT = '''
import aiflows_jarvis  # a user's own script: the package first, then aiflows' backends directly
from aiflows.backends.api_info import ApiInfo
from aiflows.backends.llm_lite import LiteLLMBackend
import litellm
assert litellm.telemetry is False and litellm.suppress_debug_info is True
LiteLLMBackend(api_infos=[ApiInfo(backend_used="openai", api_key="sk-test")], model_name="gpt-4")
print("OK")
'''


def offline_environment(tmp_path):
    """An environment whose Python records (and refuses) every connection but loopback, with no tokenizer cache."""
    empty_tmp = tmp_path / "tmp"
    empty_tmp.mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "PYTHONPATH")}
    base.update(PYTHONPATH=ROOT, TMPDIR=str(empty_tmp), HOME=str(tmp_path))
    env, attempts = guarded_environment(str(tmp_path / "guard"), base)
    return env, attempts, empty_tmp


@pytest.mark.parametrize("script", [SCRIPT, USER_SCRIPT], ids=["every-module", "user-script"])
def test_import_and_build_a_chat_flow_with_the_network_down(tmp_path, script):
    env, attempts, empty_tmp = offline_environment(tmp_path)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("OK")
    check_guarded_run(attempts)
    # tiktoken's default cache holds the bundled file only (seeded for processes that import litellm first)
    assert os.listdir(empty_tmp / "data-gym-cache") == [TOKENIZER_FILE], "tiktoken downloaded into its cache"
    assert filecmp.cmp(empty_tmp / "data-gym-cache" / TOKENIZER_FILE, os.path.join(TOKENIZER_DIR, TOKENIZER_FILE),
                       shallow=False)
    assert not (tmp_path / ".flow_cache").exists(), "no disk cache is opened by the package's flows"


def test_the_command_line_needs_no_network_to_start(tmp_path):
    env, attempts, _ = offline_environment(tmp_path)
    env = {k: v for k, v in env.items() if k not in ("OPENAI_API_KEY", "AZURE_API_KEY")}
    done = subprocess.run([sys.executable, os.path.join(ROOT, "run_jarvis.py"), "a goal"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 2 and "OPENAI_API_KEY" in done.stdout, done.stdout + done.stderr
    check_guarded_run(attempts)


LITELLM_FIRST = '''
from aiflows.backends.api_info import ApiInfo  # the aiflows authors' order: litellm is imported first
import litellm
assert litellm.utils.encoding.encode("hello world") == [15339, 1917]
print("OK")
'''


def test_litellm_imported_before_the_package_finds_the_tokenizer_once_the_package_ran_here(tmp_path):
    env, attempts, empty_tmp = offline_environment(tmp_path)
    first = subprocess.run([sys.executable, "-c", "import aiflows_jarvis"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr[-3000:]
    check_guarded_run(attempts)
    done = subprocess.run([sys.executable, "-c", LITELLM_FIRST], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0 and done.stdout.startswith("OK"), done.stderr[-3000:]
    if os.path.exists(attempts):  # litellm's price list (it falls back to its own copy), never the tokenizer
        with open(attempts) as f:
            tried = f.read()
        assert "openaipublic" not in tried and "blob.core.windows.net" not in tried, tried
