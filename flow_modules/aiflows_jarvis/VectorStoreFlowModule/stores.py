"""Vector stores behind one small interface: ``add(texts, vectors)``, ``search(vector, k) -> texts``.

``type`` in a VectorStoreFlow's YAML chooses the backend: ``chroma`` (default: a chromadb ``PersistentClient``,
telemetry off and no embedding function of its own, so it never downloads a model; cosine distance) or ``faiss``
(an ``IndexFlatIP`` over L2-normalised vectors, saved atomically after every write with ``documents.json``).

Each store records the embedding model and dimension it was written with; another model or dimension, or files
that cannot be read, raise ``VectorStoreError`` naming the folder. The libraries are imported when a store is
opened, so the flows build without them, and a missing library says which extra installs it.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

from aiflows_jarvis.CoreFlowModule import JarvisError, atomic_write

INSTALL_HINT = 'pip install -e ".[autogpt]" (or: pip install chromadb faiss-cpu)'


class VectorStoreError(JarvisError):
    """A vector store that cannot be used as configured: a missing library, another embedding model or dimension, a
    corrupt store."""


def _missing(library: str, error: ImportError) -> VectorStoreError:
    return VectorStoreError(
        f"The vector store needs the `{library}` package, which is not installed ({error}). "
        f"Install it with: {INSTALL_HINT}"
    )


def _normalised(vector: List[float]) -> List[float]:
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class VectorStore:
    """A persistent store of texts and their vectors."""

    def __init__(self, path: str, model: str, collection: str = "memories"):
        self.path = os.path.abspath(path)
        self.model = model
        self.collection = collection
        self.dimension: Optional[int] = None

    def add(self, texts: List[str], vectors: List[List[float]]) -> None:
        raise NotImplementedError

    def search(self, vector: List[float], k: int) -> List[str]:
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError

    def items(self, batch: int = 1000) -> Iterator[Tuple[List[str], List[List[float]]]]:
        """Every text with its vector, ``batch`` at a time (to copy a store into another kind)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    # ~~~ Checks shared by the backends ~~~
    def _check_model(self, recorded_model: Optional[str], recorded_dimension: Optional[int]) -> None:
        if recorded_model and recorded_model != self.model:
            raise VectorStoreError(
                f"The vector store in {self.path} was written with the embedding model {recorded_model!r}; this run "
                f"embeds with {self.model!r}, whose vectors cannot be compared with those. Use the same embedding "
                "model, or give this run another memory folder (or move the store away to start a new one)."
            )
        if recorded_dimension:
            self.dimension = int(recorded_dimension)

    def _check_dimension(self, vectors: List[List[float]]) -> int:
        sizes = {len(v) for v in vectors}
        if len(sizes) != 1:
            raise VectorStoreError(f"Vectors of different lengths {sorted(sizes)} cannot go into one store.")
        size = sizes.pop()
        if self.dimension is not None and size != self.dimension:
            raise VectorStoreError(
                f"The vector store in {self.path} holds vectors of dimension {self.dimension}; the embedding model "
                f"{self.model!r} gives {size}. Use the embedding model (and dimensions) the store was written with, "
                "or another memory folder."
            )
        return size


class ChromaStore(VectorStore):
    """chromadb, persistent in ``path``."""

    def __init__(self, path: str, model: str, collection: str = "memories"):
        super().__init__(path, model, collection)
        try:
            import chromadb
            from chromadb.config import Settings
        except ImportError as error:
            raise _missing("chromadb", error) from None
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise VectorStoreError(
                f"The vector store folder {self.path} is a file; move it away or give another memory folder."
            )
        os.makedirs(self.path, exist_ok=True)
        try:
            self._client = chromadb.PersistentClient(
                path=self.path, settings=Settings(anonymized_telemetry=False, allow_reset=False)
            )
            try:  # an existing collection keeps its metadata (get_or_create_collection could overwrite it)
                self._collection = self._client.get_collection(collection, embedding_function=None)
            except Exception:  # noqa: BLE001 - chromadb's "does not exist" error differs between versions
                self._collection = self._client.create_collection(
                    collection, embedding_function=None, metadata={"hnsw:space": "cosine", "embedding_model": model}
                )
            metadata = self._collection.metadata or {}
        except VectorStoreError:
            raise
        except Exception as error:  # noqa: BLE001 - chromadb raises many kinds for a broken database
            raise VectorStoreError(
                f"The Chroma vector store in {self.path} cannot be opened ({type(error).__name__}: {error}). It may be "
                "corrupt, or written by another chromadb version: move the folder away to start a new store."
            ) from None
        self._check_model(metadata.get("embedding_model"), metadata.get("dimension"))

    def add(self, texts: List[str], vectors: List[List[float]]) -> None:
        size = self._check_dimension(vectors)
        try:
            self._collection.add(
                ids=[uuid.uuid4().hex for _ in texts],
                documents=list(texts),
                embeddings=[list(map(float, v)) for v in vectors],
            )
            if self.dimension is None:
                metadata = {k: v for k, v in (self._collection.metadata or {}).items() if not k.startswith("hnsw:")}
                self._collection.modify(metadata={**metadata, "embedding_model": self.model, "dimension": size})
        except Exception as error:  # noqa: BLE001
            raise VectorStoreError(f"Writing to the Chroma vector store in {self.path} failed: {error}") from None
        self.dimension = size

    def search(self, vector: List[float], k: int) -> List[str]:
        count = self.count()
        if not count or k <= 0:
            return []
        self._check_dimension([vector])
        try:
            result = self._collection.query(
                query_embeddings=[list(map(float, vector))], n_results=min(k, count), include=["documents"]
            )
        except Exception as error:  # noqa: BLE001
            raise VectorStoreError(f"Reading the Chroma vector store in {self.path} failed: {error}") from None
        return [d for d in (result.get("documents") or [[]])[0] if d is not None]

    def count(self) -> int:
        return int(self._collection.count())

    def items(self, batch: int = 1000) -> Iterator[Tuple[List[str], List[List[float]]]]:
        for offset in range(0, self.count(), batch):
            try:
                got = self._collection.get(include=["documents", "embeddings"], limit=batch, offset=offset)
            except Exception as error:  # noqa: BLE001
                raise VectorStoreError(f"Reading the Chroma vector store in {self.path} failed: {error}") from None
            pairs = [(d, [float(x) for x in v]) for d, v in zip(got["documents"], got["embeddings"]) if d is not None]
            if pairs:
                yield [d for d, _ in pairs], [v for _, v in pairs]


