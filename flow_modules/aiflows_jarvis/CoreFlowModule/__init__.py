"""Shared runtime of the Jarvis flow modules: lean flow bases, the run context, the user in the loop, memory files,
LLM errors.

Importing it first points tiktoken at the tokenizer this module carries, so litellm 1.0.0 imports offline.
"""
from .offline import ensure_offline_tokenizer

ensure_offline_tokenizer()

dependencies = []

from .errors import (  # noqa: E402
    ConfigurationError,
    EditorError,
    InputUnavailableError,
    JarvisError,
    LLMCallError,
    MemoryFileError,
    RunStopped,
    TranscriptError,
)
from .interaction import (  # noqa: E402
    APPROVAL,
    KINDS,
    FEEDBACK,
    QUESTION,
    AutoApproveInput,
    Console,
    InputSource,
    ScriptedInput,
    TerminalInput,
    get_closed_input_hint,
    get_console,
    get_input_source,
    set_closed_input_hint,
    is_approval,
    set_console,
    set_input_source,
    using_input_source,
)
from .lean import (  # noqa: E402
    BoundedHistory,
    LeanAtomicFlow,
    LeanBranchingFlow,
    LeanCircularFlow,
    LeanFlowMixin,
    LeanSequentialFlow,
    current_flow_path,
    set_step_record,
    set_trace_file,
)
from . import message_stamps  # noqa: E402,F401  (aiflows' message ids and time stamps, made quicker)
from .prompts import StrictJinjaPrompt  # noqa: E402
from .run_context import RunContext, current_run  # noqa: E402
from .usage import USAGE  # noqa: E402
