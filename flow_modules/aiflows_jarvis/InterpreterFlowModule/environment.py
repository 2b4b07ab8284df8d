"""The environment generated code gets: no secrets, no LLM endpoints, the kernel's Python first on PATH."""

from __future__ import annotations

import fnmatch
import functools
import logging
import os
import re
import sys
from typing import Dict, Iterable, List, Optional, Tuple

log = logging.getLogger(__name__)

# Names whose parts (split at "_") say they hold a secret: OPENAI_KEY, GITHUB_TOKEN, ANTHROPIC_AUTH_TOKEN, DB_PASS,
# KEY_FILE... Whole parts only, so that KEYBOARD_LAYOUT, TOKENIZERS_PARALLELISM or PASSENGER_COUNT are kept.
_SECRET_PARTS = (
    "KEY",
    "KEYS",
    "APIKEY",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "AUTHTOKEN",
    "WEBHOOK",
    "WEBHOOKS",
)
# Words that say "secret" wherever they are in a name (PGPASSWORD, AWSSECRETKEY): no harmless name contains them.
_SECRET_WORDS = ("SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "APIKEY", "WEBHOOK")
# LLM providers (litellm's names): their endpoints, API versions and organizations say which account a run uses.
# (Azure: only Azure OpenAI's; AZURE_STORAGE_ENDPOINT and the like are other services' and not secrets.)
# (Not HF_: HF_ENDPOINT names a Hub mirror, which downloads from the shell need; HF_TOKEN goes as a token.)
LLM_PROVIDERS = (
    "OPENAI",
    "AZURE_OPENAI",
    "ANTHROPIC",
    "COHERE",
    "MISTRAL",
    "GROQ",
    "GEMINI",
    "VERTEXAI",
    "HUGGINGFACE",
    "TOGETHER",
    "TOGETHERAI",
    "REPLICATE",
    "OPENROUTER",
    "DEEPSEEK",
    "PERPLEXITY",
    "PERPLEXITYAI",
    "FIREWORKS",
    "FIREWORKS_AI",
    "XAI",
    "OLLAMA",
    "LITELLM",
    "VOYAGE",
    "AI21",
    "NVIDIA_NIM",
    "CLOUDFLARE",
)
LLM_SETTINGS = ("API_BASE", "BASE_URL", "API_URL", "API_VERSION", "ENDPOINT", "ORGANIZATION", "ORG_ID", "PROJECT_ID")

#: Variables never passed to the kernel or the shell (shell-style patterns, matched on the upper-cased name):
#: secrets by name, and the LLM providers' endpoints (``OPENAI_API_BASE``, ``AZURE_OPENAI_API_VERSION``, ...).
DEFAULT_ENV_SCRUB: Tuple[str, ...] = (
    tuple(p for part in _SECRET_PARTS for p in (part, f"{part}_*", f"*_{part}", f"*_{part}_*"))
    + tuple(f"*{word}*" for word in _SECRET_WORDS)
    + ("*_PWD", "*_PWD_*", "AUTH", "AUTH_*", "*_AUTH")  # NPM_CONFIG__AUTH, BASIC_AUTH; not SSH_AUTH_SOCK
    + ("*_API_BASE", "AZURE_API_VERSION", "AZURE_API_TYPE")  # litellm's names for Azure OpenAI
    + tuple(f"{provider}_*{setting}" for provider in LLM_PROVIDERS for setting in LLM_SETTINGS)
)

# Values that are credentials whatever the variable's name:
# * a URL with a password (DATABASE_URL=postgres://user:password@host/db, PIP_INDEX_URL=https://u:p@host/simple),
#   or with a token in place of the user (https://ghp_...@github.com: 20 characters or more);
# * a URL with a secret in its query (jdbc:...?user=me&password=..., ...?api_key=..., a signed URL's sig=...);
# * a webhook's URL (hooks.slack.com, Discord's, Teams', any with "webhook" in it): whoever has it can post;
# * a connection string's password (Server=...;Password=...;, AccountKey=..., SharedAccessKey=...);
# * an Authorization header's value (Bearer ..., Basic ..., Token ...), a JSON Web Token;
# * the key formats of well-known services (OpenAI and Anthropic sk-..., GitHub, GitLab, Slack, AWS, Hugging Face,
#   Google, Stripe).
# Such a variable is dropped, not rewritten without its credentials: a missing DATABASE_URL fails at once and says
# its name, where a URL stripped of its user would connect as someone else or fail later for a reason less clear.
_SECRET_WORD = r"(?:pass|passwd|password|pwd|secret|token|key|apikey|sig|signature|credential|auth|accountkey)"
_SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*://(?:[^/?#@\s:]*:[^/?#\s]*|[A-Za-z0-9_\-.~%]{20,})@"
    r"|://\S*?[?&;](?:[\w.\-]*[_.\-])?" + _SECRET_WORD + r"=[^&#;\s]"
    r"|https?://(?:hooks\.|\S*webhook)"
    r"|(?:^|[;,\s_])(?:password|passwd|pwd|accountkey|sharedaccesskey|sharedaccesssignature)\s*=\s*[^;\s]"
    r"|^\s*(?:authorization\s*:\s*)?(?:bearer|basic|token|digest)\s+[\w\-.~+/]{8,}=*\s*$"
    r"|^\s*(?:sk-[A-Za-z0-9_\-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w\-]{20,}"
    r"|xox[abposr]-[\w\-]{10,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{30,}|AIza[\w\-]{35}|[sr]k_live_\w{20,}"
    r"|eyJ[\w\-]{10,}\.eyJ[\w\-]{10,}\.[\w\-]*)\s*$",
    re.IGNORECASE,
)

