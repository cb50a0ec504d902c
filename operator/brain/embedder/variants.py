"""Model variants: `<base>@rp<dim>`, the base model seen through a fixed random orthogonal projection.

A second model for model-migration tests and benchmarks on a machine that holds one offline
model. It is a different model in every way a brain can tell: its vectors have another dimension
(or, at `@rp<same dim>`, a rotated space), so a query embedded by one compared with vectors of the
other ranks at random (cosines between a vector and a rotated vector carry no meaning), while within
the variant cosines follow the base model's (an orthogonal map keeps angles; a projection to fewer
dimensions keeps them approximately, Johnson-Lindenstrauss). Mixing the two is therefore visible
exactly as mixing two real models would be, and retrieval by the variant alone still works.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from brain.embedder.model import DEFAULT_MODEL, Embedder, LocalEmbedder

_VARIANT = re.compile(r"^(?P<base>.+)@rp(?P<dim>[1-9][0-9]{0,4})$")


class ProjectedEmbedder:
    def __init__(self, inner: Embedder, dim: int, name: str) -> None:
        if dim > inner.dim:
            raise ValueError(f"{name}: a projection keeps at most the base model's {inner.dim} dimensions")
        seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
        q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((inner.dim, inner.dim)))
        self._proj = np.asarray(q[:, :dim], dtype=np.float32)
        self.inner = inner
        self.dim = dim
        self.model = name

    async def embed(self, texts: list[str]) -> np.ndarray:
        out = (await self.inner.embed(texts)) @ self._proj
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.asarray(out / norms, dtype=np.float32)


def load_embedder(model: str = DEFAULT_MODEL, base: Embedder | None = None) -> Embedder:
    """The in-process embedder for `model`; `base` reuses an already loaded base model."""
    m = _VARIANT.match(model)
    if m is None:
        return base if base is not None and base.model == model else LocalEmbedder(model)
    inner = base if base is not None and base.model == m["base"] else LocalEmbedder(m["base"])
    return ProjectedEmbedder(inner, int(m["dim"]), model)
