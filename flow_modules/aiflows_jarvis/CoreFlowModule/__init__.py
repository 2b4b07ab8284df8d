"""Shared runtime of the Jarvis flow modules, behind this one door: other modules import Core's names from here.

- ``startup/``: the bundled tokenizer, litellm imported offline and quietly, imports deferred until their first use;
- ``flows/``: lean flow bases, configurations read and instantiated without hydra, strict prompt templates;
- ``run/``: one run's context, what it counts (LLM calls, tokens, cost), its budget, what it hides;
- ``console/``: what the user sees and answers;
- ``memory/``: the memory folder's files (which file holds a memory, safe writes, locks, logs, plans);
- ``errors``, ``text``: what goes wrong, for the user; text cut to fit.

Importing it first points tiktoken at the tokenizer this module carries, so litellm 1.0.0 imports offline.
"""

from .startup.offline import ensure_offline_tokenizer

ensure_offline_tokenizer()

dependencies = []

# The order matters: the tokenizer first (above), then aiflows' message stamps made quicker, then the rest.
# isort: off
from .flows import message_stamps  # noqa: E402,F401  (aiflows' message ids and time stamps, made quicker)

# What goes wrong, for the user
from .errors import (  # noqa: E402
    BadInputError,
    ConfigurationError,
    describe,
    EditorError,
    InputUnavailableError,
    JarvisError,
    LLMCallError,
    MemoryFileError,
    MemoryInUseError,
    root_cause,
    RunStopped,
    TranscriptError,
)

# Text cut to fit
from .text import one_line, shorten  # noqa: E402

# Start-up
from .startup.offline import ensure_offline_tokenizer, import_litellm, litellm_model_cost  # noqa: E402

# The flow runtime
from .flows.lean import (  # noqa: E402
    BoundedHistory,
    config_key_path,
    current_flow_path,
    LeanAtomicFlow,
    LeanBranchingFlow,
    LeanCircularFlow,
    LeanFlowMixin,
    LeanSequentialFlow,
)
from .flows.prompts import StrictJinjaPrompt  # noqa: E402
from .flows.instantiate import copy_config, instantiate  # noqa: E402
from .flows.config_tree import chat_backends_skeleton, flow_class, flow_target_problem, root_of, walk_config  # noqa: E402
from .flows.config_cache import default_value, read_yaml  # noqa: E402

# The run: its context, what it counts and may spend, what it hides
from .run.context import RunContext  # noqa: E402
from .run.current import current_run, entered_run, start_thread  # noqa: E402
from .run.budget import (  # noqa: E402
    BudgetExceeded,
    check_budget,
    check_time,
    get_run_budget,
    RunBudget,
    tool_timeout,
)
from .run.usage import (  # noqa: E402
    cl100k_tokenizer,
    count_message_tokens,
    count_tokens,
    legend,
    message_tokens_at_most,
    short_paths,
    tokenizer_loaded,
    USAGE,
)
from .run.models import bare_name, model_info, openai_response_format_support  # noqa: E402
from .run.redaction import (  # noqa: E402
    redact,
    redact_data,
    remember_secret,
    remember_secrets,
    url_password,
    url_shown_without_secret,
    urls_with_secrets,
    with_credentials,
    without_credentials,
)
from .run.tool_calls import run_tool  # noqa: E402
from .run.warm_up import warm_up  # noqa: E402

# The console and the user's answers
from .console.interaction import (  # noqa: E402
    APPROVAL,
    AutoApproveInput,
    breadcrumb,
    breadcrumb_parts,
    Console,
    FEEDBACK,
    get_closed_input_hint,
    get_console,
    get_input_source,
    InputSource,
    is_approval,
    KINDS,
    OutputClosed,
    QUESTION,
    ScriptedInput,
    shown_path,
    STOPPED_BY_USER,
    TerminalInput,
    warn_once,
)
from .console.terminal import clean_text, invisible_characters_note, without_lone_surrogates  # noqa: E402

