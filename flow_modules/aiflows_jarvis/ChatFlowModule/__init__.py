"""ChatFlowModule: one LLM chat with strict prompt templates, a sliding window or a layout for prefix caches, retries
and token counting."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
]

from .backends import (  # noqa: E402
    add_backend_wrapper,
    backend_factory,
    build_backend,
    remove_backend_wrapper,
    set_backend_factory,
    with_api_infos,
)
from .ChatAtomicFlow import ChatAtomicFlow  # noqa: E402
from .llm_errors import MalformedReply, RetryPolicy, call_with_retries, classify, context_window_advice  # noqa: E402
from .transcripts import (  # noqa: E402
    ReplayBackend,
    Transcript,
    TranscriptRecorder,
    replay_factory,
)
