"""`python -m brain.jobs.reindex`: migrate the brain's index to the configured embedding model.

The operator runs this as a Job when `spec.embedding.model` differs from the model the index is
built by (brain_operator/render/jobs.py `render_reindex_job`). It is a thin edge over
`brain.store.reindex.migrate_model`, which builds the new index beside the live one and swaps it
in; a rerun resumes a running migration and keeps the rows it already embedded, and a brain
already built by the target model is a no-op, so a retried pod never does the work twice.

The target is the pod's own `BRAIN_EMBEDDING_MODEL` / `BRAIN_EMBEDDING_DIM`, embedded through
the Brain's embedder Service (`BRAIN_EMBEDDER_URL`, which serves the spec's model); without a URL
(a laptop) the model runs in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from brain.core.contract import Env
from brain.core.errors import BrainError
from brain.embedder.model import Embedder
from brain.jobs.common import emit, setup_logging
from brain.store import Store, reindex


def target_embedder(model: str, dim: int | None) -> Embedder:
    """The client that embeds with `model`: the embedder Service when its URL is set, else in-process.

    The client is told the model's name, so `migrate_model` refuses (by name) a Service that would
    hand back vectors of another model's dimension.
    """
    url = os.environ.get(Env.EMBEDDER_URL)
    if url:
        from brain.embedder import EmbeddingClient

        return EmbeddingClient(url, model=model, dim=dim or 384, timeout=60.0, failure_threshold=5)
    from brain.embedder.variants import load_embedder

    return load_embedder(model)


async def run(dsn: str, model: str, dim: int | None) -> dict[str, Any]:
    embedder = target_embedder(model, dim)
    if dim is not None and embedder.dim != dim:
        raise BrainError(f"{Env.EMBEDDING_DIM} is {dim} but {model} embeds {embedder.dim} dimensions")
    stored = await reindex.stored_dim(dsn)
    store = await Store.open(dsn, dim=stored or embedder.dim, embedding_model=model)
    try:
        async with store.pool.acquire() as conn:
            live = await reindex.adopt_model(conn, model)
        if live == model and await reindex.running(store.pool) is None:
            return {"ok": True, "current": True, "model": model}
        swapped = await reindex.migrate_model(store.pool, embedder)
        return {"ok": True, "current": True, **swapped}
    finally:
        await store.close()
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m brain.jobs.reindex", description=__doc__)
    p.add_argument("--dsn", default=os.environ.get(Env.DATABASE_URL))
    p.add_argument("--to-model", default=os.environ.get(Env.EMBEDDING_MODEL))
    p.add_argument("--to-dim", type=int, default=None)
    args = p.parse_args(argv)
    setup_logging()
    dim = args.to_dim or (int(os.environ[Env.EMBEDDING_DIM]) if os.environ.get(Env.EMBEDDING_DIM) else None)
    if not args.dsn:
        emit({"ok": False, "error": f"no database: set {Env.DATABASE_URL} (or pass --dsn)"})
        return 2
    if not args.to_model:
        emit({"ok": False, "error": f"no target model: set {Env.EMBEDDING_MODEL} (or pass --to-model)"})
        return 2
    try:
        summary = asyncio.run(run(args.dsn, args.to_model, dim))
    except BrainError as e:
        emit({"ok": False, "error": str(e)})
        return 1
    emit(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
