from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Optional

import jinja2
from aiflows.base_flows import CircularFlow

from aiflows_jarvis.CoreFlowModule import (
    LeanCircularFlow,
    RunStopped,
    breadcrumb,
    config_key_path,
    current_flow_path,
    get_console,
    get_input_source,
    last_within,
    mark_steps_done,
    plan_steps,
    shorten,
    undone_steps,
)

from .command_config import STEP_ARGUMENT, TOOLS_BRANCH, declared_by_classes, derive_commands, with_step_argument

# Keys of a branch's output shown first when it is turned into the controller's `result`.
_RESULT_ORDER = ("summary", "result", "status", "human_input", "feedback")

# Commands whose branch shows their arguments whole (the plan writer shows the goal's plan, run_code its code,
# update_plan the plan, the answers the answer): the step line names the command only, so nothing is shown twice.
_SHOWN_BY_BRANCH = ("write_plan", "run_code", "update_plan", "final_answer", "intermediate_answer")

# State keys of the stuck-loop guard: a digest of the last (command, arguments), how many times in a row the
# controller issued it, and the user's answer when a repeated command is not to be executed.
_REPEAT_SIGNATURE = "repeat_signature"
_REPEAT_COUNT = "repeat_count"
_NOT_EXECUTED_NOTE = "not_executed_note"

# State keys of the bookkeeping done by code: the commands the state decided (run before the controller is asked
# again), whether the command being run is one of them, whether the opening command was considered, and the results
# of the commands that did work (a finish made by code returns them: no controller summarized them).
_DECIDED_QUEUE = "decided_commands"
_DECIDED = "decided"
_OPENED = "opened"
_WORK_RESULTS = "work_results"
_GATHER = "gather_results"  # the finish being made returns the work results, not only the last
_TOLD = "results_to_tell"  # what the controller reads next: its last command's result and those made for it since
_HUSHED = "step_hushed"  # the command being run says nothing of its step: a finish made by code follows
# The summary of a finish made because the plan is done (the loop's last result follows it).
PLAN_DONE = "Every step of the plan is done."
_LOOP_KEYS = (
    _REPEAT_SIGNATURE,
    _REPEAT_COUNT,
    _NOT_EXECUTED_NOTE,
    _DECIDED_QUEUE,
    _DECIDED,
    _OPENED,
    _WORK_RESULTS,
    _GATHER,
    _TOLD,
    _HUSHED,
)


def command_signature(command: str, args: Dict[str, Any]) -> str:
    """A short digest of a command and its arguments (canonical JSON): equal for the same call, whatever the key
    order; its size does not depend on the arguments'."""
    canonical = json.dumps([command, args], sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _user_reply(answer: Any) -> str:
    answer = str(answer or "").strip()
    return f"The user replied: {answer}" if answer else "The user replied with an empty answer (no objection)."


def format_branch_output(output: Dict[str, Any], keys: Optional[List[str]] = None, branch: str = "") -> str:
    """A branch's output as the text the controller reads next: each thing once.

    ``keys``: the output keys the controller reads, in order (a command's ``result_keys``); by default all of them.
    Empty values are left out. A boss's output (``summary`` and ``status``) reads as ``<branch> finished: <summary>``
    (or ``<branch> stopped (<why>): ...``), then its last result."""
    if keys is not None:
        output = {k: output[k] for k in keys if k in output}
    if not output:
        return "(the command returned nothing)"
    if set(output) == {"human_input"}:
        return _user_reply(output["human_input"])
    shown = {k: v for k, v in output.items() if k == "human_input" or _has_text(v)}
    if set(shown) == {"result"}:
        return str(shown["result"])
    if "summary" in shown and "status" in output:
        return _boss_output(shown, str(output.get("status") or ""), branch or "It")
    lines = [str(shown.pop("result")).strip()] if "result" in shown else []
    for key in [k for k in _RESULT_ORDER if k in shown] + sorted(k for k in shown if k not in _RESULT_ORDER):
        value = shown[key]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        if key == "human_input":
            lines.append(_user_reply(value))
        elif key == "feedback":
            lines.append(f"The user's feedback: {text}")
        else:
            lines.append(f"{key}: {text}")
    return "\n".join(lines)


_JINJA = jinja2.Environment(undefined=jinja2.ChainableUndefined, autoescape=False)


def _step_number(value: Any) -> Optional[str]:
    """A step number as the plan writes it ("2"), from what a command gave (2, "2", "step 2"); None if none."""
    digits = "".join(ch for ch in str(value if value is not None else "") if ch.isdigit())
    return str(int(digits)) if digits else None


def _last_within(texts: List[str], limit: int) -> str:
    """The last of the texts that fit ``limit`` characters together (the last one cut to it if need be), with a
    line saying how many earlier ones are left out."""
    kept = [text for _, text in last_within(list(enumerate(texts)), limit)]
    left = len(texts) - len(kept)
    note = [f"({left} earlier command{'s' if left > 1 else ''} left out)"] if left else []
    return "\n\n".join(note + kept[:-1] + [shorten(kept[-1], limit)])


def _has_text(value: Any) -> bool:
    return value not in (None, "", [], {}) and not (isinstance(value, str) and not value.strip())


def _boss_output(output: Dict[str, Any], status: str, name: str) -> str:
    summary = str(output["summary"]).strip()
    if status == "finished" or not status:
        parts = [f"{name} finished: {summary}"]
    else:
        parts = [f"{name} stopped ({status.removeprefix('stopped: ')}): {summary}"]
    result = str(output.get("result") or "").strip()
    if result and result not in parts[0]:
        parts.append(f"What it returned:\n{result}")
    extra = {k: v for k, v in output.items() if k not in ("summary", "result", "status")}
    parts += [
        f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)}" for k, v in extra.items()
    ]
    return "\n\n".join(parts)