# The memory folder's files
from .memory.folder import memory_files_of, memory_path, set_memory_files, with_memory_files  # noqa: E402
from .memory.files import (  # noqa: E402
    append_text,
    archive_copy,
    atomic_write,
    open_regular,
    read_text,
    say_rebuilt,
    sweep_temporary_files,
)
from .memory.locks import file_lock, RUN_LOCK_NAME, RunLock  # noqa: E402
from .memory.logs import (  # noqa: E402
    append_log_entry,
    CUT_ENTRY_MARKER,
    format_log_entry,
    last_log_number,
    last_within,
    read_log_tail,
    split_log_entries,
    summarize_arguments,
)
from .memory.plans import (  # noqa: E402
    changed_beyond_marks,
    describe_marks,
    describe_update,
    dropped_steps,
    mark_steps_done,
    marks_changed,
    one_step_plan,
    plan_as_shown,
    plan_steps,
    progress,
    undone_steps,
    without_marks,
)

# Deprecated: a run is configured when it is built (RunContext(...))
from .run.deprecated import (  # noqa: E402
    deprecated_setting,
    set_closed_input_hint,
    set_console,
    set_input_source,
    set_run_budget,
    set_step_record,
    set_tool_recorder,
    set_tool_replay,
    set_trace_file,
    set_warm_up,
    using_input_source,
)
# isort: on

__all__ = [
    "deprecated_setting",
    "entered_run",
    "start_thread",
    "default_value",
    "chat_backends_skeleton",
    "append_log_entry",
    "append_text",
    "APPROVAL",
    "archive_copy",
    "atomic_write",
    "AutoApproveInput",
    "BadInputError",
    "bare_name",
    "BoundedHistory",
    "breadcrumb",
    "breadcrumb_parts",
    "BudgetExceeded",
    "changed_beyond_marks",
    "check_budget",
    "check_time",
    "cl100k_tokenizer",
    "clean_text",
    "config_key_path",
    "ConfigurationError",
    "Console",
    "copy_config",
    "count_message_tokens",
    "count_tokens",
    "current_flow_path",
    "current_run",
    "CUT_ENTRY_MARKER",
    "describe",
    "describe_marks",
    "describe_update",
    "dropped_steps",
    "EditorError",
    "ensure_offline_tokenizer",
    "FEEDBACK",
    "file_lock",
    "flow_class",
    "flow_target_problem",
    "format_log_entry",
    "get_closed_input_hint",
    "get_console",
    "get_input_source",
    "get_run_budget",
    "import_litellm",
    "InputSource",
    "InputUnavailableError",
    "instantiate",
    "invisible_characters_note",
    "is_approval",
    "JarvisError",
    "KINDS",
    "last_log_number",
    "last_within",
    "LeanAtomicFlow",
    "LeanBranchingFlow",
    "LeanCircularFlow",
    "LeanFlowMixin",
    "LeanSequentialFlow",
    "legend",
    "litellm_model_cost",
    "LLMCallError",
    "mark_steps_done",
    "marks_changed",
    "memory_files_of",
    "memory_path",
    "MemoryFileError",
    "MemoryInUseError",
    "message_tokens_at_most",
    "model_info",
    "one_line",
    "one_step_plan",
    "open_regular",
    "openai_response_format_support",
    "OutputClosed",
    "plan_as_shown",
    "plan_steps",
    "progress",
    "QUESTION",
    "read_log_tail",
    "read_text",
    "read_yaml",
    "redact",
    "redact_data",
    "remember_secret",
    "remember_secrets",
    "root_cause",
    "root_of",
    "RUN_LOCK_NAME",
    "run_tool",
    "RunBudget",
    "RunContext",
    "RunLock",
    "RunStopped",
    "say_rebuilt",
    "ScriptedInput",
    "set_closed_input_hint",
    "set_console",
    "set_input_source",
    "set_memory_files",
    "set_run_budget",
    "set_step_record",
    "set_tool_recorder",
    "set_tool_replay",
    "set_trace_file",
    "set_warm_up",
    "short_paths",
    "shorten",
    "shown_path",
    "split_log_entries",
    "STOPPED_BY_USER",
    "StrictJinjaPrompt",
    "summarize_arguments",
    "sweep_temporary_files",
    "TerminalInput",
    "tokenizer_loaded",
    "tool_timeout",
    "TranscriptError",
    "undone_steps",
    "url_password",
    "url_shown_without_secret",
    "urls_with_secrets",
    "USAGE",
    "using_input_source",
    "walk_config",
    "warm_up",
    "warn_once",
    "with_credentials",
    "with_memory_files",
    "without_credentials",
    "without_lone_surrogates",
    "without_marks",
]
