"""An embedder that is down, shared by the retrieval tests and the benches (hack/bench/variants.py
`--embedder-down`), so both ask the pipeline's outage path the same way."""

from __future__ import annotations

import numpy as np

from brain.embedder import EmbedderUnavailable


class DownEmbedder:
    """Every call fails as a refused connection does; `asked` keeps what each call was for (the
    question, or the floor calibration's probes in the background)."""

    def __init__(self, model: str = "down", dim: int = 384) -> None:
        self.model, self.dim = model, dim
        self.asked: list[list[str]] = []

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.asked.append(list(texts))
        raise EmbedderUnavailable("connection refused")
