"""Search indexes of the memory: the code library's entries and the logs' entries, ranked by relevance to a query.

When the library or the logs outgrow what a prompt may hold, the entries shown are the ones relevant to the task; the
index says which.

A log has its index in ``<memory folder>/.index/<file name>.idx``: a journal with one line per change (an entry put,
and what the log was when the index last caught up with it), each line with its checksum. An entry is one appended
line, so a log entry costs the same at any length. A journal torn by a kill (a line cut or not matching its
checksum), missing, or describing another version of its log (rewritten, a kill between the log's write and the
index's) is rebuilt from the log, written whole to a temporary file and renamed over the journal; so is a journal with
many lines superseded.

The code library has no journal: the library package keeps its own index of what each module defines
(``library/_index/``, see CodeLibraryFlowModule's ``package``), which the library's search index is built from, in
memory, and caught up with entry by entry (``library_entries`` is the adapter). Tokenizing thousands of docstrings is
most of what a large library costs a run, so from ``_CACHE_FROM`` entries the built index is also kept in
``library/_index/search.bin`` (a cache with its checksum: one that does not read, or made by other indexing rules, is
built again) and the next run starts from it, putting again only the entries whose digest changed since.
Ranking is lexical, with no model and no network: BM25 over words (camelCase and snake_case split) and their stems, so
"normalise the temperatures" finds ``def normalize_temperature``. The provider's embeddings can re-rank what it finds
(MemoryReadingFlowModule does, when configured).
"""

from __future__ import annotations

import functools
import heapq
import json
import marshal
import math
import os
import re
import threading
import zlib
from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import (
    MemoryFileError,
    append_text,
    atomic_write,
    open_regular,
    read_text,
    say_rebuilt,
    split_log_entries,
)

from .library_entries import (
    entry_text,
    library_entries,
    library_fingerprint,
    library_key,
    rendering_id,
    search_cache_path,
)

INDEX_FOLDER = ".index"
_VERSION = 1
# A journal with more than this many lines per live entry (plus some) is rewritten whole.
_COMPACT_RATIO = 3
_TAIL_BYTES = 256  # the bytes of a log compared to tell it was not rewritten since it was indexed

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_STOP = frozenset(
    """a an and are as at be by for from has have if in into is it its of on or that the this to was
were will with which what when where who how do does did can could should would you your we our they their i me my
so not no yes but all any each per than then there these those via using use used uses""".split()
)
_SUFFIXES = (
    "ational",
    "ations",
    "ation",
    "ising",
    "izing",
    "ments",
    "ment",
    "ness",
    "ings",
    "ing",
    "ies",
    "ied",
    "ers",
    "er",
    "ed",
    "es",
    "ly",
    "al",
    "s",
    "e",
)
_K1, _B = 1.2, 0.75
_COMMON_FROM = 50  # entries from which terms in more than half of them are not scored
_CACHE_FROM = 1000  # entries from which the library's search index is kept on disk between runs
_RECACHE_EVERY = 200  # entries put or dropped since the cache was written before it is again (5% when more)


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:6]


@functools.lru_cache(maxsize=1 << 16)
def _terms(word: str) -> Tuple[str, ...]:
    """The terms of one word as written (a library's words repeat: each is lowered and stemmed once)."""
    word = word.lower()
    if len(word) < 2 or word in _STOP:
        return ()
    return word, "~" + _stem(word)


def features(text: str) -> List[str]:
    """The terms a text is indexed and searched by: its words (lowercase, identifiers split), and their stems (the
    first letters without a common suffix: `temperatures`, `temperature` share one)."""
    out: List[str] = []
    for word in _WORD.findall(text):
        out.extend(_terms(word))
    return out


