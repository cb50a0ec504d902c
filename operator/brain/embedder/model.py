"""fastembed models, loaded offline when a model directory is given (tests, laptops) or from a baked cache."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from brain.core.contract import DEFAULT_EMBEDDING_MODEL
from brain.embedder.settings import THREADS_ENV, ModelSettings, load_model_settings

DEFAULT_MODEL = DEFAULT_EMBEDDING_MODEL  # the one the embedder image bakes (images/embedder/model.txt)
OFFLINE_MODEL_DIR = "models/all-minilm-l6-v2-int8-tryaii1.0.0-gt0.1.0"  # assembled by hack/model.sh


# The gateway's in-process model embeds one short question per request. A second onnxruntime
# thread buys little for ~15 tokens, and the pool's threads spin between operators, taking the two
# cores from Postgres and the event loop for the rest of the request: at 100k memories, with other
# work on the machine, one thread took the retrieval's p50 from 64 to 56 ms and from 51 to 31 ms in
# two alternating pairs of runs (docs/performance.md, "The query model's threads").
QUERY_THREADS = 1


def threads_from_env(default: int | None, env: Mapping[str, str] | None = None) -> int | None:
    """onnxruntime threads from $BRAIN_EMBEDDER_THREADS: a positive count, 0 for all cores (None).
    `env`: the variables to read it from; None: the process's (brain.embedder.settings)."""
    raw = (env.get(THREADS_ENV, "") if env is not None else load_model_settings().threads).strip()
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"{THREADS_ENV}={raw!r}: expected a whole number of threads, or 0 for all cores")
    return n or None


class Embedder(Protocol):
    dim: int
    model: str

    async def embed(self, texts: list[str]) -> np.ndarray: ...


def offline_model_path(settings: ModelSettings | None = None) -> Path | None:
    """The model directory hack/model.sh assembled, if this machine has it (None: the process's settings)."""
    settings = settings or load_model_settings()
    if settings.model_path:
        return Path(settings.model_path)
    path = settings.cache / OFFLINE_MODEL_DIR
    return path if (path / "model.onnx").exists() else None


class LocalEmbedder:
    """fastembed in this process. One lock: onnxruntime already uses every core for one batch."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        model_path: str | Path | None = None,
        cache_dir: str | None = None,
        threads: int | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        from fastembed import TextEmbedding

        settings = settings or load_model_settings()  # None: this process's (brain.embedder.settings)
        path = (
            Path(model_path)
            if model_path
            else (offline_model_path(settings) if model == DEFAULT_MODEL else None)
        )
        kwargs: dict[str, Any] = {"threads": threads}
        if path is not None:
            kwargs.update(specific_model_path=str(path), local_files_only=True)
        elif cache_dir:
            kwargs.update(cache_dir=cache_dir, local_files_only=settings.hf_offline)
        self._model = TextEmbedding(model_name=model, **kwargs)
        self.model = model
        self._lock = threading.Lock()
        self.dim = int(self.embed_sync(["dimension probe"]).shape[1])

    def embed_sync(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Batches are padded to their longest text, so texts are embedded in length order (~2x faster)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with self._lock:
            vectors = list(self._model.embed([texts[i] for i in order], batch_size=batch_size))
        out = np.empty((len(texts), len(vectors[0]) if vectors else 0), dtype=np.float32)
        for pos, i in enumerate(order):
            out[i] = vectors[pos]
        return out

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, texts)


class QueryCache:
    """An LRU in front of any embedder: agents repeat queries, and an embedding costs milliseconds."""

    def __init__(self, inner: Embedder, size: int = 4096) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.model = inner.model
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            for text, vec in zip(missing, await self.inner.embed(missing), strict=True):
                self._cache[text] = vec
                if len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        out = []
        for t in texts:
            self._cache.move_to_end(t)
            out.append(self._cache[t])
        return np.stack(out)
