"""The in-process model's settings: where a LocalEmbedder finds its files, and its threads.

Every process that runs the model (the embedder pod, the gateway, the jobs, brainctl) reads them
here, once per model it loads; `python -m brain.embedder`'s flags are its __main__'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from brain.core.contract import Env

THREADS_ENV = Env.EMBEDDER_THREADS


def _default_cache() -> Path:
    return Path.home() / ".cache" / "brain-operator"


@dataclass(frozen=True)
class ModelSettings:
    model_path: str | None = None  # $BRAIN_EMBEDDING_MODEL_PATH: a model directory, loaded offline
    cache: Path = field(default_factory=_default_cache)  # $BRAIN_CACHE: where hack/model.sh put it
    hf_offline: bool = False  # $HF_HUB_OFFLINE set: a fastembed cache is never downloaded into
    threads: str = ""  # $BRAIN_EMBEDDER_THREADS as written (brain.embedder.model.threads_from_env)


def load_model_settings(environ: Mapping[str, str] = os.environ) -> ModelSettings:
    return ModelSettings(
        model_path=environ.get("BRAIN_EMBEDDING_MODEL_PATH") or None,
        cache=Path(environ.get("BRAIN_CACHE", _default_cache())),
        hf_offline=bool(environ.get("HF_HUB_OFFLINE")),
        threads=environ.get(THREADS_ENV, ""),
    )
