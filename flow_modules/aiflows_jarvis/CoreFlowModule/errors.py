"""Typed errors. Errors caused by the model go back to the model; these stop a run with a message a user can act on."""

from __future__ import annotations


class JarvisError(Exception):
    """Base class of the errors this package raises on purpose. ``str(e)`` is meant to be shown to the user as is."""


class RunStopped(KeyboardInterrupt):
    """The user stopped the whole run (Ctrl+C, then Enter): every level lets it through without asking again."""


class ConfigurationError(JarvisError):
    """A configuration value is missing or wrong; the message names the key and what to do."""


class BadInputError(ConfigurationError):
    """What the user gave at start (the goal, the configuration, a file named on the command line) cannot be used:
    the run is refused before anything in the memory folder is moved or written (the command line exits with 2)."""


class LLMCallError(JarvisError):
    """An LLM call failed for good (after retries, or at once for errors retrying cannot fix)."""

    info = None  # the LLMErrorInfo (kind, status, the server's message) when the error came from a backend call

    def __init__(self, message: str, *, flow: str = "", cause: BaseException | None = None, retryable: bool = False):
        super().__init__(message)
        self.flow = flow
        self.cause = cause
        self.retryable = retryable


class InputUnavailableError(JarvisError):
    """A flow needs the user's answer but no answer can be read (stdin closed, scripted answers used up)."""


class EditorError(JarvisError):
    """The configured editor could not be started or failed."""


class MemoryFileError(JarvisError):
    """A memory file could not be read or written. ``reason``: why, in a few words (``it is not UTF-8 text (...)``),
    for a caller that words the message its own way (an index rebuilt says so in one line)."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


class NotRegularFileError(MemoryFileError):
    """A FIFO, a folder, a socket or a device where a memory file should be: refused, never opened blocking."""


class MemoryInUseError(JarvisError):
    """Another run holds the memory folder's lock (see ``locks.RunLock``); the message names its PID."""

    def __init__(self, message: str, *, holder_pid: int | None = None):
        super().__init__(message)
        self.holder_pid = holder_pid


class TranscriptError(JarvisError):
    """A replayed transcript does not hold what the run asks for."""


def flow_path_of(error: BaseException) -> str:
    """The path of the flow an error was raised in (set by the lean flows' ``__call__``), or ''."""
    return getattr(error, "flow_path", "") or ""


def root_cause(error: BaseException) -> BaseException:
    """The first JarvisError in an exception's chain (hydra wraps errors raised while building flows), else itself."""
    seen = set()
    current = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, JarvisError):
            return current
        current = current.__cause__ or current.__context__
    return error


def describe(error: BaseException) -> str:
    """One line for the user: where it happened and what happened."""
    where = flow_path_of(error)
    error = root_cause(error)
    what = str(error) or error.__class__.__name__
    if not isinstance(error, JarvisError):
        what = f"{error.__class__.__name__}: {what}"
    return f"{what} (in {where})" if where and where not in what else what
