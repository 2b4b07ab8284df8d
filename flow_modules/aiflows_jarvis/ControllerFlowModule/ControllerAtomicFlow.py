from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Optional

from aiflows_jarvis.ChatFlowModule import ChatAtomicFlow
from aiflows_jarvis.CoreFlowModule import StrictJinjaPrompt, get_console, plan_as_shown, shorten

from .commands import InvalidReply, commands_from_config, example_reply, read_command, render_commands, reply_schema

# An invalid reply is shown back to the model with its correction, cut to this many characters (head and tail): a
# server that ignores max_tokens could otherwise send a huge reply that travels in every retry.
ECHOED_REPLY_CHARS = 4000


class ControllerAtomicFlow(ChatAtomicFlow):
    """The controller of every boss: an LLM that picks the next command and its arguments.

    Its prompt is laid out for prefix caches (ChatFlowModule/layout.py): the system prompt (goal, commands,
    protocol) is the same on every call; what the boss knows (plan and its file, logs, the code library where
    configured) is in the first user message, and each later call appends the result of the last command and what
    changed in the memory since (a new plan, log entries it has not seen, new library functions), so each prompt
    begins with the previous one. The chat is rebuilt from a fresh snapshot of the memory once per block of calls
    (`prompt_blocks`). The reply is one JSON object `{"command": ..., "command_args": {...}}`; where the chat's
    `structured_output` allows, the request carries a `response_format` generated from the commands
    (`reply_schema`).

    Replies are read leniently (`read_command`: each repair is counted in the run's `usage`, not corrected); one
    that is ambiguous or wrong gets a correction saying exactly what was wrong, at most `max_corrections` times,
    then the flow returns `controller_error`. Failed attempts are not kept in the chat; a repaired reply is kept in
    its canonical JSON form, so the model sees its last move as the protocol wants it.

    *Configuration Parameters*:
    - `commands` (dict): `name: {description, input_args, optional_args, arg_types, arg_notes, arg_schemas}`;
      `arg_types` maps an argument to its JSON-Schema type (string, integer, number, boolean, array, object; string
      when not declared), `arg_notes` to what it means, `arg_schemas` to a scalar's `enum` or an array's `items`. In
      a ControllerExecutorFlow they come from the loop's `commands`, which also name each command's flow, and from
      the run's tools (`add_commands`, before the chat starts).
    - `max_corrections` (int): how many invalid replies are corrected before giving up.
    - `correction_message_prompt_template` (dict): the correction sent after an invalid reply (variables:
      `problem`, `commands`, `example`).
    - `reply_format_instructions` (str): the protocol, appended to every system prompt.
    - `bookkeeping_by_code` (bool): set from the loop's; the prompts get it, to say how steps are marked done.
    - the ChatAtomicFlow parameters (`backend`, prompt templates, `prompt_blocks`, `memory_message_prompt_template`,
      `memory_updates`, `retry`, ...); the system prompt gets `commands`, and the prompts `plan_file_location` (from
      `memory_files.plan`), `bookkeeping_by_code` and `workdir`, besides the input. A plan of one step that is the
      goal itself (written by code) is shown as such, not as the goal again.

    *Input Interface Non Initialized*: `goal` and the memory (`plan`, `logs`, `memory_files`, ...).

    *Input Interface Initialized*: `result` (of the last command) and the memory.

    *Output Interface*:
    - `command` (str), `command_args` (dict); on giving up, `controller_error` (str) instead.
    """

    handles_repetition = True  # a reply that repeats itself is an invalid reply: corrected, and said so there

    def __init__(self, commands, **kwargs):
        super().__init__(**kwargs)
        self.commands = commands
        self._system_template = self.system_message_prompt_template
        self.system_message_prompt_template = self._system_template.partial(commands=render_commands(commands))
        self._response_formats: Dict[str, dict] = {}
        self.correction_prompt = StrictJinjaPrompt.from_prompt(
            self.flow_config.get("correction_message_prompt_template")
            or {"template": "Your reply could not be used: {{problem}}", "input_variables": ["problem"]}
        )

    @classmethod
    def _constructor_kwargs(cls, flow_config: Dict[str, Any]) -> Dict[str, Any]:
        commands = commands_from_config(flow_config.get("commands"), flow_config.get("name", cls.__name__))
        return {**super()._constructor_kwargs(flow_config), "commands": commands}

    def add_commands(self, declarations: Dict[str, Dict[str, Any]]) -> List[str]:
        """Offer more commands (``name: {description, input_args, ...}``, as in the YAML), known only at run time
        (the tools of MCP servers); returns the names added. Those it has already are left as they are. The system
        prompt and the reply schema include them from the next chat on: call it before the chat starts (its
        system prompt is rendered once per chat)."""
        known = {c.name for c in self.commands}
        new = {name: spec for name, spec in declarations.items() if name not in known}
        if not new:
            return []
        added = commands_from_config(new, f"{self.flow_config.get('name', 'Controller')} (commands added at run time)")
        commands = [c for c in self.commands if c.name != "finish"] + added
        self.commands = commands + [c for c in self.commands if c.name == "finish"]
        self.system_message_prompt_template = self._system_template.partial(commands=render_commands(self.commands))
        self._response_formats.clear()
        return [c.name for c in added]

    def _render_system_message(self, input_data: Dict[str, Any]) -> str:
        prompt = super()._render_system_message(input_data)
        instructions = self.flow_config.get("reply_format_instructions")
        return f"{prompt}\n\n{instructions}" if instructions else prompt

    def response_format(self, dialect: str) -> Optional[dict]:
        """The schema of this controller's replies (see ``reply_schema``), generated once per dialect."""
        if dialect not in self._response_formats:
            self._response_formats[dialect] = reply_schema(self.commands, dialect)
        return copy.deepcopy(self._response_formats[dialect])

    def _template_data(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        data = dict(input_data)
        memory_files = data.get("memory_files") or {}
        if isinstance(memory_files, dict) and "plan_file_location" not in data:
            data["plan_file_location"] = memory_files.get("plan", "(no plan file)")
        data.setdefault("bookkeeping_by_code", bool(self.flow_config.get("bookkeeping_by_code", True)))
        if not self._is_conversation_initialized():
            data.setdefault("result", "")  # a first call made outside a loop: nothing has run yet
        if "plan" in data and data.get("goal"):
            data["plan"] = plan_as_shown(str(data["plan"] or ""), str(data["goal"]))
        return data

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        data = self._template_data(input_data)
        user_message = self.prepare_turn(data)

        extra: List[dict] = []
        max_corrections = int(self.flow_config.get("max_corrections", 3))
        problem = ""
        for attempt in range(max_corrections + 1):
            reply = self.call_llm(self.messages_for(user_message, extra))
            try:
                if self.last_repetition is not None:
                    raise InvalidReply(self._repetition_problem())
                command, args, repairs = read_command(reply, self.commands)
            except InvalidReply as error:
                problem = self._cut_off_problem() if self.last_finish_reason == "length" else str(error)
                self.run_context.usage.record_correction(self._where())
                get_console().line(
                    "warning",
                    f"{self._where()}: invalid reply ({problem})"
                    + (" - asking again" if attempt < max_corrections else ""),
                )
                correction = self.correction_prompt.format(
                    problem=problem,
                    commands=", ".join(c.name for c in self.commands),
                    example=example_reply(self.commands),
                )
                extra += [
                    {"role": "assistant", "content": shorten(reply, ECHOED_REPLY_CHARS)},
                    {"role": "user", "content": correction},
                ]
                continue
            for kind in repairs:
                self.run_context.usage.record_repair(self._where(), kind)
            # A repaired reply is kept as the protocol wants it: the model sees its last move in the right form.
            self.commit_turn(user_message, json.dumps({"command": command, "command_args": args}) if repairs else reply)
            return {"command": command, "command_args": args}
        return {
            "controller_error": f"the controller gave {max_corrections + 1} invalid replies in a row; "
            f"the last problem: {problem}",
        }

    def _repetition_problem(self) -> str:
        return (
            f"{self.last_repetition.describe('Your reply')} and was stopped there. Reply with one JSON "
            "object, once, and write nothing twice."
        )

    def _cut_off_problem(self) -> str:
        limit = f" ({self._fitted_max_tokens or self.reply_tokens()} tokens)"
        return (
            f"Your reply was cut off at the max_tokens limit{limit} before the JSON object was complete. Reply "
            "with a shorter command: for long code, split the work into several steps (one function or one "
            "part of the script per command)."
        )
