"""What of a large library or a long log goes into a prompt: the entries relevant to the task and the last result.

The memory index (``search_index``) ranks the entries; this module picks what fits the budget, says how many
entries were left out and how to see them, and keeps the pick stable from one round to the next: the entries
picked last round that are still among the best come first, and the entries are shown in the memory's order, so an
unchanged task and result give the same text (a prompt prefix the provider can cache).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from aiflows_jarvis.CodeLibraryFlowModule import package_summary, summary_head
from aiflows_jarvis.CoreFlowModule import (
    ConfigurationError,
    current_run,
    get_console,
    last_within,
    read_log_tail,
    shorten,
    split_log_entries,
)

from .library_entries import key_pair, recent_keys
from .search_index import MemoryIndex, library_index, log_index

# What of the last result goes into the query (a long output would drown the task's words).
_RESULT_QUERY_CHARS = 1500


def make_query(goal: Any, result: Any) -> str:
    """The query the entries are ranked by: the task, then the start of the last result."""
    return f"{goal or ''}\n{str(result or '')[:_RESULT_QUERY_CHARS]}"


class Reranker:
    """Re-ranks the index's candidates with the provider's embeddings, when configured: half the lexical score (scaled
    to the best), half the cosine. The embeddings come from the run's embeddings factory
    (``RunContext(embeddings_factory=...)``, which the application sets from its provider), so reading the memory
    does not import the vector stores. A vector is computed once per text and kept for the process; a failing
    provider leaves the lexical order, with a warning."""

    def __init__(self, embedding_config: Dict[str, Any], flow_name: str):
        factory = current_run().embeddings_factory
        if factory is None:
            raise ConfigurationError(
                f"{flow_name}: retrieval.embedding is `provider` but the run has no embeddings: build the run with "
                "`RunContext(embeddings_factory=embeddings_with_api_infos([...]))` (from the VectorStore module), "
                "or set retrieval.embedding to `local`"
            )
        self.embeddings = factory(dict(embedding_config), flow_name)
        self.vectors: Dict[str, List[float]] = {}
        self.failed = False

    def _vectors(self, texts: Sequence[str]) -> List[List[float]]:
        missing = [text for text in dict.fromkeys(texts) if text not in self.vectors]
        if missing:
            for text, vector in zip(missing, self.embeddings.embed(missing, where="memory retrieval")):
                self.vectors[text] = vector
        return [self.vectors[text] for text in texts]

    def rerank(self, index: MemoryIndex, query: str, found: List[Tuple[str, float]]) -> List[Tuple[str, float]]:
        if self.failed or len(found) < 2:
            return found
        try:
            vectors = self._vectors([query] + [index.texts[key] for key, _ in found])
        except Exception as error:  # noqa: BLE001 - the provider's failure must not stop the run: lexical order
            self.failed = True
            get_console().line(
                "warning",
                f"memory retrieval: the provider's embeddings failed ({error}); the "
                "entries are ranked by their words only",
            )
            return found
        query_vector, best = vectors[0], max(score for _, score in found) or 1.0
        scored = [
            (key, 0.5 * score / best + 0.5 * _cosine(query_vector, vector))
            for (key, score), vector in zip(found, vectors[1:])
        ]
        return sorted(scored, key=lambda item: -item[1])


def _cosine(a: List[float], b: List[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _ranked(index: MemoryIndex, query: str, candidates: int, reranker: Optional[Reranker], allowed=None) -> List[str]:
    found = index.search(query, candidates * 3 if allowed else candidates)
    if allowed:
        found = [(key, score) for key, score in found if allowed(key)][:candidates]
    if reranker is not None:
        found = reranker.rerank(index, query, found)
    return [key for key, _ in found]


def _pick(
    order: List[str], budget: int, cost: Callable[[str], int], group: Optional[Callable[[str], Tuple[str, int]]] = None
) -> List[str]:
    """The keys of ``order`` (first is most wanted) whose ``cost`` (plus 2, their separator) fits ``budget`` together;
    ``group``: key -> (its group, the cost of the group's header), counted with the first key of the group."""
    chosen, used, groups = [], 0, set()
    for key in dict.fromkeys(order):
        name, header = group(key) if group else ("", 0)
        more = cost(key) + 2 + (0 if name in groups else header)
        if used + more <= budget:
            chosen.append(key)
            used += more
            groups.add(name)
    return chosen


def relevant_library(
    code_library: str,
    query: str,
    max_chars: int,
    previous: List[str],
    recent: int = 3,
    candidates: int = 40,
    reranker: Optional[Reranker] = None,
) -> Tuple[str, List[str]]:
    """``(the library for the prompt, the keys picked)``: the package's summary (``package_summary``: its modules, one
    line each, then the entries under their modules' headers) of the ``recent`` last saved functions and the most
    relevant to ``query`` (those of ``previous`` first), within ``max_chars``; a line before the entries says how
    many are left out and how to see them."""
    index = library_index(code_library)
    found = _ranked(index, query, candidates, reranker)
    kept = set(previous)
    order = recent_keys(code_library, recent, index.texts)
    order += [key for key in found if key in kept] + [key for key in found if key not in kept]
    total = len(index)
    note = (
        f"(the library defines {total} functions and classes: the ones most relevant to the task and the last "
        f"saved follow; {total} are left out: call search_library with a few words of what you need to see "
        "others)"
    )
    room = max_chars - len(summary_head(code_library, max_chars)) - 2 - len(note) - 1

    def module_header(key: str) -> Tuple[str, int]:  # as package_summary counts: a module's header line, once
        module = key_pair(key)[0]
        return module, len(f"# library/{module}.py") + 1

    chosen = _pick(order, room, lambda key: len(index.texts[key]), module_header)
    note = note.replace(f"; {total} are left out", f"; {total - len(chosen)} are left out", 1)
    return package_summary(code_library, max_chars, [key_pair(key) for key in chosen], note), chosen


def relevant_logs(
    log_path: str,
    query: str,
    max_entries: int,
    max_chars: Optional[int],
    previous: List[str],
    relevant: int = 5,
    candidates: int = 40,
    reranker: Optional[Reranker] = None,
) -> Tuple[str, List[str]]:
    """``(the log's entries for the prompt, the earlier entries picked)``. While the log holds at most
    ``max_entries`` entries, its tail as ``read_log_tail`` gives it. Beyond, the last ``max_entries - relevant``
    entries are kept, and up to ``relevant`` earlier ones, the most relevant to ``query``, come before them, with a
    line saying how many are left out and how to see them."""
    whole = read_log_tail(log_path, max_entries, max_chars)
    entries = split_log_entries(whole)
    if not relevant or not entries or entries[0][0] <= 1 or max_entries <= relevant:
        return whole, []
    recent_chars = (max_chars * 3 // 4) if max_chars else None
    recent = last_within(entries[-(max_entries - relevant) :], recent_chars)  # as read_log_tail gives it
    if not recent:
        return whole, []
    first_recent = recent[0][0]
    index = log_index(log_path)
    earlier = _ranked(index, query, candidates, reranker, allowed=lambda key: key.isdigit() and int(key) < first_recent)
    kept = set(previous)
    order = [key for key in earlier if key in kept] + [key for key in earlier if key not in kept]
    each = (max_chars // 4 // relevant) if max_chars else 1500
    order = order[:relevant]
    chosen = _pick(order, (max_chars // 4) if max_chars else 10**9, lambda key: min(len(index.texts[key]), each))
    if not chosen:  # no earlier entry is more relevant than another (the task's words are in most of them)
        return whole, []
    shown = sorted(chosen, key=int)
    left_out = first_recent - 1 - len(shown)
    name = os.path.basename(log_path)
    header = (
        f"[{first_recent - 1} earlier entries are in {name}: the {len(shown)} most relevant to the task "
        f"follow, then the last {len(recent)}; {left_out} are left out (search_logs finds them)]"
    )
    body = [shorten(index.texts[key], each) for key in shown] + [entry for _, entry in recent]
    return header + "\n" + "\n".join(body), chosen


QUERY_SHOWN = 200  # characters of a query the answer says back


def search_text(index: MemoryIndex, query: str, what: str, max_results: int, max_chars: int) -> str:
    """The answer to a search command: the best entries for ``query``, each shortened to share ``max_chars``."""
    found = index.search(query, max_results)
    asked = shorten(query, QUERY_SHOWN)  # a query of 40 KB is not said back whole (nor shown whole on the console)
    if not found:
        return f"No entry of the {what} matches {asked!r} (it has {len(index)} entries)."
    each = max(200, max_chars // len(found))
    parts = [shorten(index.texts[key], each) for key, _ in found]
    return (
        f"The {len(found)} entries of the {what} ({len(index)} in all) most relevant to {asked!r}, best "
        "first:\n\n" + "\n\n".join(parts)
    )
