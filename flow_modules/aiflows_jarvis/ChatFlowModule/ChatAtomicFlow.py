from __future__ import annotations

import copy
import os
import time
from typing import Any, Dict, List, Optional

from aiflows.messages import UpdateMessage_ChatMessage
from aiflows.utils import logging

from aiflows_jarvis.CoreFlowModule import (
    ConfigurationError,
    LeanAtomicFlow,
    LLMCallError,
    StrictJinjaPrompt,
    breadcrumb,
    check_budget,
    count_message_tokens,
    count_tokens,
    current_flow_path,
    get_console,
    get_run_budget,
    instantiate,
    redact_data,
    shorten,
)

from .backends import build_backend, reply_content, unwrap_backend
from .context import fit_to_context
from .layout import PromptBlocks
from .llm_errors import MalformedReply, RetryPolicy, call_with_retries
from .repetition import Repetition, find_repetition
from .responses import listening_to_streams, response_info
from .servers import (
    FORMAT_REJECTION as _FORMAT_REJECTION,
)
from .servers import (
    STRUCTURED_LEVELS,
    STRUCTURED_OUTPUT_MODES,
    UNKNOWN_MODEL,
    ServerSettings,
    context_window_from_error,
    server_settings,
)

log = logging.get_logger(f"aiflows.{__name__}")

_PROMPT_KEYS = ("system_message_prompt_template", "init_human_message_prompt_template", "human_message_prompt_template")


