from __future__ import annotations

import os
from typing import Any, Dict, Optional

from aiflows_jarvis.CodeLibraryFlowModule import (
    legacy_file,
    library_structure,
    package_dir,
    package_summary,
    summary_head,
)
from aiflows_jarvis.CoreFlowModule import (
    ConfigurationError,
    LeanAtomicFlow,
    MemoryFileError,
    memory_path,
    read_log_tail,
    read_text,
)

from .retrieval import Reranker, make_query, relevant_library, relevant_logs

READERS = ("text", "log_tail", "signatures", "modules")


class MemoryReadingAtomicFlow(LeanAtomicFlow):
    """Reads the memory files named in `memory_files` for the keys of its output interface.

    `plan` and other memories are read whole. `logs` is read from its end: the last `max_log_entries` entries, with
    a line saying how many earlier ones are in the file, so what goes into a prompt does not grow with the run.
    `code_library` is read as the library package's structure (its modules, one line each) and the signatures and
    docstrings of its functions and classes, not their bodies, from the package's index (a `library.py` is migrated
    into the package first). A missing file reads as "".

    When the library or the log outgrows its budget, the entries shown are chosen by relevance to the task and the
    last result (`retrieval.py`, over the memory's search index): the last entries are always kept, and a line says
    how many were left out and which command (`search_library`, `search_logs`) finds them. The pick stays the same
    from one round to the next while the task and the result bring nothing new.

    *Configuration Parameters*:
    - `output_interface` (list): the memories to read, e.g. `[plan, logs, code_library]`.
    - `readers` (dict): how each memory is read: `text`, `log_tail`, `signatures` or `modules` (the library's
      modules, one line each: what a boss that does not write code needs to know of it) (defaults: `logs:
      log_tail`, `code_library: signatures`, others `text`).
    - `max_log_entries` (int or null): how many log entries to read at most (null: all).
    - `max_log_chars` (int or null): how many characters of log entries to read at most (at least one entry).
    - `max_library_chars` (int or null): the size of the library summary; beyond it docstrings are shortened,
      then dropped (or, with `retrieval`, the relevant entries are shown).
    - `retrieval` (dict): `enabled` (bool); `embedding`: `local` (the index's lexical ranking, offline) or
      `provider` (re-ranked by the run's embeddings, `RunContext(embeddings_factory=...)`, with
      `embedding_config` as VectorStoreFlow's `embedding`);
      `recent_library_entries` (the last saved functions always shown), `relevant_log_entries` (earlier log entries
      shown among the `max_log_entries`), `candidates` (how many the index proposes).
    - `memory_files` (dict, optional): used when the input has no `memory_files`.

    *Input Interface*:
    - `memory_files` (dict): memory name -> file path.
    - `goal` (str, optional), `result` (str, optional): what the entries are chosen by.

    *Output Interface*:
    - one key per memory in `output_interface` (str).
    """

    def set_up_flow_state(self):
        super().set_up_flow_state()
        self.flow_state["picked"] = {}  # memory -> the entries picked last round (kept first if still relevant)
        self._reranker = None

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        readers = {"logs": "log_tail", "code_library": "signatures", **(self.flow_config.get("readers") or {})}
        retrieval = dict(self.flow_config.get("retrieval") or {})
        query = make_query(input_data.get("goal"), input_data.get("result"))
        picked = self.flow_state.setdefault("picked", {})
        out = {}
        for key in self.flow_config["output_interface"]:
            reader = readers.get(key, "text")
            path = memory_path(self, input_data, key)
            if reader == "log_tail":
                max_entries = self.flow_config.get("max_log_entries")
                if retrieval.get("enabled") and max_entries:
                    out[key], picked[key] = relevant_logs(
                        path,
                        query,
                        int(max_entries),
                        self.flow_config.get("max_log_chars"),
                        picked.get(key, []),
                        int(retrieval.get("relevant_log_entries", 5)),
                        int(retrieval.get("candidates", 40)),
                        self._reranker_of(retrieval),
                    )
                else:
                    out[key] = read_log_tail(path, max_entries, self.flow_config.get("max_log_chars"))
            elif reader == "signatures":
                max_chars = self.flow_config.get("max_library_chars")
                try:
                    pick = bool(retrieval.get("enabled") and max_chars)
                    summary = package_summary(path, max_chars, whole_only=pick)
                    out[key] = summary
                    if summary is None:  # over its budget: the relevant entries are picked
                        out[key], picked[key] = relevant_library(
                            path,
                            query,
                            int(max_chars),
                            picked.get(key, []),
                            int(retrieval.get("recent_library_entries", 3)),
                            int(retrieval.get("candidates", 40)),
                            self._reranker_of(retrieval),
                        )
                except MemoryFileError as error:  # a library.py that does not compile is not migrated
                    out[key] = f"(the code library cannot be read: {error})"
            elif reader == "modules":
                out[key] = self._modules(path)
            elif reader == "text":
                out[key] = read_text(path).strip()
            else:
                raise ConfigurationError(f"{self.flow_config['name']}: unknown reader {reader!r}; use one of {READERS}")
        return out

    def _modules(self, path: str) -> str:
        """The library's modules, one line each, read without changing anything: a library not made yet stays so,
        and a `library.py` of an earlier version is named, not moved (the boss that writes code moves it)."""
        if not os.path.isdir(package_dir(path)):
            if os.path.isfile(legacy_file(path)):
                return (
                    "(the library is still library.py, the single file of an earlier version: Coder moves it into "
                    "the package `library` when it first uses it, and sees its functions)"
                )
            return ""
        try:
            return summary_head(path, self.flow_config.get("max_library_chars")) if library_structure(path) else ""
        except MemoryFileError as error:
            return f"(the code library cannot be read: {error})"

    def _reranker_of(self, retrieval: Dict[str, Any]) -> Optional[Reranker]:
        """The provider's embeddings when `retrieval.embedding` is `provider`; None for the local ranking."""
        embedding = retrieval.get("embedding", "local")
        if embedding == "local":
            return None
        if embedding != "provider":
            raise ConfigurationError(
                f"{self.flow_config['name']}: retrieval.embedding must be `local` or `provider`, not {embedding!r}"
            )
        if getattr(self, "_reranker", None) is None:
            self._reranker = Reranker(dict(retrieval.get("embedding_config") or {}), self.flow_config["name"])
        return self._reranker
