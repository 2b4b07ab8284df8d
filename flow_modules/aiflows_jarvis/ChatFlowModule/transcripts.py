"""Record every LLM exchange of a run, and serve a recording back.

A transcript is a JSON-lines file. The first line is a header (``{"type": "header", ...}``: goal, model, when);
every other line is one exchange: ``{"type": "llm", "flow": <flow path>, "call": <n-th call of that flow>,
"messages": [...], "reply": "..."}``. Lines are written in the order the calls happen and flushed at once, so a
transcript of an interrupted run holds every exchange up to the interruption. A run whose flows call tools
(AutoGPT's searches, through ``CoreFlowModule.tool_calls``) records them too: ``{"type": "tool", "flow": ...,
"input": {...}, "observation": "..."}``; a replay answers them in order, per flow, without the tool.

On replay, each flow gets the replies recorded for it, in order, and the last message of each call must be the one
recorded (up to folders, timestamps and addresses, see ``comparable``): a run that went elsewhere would otherwise
get replies that no longer fit and end with a recorded answer that is false. A missing reply or another message
stops the replay with a TranscriptError naming the flow and the call and showing where the messages differ.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import defaultdict, deque
from typing import Any, Deque, Dict, List, Optional

from aiflows_jarvis.CoreFlowModule import BadInputError, TranscriptError, current_flow_path, redact

from .backends import reply_content

FORMAT_VERSION = 1
WHAT_A_TRANSCRIPT_IS = (
    "A transcript is the JSON-lines file a recording run (`--record FILE`, or a script's "
    "RunContext(backend_wrappers=[TranscriptRecorder(...).wrap])) writes: a header line, then one "
    "line per LLM exchange."
)


class UnreadableTranscript(TranscriptError, BadInputError):
    """The file given as a transcript is not one (missing, binary, not JSON lines, records of another shape)."""


class TranscriptRecorder:
    """Writes every exchange of the backends it wraps to ``path``. Use ``add_backend_wrapper(recorder.wrap)``."""

    def __init__(self, path: str, **header: Any):
        self.path = os.path.abspath(path)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._file = open(self.path, "w", encoding="utf-8")
        self._lock = threading.Lock()
        self._calls: Dict[str, int] = defaultdict(int)
        self._write(
            {"type": "header", "version": FORMAT_VERSION, "recorded": time.strftime("%Y-%m-%dT%H:%M:%S"), **header}
        )

    def _write(self, record: Dict[str, Any]) -> None:
        with self._lock:
            self._file.write(redact(json.dumps(record, ensure_ascii=False)) + "\n")
            self._file.flush()

    def record(self, flow: str, messages: List[dict], reply: str) -> None:
        with self._lock:
            self._calls[flow] += 1
            call = self._calls[flow]
        self._write({"type": "llm", "flow": flow, "call": call, "messages": messages, "reply": reply})

    def record_tool(self, flow: str, tool_input: Dict[str, Any], observation: str) -> None:
        """A tool call and its observation (``CoreFlowModule.tool_calls.set_tool_recorder(recorder.record_tool)``)."""
        self._write({"type": "tool", "flow": flow, "input": tool_input, "observation": observation})

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


_FOLDERS = re.compile(r"(?<![\w.~])(?:[A-Za-z]:)?[/\\](?:[\w.\-~]+[/\\])+")
_TIMES = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|\d{8}-\d{6}")
_ADDRESSES = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")  # object reprs: <function f at 0x7f3a2c...>


def comparable(text: str) -> str:
    """A message as replay compares it: what differs from run to run is replaced by placeholders (the folders of
    absolute paths, timestamps, objects' memory addresses); trailing spaces are ignored; redacted, as it was
    recorded (a password of the goal is sent, and recorded redacted)."""
    text = _ADDRESSES.sub("<address>", _TIMES.sub("<time>", _FOLDERS.sub("<dir>/", redact(str(text)))))
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def first_difference(recorded: str, actual: str, width: int = 160) -> str:
    """The first line where two messages differ, from both, shortened."""
    a, b = recorded.splitlines() or [""], actual.splitlines() or [""]
    for number in range(max(len(a), len(b))):
        left = a[number] if number < len(a) else "(the recorded message ends here)"
        right = b[number] if number < len(b) else "(this run's message ends here)"
        if left != right:
            return f"line {number + 1} of the message:\n  recorded: {left[:width]}\n  this run: {right[:width]}"
    return "(no difference)"


class Transcript:
    """A recorded run: its header and, per flow path, the replies in the order they were given."""

    def __init__(
        self,
        path: str,
        header: Dict[str, Any],
        records: List[Dict[str, Any]],
        tool_records: Optional[List[Dict[str, Any]]] = None,
    ):
        self.path = path
        self.header = header
        self.records = records
        self.tool_records = list(tool_records or [])
        self._queues: Dict[str, Deque[Dict[str, Any]]] = defaultdict(deque)
        for record in records:
            self._queues[record["flow"]].append(record)
        self._tool_queues: Dict[str, Deque[Dict[str, Any]]] = defaultdict(deque)
        for record in self.tool_records:
            self._tool_queues[record["flow"]].append(record)
        self._served: Dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str) -> "Transcript":
        """The transcript in ``path``; UnreadableTranscript, naming the file and the line, if it is not one."""
        if not os.path.isfile(path):
            what = "is a folder" if os.path.isdir(path) else "does not exist"
            raise UnreadableTranscript(f"No transcript at {path}: it {what}. {WHAT_A_TRANSCRIPT_IS}")
        header: Dict[str, Any] = {}
        records, tool_records = [], []
        try:
            with open(path, "rb") as f:
                for number, raw in enumerate(f, 1):
                    record = cls._record(path, number, raw)
                    if record is None:
                        continue
                    if record["type"] == "header":
                        header = record
                    elif record["type"] == "tool":
                        tool_records.append(record)
                    else:
                        records.append(record)
        except OSError as error:
            raise UnreadableTranscript(f"Cannot read the transcript {path}: {error.strerror or error}.") from None
        return cls(path, header, records, tool_records)

    @staticmethod
    def _record(path: str, number: int, raw: bytes) -> Optional[Dict[str, Any]]:
        """Line ``number`` of a transcript as a header or an llm record; None for a blank line."""

        def refused(what: str) -> UnreadableTranscript:
            return UnreadableTranscript(f"{path} is not a transcript: line {number} {what}. {WHAT_A_TRANSCRIPT_IS}")

        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise refused("is not UTF-8 text (is it a binary file?)") from None
        if not line.strip():
            return None
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as error:
            what = f"({error.msg})" if isinstance(error, json.JSONDecodeError) else "(nested too deeply)"
            raise refused(f"is not valid JSON {what}") from None
        if isinstance(record, dict) and record.get("type") == "header":
            return record
        if (
            isinstance(record, dict)
            and record.get("type") == "tool"
            and isinstance(record.get("flow"), str)
            and isinstance(record.get("input"), dict)
            and isinstance(record.get("observation"), str)
        ):
            return record
        messages = record.get("messages", []) if isinstance(record, dict) else None
        if (
            isinstance(record, dict)
            and record.get("type") == "llm"
            and isinstance(record.get("flow"), str)
            and isinstance(record.get("reply"), str)
            and isinstance(messages, list)
            and all(isinstance(m, dict) for m in messages)
        ):
            return record
        raise refused("is neither a header nor an llm record (with a `flow` and a `reply`)")

    def replies(self) -> List[str]:
        """Every reply, in the order recorded (what a loopback server serves to replay a run over HTTP)."""
        return [r["reply"] for r in self.records]

    def next_reply(self, flow: str, messages: Optional[List[dict]] = None) -> str:
        """The next reply recorded for ``flow``; TranscriptError if there is none, or if ``messages`` (the request)
        ends with another message than the recorded request did."""
        with self._lock:
            self._served[flow] += 1
            call = self._served[flow]
            queue = self._queues.get(flow)
            if not queue:
                held = len([r for r in self.records if r["flow"] == flow])
                others = ", ".join(sorted({r["flow"] for r in self.records})) or "(none)"
                raise TranscriptError(
                    f"The transcript {self.path} holds no reply for call {call} of {flow} "
                    f"(it holds {held} for that flow). The run has left the recording; flows in the transcript: "
                    f"{others}."
                )
            record = queue.popleft()
        recorded_messages = record.get("messages")
        if messages and recorded_messages:
            recorded = comparable(recorded_messages[-1].get("content", ""))
            actual = comparable(messages[-1].get("content", ""))
            if recorded != actual:
                raise TranscriptError(
                    f"The run has left the recording at call {call} of {flow}: it asks with another message than "
                    f"the one {self.path} holds, so the recorded reply would not fit. First difference, "
                    f"{first_difference(recorded, actual)}\nA replay reproduces a run only from the same start: the "
                    "same code library and files (replay into a fresh --memory-dir) and the same versions."
                )
        return record["reply"]

    def next_tool(self, flow: str, tool_input: Dict[str, Any]) -> str:
        """The next observation recorded for a tool call of ``flow``; TranscriptError if there is none, or if the
        call asks with other arguments than the recorded one."""
        with self._lock:
            queue = self._tool_queues.get(flow)
            if not queue:
                raise TranscriptError(
                    f"The transcript {self.path} holds no more tool results for {flow} (it asks "
                    f"with {json.dumps(tool_input, ensure_ascii=False)[:200]}): the run has left "
                    "the recording."
                )
            record = queue.popleft()
        if comparable(json.dumps(record["input"], sort_keys=True, ensure_ascii=False)) != comparable(
            json.dumps(tool_input, sort_keys=True, ensure_ascii=False)
        ):
            raise TranscriptError(
                f"The run has left the recording at a tool call of {flow}: it asks with "
                f"{json.dumps(tool_input, ensure_ascii=False)[:200]}, the recording with "
                f"{json.dumps(record['input'], ensure_ascii=False)[:200]}."
            )
        return record["observation"]

    def unused(self) -> int:
        return sum(len(q) for q in self._queues.values()) + sum(len(q) for q in self._tool_queues.values())


class ReplayBackend:
    """A backend that answers from a Transcript, by the path of the flow that calls it."""

    def __init__(self, transcript: Transcript):
        self.transcript = transcript

    def __call__(self, messages: List[dict], **kwargs: Any):
        return [{"role": "assistant", "content": self.transcript.next_reply(current_flow_path(), messages)}]


def replay_factory(transcript: Transcript):
    """A backend factory (see ``set_backend_factory``) making every chat flow answer from ``transcript``."""

    def factory(backend_config: Dict[str, Any], flow_name: str) -> ReplayBackend:
        return ReplayBackend(transcript)

    return factory