# Folders a system Python lives in: not moved to the front of the shell's PATH (that would put /usr/bin before
# /usr/local/bin and ~/.local/bin for every command); their pip is found there anyway.
_SYSTEM_BIN_DIRS = {"/usr/bin", "/bin", "/usr/local/bin"}


@functools.lru_cache(maxsize=8)
def scrub_matcher(patterns: Tuple[str, ...]) -> "re.Pattern[str]":
    """One regular expression for all the patterns, rather than a few hundred fnmatch calls per variable."""
    return re.compile("|".join(fnmatch.translate(p.upper()) for p in patterns) or r"(?!)")


def is_secret_value(value: str) -> bool:
    """The value is a credential whatever its variable's name (see ``_SECRET_VALUE``)."""
    return bool(value) and "\0" not in value and _SECRET_VALUE.search(value) is not None


def scrubbed_secrets(
    patterns: Iterable[str] = DEFAULT_ENV_SCRUB, base: Optional[Dict[str, str]] = None
) -> Dict[str, str]:
    """``{name: value}`` of the variables of ``base`` (default ``os.environ``) the code does not get: those whose
    name matches ``patterns`` (the LLM endpoints among them) and those whose value is a credential. What must be
    redacted by value from whatever is written or sent after a run.

    :param patterns: shell-style name patterns (``DEFAULT_ENV_SCRUB``, or the configuration's ``env_scrub``).
    :param base: the environment to look at."""
    matcher = scrub_matcher(tuple(patterns))
    env = os.environ if base is None else base
    return {name: value for name, value in env.items() if matcher.match(name.upper()) or is_secret_value(value)}


def scrubbed_environment(
    patterns: Iterable[str] = DEFAULT_ENV_SCRUB, base: Optional[Dict[str, str]] = None
) -> Dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without the variables ``scrubbed_secrets`` names."""
    env = dict(os.environ if base is None else base)
    for name in scrubbed_secrets(patterns, env):
        del env[name]
    return env


def code_environment(workspace: str, patterns: Iterable[str] = DEFAULT_ENV_SCRUB) -> Dict[str, str]:
    """The shell's environment (the kernel's adds the workspace to PYTHONPATH): no secrets, and the kernel's
    Python first on PATH, so that `pip install` and `python` in shell code use the kernel's interpreter.

    The workspace is not put on the shell's PYTHONPATH: a workspace file named like a standard module (`csv.py`)
    would shadow it for pip and every Python program run from bash. `python script.py` and `python -c` run in
    the workspace find its modules without it."""
    env = scrubbed_environment(patterns)
    env["MPLBACKEND"] = "Agg"
    env["PWD"] = workspace
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.pop("JPY_PARENT_PID", None)
    bin_dir = os.path.dirname(sys.executable)
    if sys.executable and bin_dir not in _SYSTEM_BIN_DIRS:  # moving /usr/bin first would reorder everything
        env["PATH"] = os.pathsep.join(
            [bin_dir] + [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p != bin_dir]
        )
    if sys.executable:
        if sys.prefix != sys.base_prefix:  # a virtual environment: say so, as its `activate` script would
            env["VIRTUAL_ENV"] = sys.prefix
        else:  # one the user activated is not the kernel's
            env.pop("VIRTUAL_ENV", None)
    return env


def hide_secrets_from_proc(patterns: Iterable[str] = DEFAULT_ENV_SCRUB) -> List[str]:
    """Blank, in this process's own ``/proc/<pid>/environ``, the values of the variables the kernel does not get.

    The kernel's code can walk up its ancestors and read this process's ``/proc/<pid>/environ``: the block the
    process started with, which ``os.environ`` changes never touch. The values are overwritten there through
    ``/proc/self/mem`` after ``setenv`` moved the C library's copy out, so ``os.environ``, ``getenv`` and child
    processes still see the variables. ``NAME=`` stays. The processes above this one are out of reach (the sandbox
    hides them).

    :param patterns: name patterns of the variables to blank (see ``scrubbed_environment``).
    :return: the names blanked; empty where there was nothing to blank, or off Linux.
    """
    import ctypes

    env_names = [name for name in os.environ if name not in scrubbed_environment(patterns, {name: os.environ[name]})]
    if not env_names or not sys.platform.startswith("linux"):
        return []
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start and env_end: fields 50 and 51 of proc(5)
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            wanted = {os.fsencode(name) for name in env_names}
            libc = ctypes.CDLL(None, use_errno=True)
            blanked, offset = [], 0
            for entry in block.split(b"\0"):
                name, equals, value = entry.partition(b"=")
                if equals and value and name in wanted:
                    # the C library's entry leaves the block first: setenv copies the value to the heap
                    if libc.setenv(name, value, 1) == 0:
                        mem.seek(start + offset + len(name) + 1)
                        mem.write(b"\0" * len(value))
                        blanked.append(os.fsdecode(name))
                offset += len(entry) + 1
            return blanked
    except (OSError, ValueError, IndexError, AttributeError) as error:
        log.debug("could not blank the secrets in /proc/self/environ: %s", error)
        return []
