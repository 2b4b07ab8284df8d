"""Which kind of store a folder holds, recorded in the folder, and copying a store into another kind.

Chroma and FAISS keep different files, so a folder opened as the other kind shows none of its memories and gains
the other kind's files beside them. A store folder therefore records its kind in ``store.json``, and opening it as
another kind is refused (``StoreKindMismatch``), or, when asked (``migrate``), its memories are copied into a new
store of the kind wanted: the texts with their vectors as they are (the embedding model is the same, so nothing is
embedded again), and the folder as it was is kept beside it as ``<folder>.<kind>``. A folder written before the
record existed is known by its files: ``chroma.sqlite3`` (Chroma), ``<collection>/index.faiss`` or
``documents.json`` (FAISS).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import BadInputError, atomic_write

from .stores import FaissStore, VectorStoreError, open_store

RECORD = "store.json"
NAMES = {"chroma": "Chroma", "faiss": "FAISS"}


class StoreKindMismatch(VectorStoreError, BadInputError):
    """The folder holds a store of another kind than the one configured; ``found`` (its kinds), ``wanted`` and
    ``kept`` (where ``migrate`` would keep the folder as it is) let a command line say it in its own words."""

    def __init__(self, message: str, path: str, found: List[str], wanted: str, kept: str):
        super().__init__(message)
        self.path, self.found, self.wanted, self.kept = path, found, wanted, kept


def name(kind: str) -> str:
    return NAMES.get(kind, kind)


def kinds_present(path: str) -> List[str]:
    """The kinds whose files are in ``path`` (both, in a folder an older version opened as the other kind)."""
    if not os.path.isdir(path):
        return []
    kinds = ["chroma"] if os.path.exists(os.path.join(path, "chroma.sqlite3")) else []
    for entry in sorted(os.listdir(path)):
        sub = os.path.join(path, entry)
        if os.path.isdir(sub) and any(
            os.path.exists(os.path.join(sub, f)) for f in (FaissStore.INDEX, FaissStore.DOCUMENTS)
        ):
            kinds.append("faiss")
            break
    return kinds


def recorded_kind(path: str) -> Optional[str]:
    """The kind ``store.json`` names, or None when there is no record."""
    record = os.path.join(path, RECORD)
    if not os.path.exists(record):
        return None
    try:
        with open(record, encoding="utf-8") as f:
            kind = json.load(f)["type"]
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"`type` is {kind!r}")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise VectorStoreError(
            f"{record} cannot be read ({type(error).__name__}: {error}). Remove it: the kind of "
            "store is then found from the files in the folder."
        ) from None
    return kind


def record_kind(kind: str, path: str) -> None:
    os.makedirs(path, exist_ok=True)
    atomic_write(os.path.join(path, RECORD), json.dumps({"type": kind}) + "\n")


def folder_kinds(path: str) -> Tuple[List[str], bool]:
    """The kinds of store in ``path`` and whether they come from the record (else from the files)."""
    kind = recorded_kind(path)
    return ([kind], True) if kind else (kinds_present(path), False)


def kept_path(path: str, kinds: List[str]) -> str:
    """A free name beside ``path`` for the folder as it was: ``<path>.chroma`` (``.chroma-2``, ... if taken)."""
    base = f"{path}.{'+'.join(kinds)}"
    candidate, number = base, 2
    while os.path.lexists(candidate):
        candidate, number = f"{base}-{number}", number + 1
    return candidate


def finish_migration(path: str) -> Optional[str]:
    """A migration killed between its two renames left no ``path``, the folder as it was kept beside it, and the new
    store whole in ``<path>.migrating-<kind>`` (its kind is recorded last): that store is put in place. Returns its
    kind, or None when there was nothing to finish."""
    if os.path.lexists(path):
        return None
    for kind in NAMES:
        made = f"{path}.migrating-{kind}"
        if os.path.isfile(os.path.join(made, RECORD)) and recorded_kind(made) == kind:
            os.rename(made, path)
            return kind
    return None


def check_folder(kind: str, path: str) -> None:
    """Raise StoreKindMismatch if ``path`` holds a store of another kind than ``kind`` (or of two kinds). A
    migration killed before its end is finished first (``finish_migration``)."""
    finish_migration(path)
    kinds, recorded = folder_kinds(path)
    if not kinds or kinds == [kind]:
        return
    kept = kept_path(path, kinds)
    if len(kinds) > 1:
        what = (
            f"holds both a {name(kinds[0])} and a {name(kinds[1])} store (written before the folder recorded its kind)"
        )
        todo = (
            f"set `migrate: true` to copy them all into one {name(kind)} store (the folder as it is is kept in "
            f"{kept}), or move the files of the one you do not want out of the folder"
        )
    else:
        how = f"recorded in its {RECORD}" if recorded else "found from its files"
        what = f"is a {name(kinds[0])} store ({how})"
        todo = (
            f"use `type: {kinds[0]}`, or set `migrate: true` to copy its memories into a {name(kind)} store (the "
            f"{name(kinds[0])} store is kept in {kept})"
        )
    raise StoreKindMismatch(
        f"The vector store in {path} {what}; this flow is configured for {name(kind)} (`type: {kind}`), which would "
        f"show none of its memories. To go on, {todo}.",
        path,
        kinds,
        kind,
        kept,
    )


def migrate(kind: str, path: str, model: str, collection: str) -> Tuple[int, str]:
    """Copy every store in ``path`` into a new store of ``kind`` (its own memories first, if it has some) and put it
    in ``path``; the folder as it was is moved to ``kept_path``. Returns how many memories were copied and where
    the old folder is. A copy that fails leaves ``path`` as it was (the half-made store is removed)."""
    kinds, _ = folder_kinds(path)
    sources = sorted(kinds, key=lambda k: k != kind)
    temporary = f"{path}.migrating-{kind}"
    shutil.rmtree(temporary, ignore_errors=True)  # left by a copy that was killed
    copied = 0
    try:
        target = open_store(kind, temporary, model, collection)
        try:
            for source_kind in sources:
                source = open_store(source_kind, path, model, collection)
                try:
                    for texts, vectors in source.items():
                        target.add(texts, vectors)
                        copied += len(texts)
                finally:
                    source.close()
        finally:
            target.close()
        record_kind(kind, temporary)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    kept = kept_path(path, kinds)
    os.rename(path, kept)
    os.rename(temporary, path)
    return copied, kept
