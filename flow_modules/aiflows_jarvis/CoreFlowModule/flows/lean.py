"""Flows whose cost per call does not grow with the number of calls.

aiflows 0.1.7 as it comes makes a long controller loop quadratic: every message is JSON-dumped for the debug log even
when that log is off, every OutputMessage carries a deep copy of its flow's whole history, and the parent then
deep-copies that message into its own history (once more per level of nesting).

The lean flows keep aiflows' interfaces (configs, ``flow_state``, ``history``, messages, topology, interfaces) and
change only how messages are kept:

* ``history`` holds the last ``history_size`` messages of the flow (default 32), not all of them;
* an OutputMessage carries no copy of the flow's history (its ``history`` is ``[]``);
* a message is rendered for the debug log only when the debug log is on;
* every message can instead be written once, as one JSON line, to a run trace (``RunContext(trace_file=...)`` or
  the environment variable ``JARVIS_TRACE``): the full record of a run, at a constant cost per message;
* errors are not logged as tracebacks at every level of nesting; they carry ``flow_path`` (where they happened);
* the disk cache (``.flow_cache`` in the working directory) is only opened when caching is actually used.

They are also quicker to build: a class's default configuration comes from YAML files parsed once per process
(``config_cache``; aiflows parses every file of the class chain at every ``get_config``), and subflows and
topology interfaces are built by ``instantiate`` (no OmegaConf round trip of the subtree at every level).

Use them through the first base class, as aiflows' config loader follows only the first base:
``class MyFlow(LeanAtomicFlow)``, or ``class X(CircularFlow, LeanFlowMixin)`` for another aiflows base.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from collections import deque
from contextvars import ContextVar
from typing import Any, Dict, List, Optional, Tuple, Union

from aiflows.base_flows import AtomicFlow, BranchingFlow, CircularFlow, CompositeFlow, Flow, SequentialFlow
from aiflows.base_flows.circular import TopologyNode
from aiflows.data_transformations import KeyMatchInput
from aiflows.flow_cache import CACHING_PARAMETERS, FlowCache
from aiflows.history import FlowHistory
from aiflows.interfaces import KeyInterface
from aiflows.messages import InputMessage, Message, OutputMessage, UpdateMessage_Generic
from aiflows.utils import logging

from ..memory.folder import fill_memory_files
from ..run.current import current_run
from ..run.redaction import redact
from . import config_cache
from .instantiate import copy_config, instantiate

log = logging.get_logger(f"aiflows.{__name__}")


DEFAULT_HISTORY_SIZE = 32

_CALL_STACK: ContextVar[tuple] = ContextVar("jarvis_flow_call_stack", default=())


def current_flow_path() -> str:
    """The names of the flows being called, outermost first, joined by '/' (e.g. 'Jarvis/CtrlExMem/Controller')."""
    return "/".join(_CALL_STACK.get())


# The subflow names of the flows being built, outermost first (the root's name, then the subflows_config keys).
_BUILD_STACK: ContextVar[tuple] = ContextVar("jarvis_flow_build_stack", default=())


def config_key_path(config: Dict[str, Any]) -> str:
    """Where the flow being built sits in the configuration it is built from, as a key path for messages
    (``Jarvis.subflows_config.CtrlExMem``); outside a build, the flow's own name."""
    names = _BUILD_STACK.get() or (str(config.get("name") or "flow"),)
    return ".subflows_config.".join(names)


class BoundedHistory(FlowHistory):
    """A FlowHistory that keeps the last ``limit`` messages; ``total`` counts every message ever added."""

    def __init__(self, limit: int = DEFAULT_HISTORY_SIZE):
        super().__init__()
        self.messages = deque(maxlen=max(1, int(limit)))
        self.total = 0

    def add_message(self, message: Message, private: bool = False) -> None:
        """Keep a snapshot of ``message``; ``private``: its data is a fresh copy no one else changes, kept as it is."""
        self.messages.append(message if private else _detached_copy(message))
        self.total += 1

    def get_last_n_messages(self, n: int) -> List[Message]:
        if n <= 0:
            return []
        return list(self.messages)[-n:]


def _detached_copy(message: Message) -> Message:
    """A snapshot of a message without the nested history an OutputMessage of a non-lean flow may carry (a shallow
    copy as ``copy.copy`` makes of a plain object, without its generic ``__reduce_ex__`` round trip)."""
    snapshot = object.__new__(type(message))
    snapshot.__dict__.update(message.__dict__)
    snapshot.data = copy_config(message.data)
    if isinstance(snapshot, OutputMessage):
        snapshot.history = []
    return snapshot


