from __future__ import annotations

import copy
import json
from typing import Any, Dict

import hydra
from aiflows.base_flows import AtomicFlow
from aiflows.messages import UpdateMessage_ChatMessage
from aiflows.prompt_template import JinjaPrompt


class ChatController(AtomicFlow):
    """A controller chat as aiflows' hub ChatAtomicFlow keeps one: the system prompt, then every user message and
    reply, all in ``flow_state["previous_messages"]``, all sent with each call and logged to the flow's history.
    The reply is a JSON command (``{"command": ..., "command_args": {...}}``).

    *Configuration Parameters*: ``backend`` (a ``_target_`` with the call shape of aiflows' ``LiteLLMBackend``),
    ``commands``, and the three Jinja prompt templates.
    *Input Interface*: ``goal`` on the first call, ``observation`` after.
    *Output Interface*: ``command``, ``command_args``.
    """

    def __init__(self, backend, **kwargs):
        super().__init__(**kwargs)
        self.backend = backend

    @classmethod
    def instantiate_from_config(cls, config):
        config = copy.deepcopy(config)
        backend = hydra.utils.instantiate(config["backend"], _convert_="partial")
        return cls(flow_config=config, backend=backend)

    def set_up_flow_state(self):
        super().set_up_flow_state()
        self.flow_state["previous_messages"] = []

    def _add_chat_message(self, role: str, content: str) -> None:
        self.flow_state["previous_messages"].append({"role": role, "content": content})
        self._log_message(
            UpdateMessage_ChatMessage(
                created_by=self.flow_config["name"], updated_flow=self.flow_config["name"], role=role, content=content
            )
        )

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        config = self.flow_config
        if not self.flow_state["previous_messages"]:
            commands = "\n".join(
                f"- {name}: {spec['description']} Arguments: {', '.join(spec['input_args'])}."
                for name, spec in config["commands"].items()
            )
            self._add_chat_message(
                "system", JinjaPrompt(**config["system_message_prompt_template"]).format(commands=commands)
            )
            user = JinjaPrompt(**config["init_human_message_prompt_template"]).format(goal=input_data["goal"])
        else:
            user = JinjaPrompt(**config["human_message_prompt_template"]).format(
                observation=input_data.get("observation")
            )
        self._add_chat_message("user", user)
        reply = self.backend(messages=self.flow_state["previous_messages"])[0]["content"]
        self._add_chat_message("assistant", reply)
        parsed = json.loads(reply)
        return {"command": parsed["command"], "command_args": parsed.get("command_args") or {}}
