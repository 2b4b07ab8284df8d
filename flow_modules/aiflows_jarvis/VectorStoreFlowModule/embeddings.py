"""Embeddings for the vector stores: the LLM provider's, through litellm, or a deterministic local one.

``LiteLLMEmbeddings`` calls litellm's ``embedding`` (OpenAI's, or any OpenAI-compatible ``/v1/embeddings`` server)
in batches, each retried like a chat call (``call_with_retries``), checked against the run's budget and counted in
the usage. Hazard: litellm 1.0.0 sends an embedding to an OpenAI-compatible server only for the model names in its
``open_ai_embedding_models`` list, so the model asked for is added to that list before the call.

``HashEmbeddings`` needs no model and no network (hashed words and character trigrams: texts that share words are
near; it is no semantic model), for the offline demo and for tests. ``RunContext(embeddings_factory=...)`` replaces how
every VectorStoreFlow of a run gets its embeddings, as ``RunContext(backend_factory=...)`` does for chats.
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
import time
from typing import Any, Callable, Dict, List, Optional

from aiflows_jarvis.ChatFlowModule import MalformedReply, RetryPolicy, call_with_retries
from aiflows_jarvis.CoreFlowModule import (
    USAGE,
    ConfigurationError,
    check_budget,
    count_tokens,
    current_run,
    deprecated_setting,
)

Vector = List[float]
EmbeddingsFactory = Callable[[Dict[str, Any], str], "Embeddings"]


class Embeddings:
    """What a vector store needs: ``embed(texts) -> vectors`` and a ``model`` name recorded with the store (a store
    written with one model is not read with another)."""

    model: str = ""

    def embed(self, texts: List[str], where: str = "") -> List[Vector]:
        raise NotImplementedError


class HashEmbeddings(Embeddings):
    """Deterministic local embeddings: hashed words and character trigrams, L2-normalised (no model, no network)."""

    def __init__(self, dimension: Optional[int] = None, hash_dimension: Optional[int] = None, **_: Any):
        self.dimension = int(dimension or hash_dimension or 256)
        if self.dimension < 8:
            raise ConfigurationError(f"HashEmbeddings: dimension must be at least 8, not {dimension}")
        self.model = f"hash-{self.dimension}"

    def _vector(self, text: str) -> Vector:
        vector = [0.0] * self.dimension
        words = re.findall(r"\w+", text.lower())
        features = words + [w[i : i + 3] for w in words if len(w) > 3 for i in range(len(w) - 2)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dimension
            vector[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed(self, texts: List[str], where: str = "") -> List[Vector]:
        return [self._vector(str(text)) for text in texts]


def _api_info_fields(api_info: Any) -> Dict[str, Any]:
    if isinstance(api_info, dict):
        return dict(api_info)
    return {key: getattr(api_info, key, None) for key in ("backend_used", "api_key", "api_base", "api_version")}


class LiteLLMEmbeddings(Embeddings):
    """The provider's embeddings through ``litellm.embedding``, batched, retried and counted.

    ``api_infos``: aiflows ``ApiInfo``s (or dicts); the first is used. ``model_name``: a name or
    ``{openai: ..., azure: ...}`` keyed by ``backend_used``. ``batch_size`` texts go in one request.
    ``request_timeout`` bounds one attempt, ``retry`` is a ``RetryPolicy`` config (as in a chat's YAML).
    """

    def __init__(
        self,
        api_infos: Any = None,
        model_name: Any = "text-embedding-3-small",
        batch_size: int = 64,
        request_timeout: float = 60,
        retry: Optional[dict] = None,
        dimensions: Optional[int] = None,
        **_: Any,
    ):
        if (
            api_infos is None
            or api_infos == "???"
            or (isinstance(api_infos, (list, tuple)) and (not api_infos or any(a == "???" for a in api_infos)))
        ):
            raise ConfigurationError(
                "embeddings: api_infos is not set, so there is no key for the embedding model. Set OPENAI_API_KEY "
                "(or give --api-base for a server with /v1/embeddings), or fill `embedding.api_infos` with "
                "quick_load; `embedding: {type: hash}` needs no model."
            )
        first = api_infos[0] if isinstance(api_infos, (list, tuple)) else api_infos
        self.api_info = _api_info_fields(first)
        backend_used = self.api_info.get("backend_used") or "openai"
        if isinstance(model_name, dict):
            if backend_used not in model_name:
                raise ConfigurationError(
                    f"embeddings: model_name has no entry for {backend_used!r} (it has {sorted(model_name)})"
                )
            model_name = model_name[backend_used]
        if not self.api_info.get("api_key"):
            raise ConfigurationError(
                "embeddings: no API key. Set OPENAI_API_KEY (or AZURE_API_KEY), or give the key of your "
                "OpenAI-compatible server in api_infos."
            )
        self.model = str(model_name)
        self.batch_size = max(1, int(batch_size))
        self.request_timeout = float(request_timeout) if request_timeout else None
        self.retry_policy = RetryPolicy.from_config(retry)
        self.dimensions = dimensions

    def _call_params(self) -> Dict[str, Any]:
        backend_used = self.api_info.get("backend_used") or "openai"
        model = self.model
        params: Dict[str, Any] = {"api_key": self.api_info.get("api_key")}
        if self.api_info.get("api_base"):
            params["api_base"] = str(self.api_info["api_base"]).rstrip("/")
        if backend_used == "azure":
            params.update(custom_llm_provider="azure", api_version=self.api_info.get("api_version"))
            model = model.split("/", 1)[1] if model.startswith("azure/") else model
        else:
            params["custom_llm_provider"] = "openai"
            model = model.split("/", 1)[1] if model.startswith("openai/") else model
        if self.dimensions:
            params["dimensions"] = int(self.dimensions)
        params["model"] = model
        return params

    def embed(self, texts: List[str], where: str = "") -> List[Vector]:
        from aiflows_jarvis.CoreFlowModule import import_litellm

        litellm = import_litellm()
        params = self._call_params()
        if params["model"] not in litellm.open_ai_embedding_models:  # see the module docstring
            litellm.open_ai_embedding_models.append(params["model"])
        where = f"{where or 'VectorStore'}/embeddings"
        provider = {
            "model": params["model"],
            "api_base": params.get("api_base"),
            "backend_used": self.api_info.get("backend_used"),
        }
        vectors: List[Vector] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [str(t) if str(t) else " " for t in texts[start : start + self.batch_size]]
            check_budget(where)
            started = time.monotonic()

            def once() -> tuple:
                kwargs = dict(params)
                if self.request_timeout:
                    kwargs["force_timeout"] = self.request_timeout
                response = litellm.embedding(input=batch, **kwargs)
                return _vectors_of(response, len(batch)), response

            (batch_vectors, response), retries = call_with_retries(once, self.retry_policy, where, provider=provider)
            usage = _get(response, "usage")
            reported = _get(usage, "prompt_tokens")
            tokens = int(reported) if isinstance(reported, (int, float)) else sum(count_tokens(t) for t in batch)
            USAGE.record(
                where,
                tokens,
                0,
                time.monotonic() - started,
                retries,
                model=params["model"],
                reported=isinstance(reported, (int, float)),
            )
            vectors.extend(batch_vectors)
        return vectors


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    try:
        return obj[key]
    except Exception:  # noqa: BLE001 - litellm objects answer either way
        return getattr(obj, key, None)


def _vectors_of(response: Any, expected: int) -> List[Vector]:
    """The vectors of an embedding response, in input order; MalformedReply (retried) if it is not one."""
    data = _get(response, "data")
    if not isinstance(data, list) or len(data) != expected:
        raise MalformedReply(
            f"the embedding response has {len(data) if isinstance(data, list) else 'no'} vectors for {expected} texts"
        )
    items = sorted(data, key=lambda item: _get(item, "index") or 0)
    vectors = []
    for item in items:
        vector = _get(item, "embedding")
        if not isinstance(vector, list) or not vector or not all(isinstance(v, (int, float)) for v in vector):
            raise MalformedReply("the embedding response holds an item without a numeric `embedding`")
        vectors.append([float(v) for v in vector])
    if len({len(v) for v in vectors}) > 1:
        raise MalformedReply("the embedding response holds vectors of different lengths")
    return vectors


# ~~~ The seam: how every VectorStoreFlow gets its embeddings (the run's factory, else its own config) ~~~
_TYPES = {"litellm": LiteLLMEmbeddings, "hash": HashEmbeddings}


def build_embeddings_from_config(config: Dict[str, Any], flow_name: str) -> Embeddings:
    """The embeddings a VectorStoreFlow's ``embedding`` config names (``type: litellm`` or ``hash``)."""
    config = dict(config or {})
    kind = config.pop("type", "litellm")
    if kind not in _TYPES:
        raise ConfigurationError(f"{flow_name}: embedding.type must be one of {sorted(_TYPES)}, not {kind!r}")
    try:
        return _TYPES[kind](**config)
    except ConfigurationError as error:
        raise ConfigurationError(f"{flow_name}: {error}") from None


def set_embeddings_factory(factory: Optional[EmbeddingsFactory]) -> Optional[EmbeddingsFactory]:
    """Deprecated: ``RunContext(embeddings_factory=...)``."""
    return deprecated_setting("set_embeddings_factory", "embeddings_factory", factory)[0]


def build_embeddings(config: Dict[str, Any], flow_name: str) -> Embeddings:
    factory = current_run().embeddings_factory
    if factory is not None:
        return factory(copy.deepcopy(config or {}), flow_name)
    return build_embeddings_from_config(config, flow_name)


def embeddings_with_api_infos(api_infos: List[Any], model_name: Optional[str] = None) -> EmbeddingsFactory:
    """A factory filling ``api_infos`` (and, if given, ``model_name``) into each flow's litellm embeddings; a flow
    configured with ``type: hash`` keeps it."""

    def factory(config: Dict[str, Any], flow_name: str) -> Embeddings:
        if config.get("type", "litellm") == "litellm":
            config["api_infos"] = list(api_infos)
            if model_name:
                config["model_name"] = model_name
        return build_embeddings_from_config(config, flow_name)

    return factory


def hash_embeddings_factory(config: Dict[str, Any], flow_name: str) -> Embeddings:
    """Every flow gets ``HashEmbeddings`` (of the configured ``dimension``, else 256): offline and deterministic."""
    return HashEmbeddings(dimension=int(config.get("hash_dimension") or 256))
