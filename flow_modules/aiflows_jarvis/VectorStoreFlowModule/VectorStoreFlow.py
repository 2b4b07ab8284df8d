from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from aiflows_jarvis.CoreFlowModule import ConfigurationError, LeanAtomicFlow, current_flow_path, get_console, shorten

from .embeddings import Embeddings, build_embeddings
from .store_folder import StoreKindMismatch, check_folder, migrate, name, record_kind, recorded_kind
from .stores import VectorStore, VectorStoreError, open_store


class VectorStoreFlow(LeanAtomicFlow):
    """A long-term memory: writes texts to a vector store and reads back the `k` most relevant to a query.

    The seed's interface: `operation` `read` (`content` is the query) or `write` (`content`: a text or a list). The
    store is persistent (a folder in the memory directory), so a later run remembers what an earlier one wrote; it
    records its kind (`store.json`), embedding model and dimension and refuses to mix them (a store of another kind
    can be copied across: `migrate`), and a corrupt store is named, not silently replaced. The store is opened on
    the first call, so the flow builds without the vector-store libraries or credentials.

    *Configuration Parameters*:
    - `type` (str): `chroma` (default; chromadb, persistent) or `faiss` (faiss, saved to disk after every write).
    - `k` (int): how many documents a read returns.
    - `collection` (str): the collection (chroma) or sub-folder (faiss) inside the store's folder.
    - `persist_directory` (str or null): the store's folder; null: `memory_files.vector_store`, which the launcher
      fills from `memory_file_names` (a folder in the memory directory).
    - `embedding` (dict): `type: litellm` with `api_infos: ???`, `model_name` (`{openai: text-embedding-3-small,
      azure: ...}`), `batch_size`, `request_timeout`, `retry`; or `type: hash` (`hash_dimension`).
    - `max_document_chars` (int): a text written is cut to this many characters (head and tail kept).
    - `migrate` (bool): true: a store of another kind in the folder is copied into one of `type` (the vectors as
      they are; the folder as it was is kept beside it as `<folder>.<kind>`); false (default): it is refused.

    *Input Interface*:
    - `operation` (str): `read` or `write`.
    - `content` (str or list of str): the query (read), or the text(s) to add (write).

    *Output Interface*:
    - `retrieved` (list of str or str): the page content of the `k` most relevant documents, or `""` after a write.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._store: Optional[VectorStore] = None
        self._embeddings: Optional[Embeddings] = None

    # ~~~ Set-up, on first use ~~~
    def store_directory(self) -> str:
        directory = self.flow_config.get("persist_directory")
        if not directory or directory == "???":
            files = self.flow_config.get("memory_files")
            directory = files.get("vector_store") if isinstance(files, dict) else None
        if not directory or directory == "???":
            raise ConfigurationError(
                f"{self.flow_config['name']}: the vector store has no folder: set `persist_directory`, or "
                "`memory_files: {vector_store: <folder>}` (run_autogpt.py puts it in the memory folder)."
            )
        return os.path.abspath(directory)

    @property
    def embeddings(self) -> Embeddings:
        if self._embeddings is None:
            self._embeddings = build_embeddings(self.flow_config.get("embedding") or {}, self.flow_config["name"])
        return self._embeddings

    @property
    def kind(self) -> str:
        return str(self.flow_config.get("type") or "chroma")

    def prepare_store(self) -> Optional[str]:
        """Check that the folder holds no store of another kind; with `migrate`, copy one across. Returns what was
        copied (a line to show), or None. Raises StoreKindMismatch (without `migrate`), VectorStoreError."""
        folder = self.store_directory()
        try:
            check_folder(self.kind, folder)
        except StoreKindMismatch as mismatch:
            if not self.flow_config.get("migrate"):
                raise
            copied, kept = migrate(
                self.kind, folder, self.embeddings.model, str(self.flow_config.get("collection") or "memories")
            )
            found = " and ".join(name(k) for k in mismatch.found)
            return (
                f"Copied {copied} memor{'y' if copied == 1 else 'ies'} from the {found} store into a "
                f"{name(self.kind)} store in {folder}; the folder as it was is kept in {kept}."
            )
        return None

    def _set_up_retriever(self) -> VectorStore:
        """The store of the configured `type` (another backend: add it to ``stores.STORE_TYPES``)."""
        if self._store is None:
            note = self.prepare_store()
            if note:
                get_console().line("info", note)
            folder = self.store_directory()
            self._store = open_store(
                self.kind, folder, self.embeddings.model, str(self.flow_config.get("collection") or "memories")
            )
            if recorded_kind(folder) is None:
                record_kind(self.kind, folder)
        return self._store

    # ~~~ Operations ~~~
    def read(self, query: str, k: Optional[int] = None) -> List[str]:
        store = self._set_up_retriever()
        if not store.count():
            return []
        vector = self.embeddings.embed([query], self._where())[0]
        return store.search(vector, int(k if k is not None else self.flow_config.get("k", 3)))

    def write(self, texts: List[str]) -> None:
        limit = int(self.flow_config.get("max_document_chars") or 0)
        texts = [shorten(t, limit) if limit else t for t in texts if t and t.strip()]
        if not texts:
            return
        store = self._set_up_retriever()
        store.add(texts, self.embeddings.embed(texts, self._where()))

    def _where(self) -> str:
        return current_flow_path() or self.flow_config["name"]

    def run(self, input_data: Dict[str, Any]) -> Dict[str, Any]:
        operation = input_data.get("operation")
        if operation not in ("read", "write"):
            raise ConfigurationError(
                f"{self.flow_config['name']}: operation must be 'read' or 'write', not {operation!r}"
            )
        content = input_data.get("content")
        if operation == "read":
            if not isinstance(content, str):
                raise ConfigurationError(
                    f"{self.flow_config['name']}: a read's content must be a string (the "
                    f"query), not {type(content).__name__}"
                )
            return {"retrieved": self.read(content)}
        if isinstance(content, str):
            content = [content]
        if not isinstance(content, list) or not all(isinstance(c, str) for c in content):
            raise ConfigurationError(
                f"{self.flow_config['name']}: a write's content must be a string or a list of strings"
            )
        self.write(content)
        return {"retrieved": ""}

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


__all__ = ["VectorStoreFlow", "VectorStoreError"]
