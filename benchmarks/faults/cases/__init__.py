"""Every case of the fault suite, one module per area (importing this package registers them)."""
from . import concurrency, disk, inputs, kernel, kills, llm, memory, resume, scale, signals, terminal  # noqa: F401
from . import autogpt, mcp, secrets  # noqa: F401