# ~~~ Run trace: every message, once, as a JSON line ~~~
class RunTrace:
    """Appends one JSON object per message to a file. Thread-safe; the file is opened in append mode. ``only``:
    the messages to keep, ``only(flow_path, message) -> bool`` (default: all)."""

    def __init__(self, path: str, only: Optional[Any] = None):
        self.path = os.path.abspath(path)
        self.only = only
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")

    def write(self, flow_path: str, message: Message) -> None:
        if self.only is not None and not self.only(flow_path, message):
            return
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "flow": flow_path,
            "type": message.message_type,
            "created_by": message.created_by,
        }
        for attribute in ("src_flow", "dst_flow", "updated_flow"):
            if hasattr(message, attribute):
                record[attribute] = getattr(message, attribute)
        data = {k: v for k, v in message.data.items() if k not in set(message.private_keys or [])}
        record["data"] = data
        line = redact(json.dumps(record, default=str, ensure_ascii=False))
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


# The senders whose outputs make a loop's steps: a command chosen (the Controller), what its branch gave back (the
# Executor), the user's feedback on it (AutoGPT's HumanFeedback), a boss's plan (the Planner).
STEP_SOURCES = ("Controller", "Executor", "HumanFeedback", "Planner")


def step_message(flow_path: str, message: Message) -> bool:
    """Whether ``message`` is one of a run's steps (see ``STEP_SOURCES``): what a step record keeps."""
    return isinstance(message, OutputMessage) and getattr(message, "src_flow", None) in STEP_SOURCES


def active_records() -> Tuple[Optional[RunTrace], Optional[RunTrace]]:
    """The current run's trace (its ``trace_file``, else ``$JARVIS_TRACE``) and step record (its ``step_record``),
    each opened at the first message it keeps. Without a trace file, they are looked at again at the next outermost
    flow call, not for every message."""
    run = current_run()
    if run.records_closed:
        return None, None
    trace = run.trace
    if trace is None and not run.trace_checked:
        run.trace_checked = True
        path = run.trace_file or os.environ.get("JARVIS_TRACE")
        if path:
            trace = run.trace = RunTrace(path)
    steps = run.steps
    if steps is None and run.step_record:
        steps = run.steps = RunTrace(run.step_record, only=step_message)
    return trace, steps


_EMPTY_HISTORY = FlowHistory()
# The `history` of every OutputMessage a lean flow makes: empty, and shared, which also marks the message as one whose
# output is its own copy (nothing to copy again when a parent keeps it). Never appended to.
_NO_HISTORY: list = []


