"""Put the cl100k tokenizer file this module carries where tiktoken will look for it.

litellm 1.0.0 loads cl100k at import (``tiktoken.get_encoding("cl100k_base")``), and tiktoken downloads the file
unless it finds it in its cache: with no network, ``import litellm`` fails. Seeded here, the file is found by whoever
imports litellm first (the aiflows authors' scripts import ``aiflows.backends.api_info``, which imports it): the same
file tiktoken itself would download, under the same name, written once (to a temporary name, then renamed).

``offline.py`` seeds it when the package is imported. The one limit: a process that imports litellm before the
package, on a machine where the package never ran (or after the temporary folder was emptied), needs the network or
``TIKTOKEN_CACHE_DIR`` pointing at a folder that holds the file (``CoreFlowModule/startup/tiktoken_cache`` does).

The folder is the one tiktoken reads with this environment (its ``read_file_cached``): ``TIKTOKEN_CACHE_DIR`` if set,
else ``DATA_GYM_CACHE_DIR`` if set, else ``<temporary folder>/data-gym-cache``; none when the one set is empty
(tiktoken's cache is off). A folder the user chose with ``TIKTOKEN_CACHE_DIR`` is seeded too: a script that imports
litellm first needs the file there, as the package points ``TIKTOKEN_CACHE_DIR`` at its own copy only once it is
imported. A folder that cannot be written is left alone, silently.

``AIFLOWS_JARVIS_NO_TOKENIZER_SEED=1`` turns the copying off: importing the package first still works offline (it
points ``TIKTOKEN_CACHE_DIR`` at the bundled file, writing nothing).
"""

import os

TOKENIZER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiktoken_cache")
# tiktoken names a cached file sha1(url) and accepts it only if its sha256 matches.
TOKENIZER_FILE = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
TOKENIZER_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
TOKENIZER_SIZE = 1681126  # bytes: a file of another size in the cache (a truncated copy) is replaced
OPT_OUT = "AIFLOWS_JARVIS_NO_TOKENIZER_SEED"


def seeding_opted_out() -> bool:
    """True if ``AIFLOWS_JARVIS_NO_TOKENIZER_SEED`` is set to anything but empty or ``0``."""
    return os.environ.get(OPT_OUT, "") not in ("", "0")


def tiktoken_cache_dir():
    """The folder tiktoken reads the tokenizer from in a process with this environment (see the module's docstring);
    None if tiktoken's cache is off."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in os.environ:
            return os.environ[name] or None
    import tempfile

    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def tokenizer_in(folder: str) -> bool:
    """True if ``folder`` holds the tokenizer file (checked by its size: one ``stat``)."""
    try:
        return os.stat(os.path.join(folder, TOKENIZER_FILE)).st_size == TOKENIZER_SIZE
    except OSError:
        return False


def seed_tokenizer_cache(folder: str):
    """Copy the bundled tokenizer file into ``folder`` unless it is there: to a temporary name, then renamed, so a
    reader never sees half a file. Returns its path, or None if it could not be written (a read-only or full folder:
    tiktoken would then download it, as without this)."""
    target = os.path.join(folder, TOKENIZER_FILE)
    if tokenizer_in(folder):
        return target
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(TOKENIZER_DIR, TOKENIZER_FILE), "rb") as source, open(temporary, "wb") as copy:
            copy.write(source.read())
        os.replace(temporary, target)
        return target
    except OSError:
        try:
            os.remove(temporary)
        except OSError:
            pass
        return None


def seed_default_tokenizer_cache():
    """Seed the folder tiktoken reads with this environment (``tiktoken_cache_dir``), unless the user opted out or
    tiktoken's cache is off; returns the file's path there, or None."""
    if seeding_opted_out():
        return None
    folder = tiktoken_cache_dir()
    return seed_tokenizer_cache(folder) if folder else None
