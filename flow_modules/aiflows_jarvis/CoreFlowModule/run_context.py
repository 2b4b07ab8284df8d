"""One run's collaborators in one object, instead of settings spread over the modules.

A run needs to know where the user's answers come from, where to print, how chats get their LLM, what it used and
may still use, where its trace goes. A launcher (or a library user) says it once and every flow reads it through
``current_run()``::

    with RunContext(input_source=AutoApproveInput(), budget=RunBudget(max_calls=50)) as run:
        flow.call(...)
    print(run.usage.summary())

``current_run()`` is the innermost context entered, else the process's default one (terminal input, a stdout
console, the backend each chat's configuration names, no budget, no trace): a bare ``flow.call()`` works. Leaving a
context puts back the one it was entered in and closes its trace file; a context starts with nothing of another's.

The contexts entered are one stack per process, not per thread: a thread that a run starts (the kernel's warm-up,
the console's status line, a tool's time limit) sees the run that started it. Two runs at the same time in one
process would share the innermost one; run them in processes of their own.

The modules' ``set_*`` functions (``set_input_source``, ``set_backend_factory``, ``set_run_budget``, ...) change the
current context. Chat and vector-store modules keep their state here in slots of plain callables and dicts, so
this module imports none of them.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .budget import RunBudget
    from .interaction import Console, InputSource
    from .lean import RunTrace
    from .usage import UsageMeter


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
    - ``warm_up``: work to start when the run first waits for the user (see ``warm_up``).
    - ``tool_recorder`` / ``tool_replay``: record or replay tool calls (see ``tool_calls``).
    - ``memory_dir``: the run's memory folder (``set_memory_files`` uses it when given no folder).
    - ``tool_provider``: the tools the run offers its controllers besides their own commands (MCP servers: see
      ControllerExecutorFlow's ``tools``): ``commands(taken)`` gives their declarations, listed when a controller
      first needs them; ``close()`` is the launcher's, when the run ends.
    """

    __slots__ = ("input_source", "console", "closed_input_hint", "backend_factory", "backend_wrappers",
                 "embeddings_factory", "usage", "budget", "trace_file", "trace", "trace_checked", "warm_up",
                 "tool_recorder", "tool_replay", "servers", "memory_dir", "steps", "tool_provider")

    def __init__(self, *, input_source: Optional["InputSource"] = None, console: Optional["Console"] = None,
                 closed_input_hint: Optional[str] = None, backend_factory: Optional[Callable] = None,
                 backend_wrappers: Iterable[Callable] = (), embeddings_factory: Optional[Callable] = None,
                 usage: Optional["UsageMeter"] = None, budget: Optional["RunBudget"] = None,
                 trace_file: Optional[str] = None, warm_up: Optional[Callable[[], None]] = None,
                 tool_recorder: Optional[Callable] = None, tool_replay: Optional[Callable] = None,
                 memory_dir: Optional[str] = None, tool_provider: Any = None):
        _check("input_source", input_source, lambda v: callable(getattr(v, "ask", None)),
               "an InputSource (TerminalInput(), AutoApproveInput(), ScriptedInput([...]))")
        _check("console", console, lambda v: callable(getattr(v, "show", None)) and callable(getattr(v, "line", None)),
               "a Console (Console(stream=...))")
        _check("closed_input_hint", closed_input_hint, lambda v: isinstance(v, str), "a text")
        for name, value in (("backend_factory", backend_factory), ("embeddings_factory", embeddings_factory),
                            ("warm_up", warm_up), ("tool_recorder", tool_recorder), ("tool_replay", tool_replay)):
            _check(name, value, callable, "a function")
        wrappers = list(backend_wrappers or ())
        for wrapper in wrappers:
            _check("backend_wrappers", wrapper, callable, "a list of functions (backend, flow_name) -> backend")
        _check("usage", usage, lambda v: callable(getattr(v, "record", None)), "a UsageMeter")
        _check("budget", budget, lambda v: hasattr(v, "max_calls") and hasattr(v, "remaining_time"),
               "a RunBudget (RunBudget(max_calls=..., max_time=...))")
        _check("trace_file", trace_file, lambda v: isinstance(v, str) and v, "a file path")
        _check("memory_dir", memory_dir, lambda v: isinstance(v, str) and v, "a folder path")
        _check("tool_provider", tool_provider, lambda v: callable(getattr(v, "commands", None)),
               "a tool provider (with commands(taken) -> {name: declaration})")
        from .interaction import Console, TerminalInput  # here: those modules import this one
        from .usage import UsageMeter

        self.input_source: "InputSource" = input_source if input_source is not None else TerminalInput()
        self.console: "Console" = console if console is not None else Console()
        self.closed_input_hint = closed_input_hint
        self.backend_factory = backend_factory
        self.backend_wrappers: List[Callable] = wrappers
        self.embeddings_factory = embeddings_factory
        self.usage: "UsageMeter" = usage if usage is not None else UsageMeter()
        self.budget = budget
        self.trace_file = trace_file
        self.trace: Optional["RunTrace"] = None   # opened at the first message (see lean._active_trace)
        self.trace_checked = False                # whether trace_file / $JARVIS_TRACE was looked at
        self.steps: Optional["RunTrace"] = None   # the run's steps, for its report (see lean.set_step_record)
        self.warm_up = warm_up
        self.tool_recorder = tool_recorder
        self.tool_replay = tool_replay
        self.servers: Dict[Any, Any] = {}         # what the run learned of each LLM server (ChatFlowModule.servers)
        self.memory_dir = memory_dir
        self.tool_provider = tool_provider

    # ~~~ Entering and leaving ~~~
    def __enter__(self) -> "RunContext":
        if not _STACK:
            _default()
        _STACK.append(self)
        return self

    def __exit__(self, *exc_info: Any) -> None:  # the process's default (index 0) is never left
        for i in range(len(_STACK) - 1, 0, -1):  # the last entry of this context (it may be entered twice)
            if _STACK[i] is self:
                del _STACK[i]
                break
        else:
            raise RuntimeError("this RunContext is not entered: leave a context with the `with` block that entered it")
        if self not in _STACK:
            self.close_trace()
            steps, self.steps = self.steps, None
            if steps is not None:
                steps.close()

    def close_trace(self) -> None:
        """Close the trace file, if one is open (a later message opens ``trace_file`` again)."""
        trace, self.trace = self.trace, None
        self.trace_checked = False
        if trace is not None:
            trace.close()

    def __repr__(self) -> str:
        settings = {"backend_factory": self.backend_factory, "budget": self.budget, "trace_file": self.trace_file,
                    "memory_dir": self.memory_dir}
        shown = [f"{k}={v!r}" for k, v in settings.items() if v is not None]
        return f"RunContext({', '.join([type(self.input_source).__name__] + shown)})"


def _check(name: str, value: Any, test: Callable[[Any], bool], expected: str) -> None:
    if value is not None and not test(value):
        raise TypeError(f"RunContext({name}=...) must be {expected}, not {value!r}")


# The contexts entered, innermost last, over the process's default one (made at first use). A list changed in
# place: no `global` needed.
_STACK: List[RunContext] = []
_DEFAULT_LOCK = threading.Lock()


def current_run() -> RunContext:
    """The innermost ``RunContext`` entered, else the process's default one."""
    try:
        return _STACK[-1]
    except IndexError:
        return _default()


def default_run() -> RunContext:
    """The process's default context: what ``current_run()`` is when no context is entered."""
    return _STACK[0] if _STACK else _default()


def _default() -> RunContext:
    with _DEFAULT_LOCK:
        if not _STACK:
            _STACK.append(RunContext())
    return _STACK[0]
