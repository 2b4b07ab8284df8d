"""Record every LLM exchange of a run, and serve a recording back.

A transcript is a JSON-lines file. The first line is a header (``{"type": "header", ...}``: goal, model, when);
every other line is one exchange: ``{"type": "llm", "flow": <flow path>, "call": <n-th call of that flow>,
"messages": [...], "reply": "..."}``. Lines are written in the order the calls happen and flushed at once, so a
transcript of an interrupted run holds every exchange up to the interruption.

On replay, each flow gets the replies recorded for it, in order (``messages`` are not compared: prompts hold
timestamps and paths). When a flow asks for a reply the transcript does not hold, the replay stops with a
TranscriptError naming the flow and the call.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict, deque
from typing import Any, Deque, Dict, List

from flow_modules.aiflows.CoreFlowModule import TranscriptError, current_flow_path

from .backends import reply_content

FORMAT_VERSION = 1


class TranscriptRecorder:
    """Writes every exchange of the backends it wraps to ``path``. Use ``add_backend_wrapper(recorder.wrap)``."""

    def __init__(self, path: str, **header: Any):
        self.path = os.path.abspath(path)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8")
        self._lock = threading.Lock()
        self._calls: Dict[str, int] = defaultdict(int)
        self._write({"type": "header", "version": FORMAT_VERSION,
                     "recorded": time.strftime("%Y-%m-%dT%H:%M:%S"), **header})

    def _write(self, record: Dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()

    def record(self, flow: str, messages: List[dict], reply: str) -> None:
        with self._lock:
            self._calls[flow] += 1
            call = self._calls[flow]
        self._write({"type": "llm", "flow": flow, "call": call, "messages": messages, "reply": reply})

    def wrap(self, backend: Any, flow_name: str = "") -> "RecordingBackend":
        return RecordingBackend(backend, self)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


class RecordingBackend:
    """Calls the backend it wraps and records the exchange (only successful calls are recorded)."""

    def __init__(self, inner: Any, recorder: TranscriptRecorder):
        self.inner = inner
        self.recorder = recorder

    def __call__(self, messages: List[dict], **kwargs: Any):
        replies = self.inner(messages=messages, **kwargs)
        self.recorder.record(current_flow_path(), messages, reply_content(replies) or "")
        return replies


class Transcript:
    """A recorded run: its header and, per flow path, the replies in the order they were given."""

    def __init__(self, path: str, header: Dict[str, Any], records: List[Dict[str, Any]]):
        self.path = path
        self.header = header
        self.records = records
        self._queues: Dict[str, Deque[Dict[str, Any]]] = defaultdict(deque)
        for record in records:
            self._queues[record["flow"]].append(record)
        self._served: Dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str) -> "Transcript":
        if not os.path.isfile(path):
            raise TranscriptError(f"No transcript at {path}.")
        header: Dict[str, Any] = {}
        records = []
        with open(path, "r", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise TranscriptError(f"{path}, line {number}: not valid JSON ({error.msg}).") from None
                if record.get("type") == "header":
                    header = record
                elif record.get("type") == "llm" and "flow" in record and "reply" in record:
                    records.append(record)
                else:
                    raise TranscriptError(f"{path}, line {number}: expected a header or an llm record "
                                          "with `flow` and `reply`.")
        return cls(path, header, records)

    def replies(self) -> List[str]:
        """Every reply, in the order recorded (what a loopback server serves to replay a run over HTTP)."""
        return [r["reply"] for r in self.records]

    def next_reply(self, flow: str) -> str:
        with self._lock:
            self._served[flow] += 1
            queue = self._queues.get(flow)
            if not queue:
                held = len([r for r in self.records if r["flow"] == flow])
                others = ", ".join(sorted({r["flow"] for r in self.records})) or "(none)"
                raise TranscriptError(
                    f"The transcript {self.path} holds no reply for call {self._served[flow]} of {flow} "
                    f"(it holds {held} for that flow). The run has left the recording; flows in the transcript: "
                    f"{others}."
                )
            return queue.popleft()["reply"]

    def unused(self) -> int:
        return sum(len(q) for q in self._queues.values())


class ReplayBackend:
    """A backend that answers from a Transcript, by the path of the flow that calls it."""

    def __init__(self, transcript: Transcript):
        self.transcript = transcript

    def __call__(self, messages: List[dict], **kwargs: Any):
        return [{"role": "assistant", "content": self.transcript.next_reply(current_flow_path())}]


def replay_factory(transcript: Transcript):
    """A backend factory (see ``set_backend_factory``) making every chat flow answer from ``transcript``."""

    def factory(backend_config: Dict[str, Any], flow_name: str) -> ReplayBackend:
        return ReplayBackend(transcript)

    return factory