class MemoryIndex:
    """An index of one memory file's entries, kept in memory as BM25 postings and on disk as its journal."""

    def __init__(self, path: str, kind: str):
        self.path = path
        self.kind = kind
        self.texts: Dict[str, str] = {}  # key -> text, in the memory's order
        self.source: Dict[str, Any] = {}  # what the memory file was when the index caught up with it
        self._lengths: Dict[str, int] = {}
        self._terms: Dict[str, Tuple[str, ...]] = {}
        self._postings: Dict[str, Dict[str, int]] = {}
        self._total = 0
        self.position: Dict[str, int] = {}  # key -> rank in the memory's order (the order of ``texts``)
        self._next = 0
        self.lines = 0  # journal lines applied
        self.offset = 0  # journal bytes applied
        self.ident: Optional[Tuple[int, int]] = None
        self.unsaved = 0  # entries put or dropped since the library's cache was written (or read)

    def __len__(self) -> int:
        return len(self.texts)

    # ~~~ In memory ~~~
    def _put(self, key: str, text: str) -> None:
        if key in self.texts:
            self._drop(key)
        counts = Counter(features(text))
        for term, count in counts.items():
            self._postings.setdefault(term, {})[key] = count
        self.texts[key] = text
        self.position[key], self._next = self._next, self._next + 1
        self._lengths[key] = length = sum(counts.values())
        self._terms[key] = tuple(counts)
        self._total += length

    def _drop(self, key: str) -> None:
        if key not in self.texts:
            return
        del self.texts[key]
        self.position.pop(key, None)  # (an index read from the library's cache has its positions made at its end)
        self._total -= self._lengths.pop(key)
        for term in self._terms.pop(key):
            posting = self._postings[term]
            posting.pop(key, None)
            if not posting:
                del self._postings[term]

    def reorder(self, keys: List[str]) -> None:
        """Put the entries in the memory's order ``keys`` (the same keys as held): ties in a search follow it."""
        self.texts = {key: self.texts[key] for key in keys}
        self.position = {key: rank for rank, key in enumerate(keys)}
        self._next = len(keys)

    def _apply(self, record: Dict[str, Any]) -> None:
        if "put" in record:
            self._put(str(record["put"]), str(record.get("text", "")))
        elif "drop" in record:
            self._drop(str(record["drop"]))
        elif "source" in record:
            self.source = dict(record["source"])

    def search(self, query: str, limit: int = 10) -> List[Tuple[str, float]]:
        """``[(key, score)]`` of the ``limit`` entries most relevant to ``query``, best first (ties: memory order)."""
        if not self.texts:
            return []
        count = len(self.texts)
        average = self._total / count or 1.0
        scores: Dict[str, float] = {}
        for term, times in Counter(features(query)).items():
            posting = self._postings.get(term)
            if not posting or (count > _COMMON_FROM and len(posting) > count // 2):
                continue  # a term in most entries tells little, and scoring it costs a pass over most of them
            idf = math.log(1.0 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
            weight = idf * (1.0 + math.log(times)) * (0.5 if term.startswith("~") else 1.0)
            for key, tf in posting.items():
                norm = _K1 * (1.0 - _B + _B * self._lengths[key] / average)
                scores[key] = scores.get(key, 0.0) + weight * tf * (_K1 + 1.0) / (tf + norm)
        position = self.position
        return heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], position[item[0]]))

    # ~~~ On disk ~~~
    def append(self, records: List[Dict[str, Any]]) -> None:
        """Apply ``records`` and append them to the journal with one write."""
        for record in records:
            self._apply(record)
        data = "".join(_line(record) for record in records)
        append_text(self.path, data)
        self.lines += len(records)
        self.offset += len(data.encode("utf-8"))
        if self.lines > _COMPACT_RATIO * len(self.texts) + 64:
            self.rewrite()

    def rewrite(self) -> None:
        """Write the journal whole (one line per entry), atomically."""
        records = [{"v": _VERSION, "kind": self.kind}]
        records += [{"put": key, "text": text} for key, text in self.texts.items()]
        records.append({"source": self.source})
        data = "".join(_line(record) for record in records)
        atomic_write(self.path, data)
        self.lines, self.offset = len(records), len(data.encode("utf-8"))
        info = os.stat(self.path)
        self.ident = (info.st_dev, info.st_ino)


