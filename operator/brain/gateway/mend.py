"""Vectors for the entries that were written while the embedder was away.

The door stores a write whose embedding failed rather than lose it (`MemoryService._embed`): the
keyword legs find it at once, but the vector leg never does, so until a reindex a paraphrase misses
an approved memory and an older, similar entry is served in its place. The gateway mends those rows
itself: the door wakes it when it stores one, and the index refresh wakes it when the stored count
says some are missing (a job, or another replica, wrote them). Each wake embeds the missing rows in
bounded batches with the brain's live model (`Store.fill_live`, which refuses any other, and leaves
a rolling model change's rows to its reindex, and skips a batch another replica is filling); while
the embedder is still away, or its breaker still open, it tries again with a backoff. What it mends
is counted, and the injection cache is dropped so the next request ranks the mended rows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from brain.embedder.model import Embedder
from brain.gateway import metrics
from brain.store.reindex import ModelMismatch
from brain.store.store import Store

log = logging.getLogger("brain.gateway.mend")

BATCH = 16  # rows embedded in one embedder call; then a pause, so questions are not queued behind a drain
PAUSE_S = 1.0  # between batches while a backlog drains: at most BATCH rows a second per replica
RETRY_S = (1.0, 30.0)  # first and longest wait between tries while the embedder cannot embed


class VectorMend:
    """One per gateway process: a wake flag and the loop that acts on it."""

    def __init__(self, *, batch: int = BATCH, retry_s: tuple[float, float] = RETRY_S) -> None:
        self.batch = batch
        self.retry_s = retry_s
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Ask for a mend: cheap and idempotent, called by the door on every write without a vector."""
        self._wake.set()

    async def run(
        self,
        store: Callable[[], Store | None],
        embedder: Callable[[], Embedder | None],
        mended: Callable[[], None],
    ) -> None:
        """Until cancelled: wait for a wake, then embed what is missing; `mended()` after each batch
        that embedded anything."""
        delay = self.retry_s[0]
        while True:
            await self._wake.wait()
            self._wake.clear()
            s, e = store(), embedder()
            if s is None or e is None:  # not connected, or the model still loading: a refresh wakes it
                continue
            try:
                n = await s.fill_live(e, limit=self.batch, wait=False)  # another replica's fill takes them
            except asyncio.CancelledError:
                raise
            except ModelMismatch as err:  # a model change is rolling out: the reindex fills these rows
                log.debug("not mending vectors: %s", err)
                continue
            except Exception as err:  # the embedder is still away (or the database): try again later
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError from err  # stopping: an error on the way out ends the loop too
                log.info("mending missing vectors failed (%s); retrying in %.0fs", err, delay)
                metrics.vectors_mend_failures.inc()
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_s[1])
                self._wake.set()
                continue
            delay = self.retry_s[0]
            if n:
                log.info("embedded %d entries stored without a vector", n)
                metrics.vectors_mended.inc(n)
                mended()
            if n >= self.batch:  # there may be more: go on after a pause, the embedder is shared
                await asyncio.sleep(PAUSE_S)
                self._wake.set()