class ChatAtomicFlow(LeanAtomicFlow):
    """One LLM chat: a system prompt, a first user message, later user messages, and the model's replies.

    The system prompt is rendered from the input on the first call (and on every call with `refresh_system_prompt`,
    so memory injected into it stays current); only the newest one is sent, first, followed by a sliding window of
    the earlier user and assistant messages (`flow_state["previous_messages"]`). With `prompt_blocks` (controllers)
    the chat is laid out for prefix caches instead (`layout.py`): a head that never changes, the memory in its first
    message, later messages only appended (the result and what changed in the memory), rebuilt once per block.
    Transient LLM errors (rate limits, timeouts, connection errors, 5xx, malformed bodies) are retried with backoff;
    authentication and bad-request errors stop at once; either way the error names the flow. A turn whose call fails
    leaves the chat as it was.

    *Configuration Parameters*:
    - `backend` (dict): the LLM backend, by default `aiflows.backends.llm_lite.LiteLLMBackend` with `api_infos: ???`
      (filled by `quick_load`), `model_name` (a string or `{openai: ..., azure: ...}`), `wait_time_per_key: 0` and
      litellm parameters (`temperature`, `max_tokens`, `request_timeout`, ...). Chat completions to OpenAI and to
      OpenAI-compatible servers (`openai/<name>` models, bare OpenAI model names) are sent without litellm, which is
      then never imported, and streamed where the server streams: `request_timeout` is then the longest wait for
      the first token and between two, never for the whole reply (see `generation`); Azure and other providers go
      through litellm; `transport: litellm` sends everything through litellm.
    - `system_message_prompt_template`, `init_human_message_prompt_template`, `human_message_prompt_template` (dict):
      Jinja templates (`template`, `input_variables`, `partial_variables`), rendered strictly: an undefined variable
      raises.
    - `input_interface_non_initialized` / `input_interface_initialized` (list): input keys for the first call and
      for later calls.
    - `previous_messages` (dict): `first_k` / `last_k`, how many of the earliest and latest user/assistant messages
      are sent; both null: the whole conversation. The new user message is always sent. The default (`last_k: 2`)
      sends the refreshed system prompt, the model's last reply and the new user message.
    - `refresh_system_prompt` (bool): re-render the system prompt from the input on every call (default true;
      the system template's variables must then be in `input_interface_initialized` too).
    - `prompt_blocks` (dict or null): null: the sliding window above. Else `turns` (calls per block), `keep_turns`
      (exchanges kept when a block is rebuilt), `max_chars` (appended characters that start a new block sooner),
      `snapshot_log_entries` (log entries a snapshot shows at most); `previous_messages` is then not used.
    - `memory_message_prompt_template` (dict or null): with `prompt_blocks`, the memory shown at the start of the
      first user message of a block (e.g. plan, logs, code library).
    - `memory_updates` (dict): with `prompt_blocks`, the memories whose changes are sent after the result: key ->
      heading (`plan: The plan is now`), or `{heading, items, headers}` to send only the items (functions,
      memories) not shown yet, each under its group's header (`headers`: a library module's) when given; `logs` is
      read as log entries.
    - `retry` (dict): `max_attempts`, `initial_delay`, `max_delay`, `backoff`, `jitter` for transient errors;
      a server's `Retry-After` is honoured up to `max_retry_after` seconds; `call_deadline` bounds one call,
      retries included (seconds).
    - `structured_output` (str): `auto` | `json_schema` | `json_object` | `off`: the `response_format` sent when the
      chat has a reply schema (controllers do). `json_schema` is OpenAI's strict form (also vLLM, llama.cpp's server,
      Ollama); `json_object` sends `{"type": "json_object", "schema": ...}` (llama-cpp-python's server, vLLM; OpenAI
      gets the type alone); `auto` takes what an OpenAI/Azure model is known to accept and asks other servers from
      the strictest form down, one level down after each rejection, kept for the rest of the run.
    - `context_window` (int or null): the model's context window in tokens; null: what an OpenAI-compatible server
      says when asked (vLLM's /v1/models, llama.cpp's /props, Ollama's /api/show; once per server and run), else
      litellm's model map, else `default_context_window` (a server's overflow message that states its window is
      believed). Before each call the prompt plus the reply's `max_tokens` is fitted to it: `shrinkable_inputs` are
      shortened in order (logs oldest entries first), then earlier messages, then `max_tokens` down to
      `min_reply_tokens`; a prompt that cannot fit is not sent (ContextOverflow).
    - `show_replies` (bool): print each reply on the console.

    A reply that repeats itself (the same line or sentence again and again: a small model in a loop) is stopped
    early, cut after its first copy, and has `last_finish_reason` "repetition"; the chat's next call then asks for
    half the `max_tokens`.

    *Input Interface Non Initialized*: the variables of the system and first-user templates (default: `query`).

    *Input Interface Initialized*: the variables of the user template (default: `query`).

    *Output Interface*:
    - `api_output` (str): the model's reply.
    """

    handles_repetition = False  # a subclass that says so itself (its correction) when a reply repeats itself

    def __init__(
        self,
        system_message_prompt_template,
        init_human_message_prompt_template,
        human_message_prompt_template,
        backend,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.system_message_prompt_template: StrictJinjaPrompt = system_message_prompt_template
        self.init_human_message_prompt_template: StrictJinjaPrompt = init_human_message_prompt_template
        self.human_message_prompt_template: StrictJinjaPrompt = human_message_prompt_template
        self.backend = backend
        self.retry_policy = RetryPolicy.from_config(self.flow_config.get("retry"))
        # Why the last reply ended ("stop", "length": cut by max_tokens, ...), when the backend said; else None.
        self.last_finish_reason: Optional[str] = None
        self._server_settings: Optional[ServerSettings] = None
        self._pending_input: Optional[Dict[str, Any]] = None
        self._pending_system_message: Optional[str] = None
        self._system_from_input = False
        self._fitted_user_message: Optional[str] = None
        self._built_messages: Optional[List[dict]] = None
        self._build_args: tuple = ("", None)
        self._fitted_max_tokens: Optional[int] = None
        self._free_text: Optional[bool] = None  # no reply schema (``response_format`` gives None)
        self.last_repetition: Optional[Repetition] = None  # what the last reply repeated, if it did
        self._reply_cap: Optional[int] = None  # max_tokens of the next call after a reply that repeated itself
        self._blocks = self._prompt_blocks()
        self._pending_history: List[dict] = []
        self._pending_layout: Optional[Dict[str, Any]] = None
        self._rebuild = False

    # ~~~ Construction ~~~
    @classmethod
    def instantiate_from_config(cls, config: Dict[str, Any]):
        return cls(**cls._constructor_kwargs(copy.deepcopy(config)))

    @classmethod
    def _constructor_kwargs(cls, flow_config: Dict[str, Any]) -> Dict[str, Any]:
        """What the constructor gets besides the config: the prompts (made strict) and the backend."""
        kwargs: Dict[str, Any] = {"flow_config": flow_config}
        for key in _PROMPT_KEYS:
            if key not in flow_config:
                raise ConfigurationError(f"{flow_config.get('name')}: the config has no `{key}`")
            kwargs[key] = StrictJinjaPrompt.from_prompt(cls._instantiate_prompt(flow_config[key]))
        kwargs["backend"] = build_backend(flow_config.get("backend"), flow_config.get("name", cls.__name__))
        return kwargs

    @staticmethod
    def _instantiate_prompt(prompt_config: Any):
        if isinstance(prompt_config, dict) and prompt_config.get("_target_"):
            return instantiate(prompt_config)
        return prompt_config

    def _prompt_blocks(self) -> Optional[PromptBlocks]:
        """The layout for prefix caches (``prompt_blocks``), or None for the sliding window."""
        config = self.flow_config.get("prompt_blocks")
        if not config:
            return None
        memory = self.flow_config.get("memory_message_prompt_template")
        memory_prompt = StrictJinjaPrompt.from_prompt(self._instantiate_prompt(memory)) if memory else None
        where = self._where
        return PromptBlocks(
            config,
            self.flow_config.get("memory_updates") or {},
            render_memory=lambda data: memory_prompt.render_from(data, where()) if memory_prompt else "",
            render_first=lambda data: self.init_human_message_prompt_template.render_from(data, where()),
            render_next=lambda data: self.human_message_prompt_template.render_from(data, where()),
        )

    # ~~~ State ~~~
    def set_up_flow_state(self):
        super().set_up_flow_state()
        self.flow_state["previous_messages"] = []
        self.flow_state["layout"] = None

    def _is_conversation_initialized(self) -> bool:
        return bool(self.flow_state.get("system_message"))

    def get_interface_description(self):
        key = (
            "input_interface_initialized" if self._is_conversation_initialized() else "input_interface_non_initialized"
        )
        return {"input": self.flow_config[key], "output": self.flow_config["output_interface"]}

    # ~~~ Messages ~~~
    def _where(self) -> str:
        return current_flow_path() or self.flow_config["name"]

    def _render_system_message(self, input_data: Dict[str, Any]) -> str:
        return self.system_message_prompt_template.render_from(input_data, self._where())

    def _render_user_message(self, input_data: Dict[str, Any]) -> str:
        if self._blocks is not None:  # the messages before it come with it (the memory may be in them)
            self._pending_history, user_message, self._pending_layout = self._blocks.plan(
                self.flow_state.get("layout"), self.flow_state["previous_messages"], input_data, self._rebuild
            )
            return user_message
        template = (
            self.human_message_prompt_template
            if self._is_conversation_initialized()
            else self.init_human_message_prompt_template
        )
        return template.render_from(input_data, self._where())

    def _window(self, messages: List[dict], keep_last: bool = False) -> List[dict]:
        """The user/assistant messages sent: the first ``first_k`` and the last ``last_k`` (both null: all);
        with ``keep_last``, the last message (the new user message) in any case."""
        window = self.flow_config.get("previous_messages") or {}
        first_k, last_k = window.get("first_k"), window.get("last_k")
        if first_k is None and last_k is None:
            return list(messages)
        keep = set(range(min(first_k or 0, len(messages))))
        if last_k:
            keep |= set(range(max(0, len(messages) - last_k), len(messages)))
        if keep_last and messages:
            keep.add(len(messages) - 1)
        return [messages[i] for i in sorted(keep)]

    def _log_chat_message(self, role: str, content: str) -> None:
        self._log_message(
            UpdateMessage_ChatMessage(
                created_by=self.flow_config["name"], updated_flow=self.flow_config["name"], role=role, content=content
            ),
            private=True,
        )

    def prepare_turn(self, input_data: Dict[str, Any]) -> str:
        """Render (or refresh) the system prompt and return this turn's user message.

        Nothing is stored until ``commit_turn``: a turn whose LLM call fails leaves the chat as it was.
        """
        self._rebuild = False
        if "workdir" not in input_data:  # prompts may name the working folder, where code runs
            input_data = {**input_data, "workdir": self.flow_config.get("workdir") or os.getcwd()}
        user_message = self._render_user_message(input_data)
        self._pending_input = input_data
        self._fitted_user_message = None
        self._pending_system_message = self.flow_state.get("system_message")
        self._system_from_input = not self._is_conversation_initialized() or bool(
            self.flow_config.get("refresh_system_prompt")
        )
        if self._system_from_input:
            self._pending_system_message = self._render_system_message(input_data)
        return user_message

    def commit_turn(self, user_message: str, reply: str) -> None:
        """Keep the exchange (the user message as it was sent, if it had to be shortened to fit the context window);
        drop what no future window can contain, so the state does not grow without bound."""
        if self._fitted_user_message is not None:
            user_message, self._fitted_user_message = self._fitted_user_message, None
        self._pending_input = None
        if self._blocks is not None:  # appended to; rebuilt when a block is full
            self.flow_state["layout"] = self._pending_layout
            self.flow_state["previous_messages"] = self._pending_history + [
                {"role": "user", "content": user_message},
                {"role": "assistant", "content": reply},
            ]
            if self._pending_system_message != self.flow_state.get("system_message"):
                self.flow_state["system_message"] = self._pending_system_message
                self._log_chat_message("system", self._pending_system_message)
            self._log_chat_message("user", user_message)
            self._log_chat_message("assistant", reply)
            return
        if self._pending_system_message != self.flow_state.get("system_message"):
            self.flow_state["system_message"] = self._pending_system_message
            self._log_chat_message("system", self._pending_system_message)
        messages = self.flow_state["previous_messages"] + [
            {"role": "user", "content": user_message},
            {"role": "assistant", "content": reply},
        ]
        window = self.flow_config.get("previous_messages") or {}
        if window.get("first_k") is not None or window.get("last_k") is not None:
            messages = self._window(messages)
        self.flow_state["previous_messages"] = messages
        self._log_chat_message("user", user_message)
        self._log_chat_message("assistant", reply)

    # ~~~ The LLM call ~~~
    def response_format(self, dialect: str) -> Optional[dict]:
        """The ``response_format`` to send in ``dialect`` (``json_schema`` or ``json_object``), or None for free text.

        A plain chat answers in free text; the controller returns the schema of its commands.
        """
        return None

    def _server(self) -> ServerSettings:
        if self._server_settings is None:
            self._server_settings = server_settings(self.backend)
        return self._server_settings

    def call_llm(self, messages: List[dict]) -> str:
        """Send ``messages``; retry transient errors; count tokens and cost; return the reply's text.

        The run's budget is checked first, and again before each re-ask. With ``structured_output: auto``, a server
        that rejects the format is asked again one level down; a server whose overflow error states a smaller
        context window is asked again once with a prompt refitted to it (only for messages built by
        ``messages_for``). Raises ``LLMCallError`` (naming the flow) when the call fails for good.
        """
        where = self._where()
        for _ in range(4):  # at most two format downgrades and one learned context window
            check_budget(where)
            try:
                return self._call_once(messages, where)
            except LLMCallError as error:
                if self._downgrade_structured_output(error, where):
                    continue
                if messages is self._built_messages and self._learn_context_window(error, where):
                    messages = self.messages_for(*self._build_args)
                    continue
                raise
        raise LLMCallError(f"{where}: the server kept rejecting the request", flow=where)  # pragma: no cover

    def _call_once(self, messages: List[dict], where: str) -> str:
        server = self._server()
        params: Dict[str, Any] = {}
        max_tokens = self._fitted_max_tokens if messages is self._built_messages else None
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        level = self._structured_level()
        response_format = self._response_format_for(level)
        if response_format is not None:
            params["response_format"] = response_format
        request_timeout = self.backend_param("request_timeout")
        deadline = self.retry_policy.call_deadline
        budget = get_run_budget()
        remaining = budget.remaining_time() if budget is not None else None
        if remaining is not None:
            deadline = max(1.0, min(deadline, remaining)) if deadline else max(1.0, remaining)
        started = time.monotonic()
        infos: list = [None]  # what the last attempt's completion said besides its text

        def once() -> str:
            call_params = dict(params)
            if request_timeout and deadline:  # an attempt never outlives the call's deadline
                left = deadline - (time.monotonic() - started)
                call_params["request_timeout"] = min(float(request_timeout), max(1.0, left))
            # a secret the process knows never goes out, whatever put it into the chat (CoreFlowModule.redaction), but
            # those the LLM is to use (a password in the goal)
            replies = self.backend(messages=redact_data(messages, outgoing=True), **call_params)
            infos[:] = [response_info(replies)]
            content = reply_content(replies)
            if content is None:
                raise MalformedReply("the backend returned no message content")
            return content

        def on_retry(attempt: int, delay: float, info) -> None:
            get_console().line(
                "warning",
                f"{where}: {info.reason}; retrying in {delay:.1f}s "
                f"(attempt {attempt + 1} of {self.retry_policy.max_attempts})",
            )

        if self.flow_config.get("stream"):  # --stream: the status line counts tokens, long replies show as written
            params["stream"] = True
        try:
            with (
                get_console().working(
                    f"{breadcrumb(where)}: waiting for the LLM", echo=bool(self.flow_config.get("show_stream"))
                ) as status,
                listening_to_streams(status.add),
            ):
                reply, retries = call_with_retries(
                    once, self.retry_policy, where, on_retry=on_retry, deadline=deadline, provider=server.provider()
                )
        except LLMCallError as error:
            if budget is not None and (budget.remaining_time() or 1.0) <= 0:
                check_budget(where)  # the call was cut short by the run's max_time: the budget stops the run
            if (
                response_format is not None
                and level != "auto"
                and self._rejects_format(error)
                and self.flow_config.get("structured_output", "auto") != "auto"
            ):
                raise LLMCallError(
                    f"{error} (structured_output is {level}: set it to auto to let Jarvis find "
                    "what the server accepts, or to off)",
                    flow=where,
                    cause=error.cause,
                ) from error
            raise
        info = infos[0]
        self.last_finish_reason = info.finish_reason if info is not None else None
        if info is not None and info.prompt_tokens is not None and info.completion_tokens is not None:
            prompt_tokens, completion_tokens, reported = info.prompt_tokens, info.completion_tokens, True
        else:
            prompt_tokens, completion_tokens, reported = count_message_tokens(messages), count_tokens(reply), False
        self.run_context.usage.record(
            where,
            prompt_tokens,
            completion_tokens,
            time.monotonic() - started,
            retries,
            model=server.model if server.model != UNKNOWN_MODEL else None,
            reported=reported,
        )
        reply = self._without_repetition(reply, where)
        if self.flow_config.get("show_replies"):
            get_console().show("llm", f"{where} replied:", reply)
        return reply

    def _without_repetition(self, reply: str, where: str) -> str:
        """A reply that repeats itself (``repetition``; a stream was stopped there already) is cut after the first
        copy of what it repeats, with ``last_finish_reason`` "repetition"; the chat's next call asks for half the
        ``max_tokens`` (not below ``min_reply_tokens``), so a model caught in a loop is not asked for as much again."""
        self.last_repetition = find_repetition(reply)
        if self.last_repetition is None:
            self._reply_cap = None
            return reply
        self.last_finish_reason = "repetition"
        floor = int(self.flow_config.get("min_reply_tokens") or 256)
        self._reply_cap = max(floor, (self._reply_cap or self._fitted_max_tokens or self.reply_tokens()) // 2)
        if not self.handles_repetition:
            get_console().line("warning", f"{where}: {self.last_repetition.describe()}; the reply was stopped there")
        return reply[: self.last_repetition.keep]

    # ~~~ Structured output ~~~
    def _structured_level(self) -> str:
        """The format this call asks for: ``json_schema``, ``json_object`` or ``off``."""
        if self._free_text is None:  # whether the chat has a reply schema does not change: asked once
            self._free_text = self.response_format("json_object") is None
        if self._free_text:
            return "off"  # a free-text chat
        mode = str(self.flow_config.get("structured_output") or "auto")
        if mode not in STRUCTURED_OUTPUT_MODES:
            raise ConfigurationError(
                f"{self.flow_config['name']}: structured_output must be one of "
                f"{', '.join(STRUCTURED_OUTPUT_MODES)}, not {mode!r}"
            )
        if mode != "auto":
            return mode
        return self._server().structured_output

    def _response_format_for(self, level: str) -> Optional[dict]:
        if level == "off":
            return None
        response_format = self.response_format(level)
        if response_format and level == "json_object" and self._server().official:
            return {"type": "json_object"}  # OpenAI's and Azure's json_object takes no schema
        return response_format

    @staticmethod
    def _rejects_format(error: LLMCallError) -> bool:
        """A 400/422, or any status ``llm_errors`` classifies as a bad request (llama-cpp-python's server sends a 500
        with a validation error), whose message names ``response_format`` or the schema: the format is refused."""
        info = getattr(error, "info", None)
        status = getattr(info, "status", None)
        detail = f"{getattr(info, 'detail', '')} {error}"
        rejected = status in (400, 422) or (status is not None and getattr(info, "kind", None) == "bad_request")
        return rejected and bool(_FORMAT_REJECTION.search(detail))

    def _downgrade_structured_output(self, error: LLMCallError, where: str) -> bool:
        """With ``structured_output: auto``, after a server rejected the format: one level down, kept for the run."""
        if str(self.flow_config.get("structured_output") or "auto") != "auto" or not self._rejects_format(error):
            return False
        server = self._server()
        level = server.structured_output
        if level == "off":
            return False
        lower = STRUCTURED_LEVELS[STRUCTURED_LEVELS.index(level) + 1]
        server.structured_output = lower
        what = f"response_format {lower}" if lower != "off" else "no response_format (replies are read leniently)"
        get_console().line(
            "warning",
            f"{server.label} does not accept response_format {level}; "
            f"asking again with {what}, for the rest of the run.",
        )
        return True

    # ~~~ Prompts that fit the context window ~~~
    def _context_window(self) -> int:
        server = self._server()
        if server.context_window:
            return server.context_window
        configured = self.flow_config.get("context_window")
        if configured:
            server.say_window_source(int(configured), "the chat's `context_window` or --context-window")
            return int(configured)
        known = server.learn_context_window(self.backend)  # the server, asked once per run; else litellm's map
        if known:
            return known
        server.note_assumed_context_window(int(self.flow_config.get("default_context_window") or 8192))
        return server.assumed_context_window

    def backend_param(self, name: str) -> Any:
        """A litellm parameter (``max_tokens``, ``request_timeout``) as the backend was built with it (a factory may
        have set another value than the config, e.g. ``with_api_infos(..., max_tokens=N)``), else the config's."""
        params = getattr(unwrap_backend(self.backend), "params", None)
        value = params.get(name) if isinstance(params, dict) else None
        if value is None:
            config = self.flow_config.get("backend")
            value = config.get(name) if isinstance(config, dict) else None
        return value

    def reply_tokens(self) -> int:
        """The reply's ``max_tokens`` (1024 if neither the backend nor the config says)."""
        return int(self.backend_param("max_tokens") or 1024)

    def _learn_context_window(self, error: LLMCallError, where: str) -> bool:
        """A server said the prompt is too long and how long its window really is: keep that and fit again, once."""
        info = getattr(error, "info", None)
        if getattr(info, "kind", None) != "context_window":
            return False
        window = context_window_from_error(f"{getattr(info, 'detail', '')} {error}")
        server = self._server()
        if not window or window >= self._context_window() or server.context_window == window:
            return False
        server.context_window = window
        get_console().line(
            "warning",
            f"{server.label} has a context window of {window} tokens; prompts are "
            f"shortened to fit it from now on (--context-window {window} says it at start).",
        )
        return True

    def messages_for(self, user_message: str, extra: Optional[List[dict]] = None) -> List[dict]:
        """System prompt + window over (previous messages + this user message) + ``extra`` (e.g. corrections),
        shortened to fit the model's context window with the reply (see ``context.fit_to_context``).

        Call after ``prepare_turn``. Raises ``ContextOverflow`` when even the shortened prompt does not fit.
        """
        if self._rebuild and self._fitted_user_message is not None:
            user_message = self._fitted_user_message  # a new block was started for this turn
        self._build_args = (user_message, extra)
        messages, max_tokens = fit_to_context(self, user_message, list(extra or []))
        if self._reply_cap:
            max_tokens = min(max_tokens or self.reply_tokens(), self._reply_cap)
        self._built_messages, self._fitted_max_tokens = messages, max_tokens
        return messages

    def rebuild_to_fit(self, input_data: Dict[str, Any]) -> bool:
        """With ``prompt_blocks``, for a prompt that does not fit the context window: start a new block from
        ``input_data`` (a fresh snapshot of the memory, which can be shortened), once per turn. Returns whether it
        did."""
        if self._blocks is None or self._rebuild or self.flow_state.get("layout") is None:
            return False
        self._rebuild = True
        self._fitted_user_message = self._render_user_message(input_data)
        return True

    def _assemble(
        self, system_message: str, user_message: str, extra: List[dict], earlier_limit: Optional[int] = None
    ) -> List[dict]:
        if self._blocks is not None:
            conversation = self._pending_history + [{"role": "user", "content": user_message}]
        else:
            conversation = self._window(
                self.flow_state["previous_messages"] + [{"role": "user", "content": user_message}], keep_last=True
            )
        if earlier_limit is not None:
            conversation = [
                dict(m, content=shorten(m["content"], earlier_limit)) for m in conversation[:-1]
            ] + conversation[-1:]
        return [{"role": "system", "content": system_message}] + conversation + extra

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        user_message = self.prepare_turn(input_data)
        reply = self.call_llm(self.messages_for(user_message))
        self.commit_turn(user_message, reply)
        return {"api_output": reply}
