"""Shared fakes and builders for the tests: a scripted LLM at the backend seam, controller-reply builders.

The loopback OpenAI-compatible server is in ``loopback_llm.py``, the fake editor in ``fake_editor.py``.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any, Callable, Dict, List, Optional, Union

from aiflows_jarvis.CoreFlowModule import current_flow_path

Reply = Union[str, BaseException, Callable[[List[dict]], str], "Expect"]


class Expect:
    """A reply that must be asked for by a flow whose path ends with ``flow`` (e.g. 'Coder/CtrlExMem/Controller')."""

    def __init__(self, flow: str, reply: Union[str, BaseException, Callable[[List[dict]], str]]):
        self.flow = flow
        self.reply = reply

    def __repr__(self):
        return f"Expect({self.flow!r}, {str(self.reply)[:60]!r})"


class ScriptedLLM:
    """A queue of replies shared by every ScriptedBackend; records each call (flow path and messages)."""

    def __init__(self, replies=()):
        self.replies = deque(replies)
        self.calls: List[Dict[str, Any]] = []

    def add(self, *replies: Reply) -> "ScriptedLLM":
        self.replies.extend(replies)
        return self

    def __call__(self, flow: str, messages: List[dict]) -> str:
        self.calls.append({"flow": flow, "messages": messages})
        if not self.replies:
            last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
            raise AssertionError(f"the scripted LLM has no reply left for {flow}; it was asked: {last_user[:300]!r}")
        reply = self.replies.popleft()
        if isinstance(reply, Expect):
            if not flow.endswith(reply.flow):
                raise AssertionError(f"the scripted LLM expected a call from ...{reply.flow}, got one from {flow}")
            reply = reply.reply
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(messages)
        return reply

    def flows(self) -> List[str]:
        return [c["flow"] for c in self.calls]


SCRIPT = ScriptedLLM()


class Sink:
    """A text stream that keeps what is written (``.text``), not a terminal: what a Console writes in a test."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return False


class ScriptedBackend:
    """A backend (same call shape as aiflows' LiteLLMBackend) that answers from ``SCRIPT``."""

    def __init__(self, api_infos=None, model_name=None, **params):
        self.model_name = model_name
        self.params = params

    def __call__(self, messages: List[dict], **kwargs) -> List[dict]:
        return [{"role": "assistant", "content": SCRIPT(current_flow_path(), messages)}]


def scripted_factory(backend_config: Dict[str, Any], flow_name: str) -> ScriptedBackend:
    return ScriptedBackend(**{k: v for k, v in backend_config.items() if k != "_target_"})


# ~~~ Builders: each test reads as a script ~~~
def command(name: str, /, **args: Any) -> str:
    """A controller reply calling ``name`` with ``args``."""
    return json.dumps({"command": name, "command_args": args})


def finish(summary: str = "done") -> str:
    return command("finish", summary=summary)


def last_user_message(messages: List[dict]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def system_message(messages: List[dict]) -> Optional[str]:
    return next((m["content"] for m in messages if m["role"] == "system"), None)


def carried_size(flow) -> int:
    """Bytes (pickled) of the states and histories a flow tree holds: what one round carries into the next."""
    import pickle

    total = len(pickle.dumps((flow.flow_state, list(flow.history.messages))))
    for sub in getattr(flow, "subflows", {}).values():
        total += carried_size(sub)
    return total


def carried_messages(flow) -> int:
    """Messages kept in the histories of a flow tree."""
    return len(flow.history.messages) + sum(carried_messages(s) for s in getattr(flow, "subflows", {}).values())


def library_text(code_library: str) -> str:
    """The text of every module of the code library package (`library.py` -> the `library/` folder beside it), in
    module order: what a test of the single-file library read whole."""
    import os

    from aiflows_jarvis.CodeLibraryFlowModule import package_dir
    from aiflows_jarvis.CodeLibraryFlowModule.package import module_names, module_path
    from aiflows_jarvis.CoreFlowModule import read_text

    package = package_dir(code_library)
    return (
        "".join(read_text(module_path(package, module)) for module in module_names(package))
        if os.path.isdir(package)
        else read_text(code_library)
    )
