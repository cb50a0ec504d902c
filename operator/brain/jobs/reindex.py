"""`python -m brain.jobs.reindex`: migrate the brain's index to the configured embedding model.

The operator runs this as a Job when `spec.embedding.model` differs from the model the index is
built by (brain_operator/render/jobs.py `render_reindex_job`). It is a thin edge over
`brain.store.reindex.migrate_model`, which builds the new index beside the live one and swaps it
in; a rerun resumes a running migration and keeps the rows it already embedded, and a brain
already built by the target model is a no-op, so a retried pod never does the work twice.

The target is the pod's own `BRAIN_EMBEDDING_MODEL` / `BRAIN_EMBEDDING_DIM`, embedded through
the Brain's embedder Service (`BRAIN_EMBEDDER_URL`, which serves the spec's model); without a URL
(a laptop) the model runs in-process. The operator starts the Job as soon as the spec changes, while
the embedder Deployment may still be rolling from the old model to the new one, so every answer
from the Service must say it came from the target model; until it does (or for `--wait-seconds`)
the job waits and retries, and it never writes an old-model vector under the new model's name.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from typing import Any

import numpy as np

from brain.core.contract import DEFAULT_EMBEDDING_DIM, Env
from brain.core.errors import BrainError
from brain.embedder.model import Embedder
from brain.jobs.common import emit, setup_logging, traced
from brain.jobs.settings import JobSettings, load_job_settings
from brain.store import Store, reindex

WAIT_SECONDS = 900.0  # an embedder rollout (image pull, model load) takes minutes, not hours
RETRY_SECONDS = 5.0


class PatientEmbedder:
    """The embedder Service, retried while it is unavailable or answers from another model.

    A failed batch is retried, not skipped: the migration's fill resumes row by row anyway, but a
    Job that fails over a rollout would need a person to delete it (render_reindex_job)."""

    def __init__(self, client: Any, wait_seconds: float, retry_seconds: float = RETRY_SECONDS) -> None:
        self.client = client
        self.model = client.model
        self.dim = client.dim
        self.wait_seconds = wait_seconds
        self.retry_seconds = retry_seconds

    async def embed(self, texts: list[str]) -> np.ndarray:
        from brain.embedder.client import EmbedderUnavailable

        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                return np.asarray(await self.client.embed(texts))
            except EmbedderUnavailable as e:
                if time.monotonic() + self.retry_seconds > deadline:
                    raise BrainError(
                        f"the embedder Service did not embed with {self.model} within {self.wait_seconds:.0f} s "
                        f"({e}); the live index is unchanged and a rerun resumes"
                    ) from e
                await asyncio.sleep(self.retry_seconds)

    async def aclose(self) -> None:
        await self.client.aclose()


def target_embedder(
    settings: JobSettings, model: str, dim: int | None, wait_seconds: float = WAIT_SECONDS
) -> Embedder:
    """The client that embeds with `model`: the embedder Service when its URL is set, else in-process.

    The Service's client requires each answer to name `model` (require_model): an old pod that
    still serves during a rollout is waited out, never written as the new model's vector.
    """
    url = settings.embedder_url
    if url:
        from brain.embedder import EmbeddingClient

        client = EmbeddingClient(
            url,
            model=model,
            dim=dim or DEFAULT_EMBEDDING_DIM,
            timeout=60.0,
            failure_threshold=1000,
            require_model=True,
        )
        return PatientEmbedder(client, wait_seconds)
    from brain.embedder.variants import load_embedder

    return load_embedder(model)


async def run(
    settings: JobSettings, dsn: str, model: str, dim: int | None, wait_seconds: float = WAIT_SECONDS
) -> dict[str, Any]:
    embedder = target_embedder(settings, model, dim, wait_seconds)
    if dim is not None and embedder.dim != dim:
        raise BrainError(f"{Env.EMBEDDING_DIM} is {dim} but {model} embeds {embedder.dim} dimensions")
    stored = await reindex.stored_dim(dsn)
    store = await Store.open(dsn, dim=stored or embedder.dim, embedding_model=model)
    try:
        live = await store.adopt_model(model)
        if live == model and await store.reindex_running() is None:
            return {"ok": True, "current": True, "model": model}
        swapped = await store.migrate_model(embedder)
        return {"ok": True, "current": True, **swapped}
    finally:
        await store.close()
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await close()


@traced("reindex")
def main(argv: list[str] | None = None) -> int:
    settings = load_job_settings()
    p = argparse.ArgumentParser(prog="python -m brain.jobs.reindex", description=__doc__)
    p.add_argument("--dsn", default=settings.database_url)
    p.add_argument("--to-model", default=settings.embedding_model)
    p.add_argument("--to-dim", type=int, default=None)
    p.add_argument(
        "--wait-seconds",
        type=float,
        default=WAIT_SECONDS,
        help="how long to wait for the embedder Service to serve the target model (default %(default)s)",
    )
    args = p.parse_args(argv)
    setup_logging(settings)
    dim = args.to_dim or settings.embedding_dim_or_none
    if not args.dsn:
        emit({"ok": False, "error": f"no database: set {Env.DATABASE_URL} (or pass --dsn)"})
        return 2
    if not args.to_model:
        emit({"ok": False, "error": f"no target model: set {Env.EMBEDDING_MODEL} (or pass --to-model)"})
        return 2
    try:
        summary = asyncio.run(run(settings, args.dsn, args.to_model, dim, args.wait_seconds))
    except BrainError as e:
        emit({"ok": False, "error": e.message})
        return 1
    except Exception as e:  # the database unreachable or refusing: the last line still says why
        logging.getLogger("brain.jobs.reindex").exception("the migration failed")
        emit({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