def _line(record: Dict[str, Any]) -> str:
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return f"{zlib.crc32(body.encode('utf-8')):08x} {body}\n"


class TornIndex(Exception):
    """The journal has a line cut by a kill or not matching its checksum."""


def _records(data: bytes) -> Iterable[Dict[str, Any]]:
    if data and not data.endswith(b"\n"):
        raise TornIndex("the last line is cut")
    for raw in data.split(b"\n")[:-1]:
        crc, _, body = raw.partition(b" ")
        try:
            if int(crc, 16) != zlib.crc32(body):
                raise TornIndex("a line does not match its checksum")
            record = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise TornIndex(f"a line does not read: {error}") from None
        if not isinstance(record, dict):
            raise TornIndex("a line is not a record")
        yield record


_indexes: Dict[str, MemoryIndex] = {}
_lock = threading.RLock()


def index_path_of(memory_file: str) -> str:
    """Where the index of ``memory_file`` is: ``<its folder>/.index/<its name>.idx``."""
    folder, name = os.path.split(os.path.abspath(memory_file))
    return os.path.join(folder, INDEX_FOLDER, f"{name}.idx")


def _open_index(path: str, what: str, source: str) -> Optional[int]:
    """A descriptor of the index file ``path``, or None: missing or unreadable (built again), or a FIFO, a folder or
    a link (said in one line, naming ``what`` and the ``source`` it is built again from)."""
    try:
        return open_regular(path)
    except OSError:
        return None
    except MemoryFileError as error:  # replaced by the index built again
        say_rebuilt(what, error.reason, source)
        return None


def _load(memory_file: str, kind: str) -> Optional[MemoryIndex]:
    """The index of ``memory_file`` as its journal has it (only the lines appended since, when it was read lately);
    None when it is missing, torn or of another kind, or not a regular file (said: it is built again)."""
    path = index_path_of(memory_file)
    fd = _open_index(path, f"The search index of {os.path.basename(memory_file)} ({path})", "its file")
    if fd is None:
        return None
    try:
        info = os.fstat(fd)
        ident = (info.st_dev, info.st_ino)
        index = _indexes.get(path)
        if index is None or index.ident != ident or info.st_size < index.offset or index.kind != kind:
            index = MemoryIndex(path, kind)
            index.ident = ident
        data = os.pread(fd, info.st_size - index.offset, index.offset) if info.st_size > index.offset else b""
    finally:
        os.close(fd)
    try:
        records = list(_records(data))
    except TornIndex:
        return None
    if index.offset == 0 and (not records or records[0].get("v") != _VERSION or records[0].get("kind") != kind):
        return None
    for record in records:
        index._apply(record)
    index.lines += len(records)
    index.offset += len(data)
    _indexes[path] = index
    return index


def _rebuild(memory_file: str, kind: str, entries: Iterable[Tuple[str, str]], source: Dict[str, Any]) -> MemoryIndex:
    index = MemoryIndex(index_path_of(memory_file), kind)
    for key, text in entries:
        index._put(key, text)
    index.source = source
    index.rewrite()
    _indexes[index.path] = index
    return index


