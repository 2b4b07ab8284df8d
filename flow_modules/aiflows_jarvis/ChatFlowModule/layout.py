"""Prompts laid out for prefix caches: a stable head, memory in messages that are only appended to, rebuilt in blocks.

A server that keeps a prefix cache (llama.cpp, vLLM, OpenAI's prompt caching) reads again only what follows the
longest common start of two consecutive prompts. A chat with ``prompt_blocks`` therefore sends:

- the head, as its system message: instructions, commands, goal, rendered once per chat and never changed;
- a first user message with the memory as it is at the start (``memory_message_prompt_template``: plan, logs,
  library) and the first user message proper;
- then, on every call, the messages of the earlier calls unchanged, and one new user message: the result of the last
  command, followed by what changed in the memory since the chat last saw it (``memory_updates``): the log entries
  it has not seen (not the entry of its own last command, whose result it is being shown, nor those of commands
  made for it since), and a plan or library summary that changed, whole ("The plan is now: ...", or only a line
  when it is what the last command gave, or when only a plan's done marks changed).

So each call's prompt begins with the previous call's. The chat grows for at most ``turns`` calls or ``max_chars``
characters of appended messages (or until the prompt no longer fits the context window); then it is rebuilt once:
the head, a fresh snapshot of the memory, the last ``keep_turns`` exchanges, the new user message. The cache breaks
once per block, not once per call. A snapshot shows at most ``snapshot_log_entries`` log entries (a line says how many
earlier ones are in the file): with the ``turns`` a block adds, the chat shows about as many commands at its fullest
as the logs' own budget, so prompts stay as long at call 200 as at call 20.

``PromptBlocks.plan`` is pure: it returns the messages of one turn and the state to keep if the turn is committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import marks_changed, progress, split_log_entries

LOG_KEY = "logs"
PLAN_KEY = "plan"


# A string argument of the last command at least this long, found again in its result (run_code's `code`), is named
# instead of repeated: the chat holds it already, in the reply.
ECHO_MIN_CHARS = 120


def _last_command(history: List[dict]) -> Tuple[Optional[str], Dict[str, str]]:
    """The command of the chat's last reply (a controller's JSON) and its string arguments, if it is one."""
    last = next((m["content"] for m in reversed(history) if m.get("role") == "assistant"), None)
    try:
        reply = json.loads(last) if last else None
    except (TypeError, ValueError):
        return None, {}
    if not isinstance(reply, dict) or not isinstance(reply.get("command"), str):
        return None, {}
    args = reply.get("command_args") if isinstance(reply.get("command_args"), dict) else {}
    return reply["command"], {k: v.strip() for k, v in args.items() if isinstance(v, str)}


def without_echoes(result: Any, arguments: Dict[str, str]) -> Any:
    """``result`` with the long arguments of the command it answers (found in it verbatim) named, not repeated."""
    if not isinstance(result, str):
        return result
    for name, value in arguments.items():
        if len(value) >= ECHO_MIN_CHARS and value in result:
            result = result.replace(value, f"(the `{name}` of your command, unchanged)")
    return result


def _items(text: str, pattern: str) -> Dict[str, str]:
    """The items of a memory text (a library's functions, retrieved memories), in the text's order: it is cut where
    ``pattern`` matches (at a line's start); each item keyed by a digest of its text after the match (a memory's
    number is not part of it). The text before the first match is an item too."""
    starts = [m for m in re.finditer(pattern, text, re.M)]
    bounds = [(0, 0)] if not starts or starts[0].start() > 0 else []
    bounds += [(m.start(), m.end()) for m in starts]
    items: Dict[str, str] = {}
    for i, (start, body) in enumerate(bounds):
        end = bounds[i + 1][0] if i + 1 < len(bounds) else len(text)
        item = text[start:end].strip()
        if item:
            items[hashlib.sha1(text[body:end].strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]] = item
    return items


def _new_items(text: str, pattern: str, headers: Optional[str], shown: set) -> Dict[str, str]:
    """The items of ``text`` not in ``shown`` (digests), each new one under its header when ``headers`` (a regular
    expression of the lines that head a group of items: a library module's ``# library/<module>.py``) is given: a
    header is cut as an item too, and sent only above a new item of its group (once), right above it."""
    split = f"(?:{pattern})|(?:{headers})" if headers else pattern
    is_header = re.compile(headers).match if headers else (lambda item: None)
    new: Dict[str, str] = {}
    header: Optional[Tuple[str, str]] = None
    sent_under = None
    for digest, item in _items(text, split).items():
        if is_header(item):
            header = (digest, item)
            continue
        if digest in shown:
            continue
        if header is not None and header[0] != sent_under:
            new[header[0]] = header[1] + "\n" + item  # the header right above its first new item
            sent_under = header[0]
            new[digest] = ""
        else:
            new[digest] = item
    return new


def _entry_command(entry: str) -> str:
    """The command named in a log entry's header (``--- [n] <time> <command> ---``)."""
    header = entry.split("\n", 1)[0].strip(" -")
    return header.rsplit(" ", 1)[-1] if header else ""


class PromptBlocks:
    """The layout of one chat (its ``prompt_blocks`` config).

    Parameters:
    - config (dict): ``turns`` (calls per block: the first is the snapshot's), ``keep_turns`` (exchanges kept
      when rebuilt), ``max_chars`` (appended characters that force a rebuild), ``snapshot_log_entries`` (log entries a
      snapshot shows at most; null: all the reader gives).
    - updates (dict): memory key -> the heading of its change in a later user message (e.g. ``plan: The plan is
      now``), or ``{heading, items, headers}``: ``items`` is a regular expression that starts each item of the text
      (a function of the library, a retrieved memory) and only the items the block has not shown yet are sent;
      ``headers`` (optional) one that starts the lines heading a group of items (a library module's header), sent
      right above the group's new items. ``logs`` is read as log entries, the others as texts.
    - render_memory, render_first, render_next: render the snapshot, the first user message and a later user
      message (the result) from the input.
    """

    def __init__(
        self,
        config: Dict[str, Any],
        updates: Dict[str, Any],
        render_memory: Callable[[Dict[str, Any]], str],
        render_first: Callable[[Dict[str, Any]], str],
        render_next: Callable[[Dict[str, Any]], str],
    ):
        self.turns = max(1, int(config.get("turns") or 10))
        self.keep_turns = max(0, int(config.get("keep_turns") if config.get("keep_turns") is not None else 1))
        self.max_chars = int(config.get("max_chars") or 0) or None
        entries = config.get("snapshot_log_entries")
        self.snapshot_log_entries = int(entries) if entries else None
        self.updates: Dict[str, Tuple[str, Optional[str]]] = {
            key: (value.get("heading", key), value.get("items")) if isinstance(value, dict) else (str(value), None)
            for key, value in (updates or {}).items()
        }
        self.headers: Dict[str, str] = {
            key: value["headers"]
            for key, value in (updates or {}).items()
            if isinstance(value, dict) and value.get("headers")
        }
        self.render_memory, self.render_first, self.render_next = render_memory, render_first, render_next

    # ~~~ One turn ~~~
    def plan(
        self, state: Optional[Dict[str, Any]], history: List[dict], data: Dict[str, Any], rebuild: bool = False
    ) -> Tuple[List[dict], str, Dict[str, Any]]:
        """(the messages before the new user message, the new user message, the layout state after the turn).

        ``state`` is None for a chat's first call; ``rebuild`` forces a new block (the prompt does not fit)."""
        if state is None:
            return self._snapshot([], data, None, first=True)
        user, seen = self._next_message(state, history, data)
        appended = history[1:]
        grown = sum(len(str(m.get("content") or "")) for m in appended) + len(user)
        if rebuild or state["calls"] >= self.turns or (self.max_chars and grown > self.max_chars and appended):
            return self._snapshot(history, data, state, first=False)
        return list(history), user, dict(seen, calls=state["calls"] + 1, marks=state["marks"] + [seen["log_seen"]])

    def _snapshot(
        self, history: List[dict], data: Dict[str, Any], state: Optional[Dict[str, Any]], first: bool
    ) -> Tuple[List[dict], str, Dict[str, Any]]:
        """A new block: the memory now (log entries up to the first kept exchange), the kept exchanges, the new user
        message."""
        kept: List[dict] = []
        marks: List[int] = []
        mark = None
        if not first:
            assistants = [i for i, m in enumerate(history) if m.get("role") == "assistant"]
            if self.keep_turns and assistants:
                start = assistants[-min(self.keep_turns, len(assistants))]
                kept = history[start:]
                marks = state["marks"][-len([m for m in kept if m.get("role") == "assistant"]) :]
                mark = marks[0] if marks else None
            user, seen = self._next_message(state, history, data, texts=False)  # the snapshot shows them
        logs_text, top = self._snapshot_logs(data, mark)
        shown = dict(data, **({LOG_KEY: logs_text} if LOG_KEY in data else {}))
        memory = self.render_memory(shown)
        # A rebuilt block opens with the memory alone: the kept exchanges and the new message follow it.
        opening = "\n\n".join(part for part in (memory, self.render_first(data) if first else "") if part)
        seen_texts = {key: str(data.get(key) or "") for key in self.updates if key != LOG_KEY}
        items = {
            key: sorted(_new_items(seen_texts[key], pattern, self.headers.get(key), set()))
            for key, (_, pattern) in self.updates.items()
            if pattern and key in seen_texts
        }
        if first:
            return [], opening, {"texts": seen_texts, "items": items, "log_seen": top, "calls": 1, "marks": [top]}
        seen = dict(seen, texts=seen_texts, items=items, calls=1)  # the snapshot shows the memory as it is now
        if not kept:
            return [], f"{opening}\n\n{user}", dict(seen, marks=[seen["log_seen"]])
        messages = [{"role": "user", "content": opening}] + kept
        return messages, user, dict(seen, marks=marks + [seen["log_seen"]])

    # ~~~ The memory ~~~
    def _snapshot_logs(self, data: Dict[str, Any], mark: Optional[int]) -> Tuple[str, int]:
        """The logs a snapshot shows (the entries up to ``mark``, the last ``snapshot_log_entries`` of them) and the
        number of the last entry read."""
        text = str(data.get(LOG_KEY) or "")
        entries = split_log_entries(text)
        if not entries:
            return text, 0
        top = max(number for number, _ in entries)
        shown = [e for e in entries if mark is None or e[0] <= mark]
        # Entries before the run of consecutive recent ones were picked by the memory reader for their relevance to
        # the task: they stay, and only the recent run is cut.
        start = len(shown) - 1
        while start > 0 and shown[start - 1][0] == shown[start][0] - 1:
            start -= 1
        picked, recent = shown[: max(start, 0)], shown[max(start, 0) :]
        if self.snapshot_log_entries:  # at most that many in all, the picked ones among them
            picked = picked[-(self.snapshot_log_entries // 2) :]
            recent = recent[-(self.snapshot_log_entries - len(picked)) :]
        shown = picked + recent
        if shown == entries:
            return text, top
        if not shown:
            return "(the logs' entries are in the messages below)", top
        first = recent[0][0] if recent else shown[0][0]
        body = "\n".join(entry for _, entry in shown)
        if first > 1:
            files = data.get("memory_files") if isinstance(data.get("memory_files"), dict) else {}
            name = os.path.basename(str(files.get(LOG_KEY) or "the logs file"))
            if picked:
                body = (
                    f"[{first - 1} earlier entries are in {name}: the {len(picked)} most relevant to the task "
                    f"follow, then the last {len(recent)}; {first - 1 - len(picked)} are left out (search_logs "
                    f"finds them)]\n{body}"
                )
            else:
                body = f"[{first - 1} earlier entries are in {name}; the last {len(shown)} follow]\n{body}"
        return body, top

    def _next_message(
        self, state: Dict[str, Any], history: List[dict], data: Dict[str, Any], texts: bool = True
    ) -> Tuple[str, Dict[str, Any]]:
        """The user message of a later call (the result, then what changed in the memory; with ``texts`` false,
        only the new log entries) and what is then seen."""
        command, arguments = _last_command(history)
        parts = [
            self.render_next(dict(data, result=without_echoes(data["result"], arguments)) if "result" in data else data)
        ]
        result = str(data.get("result") or "")
        seen_texts = dict(state.get("texts") or {})
        seen_items = {key: list(value) for key, value in (state.get("items") or {}).items()}
        log_seen = int(state.get("log_seen") or 0)
        for key, (heading, pattern) in self.updates.items():
            if key not in data:
                continue
            text = str(data.get(key) or "")
            if key == LOG_KEY:
                entries = split_log_entries(text)
                if entries:
                    new = [(n, e) for n, e in entries if n > log_seen]
                    log_seen = max([log_seen] + [n for n, _ in entries])
                    own = next((i for i, (_, e) in enumerate(new) if command and _entry_command(e) == command), None)
                    if own is not None:  # its own last command's entry, and those of commands made for it after:
                        new = new[:own]  # the result above says what they did
                    if new:
                        parts.append(f"{heading}:\n" + "\n".join(e for _, e in new))
                    continue
            if not texts or text == seen_texts.get(key, ""):
                continue
            previous = seen_texts.get(key, "")
            seen_texts[key] = text
            if pattern:
                shown = set(seen_items.get(key) or [])
                new_items = _new_items(text, pattern, self.headers.get(key), shown)
                seen_items[key] = sorted(shown | set(new_items))
                if new_items:
                    parts.append(f"{heading}:\n" + "\n\n".join(item for item in new_items.values() if item))
            elif command and text.strip() and text.strip() in arguments.values():
                parts.append(f"{heading} as you gave it to {command}.")
            elif key == PLAN_KEY and marks_changed(previous, text):  # only done marks: one line, not the plan again
                marked = marks_changed(previous, text)
                parts.append(
                    f"Plan: step{'s' if len(marked) > 1 else ''} {', '.join(marked)} now marked done "
                    f"({progress(text)})."
                )
            elif len(text.strip()) >= ECHO_MIN_CHARS and text.strip() in result:
                parts.append(f"{heading} as the result above says.")  # a re-plan's result holds the new plan
            else:
                parts.append(f"{heading}:\n{text if text.strip() else '(empty)'}")
        return "\n\n".join(part for part in parts if part), {
            "texts": seen_texts,
            "items": seen_items,
            "log_seen": log_seen,
        }
