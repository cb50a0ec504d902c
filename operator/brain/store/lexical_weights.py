"""The reference length the stored BM25 weights were computed with, kept near the live mean.

Each memory's `bm25` sparsevec (migration 0004) holds tf·(k1+1) / (tf + k1·(1−b+b·len/ref)) per
lexeme, so the lexical leg is one inner product per candidate. `ref` cannot be the live mean
itself (every write would move every row's weights); it is one number in `brain_meta`, claimed by
the first write and moved to the live mean when the two drift more than `DRIFT` apart, after which
the column is rewritten in batches. A stale reference is not a wrong BM25 but BM25 with other
parameters: with live mean A, weights at ref L rank exactly as k1' = k1·(1−b+b·A/L),
b' = b·(A/L)·k1/k1' at the live mean would. docs/performance.md ("Lexical leg") measures what that
costs in ranking, which is where `DRIFT` comes from.

A rewrite is a non-HOT update of every row (each index gets an entry, the HNSW one included), so it
must be rare: it happens while a brain is young and its mean still moves, when it is cheap. A store
small enough rewrites inline, so a query right after never sees two references mixed; a larger one
rewrites in a background task, one short transaction per batch, resumable by any process (the
cursor lives in `brain_meta`, the rewrite is serialised by an advisory lock). The lexical leg
computes a row's weights on the fly while they are NULL (rows from before migration 0004).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

import asyncpg

if TYPE_CHECKING:
    from brain.store.base import StoreBase

log = logging.getLogger("brain.store.lexical_weights")

# How far (as a ratio) the live mean may move from the reference before the column is rewritten:
# at 25 % the weights still keep 98 % of the exact top 10 (0.981 mean overlap at 10k memories both
# ways, 0.94–0.95 at 2×; docs/performance.md, "Lexical leg"), and a rewrite is rare once a brain
# has a few thousand memories.
DRIFT = 0.25
# Rows per rewrite transaction (~1–3 ms a row, each index included: well inside the gateway's 5 s
# statement timeout even under load), and the largest brain rewritten inline, inside the query
# that saw the drift (one batch, once); larger ones rewrite in the background.
BATCH = 200
INLINE_ROWS = 200


async def reference(pool: asyncpg.Pool) -> float | None:
    """The reference length the stored weights were computed with; None before the first write."""
    value = await pool.fetchval("SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl'")
    return None if value is None else float(value)


def drifted(live_mean: float, reference: float | None, bound: float = DRIFT) -> bool:
    """Whether the weights' reference is due to move to `live_mean`."""
    if reference is None or reference <= 0:
        return True
    return abs(live_mean / reference - 1.0) > bound


async def move_reference(pool: asyncpg.Pool, live_mean: float, seen: float | None) -> bool:
    """Set the reference to `live_mean` and start a rewrite of every row, unless another process
    moved it since this one read `seen`. Returns whether this call moved it."""
    async with pool.acquire() as conn, conn.transaction():
        current = await conn.fetchval("SELECT value FROM brain_meta WHERE key = 'bm25_avgdl' FOR UPDATE")
        if (None if current is None else float(current)) != seen:
            return False
        await conn.execute(
            """INSERT INTO brain_meta (key, value) VALUES ('bm25_avgdl', $1), ('bm25_rewrite_after', '')
               ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value""",
            repr(max(float(live_mean), 1.0)),
        )
    return True


async def rewrite_batch(pool: asyncpg.Pool, batch: int = BATCH) -> int:
    """One batch; rows rewritten, 0 when nothing is due, −1 when another session is rewriting."""
    return int(await pool.fetchval("SELECT brain_bm25_rewrite($1)", batch))


async def catch_up(pool: asyncpg.Pool, batch: int = BATCH) -> int:
    """Rewrite until nothing is due (or another session holds the rewrite); rows rewritten."""
    total = 0
    while (n := await rewrite_batch(pool, batch)) > 0:
        total += n
        await asyncio.sleep(0)  # let the requests sharing this loop in between batches
    return total


async def keep(store: StoreBase, live_mean: float, docs: int, reference: float | None, pending: bool) -> None:
    """Called with each fresh corpus_stats: move a drifted reference, and get any due rewrite done.

    Never fails the read that called it: upkeep that errs is logged and tried at the next refresh.
    """
    try:
        if docs and drifted(live_mean, reference):
            pending = await move_reference(store.pool, live_mean, reference) or pending
        if pending and docs <= INLINE_ROWS:
            await catch_up(store.pool)
            return
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as e:
        log.warning("BM25 weight upkeep failed, retried at the next refresh: %s", e)
        return
    if not pending:
        return
    task = store.weights_task
    if task is None or task.done():
        store.weights_task = asyncio.create_task(_background(store.pool), name="bm25-rewrite")


async def _background(pool: asyncpg.Pool) -> None:
    try:
        n = await catch_up(pool)
        log.info("rewrote the BM25 weights of %d memories at the new reference length", n)
    except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as e:  # the next corpus_stats resumes it
        log.warning("BM25 weight rewrite stopped, resumes later: %s", e)


async def stop(store: StoreBase) -> None:
    """Cancel this process's rewrite (its open batch rolls back; the cursor keeps what committed)."""
    task, store.weights_task = store.weights_task, None
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def settle(store: StoreBase, *, only_if_due: bool = False) -> float:
    """Move the reference to the live mean now and rewrite every row, waiting for it; returns the mean.

    For a bulk load that wants exact BM25 at once (hack/bench*.py, `brainctl eval`) and for tests;
    serving never needs it (`keep` does the same past `DRIFT`, in the background). `only_if_due`
    moves the reference only past `DRIFT` and only finishes a rewrite already due (a bench's
    cached seed, which must not rewrite in the background while it is timed).
    """
    mean = float(
        await store.pool.fetchval(
            "SELECT coalesce(avg(length(tsv)), 1) FROM memories WHERE status = 'active'"
        )
        or 1.0
    )
    seen = await reference(store.pool)
    await stop(store)
    if not only_if_due or drifted(mean, seen):
        await move_reference(store.pool, mean, seen)
    while (n := await rewrite_batch(store.pool)) != 0:
        if n < 0:
            await asyncio.sleep(0.05)  # another session holds the rewrite: wait for it to finish
    store.lexical.refreshed = 0.0  # the next corpus_stats reads the new reference
    return max(mean, 1.0)