class ControllerExecutorFlow(LeanCircularFlow):
    """A controller-executor loop: Controller -> Executor (one branch per command) until the controller calls finish.

    The loop every boss, plan writer and code writer is built on. Each command is declared once, under `commands`,
    with the flow that runs it; the controller's commands and the executor's branches are derived from that when the
    loop is built (`command_config`), and `finish` is run by the loop itself. The loop always ends with a status: at
    `max_rounds`, when the controller gives up on invalid replies, or when it is stuck (the same command with the
    same arguments `max_repeats` times in a row: the command is not run again, the user's answer to "what instead?"
    is its result, and with no answer or no one to ask the loop stops). Ctrl+C during a command stops that command
    and asks the user what the controller should do instead.

    Each branch receives the controller's arguments plus the keys of its own `input_interface` that the loop's state
    holds (e.g. `memory_files`, `plan`). The YAML's topology may add nodes after the Executor (CtrlExMemFlow does).

    *Configuration Parameters*:
    - `commands` (dict): `name: {description, input_args, optional_args, arg_types, flow}`; `flow` is the
      configuration of the subflow that runs the command (`_target_` and its overrides); `finish` has none (its
      default declaration is the controller's). `subflows_config.Executor.subflows_config.<name>` is merged over the
      flow of `<name>`, and `subflows_config.Controller.commands.<name>` over its declaration.
    - `max_rounds` (int): the most Controller -> Executor rounds before stopping.
    - `max_repeats` (int): the same command with the same arguments this many times in a row is a stuck loop
      (default 3; 0 or null: not checked).
    - `subflows_config`: `Controller` (a ControllerAtomicFlow) and `Executor` (a branching flow whose branches are
      derived from `commands`).
    - `topology`: the nodes of the loop (see the YAML).
    - `reset_before_run` (bool): start every run from a clean state (chat histories included).
    - `max_result_chars` (int): what the controller reads of a command's output, at most (head and tail kept).
    - `arguments_shown_by_branch` (list, optional): commands whose arguments the step line on screen leaves out,
      because their branch shows them whole (default: write_plan, run_code, update_plan, the answers).
    - `bookkeeping_commands` (list): commands whose result is not the loop's final `result` (e.g. update_plan).
    - `keep_from_branches` (dict): branch -> output keys copied into the loop's state (later branches can take them
      as input, e.g. `write_code: [code]` so that `save_code` saves the code written).
    - `tools` (dict, optional): `{flow, ...}`: the run's tools (`RunContext.tool_provider`: MCP servers) are
      offered as commands, asked for when the controller is first called (not before: listing them may start
      servers) and added to its commands; `flow` (the branch `tools`) runs each of them, with the input `tool` (the
      command) and `arguments`; the other keys (`result_keys`, `succeeds_when`, `carries_steps`) are added to each
      tool's declaration. With no tool provider, no command is added.
    - `bookkeeping_by_code` (bool, default true): the commands the state decides are made by the loop, without an
      LLM call (below); false: the controller makes every command, as the seed's Jarvis did.
    - `opening_command` (dict, optional): `{command, command_args, when}`, the loop's first command, made by code
      (argument values are Jinja templates over the state; `when` names a state key that must be true).
    - `finish_when_plan_done` (bool): finish (by code) when a command completes the last step of the plan.
    - per command, besides what the controller is told: `result_keys` (the output keys the controller reads, in
      order; default all), `succeeds_when` (output key -> value: when the command succeeded; default: always),
      `carries_steps` (the command takes `completes_step`: the step is marked done when it succeeds) and `then`
      (`{command, command_args, when}`: made by code when the command succeeds).

    Bookkeeping by code: the user keeps every review; what is made by code is what the state already decides. A
    command that succeeds with `completes_step` is followed by `update_plan` (that step marked done); a command's
    `then` follows its success (e.g. `finish` after an accepted final answer, `save_code` after approved code); a
    `finish` made by code first marks the plan's remaining steps done. The controller is not asked while such
    commands are pending; when it is asked next, its message holds the result of its own last command and of
    each command made for it since (a plan's new done marks come as a plan update).

    *Input Interface*:
    - `goal` (str), and what the controller's prompts need (`plan`, `logs`, `memory_files`, ...).

    *Output Interface*:
    - `summary` (str): the controller's summary at `finish`, or why the loop stopped.
    - `result` (str): the result of the last command executed.
    - `status` (str): `finished`, or `stopped: <why>`.
    """

    # The commands the loop runs itself, without a flow.
    LOOP_COMMANDS = ("finish",)

    @classmethod
    def derived_config(cls, config: Dict[str, Any], where: Optional[str] = None, check: bool = True) -> Dict[str, Any]:
        """``config`` with the controller's commands and the executor's branches derived from ``commands`` (see
        ``command_config.derive_commands``); ``where`` is its key path in messages (default: where it is being
        built)."""
        return derive_commands(
            config,
            where or config_key_path(config),
            cls.LOOP_COMMANDS,
            check,
            declared_by_classes(cls, ControllerExecutorFlow),
        )

    @classmethod
    def instantiate_from_config(cls, config: Dict[str, Any]):
        return super().instantiate_from_config(cls.derived_config(config))

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        for key in _LOOP_KEYS:
            self.flow_state.pop(key, None)  # a run starts with nothing counted or pending (also without a reset)
        return super().run(input_data)

    # ~~~ The run's tools, offered as commands ~~~
    def _tools(self) -> Dict[str, Dict[str, Any]]:
        """The tool commands offered to this loop's controller: name -> declaration."""
        if "_tool_commands" not in self.__dict__:
            self._tool_commands: Dict[str, Dict[str, Any]] = {}
        return self._tool_commands

    def _offer_tools(self, controller: Any) -> None:
        """Before the controller's first call: the run's tools (its ``tool_provider``) as commands of the controller,
        each with what the loop's ``tools`` adds to it; asked once per provider (listing may start servers)."""
        tools, provider = self.flow_config.get("tools"), self.run_context.tool_provider
        if not isinstance(tools, dict) or provider is None or self.__dict__.get("_tools_of") is provider:
            return
        self._tools_of = provider
        taken = set(self.flow_config.get("commands") or {}) | {c.name for c in controller.commands} | {TOOLS_BRANCH}
        declared = self._tools()
        for name, declaration in (provider.commands(taken) or {}).items():
            spec = {**declaration, **tools}
            declared[name] = with_step_argument(spec) if spec.get("carries_steps") and self._bookkeeping() else spec
        controller.add_commands(declared)

    def branch_flow(self, command: str) -> Any:
        """The executor's branch that runs ``command`` (the tools branch for a tool), or None."""
        branches = getattr(self.subflows.get("Executor"), "subflows", {})
        return branches.get(TOOLS_BRANCH if command in self._tools() else command)

    # ~~~ When the loop runs out of rounds ~~~
    def _on_reach_max_rounds(self):
        rounds = self.flow_config.get("max_rounds")
        reason = f"stopped: reached max_rounds ({rounds}) before the controller called finish"
        get_console().line("warning", f"{self.flow_config['name']}: {reason}")
        self._state_update_dict({"status": reason, "summary": f"{self.flow_config['name']} {reason}."})

    # ~~~ Hooks for subclasses ~~~
    def on_branch_output(self, branch: str, output: Dict[str, Any]) -> Dict[str, Any]:
        """State updates after a branch ran: the output, as text, becomes the controller's `result` (after the
        result of the controller's own last command, when the loop made this one); the keys that
        `keep_from_branches` names for this branch are copied into the state (e.g. the code `write_code` wrote);
        with bookkeeping by code, the commands the outcome decides are queued."""
        spec = self._command_spec(branch)
        text = format_branch_output(output, spec.get("result_keys"), branch)
        update = {"result": shorten(text, int(self.flow_config.get("max_result_chars", 3000)))}
        bookkeeping = branch in (self.flow_config.get("bookkeeping_commands") or [])
        if self.flow_state.get(_DECIDED) and not bookkeeping:  # a plan's new done marks show as a plan change
            update[_TOLD] = list(self.flow_state.get(_TOLD) or []) + [f"{branch} (run for you): {update['result']}"]
        if not bookkeeping:
            update["last_work_result"] = shorten(text, int(self.flow_config.get("max_result_chars", 3000)))
            update[_WORK_RESULTS] = list(self.flow_state.get(_WORK_RESULTS) or [])[-19:] + [[branch, update["result"]]]
        for key in (self.flow_config.get("keep_from_branches") or {}).get(branch, []):
            if key in output:
                update[key] = output[key]
        if self._bookkeeping():
            self._decide_after(branch, dict(self.flow_state.get("command_args") or {}), output)
        return update

    def on_finish(self, command_args: Dict[str, Any]) -> Dict[str, Any]:
        """State updates when the controller (or the loop) calls finish: its summary, and as `result` the result of
        the last command that did work (not of a `bookkeeping_commands` one such as update_plan); when the loop
        finishes because the plan is done, the results of each command that did work (the last 20, within
        `max_result_chars`)."""
        result = self.flow_state.get("last_work_result", self.flow_state.get("result", ""))
        work = self.flow_state.get(_WORK_RESULTS) or []
        if self.flow_state.get(_GATHER) and len(work) > 1:  # the plan is done, and no controller summed it up
            result = _last_within(
                [f"{command}: {text}" for command, text in work], int(self.flow_config.get("max_result_chars", 3000))
            )
        return {"summary": str(command_args.get("summary", "")), "status": "finished", "result": result}

    # ~~~ Bookkeeping by code ~~~
    def _bookkeeping(self) -> bool:
        return bool(self.flow_config.get("bookkeeping_by_code", True))

    def _command_spec(self, command: str) -> Dict[str, Any]:
        spec = (self.flow_config.get("commands") or {}).get(command) or self._tools().get(command)
        return spec if isinstance(spec, dict) else {}

    def _render_decision(
        self, decision: Dict[str, Any], output: Optional[Dict[str, Any]] = None
    ) -> Optional[Dict[str, Any]]:
        """``{command, command_args}`` of a decision made by code (an opening command, a command's `then`), its
        argument templates rendered over the state and the branch's ``output``; None when its `when` is false. An
        argument that renders empty is left out (an optional one the state does not give)."""
        if not isinstance(decision, dict) or not decision.get("command"):
            return None
        when = decision.get("when")
        if when and not self.flow_state.get(when):
            return None
        data = {**self.flow_state, "output": output or {}}
        args = {}
        for name, value in (decision.get("command_args") or {}).items():
            if isinstance(value, str):
                value = _JINJA.from_string(value).render(**data).strip()
                if not value:
                    continue
            args[name] = value
        return {"command": decision["command"], "command_args": args}

    def _succeeded(self, command: str, output: Dict[str, Any]) -> bool:
        """Whether ``output`` is a success of ``command`` by its `succeeds_when` (output key -> value; "" means
        empty, e.g. no feedback from the user; no `succeeds_when`: always)."""
        for key, wanted in (self._command_spec(command).get("succeeds_when") or {}).items():
            value = output.get(key)
            if wanted == "" or wanted is None:
                if _has_text(value):
                    return False
            elif isinstance(wanted, bool):
                said = value.strip().lower() in ("true", "yes", "1") if isinstance(value, str) else bool(value)
                if said is not wanted:
                    return False
            elif value != wanted:
                return False
        return True

    def _decide_after(self, command: str, args: Dict[str, Any], output: Dict[str, Any]) -> None:
        """Queue what the outcome of ``command`` decides: the step it completes marked done, its `then`, a finish
        when the plan is done."""
        queue: List[Dict[str, Any]] = list(self.flow_state.get(_DECIDED_QUEUE) or [])
        if not self._succeeded(command, output):
            self.flow_state[_DECIDED_QUEUE] = []  # a failure is the controller's to handle
            return
        plan = str(self.flow_state.get("plan") or "")
        step = _step_number(args.get(STEP_ARGUMENT))
        if step and any(number == step for number, _ in plan_steps(plan)):
            if step in undone_steps(plan):
                queue.append({"command": "update_plan", "command_args": {"done_steps": [int(step)]}})
                plan = self.flow_state["plan"] = mark_steps_done(plan, [step])  # as the plan file will read
                if self.flow_config.get("finish_when_plan_done") and not undone_steps(plan) and plan_steps(plan):
                    queue.append({"command": "finish", "command_args": {"summary": PLAN_DONE}, "gather": True})
        then = self._render_decision(self._command_spec(command).get("then"), output)
        if then is not None:
            queue.append(then)
        self.flow_state[_DECIDED_QUEUE] = queue

    def _next_decided(self) -> Optional[Dict[str, Any]]:
        """The next command made by code, if the state decides one: the opening command, then what is queued. A
        `finish` is preceded by `update_plan` marking the steps still undone (a loop that has update_plan)."""
        if not self._bookkeeping():
            return None
        queue: List[Dict[str, Any]] = list(self.flow_state.get(_DECIDED_QUEUE) or [])
        if not self.flow_state.get(_OPENED):
            self.flow_state[_OPENED] = True
            opening = self._render_decision(self.flow_config.get("opening_command"))
            if opening is not None:
                queue.insert(0, opening)
        if not queue:
            return None
        decided = queue.pop(0)
        if (
            decided["command"] == "finish"
            and not decided.pop("marked", False)
            and "update_plan" in (self.flow_config.get("commands") or {})
        ):
            rest = undone_steps(str(self.flow_state.get("plan") or ""))
            if rest:  # once: a plan file that cannot be marked does not hold the finish back
                queue.insert(0, {**decided, "marked": True})
                steps = "all" if len(rest) > 12 else [int(n) for n in rest]  # a long plan: not every number
                decided = {"command": "update_plan", "command_args": {"done_steps": steps}}
        self.flow_state[_DECIDED_QUEUE] = queue
        self.flow_state[_GATHER] = bool(decided.pop("gather", False))
        return decided

    def on_interrupted(self, branch: str, note: str) -> Dict[str, Any]:
        return {"result": f"The user interrupted `{branch}` with Ctrl+C and said: {note}"}

    def on_not_executed(self, command: str, count: int, note: str) -> Dict[str, Any]:
        """State updates when a repeated command is not executed: the controller reads why, and the user's answer."""
        return {
            "result": f"`{command}` was NOT executed: you issued it {count} times in a row with the same "
            f"arguments. The user says what to do instead: {note}"
        }

    # ~~~ Topology interfaces ~~~
    @CircularFlow.output_msg_payload_processor
    def detect_finish_or_continue(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        early_exit_key = self.flow_config.get("early_exit_key", "EARLY_EXIT")
        if output_payload.get("controller_error"):
            reason = output_payload["controller_error"]
            get_console().line("error", f"{self._shown_where()}: {reason}")
            return {
                early_exit_key: True,
                "status": f"stopped: {reason}",
                "summary": f"{self.flow_config['name']} stopped: {reason}",
            }
        command, args = output_payload["command"], output_payload.get("command_args") or {}
        self._show_step(command, args)
        if command == "finish":
            return {early_exit_key: True, "command": command, "command_args": args, **self.on_finish(args)}
        count = self._count_repeats(command, args)
        limit = self.flow_config.get("max_repeats")
        if limit and count >= int(limit):
            note = self._ask_when_stuck(command, count)
            if not note:
                reason = f"stuck: {command} issued {count} times in a row with the same arguments"
                get_console().line("warning", f"{self._shown_where()}: stopped: {reason}")
                return {
                    early_exit_key: True,
                    "status": f"stopped: {reason}",
                    "summary": f"{self.flow_config['name']} stopped: its controller issued `{command}` {count} "
                    f"times in a row with the same arguments, so it was stuck.",
                }
            self.flow_state[_NOT_EXECUTED_NOTE] = note
        return {"command": command, "command_args": args}

    def _show_step(self, command: str, args: Dict[str, Any]) -> None:
        """The step's line on screen, with its arguments unless the branch shows them whole (its review does; a
        boss's plan review shows its goal). The steps the controller chose are the run's lines; a command made by
        code has none, since what follows says what it does: the review it opens (a plan, code), the module
        question of a save, the done marks of `update_plan` (which says its step in one line itself, unless a
        finish made by code follows: the boss's end says it). A finish made by code is not shown, nor its summary,
        which sums up what was shown. The step a command completes is the loop's bookkeeping, not shown."""
        console, where = get_console(), current_flow_path() or self.flow_config["name"]
        branch = self._branch(command)
        if self.flow_state.get(_DECIDED):
            if command == "finish":  # its summary says again what was shown: not shown by the boss either
                console.remember(str(args.get("summary") or ""))
            queue = self.flow_state.get(_DECIDED_QUEUE) or []
            self.flow_state[_HUSHED] = bool(queue and queue[0].get("command") == "finish")
            console.step(where, command, silent=True)
            return
        if getattr(branch, "says_its_step", False):  # its own line or title; what it shows is at the step's depth
            console.step(where, command, silent=True)
            return
        shows_goal = getattr(branch, "shows_goal_whole", None)
        quiet = command in (self.flow_config.get("arguments_shown_by_branch") or _SHOWN_BY_BRANCH) or bool(
            callable(shows_goal) and shows_goal()
        )
        shown = {key: value for key, value in args.items() if key != STEP_ARGUMENT}
        console.step(where, self._tools().get(command, {}).get("shown_as") or command, shown, quiet=quiet)

    def _branch(self, command: str) -> Any:
        """The flow that runs ``command`` (None for the loop's own, `finish`)."""
        return getattr(self.subflows.get("Executor"), "subflows", {}).get(command)

    def _shown_where(self) -> str:
        """This loop as the user reads it on the screen: ``Jarvis > Coder > ExtendLibrary``."""
        return breadcrumb(current_flow_path() or self.flow_config["name"])

    # ~~~ Stuck loops ~~~
    def _count_repeats(self, command: str, args: Dict[str, Any]) -> int:
        """How many times in a row (this one included) the controller has issued this command with these arguments.
        The state holds one digest and one number, whatever the number of rounds."""
        signature = command_signature(command, args)
        if self.flow_state.get(_REPEAT_SIGNATURE) == signature:
            count = int(self.flow_state.get(_REPEAT_COUNT) or 0) + 1
        else:
            count = 1
        self.flow_state[_REPEAT_SIGNATURE] = signature
        self.flow_state[_REPEAT_COUNT] = count
        return count

    def _ask_when_stuck(self, command: str, count: int) -> Optional[str]:
        """What the user wants the controller to do instead of repeating ``command``; None to stop this loop (Enter,
        or no one to ask). Ctrl+C at the question stops the whole run."""
        source = get_input_source()
        if not source.interactive:
            return None
        where = self._shown_where()
        try:
            answer = source.ask(
                f"The controller of {where} issued `{command}` with the same arguments {count} times "
                f"in a row. What should it do instead? (Enter to stop this loop)",
                kind="question",
            )
        except KeyboardInterrupt:
            raise RunStopped from None
        return answer.strip() or None

    @CircularFlow.input_msg_payload_builder
    def prepare_executor_input(self, data_dict: Dict[str, Any], dst_flow) -> Dict[str, Any]:
        command = data_dict["command"]
        branch_input = dict(data_dict.get("command_args") or {})
        branch_input.pop(STEP_ARGUMENT, None)  # the loop's, not the branch's
        if command in self._tools():  # one branch runs every tool: it is told which, with the arguments apart
            return {"branch": TOOLS_BRANCH, "branch_input_data": {"tool": command, "arguments": branch_input}}
        branch = dst_flow.subflows.get(command) if hasattr(dst_flow, "subflows") else None
        wanted = branch.flow_config.get("input_interface") if branch is not None else None
        if isinstance(wanted, (list, tuple)):
            for key in wanted:
                if key not in branch_input and key in data_dict:
                    branch_input[key] = data_dict[key]
        return {"branch": command, "branch_input_data": branch_input}

    @CircularFlow.output_msg_payload_processor
    def process_executor_output(self, output_payload: Dict[str, Any], src_flow) -> Dict[str, Any]:
        branch = self.flow_state.get("command", "")
        return self.on_branch_output(branch, output_payload.get("branch_output_data") or {})

    # ~~~ Ctrl+C during a command; a repeated command not executed ~~~
    def _call_flow_from_state(self, goal, input_interface, flow, output_interface):
        if flow is self.subflows.get("Controller"):
            decided = self._next_decided()
            if decided is not None:  # made by code: the controller is not asked
                if _TOLD not in self.flow_state:  # what its own last command gave (as the state holds it) comes first
                    self.flow_state[_TOLD] = [self.flow_state.get("result", "")]
                self.flow_state[_DECIDED] = True
                self.log_output_of(flow.flow_config["name"], {**decided, "made_by": "code"})  # the run's record
                return None, output_interface(goal=goal, data_dict=decided, src_flow=flow, dst_flow=self)
            self.flow_state[_DECIDED] = False
            self._offer_tools(flow)
            told = self.flow_state.pop(_TOLD, None)
            if told:  # its own last command's result, then those of the commands made for it since
                self.flow_state["result"] = "\n\n".join(str(part) for part in told if str(part).strip())
        if flow is not self.subflows.get("Executor"):
            return super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        note = self.flow_state.pop(_NOT_EXECUTED_NOTE, None)
        if note:  # the user said what to do instead of a command the controller keeps repeating
            return None, self.on_not_executed(
                self.flow_state.get("command", "?"), int(self.flow_state.get(_REPEAT_COUNT) or 0), note
            )
        try:
            with get_console().steps_hushed(bool(self.flow_state.pop(_HUSHED, False))):
                return super()._call_flow_from_state(goal, input_interface, flow, output_interface)
        except RunStopped:
            raise  # the user chose to stop the run at a deeper level: do not ask again
        except KeyboardInterrupt:
            branch = self.flow_state.get("command", "?")
            note = self._ask_after_interrupt(branch)
            if branch in getattr(flow, "subflows", {}):
                flow.subflows[branch].reset(full_reset=True, recursive=True)
            update = self.on_interrupted(branch, note)
            self.flow_state[_DECIDED_QUEUE] = []  # the user said what to do instead: the controller decides
            if _TOLD in self.flow_state:  # interrupted in a command made for the controller: it reads that too
                self.flow_state[_TOLD] = list(self.flow_state[_TOLD]) + [update.get("result", "")]
            return None, update

    def _ask_after_interrupt(self, branch: str) -> str:
        """What the user wants this loop's controller to do instead of the interrupted command; RunStopped if they
        want the run to stop (Enter, another Ctrl+C, or no human to ask)."""
        source = get_input_source()
        if not source.interactive:
            raise RunStopped
        where = self._shown_where()
        get_console().line("warning", f"\nInterrupted `{branch}` (in {where}).")
        try:
            note = source.ask(
                f"What should the controller of {where} do instead? (Enter to stop the whole run)", kind="question"
            )
        except KeyboardInterrupt:
            raise RunStopped from None
        if not note.strip():
            raise RunStopped
        return note.strip()