class LeanFlowMixin(Flow):
    """Overrides the message-keeping parts of ``aiflows.base_flows.Flow`` (see the module docstring)."""

    def __init__(self, flow_config: Dict[str, Any], **kwargs):
        # Flow.__init__ without opening the disk cache on every instantiation and without printing the config tree.
        self.flow_config = flow_config
        self._validate_flow_config(flow_config)
        self.set_up_flow_state()

    @classmethod
    def get_config(cls, **overrides):
        """aiflows' default configuration of the class (its YAML over its first base's) with ``overrides`` on top;
        each YAML file is parsed once per process (``config_cache``)."""
        return config_cache.get_config(cls, **overrides)

    @property
    def cache(self) -> FlowCache:
        if "_lazy_cache" not in self.__dict__:
            self.__dict__["_lazy_cache"] = FlowCache()
        return self.__dict__["_lazy_cache"]

    def set_up_flow_state(self):
        # `initial_state` (config): the keys a flow's state starts with, e.g. outputs that must exist even if the
        # step that sets them never ran.
        self.flow_state = copy.deepcopy(self.flow_config.get("initial_state") or {})
        self.history = BoundedHistory(self.flow_config.get("history_size", DEFAULT_HISTORY_SIZE))

    def _log_message(self, message: Message, private: bool = False):
        """Trace and keep ``message``. ``private``: its data is a fresh copy that no one else holds (a chat message
        just built), so the history keeps it without copying it again; so is a lean flow's OutputMessage (its
        output is copied when it is made, and the caller copies what it uses)."""
        trace, steps = active_records()
        if trace is not None or steps is not None:
            where = current_flow_path() or self.flow_config.get("name", "?")
            for record in (trace, steps):
                if record is not None:
                    record.write(where, message)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(message.to_string())
        private = private or getattr(message, "history", None) is _NO_HISTORY
        if isinstance(self.history, BoundedHistory):
            return self.history.add_message(message, private=private)
        return self.history.add_message(message)

    # Messages and states hold configuration-like data (dicts, lists, strings, numbers): they are copied with
    # copy_config, which is cheaper than deepcopy and falls back on it for other objects. The two methods below are
    # aiflows' own with that one change (every round of a loop goes through them).
    def _package_input_message(self, payload: Dict[str, Any], dst_flow: "Flow", fresh: bool = False):
        """``fresh``: ``payload`` is a copy no one else holds (a LeanKeyInterface made it): not copied again."""
        private_keys = dst_flow.flow_config["private_keys"]
        src_flow = self.flow_config["name"]
        if isinstance(dst_flow, Flow):
            dst_flow = dst_flow.flow_config["name"]
        assert not {"src_flow", "dst_flow"} & set(payload.keys()), (
            "The keys 'src_flow' and 'dst_flow' are special keys and cannot be used in the data dictionary"
        )
        return InputMessage(
            data_dict=payload if fresh else copy_config(payload),
            private_keys=private_keys,
            src_flow=src_flow,
            dst_flow=dst_flow,
            created_by=self.name,
        )

    def _state_update_dict(self, update_data: Union[Dict[str, Any], Message]):
        if isinstance(update_data, Message):
            update_data = update_data.data["output_data"]
        if len(update_data) == 0:
            raise ValueError(
                "The state_update_dict was called with an empty dictionary. If there is a justified "
                "reason to allow this, please replace the ValueError with a log.warning, and make a PR"
            )
        updates = {}
        for key, value in update_data.items():
            if key in self.flow_state and (value is None or value == self.flow_state[key]):
                continue
            updates[key] = value
            self.flow_state[key] = copy_config(value)
        if updates:
            return self._log_message(
                UpdateMessage_Generic(
                    created_by=self.flow_config["name"], updated_flow=self.flow_config["name"], data=updates
                )
            )

    def _package_output_message(self, input_message: InputMessage, response: Dict[str, Any], raw_response):
        message = OutputMessage(
            created_by=self.flow_config["name"],
            src_flow=self.flow_config["name"],
            dst_flow=input_message.src_flow,
            output_data=copy_config(response),
            raw_response=raw_response,
            input_message_id=input_message.message_id,
            history=_EMPTY_HISTORY,
        )
        message.history = _NO_HISTORY
        return message

    def log_output_of(self, subflow: str, output: Dict[str, Any]) -> None:
        """Trace ``output`` as an output of ``subflow`` that this flow made in its place (a command decided by
        code instead of by the controller), so that the trace and the step record hold every step."""
        message = OutputMessage(
            created_by=self.flow_config["name"],
            src_flow=subflow,
            dst_flow=self.flow_config["name"],
            output_data=copy_config(output),
            raw_response=None,
            input_message_id="",
            history=_EMPTY_HISTORY,
        )
        message.history = _NO_HISTORY
        self._log_message(message, private=True)

    def _post_call_hook(self):
        # aiflows logs an "UpdateMessage_NamespaceReset" after every call and clears nothing; skip the message.
        return None

    @property
    def run_context(self) -> Any:
        """The run this flow is called in (the ``RunContext`` entered, see ``run/current.py``): its usage, tools,
        budget."""
        return current_run()

    def __call__(self, input_message: InputMessage) -> OutputMessage:
        outer = _CALL_STACK.get()
        if not outer:
            run = self.run_context
            run.trace_checked = False
            if run.memory_dir:  # the flows of the tree with no memory files of their own get theirs there
                fill_memory_files(self, run.memory_dir)
        token = _CALL_STACK.set(outer + (self.flow_config.get("name", self.__class__.__name__),))
        try:
            self._log_message(input_message)
            if self.flow_config.get("enable_cache") and CACHING_PARAMETERS.do_caching:
                response = self._Flow__get_from_cache(input_message.data)
            else:
                response = self.run(input_message.data)
            output_message = self._package_output_message(input_message, response, None)
            self._post_call_hook()
            return output_message
        except Exception as error:
            if not getattr(error, "flow_path", None):
                try:
                    error.flow_path = current_flow_path()
                except Exception:  # some exception types refuse new attributes
                    pass
            raise
        finally:
            _CALL_STACK.reset(token)

    @CircularFlow.input_msg_payload_builder
    def select_input(self, data_dict: Dict[str, Any], dst_flow) -> Dict[str, Any]:
        """Topology input interface ``LeanFlowMixin.select_input``: the destination's input keys that the state
        holds (a key it needs but the state lacks fails inside the destination, with the flow's name)."""
        wanted = dst_flow.get_interface_description()["input"]
        return {key: data_dict[key] for key in wanted if key in data_dict}

    def call_subflow_with(self, data: Dict[str, Any], goal, input_interface, flow, output_interface):
        """In a composite flow, what ``_call_flow_from_state`` does, with the input taken from ``data`` instead of
        the state (e.g. to ask a generator again with a rewrite instruction); returns ``(message, output)``."""
        payload = input_interface(goal=f"[Input] {goal}", data_dict=data, src_flow=self, dst_flow=flow)
        fresh = isinstance(input_interface, LeanKeyInterface) and input_interface.copies_all
        output_message = flow(self._package_input_message(payload=payload, dst_flow=flow, fresh=fresh))
        self._log_message(output_message)
        output_data = copy_config(output_message.data["output_data"])
        if output_interface is not None:
            output_data = output_interface(goal=f"[Output] {goal}", data_dict=output_data, src_flow=flow, dst_flow=self)
        return output_message, output_data

    def call(self, input_data: Dict[str, Any], src_flow: str = "Launcher") -> Dict[str, Any]:
        """Run the flow on a dict through ``__call__`` (so it is traced and named in errors); returns the output
        dict."""
        message = InputMessage.build(data_dict=input_data, src_flow=src_flow, dst_flow=self.flow_config["name"])
        return self(message).data["output_data"]


