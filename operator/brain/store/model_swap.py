"""The store's side of changing the embedding model, for the reindex job and `brainctl reindex`.

Thin methods over the pool-level steps in `brain.store.reindex` (start, fill, index, swap,
abandon, the backfill), so that no caller outside the store holds the pool or a connection.
"""

from __future__ import annotations

from typing import Any

from brain.store import reindex
from brain.store.base import StoreBase


class ModelSwap(StoreBase):
    """Which model is live, and moving the brain to another one."""

    async def adopt_model(self, model: str) -> str:
        """The brain's live model; a brain that has none yet takes `model` (`reindex.adopt_model`)."""
        async with self._pool.acquire() as conn:
            return await reindex.adopt_model(conn, model)

    async def reindex_running(self) -> dict[str, Any] | None:
        """The running reindex (`reindex.running`), or None."""
        return await reindex.running(self._pool)

    async def migrate_model(
        self, embedder: reindex.Embedder, *, progress: reindex.Progress | None = None
    ) -> dict[str, Any]:
        """The whole migration to `embedder`'s model: start (or resume), fill, index, swap."""
        return await reindex.migrate_model(self._pool, embedder, progress=progress)

    async def fill_live(
        self, embedder: reindex.Embedder, *, limit: int | None = None, wait: bool = True
    ) -> int:
        """Embed active entries that have no live vector; refused for another model; one fill at a
        time per brain (`reindex.fill_live`)."""
        return await reindex.fill_live(self._pool, embedder, limit=limit, wait=wait)

    async def abandon_reindex(self) -> bool:
        """Drop a running reindex's column and index; the live index was never touched."""
        return await reindex.abandon(self._pool)
