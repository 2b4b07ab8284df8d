"""One run's collaborators in one object, built once and entered once.

A run needs to know where the user's answers come from, where to print, how chats get their LLM, what it used and
may still use, where its trace goes. A launcher (or a script) builds a ``RunContext`` with all of it and enters it
around the run; every flow reads it through ``current_run()`` (``current.py``)::

    with RunContext(input_source=AutoApproveInput(), budget=RunBudget(max_calls=50)) as run:
        flow.call(...)
    print(run.usage.summary())

Nothing changes a context once it is entered: what the run counts and opens (its usage, its trace and step files,
what it learned of each server) is its state, kept here too. Leaving it puts back the context it was entered in
and closes its trace and step files. A bare ``flow.call()``, with no context entered, gets one with the defaults.

The contexts are a ``ContextVar``: threads the run starts with ``start_thread`` see it, two runs in two threads
(or asyncio tasks) each see their own. The modules' ``set_*`` functions are deprecated: they change the current
context, which a run's own code never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional

from ..console.interaction import Console, TerminalInput
from .current import RUN, current_run, note_entered, register_default_maker
from .usage import UsageMeter

if TYPE_CHECKING:  # pragma: no cover
    from ..console.interaction import InputSource
    from ..flows.lean import RunTrace
    from .budget import RunBudget

__all__ = ["RunContext", "current_run"]


class RunContext:
    """The collaborators and the running state of one run; every parameter may be left out (its default).

    - ``input_source``: where the user's answers come from (default: the terminal, ``TerminalInput``).
    - ``console``: where the flows print (default: a ``Console`` on stdout).
    - ``closed_input_hint``: what a closed terminal says to do (a command line names its own option).
    - ``backend_factory``: ``factory(backend_config, flow_name) -> backend`` for every chat built in the run (default:
      the backend its configuration names); ``backend_wrappers``: ``wrapper(backend, flow_name) -> backend``, applied
      to every backend built (a transcript recorder).
    - ``embeddings_factory``: ``factory(embedding_config, flow_name) -> embeddings`` for every vector store.
    - ``usage``: the ``UsageMeter`` counting the run's LLM calls (default: a new one).
    - ``budget``: the run's ``RunBudget`` (default: no limit).
    - ``trace_file``: a file to write every flow message to, as JSON lines (default: ``$JARVIS_TRACE``, else none).
    - ``step_record``: a file to keep the run's steps in (each command, its arguments and its branch's output, whole:
      the run report reads it), as JSON lines; opened at the run's first step.
    - ``warm_up``: work to start when the run first waits for the user (see ``warm_up``).
    - ``tool_recorder`` / ``tool_replay``: record or replay tool calls (see ``tool_calls``).
    - ``memory_dir``: the run's memory folder: a flow called in the run whose tree has flows with no memory files
      gets theirs there, and code runs in the working directory (``fill_memory_files``); ``set_memory_files`` uses
      it when given no folder.
    - ``tool_provider``: the tools the run offers its controllers besides their own commands (MCP servers: see
      ControllerExecutorFlow's ``tools``): ``commands(taken)`` gives their declarations, listed when a controller
      first needs them; ``close()`` is the launcher's, when the run ends.
    """

    __slots__ = (
        "input_source",
        "console",
        "closed_input_hint",
        "backend_factory",
        "backend_wrappers",
        "embeddings_factory",
        "usage",
        "budget",
        "trace_file",
        "step_record",
        "warm_up",
        "tool_recorder",
        "tool_replay",
        "memory_dir",
        "tool_provider",
        # the run's state
        "trace",
        "trace_checked",
        "steps",
        "records_closed",
        "servers",
        "warmed",
        "_tokens",
    )

    def __init__(
        self,
        *,
        input_source: Optional["InputSource"] = None,
        console: Optional["Console"] = None,
        closed_input_hint: Optional[str] = None,
        backend_factory: Optional[Callable] = None,
        backend_wrappers: Iterable[Callable] = (),
        embeddings_factory: Optional[Callable] = None,
        usage: Optional["UsageMeter"] = None,
        budget: Optional["RunBudget"] = None,
        trace_file: Optional[str] = None,
        step_record: Optional[str] = None,
        warm_up: Optional[Callable[[], None]] = None,
        tool_recorder: Optional[Callable] = None,
        tool_replay: Optional[Callable] = None,
        memory_dir: Optional[str] = None,
        tool_provider: Any = None,
    ):
        _check(
            "input_source",
            input_source,
            lambda v: callable(getattr(v, "ask", None)),
            "an InputSource (TerminalInput(), AutoApproveInput(), ScriptedInput([...]))",
        )
        _check(
            "console",
            console,
            lambda v: callable(getattr(v, "show", None)) and callable(getattr(v, "line", None)),
            "a Console (Console(stream=...))",
        )
        _check("closed_input_hint", closed_input_hint, lambda v: isinstance(v, str), "a text")
        for name, value in (
            ("backend_factory", backend_factory),
            ("embeddings_factory", embeddings_factory),
            ("warm_up", warm_up),
            ("tool_recorder", tool_recorder),
            ("tool_replay", tool_replay),
        ):
            _check(name, value, callable, "a function")
        wrappers = list(backend_wrappers or ())
        for wrapper in wrappers:
            _check("backend_wrappers", wrapper, callable, "a list of functions (backend, flow_name) -> backend")
        _check("usage", usage, lambda v: callable(getattr(v, "record", None)), "a UsageMeter")
        _check(
            "budget",
            budget,
            lambda v: hasattr(v, "max_calls") and hasattr(v, "remaining_time"),
            "a RunBudget (RunBudget(max_calls=..., max_time=...))",
        )
        _check("trace_file", trace_file, lambda v: isinstance(v, str) and v, "a file path")
        _check("step_record", step_record, lambda v: isinstance(v, str) and v, "a file path")
        _check("memory_dir", memory_dir, lambda v: isinstance(v, str) and v, "a folder path")
        _check(
            "tool_provider",
            tool_provider,
            lambda v: callable(getattr(v, "commands", None)),
            "a tool provider (with commands(taken) -> {name: declaration})",
        )
        self.input_source: "InputSource" = input_source if input_source is not None else TerminalInput()
        self.console: "Console" = console if console is not None else Console()
        self.closed_input_hint = closed_input_hint
        self.backend_factory = backend_factory
        self.backend_wrappers: tuple = tuple(wrappers)
        self.embeddings_factory = embeddings_factory
        self.usage: "UsageMeter" = usage if usage is not None else UsageMeter()
        self.budget = budget
        self.trace_file = trace_file
        self.step_record = step_record
        self.warm_up = warm_up
        self.tool_recorder = tool_recorder
        self.tool_replay = tool_replay
        self.memory_dir = memory_dir
        self.tool_provider = tool_provider
        # ~~~ The run's state ~~~
        self.trace: Optional["RunTrace"] = None  # opened at the first message (see lean.active_records)
        self.trace_checked = False  # whether trace_file / $JARVIS_TRACE was looked at
        self.steps: Optional["RunTrace"] = None  # step_record, opened at the first step (see lean.active_records)
        self.records_closed = False  # trace and steps closed for good (close_records)
        self.servers: Dict[Any, Any] = {}  # what the run learned of each LLM server (ChatFlowModule.servers)
        self.warmed = False  # whether warm_up ran (it runs once)
        self._tokens: List[Any] = []  # one per `with` that entered this context

    # ~~~ Entering and leaving ~~~
    def __enter__(self) -> "RunContext":
        if not self._tokens:
            self.records_closed = False
        self._tokens.append(RUN.set(self))
        note_entered(+1)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if not self._tokens:
            raise RuntimeError("this RunContext is not entered: leave a context with the `with` block that entered it")
        RUN.reset(self._tokens.pop())
        note_entered(-1)
        if not self._tokens:
            self.close_records()

    def close_records(self) -> None:
        """Close the trace and step files (flushed, for a report to read them); the run keeps no more records."""
        self.records_closed = True
        for attribute in ("trace", "steps"):
            record = getattr(self, attribute)
            setattr(self, attribute, None)
            if record is not None:
                record.close()

    def __repr__(self) -> str:
        settings = {
            "backend_factory": self.backend_factory,
            "budget": self.budget,
            "trace_file": self.trace_file,
            "memory_dir": self.memory_dir,
        }
        shown = [f"{k}={v!r}" for k, v in settings.items() if v is not None]
        return f"RunContext({', '.join([type(self.input_source).__name__] + shown)})"


def _check(name: str, value: Any, test: Callable[[Any], bool], expected: str) -> None:
    if value is not None and not test(value):
        raise TypeError(f"RunContext({name}=...) must be {expected}, not {value!r}")


register_default_maker(RunContext)