config_cache.register_default_get_config(LeanFlowMixin.get_config)


class LeanAtomicFlow(AtomicFlow, LeanFlowMixin):
    """``aiflows.base_flows.AtomicFlow`` with lean message keeping."""


def _run_with_resets(flow: Flow, run, input_data: Dict[str, Any]) -> Dict[str, Any]:
    """``run(input_data)`` with the config's ``reset_before_run`` / ``reset_after_run`` (full, recursive) applied.

    aiflows keeps ``flow_state`` (and chat histories) across calls; a flow that does one task per call (a boss, a
    plan writer) resets before each run so it can be called again, and a sub-boss resets after it finishes so its
    chat histories are dropped (its plan and logs stay in files).
    """
    if flow.flow_config.get("reset_before_run"):
        flow.reset(full_reset=True, recursive=True, src_flow=flow)
    output = run(input_data)
    if flow.flow_config.get("reset_after_run"):
        flow.reset(full_reset=True, recursive=True, src_flow=flow)
    return output


def _set_up_subflows(cls, config: Dict[str, Any]) -> Dict[str, Flow]:
    """``CompositeFlow._set_up_subflows`` building each subflow with ``instantiate`` (no OmegaConf round trip of the
    subtree at every level of nesting when the configuration is plain)."""
    subflows_config = config["subflows_config"]
    if not all(isinstance(sub, dict) and "_target_" in sub for sub in subflows_config.values()):
        return CompositeFlow._set_up_subflows.__func__(cls, config)  # aiflows' own checks and errors
    subflows = {}
    parent_module = ".".join(cls.__module__.split(".")[:-1])
    outer = _BUILD_STACK.get() or (str(config.get("name") or cls.__name__),)
    for name, sub in subflows_config.items():
        if sub["_target_"].startswith("."):
            sub["_target_"] = parent_module + sub["_target_"]
        token = _BUILD_STACK.set(outer + (name,))
        try:
            flow = instantiate(sub)
        finally:
            _BUILD_STACK.reset(token)
        flow.flow_config["name"] = name
        subflows[name] = flow
    return subflows


def _instantiate_from_config(cls, config: Dict[str, Any]) -> Flow:
    """``CompositeFlow.instantiate_from_config`` (the config copied twice, the subflows built from one copy) with
    ``copy_config`` for deepcopy: a composite copies its whole subtree, at every level of nesting."""
    flow_config = copy_config(config)
    kwargs = {"flow_config": copy_config(flow_config)}
    kwargs["subflows"] = cls._set_up_subflows(flow_config)
    return cls(**kwargs)


