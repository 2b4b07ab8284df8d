"""VectorStoreFlowModule: a long-term memory (Chroma or FAISS) with the provider's embeddings through litellm."""

dependencies = [
    {"url": "aiflows/CoreFlowModule", "revision": "main"},
    {"url": "aiflows/ChatFlowModule", "revision": "main"},
]

from .embeddings import (  # noqa: E402
    Embeddings,
    HashEmbeddings,
    LiteLLMEmbeddings,
    embeddings_with_api_infos,
    hash_embeddings_factory,
    set_embeddings_factory,
)
from .store_folder import StoreKindMismatch  # noqa: E402
from .stores import VectorStoreError  # noqa: E402
from .VectorStoreFlow import VectorStoreFlow  # noqa: E402