# ~~~ The code library ~~~
def library_index(code_library: str) -> MemoryIndex:
    """The index of the code library, caught up with the package: the library package keeps its own index of what
    each module defines (``library/_index/``, parsed once per change of a module), so this one is built from it
    (``library_entries``) and, when the package's fingerprint changed, only the entries whose digest changed are put
    again and those gone are dropped. A large library starts from the index the last run kept (``_CACHE_FROM``),
    compared entry by entry with the package. MemoryFileError: a `library.py` that does not compile (it is not
    migrated)."""
    fingerprint = library_fingerprint(code_library)
    key = "library:" + library_key(code_library)
    with _lock:
        index = _indexes.get(key)
        if index is not None and index.source.get("fingerprint") == fingerprint:
            return index
        cache = search_cache_path(code_library)
        if index is None:
            index = _read_library_cache(cache, key)
        index = index or MemoryIndex(key, "library")
        digests: Dict[str, str] = index.source.get("digests") or {}
        latest = library_entries(code_library)
        built = _indexes.get(key)
        if built is not None and built is not index:  # (reading the entries migrated a library.py, which built it)
            return built
        texts = index.texts
        for gone in [k for k in texts if k not in latest]:
            index._drop(gone)
            index.unsaved += 1
        for entry_key, (digest, record) in latest.items():
            if not digest or digests.get(entry_key) != digest or entry_key not in texts:
                index._put(entry_key, entry_text(record))
                index.unsaved += bool(digest)
        index.reorder(list(latest))
        index.source = {"fingerprint": fingerprint, "digests": {k: digest for k, (digest, _) in latest.items()}}
        if len(index) >= _CACHE_FROM and index.unsaved >= min(len(index), max(_RECACHE_EVERY, len(index) // 20)):
            _write_library_cache(index, cache)
        _indexes[key] = index
        return index


def keep_library_index(code_library: str) -> None:
    """Build a large library's index now and keep it for the runs to come (a migration calls it: a library that
    arrives whole is indexed once, there, rather than at a run's first prompt); nothing for a small one."""
    if len(library_entries(code_library)) >= _CACHE_FROM:
        library_index(code_library)


# The kept index of a large library (``library/_index/search.bin``): a magic line, a head line (the rules it was made
# by, the payload's CRC and length), then the payload in marshal's format, the fastest Python reads back (about 60 ms
# for 22,000 functions, where tokenizing them again takes 400 ms). An index made by other rules is built again: other
# indexing (words, stop words, stems: bump _CACHE_VERSION when the code of ``features`` changes), entries read or
# rendered otherwise (``rendering_id``), another marshal format. The file is as trusted as the library beside it,
# whose code runs: the checks below catch a file cut, changed, or in the wrong shape, not one crafted to exhaust
# memory (marshal is not made for hostile data).
_CACHE_VERSION = 1
_CACHE_MAGIC = b"jarvis library search index\n"
_CACHE_RULES = "{} {} {:08x} {}".format(
    _CACHE_VERSION,
    marshal.version,
    zlib.crc32(repr((_WORD.pattern, sorted(_STOP), _SUFFIXES)).encode("utf-8")),
    rendering_id(),
)
_CACHE_HEAD_MAX = 256
_CACHE_MAX_BYTES = 2 << 30


def _write_library_cache(index: MemoryIndex, path: str) -> None:
    """Keep the library's index in ``path`` for the next run. A cache that cannot be written is left to the next run
    to make."""
    payload = marshal.dumps((index.source, index.texts, index._lengths, index._terms, index._postings, index._total))
    head = f"{_CACHE_RULES} {zlib.crc32(payload):08x} {len(payload)}\n".encode("ascii")
    try:
        atomic_write(path, _CACHE_MAGIC + head + payload)
    except MemoryFileError:
        return
    index.unsaved = 0


def _read_library_cache(path: str, key: str) -> Optional[MemoryIndex]:
    """The index the cache in ``path`` holds, to be compared entry by entry with the package (its ``source`` says
    what the package was), or None when there is none or it does not read: missing, cut, changed, made by other
    rules, of the wrong shape, a link or not a regular file (these last two said on the console)."""
    fd = _open_index(path, f"The code library's search index {path}", "the library's index")
    if fd is None:
        return None
    try:
        info = os.fstat(fd)
        if info.st_size > _CACHE_MAX_BYTES:
            return None
        start = os.pread(fd, len(_CACHE_MAGIC) + _CACHE_HEAD_MAX, 0)
        if not start.startswith(_CACHE_MAGIC) or b"\n" not in start[len(_CACHE_MAGIC) :]:
            return None
        head = start[len(_CACHE_MAGIC) :].split(b"\n", 1)[0]
        *rules, crc, length = head.decode("ascii").split(" ")
        offset = len(_CACHE_MAGIC) + len(head) + 1
        if " ".join(rules) != _CACHE_RULES or int(length) != info.st_size - offset:
            return None
        payload = os.pread(fd, int(length), offset)
        if len(payload) != int(length) or int(crc, 16) != zlib.crc32(payload):
            return None
        parts = marshal.loads(payload)
        del payload
        index = _index_of(parts, key)
    except (OSError, ValueError, EOFError, TypeError, UnicodeDecodeError, MemoryError, RecursionError, OverflowError):
        return None
    finally:
        os.close(fd)
    return index


def _index_of(parts: Any, key: str) -> Optional[MemoryIndex]:
    """The index ``parts`` (a cache's payload) describes, or None when they are not of its shape: every entry with
    its length and terms, every term's postings of entries held (a few ms for 22,000 entries)."""
    if not isinstance(parts, tuple) or len(parts) != 6:
        return None
    source, texts, lengths, terms, postings, total = parts
    if not all(type(part) is dict for part in (source, texts, lengths, terms, postings)) or type(total) is not int:
        return None
    if not texts.keys() == lengths.keys() == terms.keys() or type(source.get("digests")) is not dict:
        return None
    if not all(type(text) is str for text in texts.values()) or not all(type(n) is int for n in lengths.values()):
        return None
    if not all(type(held) is tuple for held in terms.values()) or not all(type(p) is dict for p in postings.values()):
        return None
    if not set().union(*terms.values()) <= postings.keys() or not set().union(*postings.values()) <= texts.keys():
        return None
    index = MemoryIndex(key, "library")
    index.texts, index._lengths, index._terms, index._postings, index._total = texts, lengths, terms, postings, total
    # no fingerprint: ``library_index`` compares it with the package entry by entry, then ``reorder`` gives positions
    index.source = {"digests": source["digests"]}
    return index


# ~~~ The logs ~~~
def _log_state(log_path: str) -> Tuple[int, int]:
    """The log's size and the checksum of its last bytes (0, 0 when it is missing)."""
    try:
        size = os.lstat(log_path).st_size
    except FileNotFoundError:
        return 0, 0
    return size, _tail_at(log_path, size) or 0


def _tail_at(log_path: str, size: int) -> Optional[int]:
    """The checksum of the log's bytes before ``size`` (None if it is shorter)."""
    try:
        fd = open_regular(log_path)
    except FileNotFoundError:
        return None
    try:
        if os.fstat(fd).st_size < size:
            return None
        return zlib.crc32(os.pread(fd, min(size, _TAIL_BYTES), size - min(size, _TAIL_BYTES)))
    finally:
        os.close(fd)


def _log_records(text: str) -> List[Dict[str, Any]]:

    return [{"put": str(number), "text": entry} for number, entry in split_log_entries(text)]


def log_index(log_path: str) -> MemoryIndex:
    """The index of a log, caught up with it: what was appended since is added; a log rewritten (shorter, or not
    the same where the index stopped), a missing or torn index: rebuilt."""
    with _lock:
        size, tail = _log_state(log_path)
        index = _load(log_path, "logs")
        if index is not None:
            known = int(index.source.get("size", -1))
            if known == size and index.source.get("tail") == tail:
                return index
            if 0 <= known < size and _tail_at(log_path, known) == index.source.get("tail"):
                with os.fdopen(open_regular(log_path), "rb") as f:  # only what was appended since
                    f.seek(known)
                    data = f.read(size - known)
                # an entry cut mid-character by a kill: its bytes are dropped, the entries around it kept
                text = data.decode("utf-8", errors="replace")
                end = known + len(data)
                index.append(_log_records(text) + [{"source": {"size": end, "tail": _tail_at(log_path, end)}}])
                return index
        text = read_text(log_path)
        records = _log_records(text)
        return _rebuild(log_path, "logs", ((r["put"], r["text"]) for r in records), {"size": size, "tail": tail})


def forget_cached_indexes() -> None:
    """Drop what this process keeps of the indexes (they are read again from disk)."""
    with _lock:
        _indexes.clear()
