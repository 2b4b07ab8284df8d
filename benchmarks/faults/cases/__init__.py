"""Every case of the fault suite, one module per area (importing this package registers them)."""

from . import (  # noqa: F401  # noqa: F401
    autogpt,
    concurrency,
    disk,
    inputs,
    kernel,
    kills,
    llm,
    mcp,
    memory,
    resume,
    scale,
    secrets,
    signals,
    terminal,
)
