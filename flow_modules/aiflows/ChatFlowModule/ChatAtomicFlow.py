from __future__ import annotations

import copy
import time
from typing import Any, Dict, List, Optional

import hydra
from aiflows.messages import UpdateMessage_ChatMessage
from aiflows.utils import logging

from flow_modules.aiflows.CoreFlowModule import (
    ConfigurationError,
    LeanAtomicFlow,
    StrictJinjaPrompt,
    current_flow_path,
    get_console,
)
from flow_modules.aiflows.CoreFlowModule.llm_errors import MalformedReply, RetryPolicy, call_with_retries
from flow_modules.aiflows.CoreFlowModule.usage import USAGE, count_message_tokens, count_tokens

from .backends import build_backend, reply_content

log = logging.get_logger(f"aiflows.{__name__}")

_PROMPT_KEYS = ("system_message_prompt_template", "init_human_message_prompt_template", "human_message_prompt_template")


class ChatAtomicFlow(LeanAtomicFlow):
    """One LLM chat: a system prompt, a first user message, later user messages, and the model's replies.

    The system prompt is rendered from the input on the first call (and on every call with ``refresh_system_prompt``,
    so memory injected into it stays current); only the newest system prompt is sent, first. Earlier user and
    assistant messages are kept in ``flow_state["previous_messages"]`` and a sliding window of them is sent.
    Transient LLM errors (rate limits, timeouts, connection errors, 5xx, malformed bodies) are retried with
    exponential backoff; authentication and bad-request errors stop at once; either way the error names the flow.

    *Configuration Parameters*:
    - `backend` (dict): the LLM backend, by default `aiflows.backends.llm_lite.LiteLLMBackend` with `api_infos: ???`
      (filled by `quick_load`), `model_name` (a string or `{openai: ..., azure: ...}`), `wait_time_per_key: 0` and
      litellm parameters (`temperature`, `max_tokens`, `request_timeout`, ...).
    - `system_message_prompt_template`, `init_human_message_prompt_template`, `human_message_prompt_template` (dict):
      Jinja templates (`template`, `input_variables`, `partial_variables`), rendered strictly: an undefined variable
      raises.
    - `input_interface_non_initialized` / `input_interface_initialized` (list): input keys for the first call and
      for later calls.
    - `previous_messages` (dict): `first_k` / `last_k`, how many of the earliest and latest user/assistant messages
      are sent; both null: the whole conversation. The default (`last_k: 2`) is the seed's sliding window: the
      refreshed system prompt, the model's last reply and the new user message, which is always sent.
    - `refresh_system_prompt` (bool): re-render the system prompt from the input on every call (default true;
      the system template's variables must then be in `input_interface_initialized` too).
    - `retry` (dict): `max_attempts`, `initial_delay`, `max_delay`, `backoff`, `jitter` for transient errors;
      a server's `Retry-After` is honoured up to `max_retry_after` seconds.
    - `show_replies` (bool): print each reply on the console.

    *Input Interface Non Initialized*: the variables of the system and first-user templates (default: `query`).

    *Input Interface Initialized*: the variables of the user template (default: `query`).

    *Output Interface*:
    - `api_output` (str): the model's reply.
    """

    def __init__(self, system_message_prompt_template, init_human_message_prompt_template,
                 human_message_prompt_template, backend, **kwargs):
        super().__init__(**kwargs)
        self.system_message_prompt_template: StrictJinjaPrompt = system_message_prompt_template
        self.init_human_message_prompt_template: StrictJinjaPrompt = init_human_message_prompt_template
        self.human_message_prompt_template: StrictJinjaPrompt = human_message_prompt_template
        self.backend = backend
        self.retry_policy = RetryPolicy.from_config(self.flow_config.get("retry"))

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
            return hydra.utils.instantiate(prompt_config, _convert_="partial")
        return prompt_config

    # ~~~ State ~~~
    def set_up_flow_state(self):
        super().set_up_flow_state()
        self.flow_state["previous_messages"] = []

    def _is_conversation_initialized(self) -> bool:
        return bool(self.flow_state.get("system_message"))

    def get_interface_description(self):
        key = "input_interface_initialized" if self._is_conversation_initialized() else "input_interface_non_initialized"
        return {"input": self.flow_config[key], "output": self.flow_config["output_interface"]}

    # ~~~ Messages ~~~
    def _where(self) -> str:
        return current_flow_path() or self.flow_config["name"]

    def _render_system_message(self, input_data: Dict[str, Any]) -> str:
        return self.system_message_prompt_template.render_from(input_data, self._where())

    def _render_user_message(self, input_data: Dict[str, Any]) -> str:
        template = (self.human_message_prompt_template if self._is_conversation_initialized()
                    else self.init_human_message_prompt_template)
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
        self._log_message(UpdateMessage_ChatMessage(created_by=self.flow_config["name"],
                                                    updated_flow=self.flow_config["name"], role=role,
                                                    content=content))

    def prepare_turn(self, input_data: Dict[str, Any]) -> str:
        """Render (or refresh) the system prompt and return this turn's user message.

        Nothing is stored until ``commit_turn``: a turn whose LLM call fails leaves the chat as it was.
        """
        user_message = self._render_user_message(input_data)
        self._pending_system_message = self.flow_state.get("system_message")
        if not self._is_conversation_initialized() or self.flow_config.get("refresh_system_prompt"):
            self._pending_system_message = self._render_system_message(input_data)
        return user_message

    def messages_for(self, user_message: str, extra: Optional[List[dict]] = None) -> List[dict]:
        """System prompt + window over (previous messages + this user message) + ``extra`` (e.g. corrections)."""
        conversation = self._window(self.flow_state["previous_messages"] + [{"role": "user", "content": user_message}],
                                    keep_last=True)
        return [{"role": "system", "content": self._pending_system_message}] + conversation + list(extra or [])

    def commit_turn(self, user_message: str, reply: str) -> None:
        """Keep the exchange; drop what no future window can contain, so the state does not grow without bound."""
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
    def call_llm(self, messages: List[dict]) -> str:
        """Send ``messages``; retry transient errors; count tokens; return the reply's text."""
        where = self._where()

        def once() -> str:
            content = reply_content(self.backend(messages=messages))
            if content is None:
                raise MalformedReply("the backend returned no message content")
            return content

        def on_retry(attempt: int, delay: float, info) -> None:
            get_console().line("warning", f"{where}: {info.reason}; retrying in {delay:.1f}s "
                                          f"(attempt {attempt + 1} of {self.retry_policy.max_attempts})")

        started = time.monotonic()
        with get_console().working(f"{where} is waiting for the LLM"):
            reply, retries = call_with_retries(once, self.retry_policy, where, on_retry=on_retry)
        USAGE.record(where, count_message_tokens(messages), count_tokens(reply), time.monotonic() - started, retries)
        if self.flow_config.get("show_replies"):
            get_console().show("llm", f"{where} replied:", reply)
        return reply

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        user_message = self.prepare_turn(input_data)
        reply = self.call_llm(self.messages_for(user_message))
        self.commit_turn(user_message, reply)
        return {"api_output": reply}