class FaissStore(VectorStore):
    """faiss, saved to ``path/index.faiss`` and ``path/documents.json`` after every write."""

    INDEX = "index.faiss"
    DOCUMENTS = "documents.json"

    def __init__(self, path: str, model: str, collection: str = "memories"):
        super().__init__(path, model, collection)
        try:
            import faiss  # noqa: F401
        except ImportError as error:
            raise _missing("faiss-cpu", error) from None
        self._faiss = faiss
        self._index = None
        self._texts: List[str] = []
        index_path, documents_path = self._files()
        if os.path.exists(index_path) or os.path.exists(documents_path):
            self._load(index_path, documents_path)

    def _files(self):
        folder = os.path.join(self.path, self.collection)
        return os.path.join(folder, self.INDEX), os.path.join(folder, self.DOCUMENTS)

    def _load(self, index_path: str, documents_path: str) -> None:
        try:
            with open(documents_path, encoding="utf-8") as f:
                documents = json.load(f)
            texts = documents["texts"]
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ValueError("`texts` is not a list of strings")
            index = self._faiss.read_index(index_path)
            if index.ntotal != len(texts):
                raise ValueError(f"the index holds {index.ntotal} vectors for {len(texts)} texts")
        except Exception as error:  # noqa: BLE001 - a missing half, bad JSON, an unreadable index
            raise VectorStoreError(
                f"The FAISS vector store in {os.path.dirname(index_path)} is corrupt ({type(error).__name__}: "
                f"{error}). Move the folder away to start a new store."
            ) from None
        self._check_model(documents.get("embedding_model"), documents.get("dimension") or index.d)
        self._index, self._texts = index, texts

    def _save(self) -> None:
        import numpy  # noqa: F401 - faiss depends on it

        index_path, documents_path = self._files()
        os.makedirs(os.path.dirname(index_path), exist_ok=True)
        temporary = f"{index_path}.tmp-{os.getpid()}"
        self._faiss.write_index(self._index, temporary)
        os.replace(temporary, index_path)
        atomic_write(
            documents_path,
            json.dumps(
                {"embedding_model": self.model, "dimension": self.dimension, "texts": self._texts}, ensure_ascii=False
            ),
        )

    def add(self, texts: List[str], vectors: List[List[float]]) -> None:
        import numpy

        size = self._check_dimension(vectors)
        if self._index is None:
            self._index = self._faiss.IndexFlatIP(size)
        self._index.add(numpy.array([_normalised(v) for v in vectors], dtype="float32"))
        self._texts.extend(texts)
        self.dimension = size
        self._save()

    def search(self, vector: List[float], k: int) -> List[str]:
        import numpy

        if self._index is None or not self._texts or k <= 0:
            return []
        self._check_dimension([vector])
        _, ids = self._index.search(numpy.array([_normalised(vector)], dtype="float32"), min(k, len(self._texts)))
        return [self._texts[i] for i in ids[0] if 0 <= i < len(self._texts)]

    def count(self) -> int:
        return len(self._texts)

    def items(self, batch: int = 1000) -> Iterator[Tuple[List[str], List[List[float]]]]:
        for start in range(0, len(self._texts), batch):
            end = min(start + batch, len(self._texts))
            vectors = self._index.reconstruct_n(start, end - start)  # normalised: the same under cosine
            yield self._texts[start:end], [[float(x) for x in v] for v in vectors]


STORE_TYPES: Dict[str, Any] = {"chroma": ChromaStore, "faiss": FaissStore}


def open_store(kind: str, path: str, model: str, collection: str = "memories") -> VectorStore:
    if kind not in STORE_TYPES:
        raise VectorStoreError(f"Unknown vector store type {kind!r}: use one of {sorted(STORE_TYPES)}.")
    return STORE_TYPES[kind](path, model, collection)