class LeanKeyInterface(KeyInterface):
    """aiflows' KeyInterface (same transformations, same result) that copies its input as plain data
    (``copy_config``: dicts and lists rebuilt, strings shared) instead of ``copy.deepcopy``. A composite flow's state
    holds the memory files' contents and is the input of an interface at every subflow call; the default interface
    (the destination's input keys, ``KeyMatchInput``) copies only the keys it selects."""

    @classmethod
    def of(cls, interface: KeyInterface) -> "LeanKeyInterface":
        lean = cls.__new__(cls)
        lean.__dict__.update(interface.__dict__)
        return lean

    @property
    def copies_all(self) -> bool:
        """Whether all it returns is a fresh copy: only the destination's input keys, each copied. (Other
        transformations may put in what they hold themselves, e.g. KeySet's values: the caller copies those.)"""
        return len(self.transformations) == 1 and type(self.transformations[0]) is KeyMatchInput

    def __call__(self, goal, src_flow, dst_flow, data_dict: Dict[str, Any], **kwargs) -> Dict[str, Any]:
        if self.copies_all:
            return {key: copy_config(data_dict[key]) for key in dst_flow.get_interface_description()["input"]}
        data_dict = copy_config(data_dict)
        kwargs.update(goal=goal, src_flow=src_flow, dst_flow=dst_flow)
        for transformation in self.transformations:
            data_dict = transformation(data_dict=data_dict, **kwargs)
        return data_dict


def _call_flow_from_state(self, goal: str, input_interface, flow, output_interface):
    """CompositeFlow's ``_call_flow_from_state`` with the output copied as plain data (``copy_config``), not
    deep-copied: ``call_subflow_with`` on the flow's state."""
    return self.call_subflow_with(self.flow_state, goal, input_interface, flow, output_interface)


def _set_up_topology(self) -> List[TopologyNode]:
    """``CircularFlow.__set_up_topology`` (same checks, same registries of interface functions) with the interfaces
    that are configurations built by ``instantiate``."""
    topology = self.flow_config.get("topology", [])
    if len(topology) == 0:
        raise ValueError(f"topology is empty for flow {self.flow_config['name']}")
    builders = getattr(CircularFlow, "_CircularFlow__input_msg_payload_builder_registry")
    processors = getattr(CircularFlow, "_CircularFlow__output_msg_payload_processor_registry")
    nodes = []
    for node in topology:
        if node["flow"] not in self.subflows:
            raise ValueError(f"flow {node['flow']} is not in subflow_configs")
        input_interface = node.get("input_interface")
        if input_interface is None:
            input_interface = LeanKeyInterface()
            input_interface.transformations.append(KeyMatchInput())
        else:
            target = input_interface["_target_"]
            key = f"{self.__class__.__name__}.{target}" if target.startswith(".") else target  # as aiflows keys it
            input_interface = builders[key] if key in builders else _lean_interface(instantiate(input_interface))
        output_interface = node.get("output_interface")
        if output_interface is not None:
            target = output_interface["_target_"]
            key = self.__class__.__name__ + target if target.startswith(".") else target
            output_interface = processors[key] if key in processors else _lean_interface(instantiate(output_interface))
        nodes.append(
            TopologyNode(
                goal=node["goal"],
                input_interface=input_interface,
                flow=self.subflows[node["flow"]],
                output_interface=output_interface,
                reset=node.get("reset", False),
            )
        )
    return nodes


def _lean_interface(interface: Any) -> Any:
    return LeanKeyInterface.of(interface) if type(interface) is KeyInterface else interface


def _lean_loop(cls: type) -> type:
    """A circular or sequential flow of aiflows made lean: its subflows set up and called the lean way, and
    ``reset_before_run``/``reset_after_run`` honoured around its run."""
    cls._set_up_subflows = classmethod(_set_up_subflows)
    cls.instantiate_from_config = classmethod(_instantiate_from_config)
    cls._call_flow_from_state = _call_flow_from_state
    cls._CircularFlow__set_up_topology = _set_up_topology

    def run(self: Any, input_data: Dict[str, Any]) -> Dict[str, Any]:
        return _run_with_resets(self, super(cls, self).run, input_data)

    cls.run = run
    return cls


@_lean_loop
class LeanSequentialFlow(SequentialFlow, LeanFlowMixin):
    """``aiflows.base_flows.SequentialFlow`` with lean message keeping and ``reset_before_run``/``reset_after_run``."""


@_lean_loop
class LeanCircularFlow(CircularFlow, LeanFlowMixin):
    """``aiflows.base_flows.CircularFlow`` with lean message keeping and ``reset_before_run``/``reset_after_run``."""


class LeanBranchingFlow(BranchingFlow, LeanFlowMixin):
    """``aiflows.base_flows.BranchingFlow`` with lean message keeping; an unknown branch names the known ones."""

    _set_up_subflows = classmethod(_set_up_subflows)
    instantiate_from_config = classmethod(_instantiate_from_config)

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        branch = input_data.get("branch")
        if branch not in self.subflows:
            raise ValueError(
                f"{self.flow_config['name']}: no branch named {branch!r}; branches are {sorted(self.subflows)}"
            )
        return super().run(input_data)
