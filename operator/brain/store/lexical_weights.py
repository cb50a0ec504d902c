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

This module works on a pool and knows nothing of the store above it: `brain.store.base.StoreBase`
holds this process's state (the corpus numbers, the one background rewrite) and calls down here
(`_keep_weights`, `settle_weights`, `close`); the `store-layers` contract in `.importlinter` keeps
the import one way.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

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


async def keep(
    pool: asyncpg.Pool, live_mean: float, docs: int, reference: float | None, pending: bool
) -> bool:
    """Called with each fresh corpus_stats: move a drifted reference, and rewrite inline a store small
    enough. Returns whether a rewrite is still due, for the caller to run in the background
    (`background`; the store keeps at most one such task, `StoreBase._keep_weights`).

    Never fails the read that called it: upkeep that errs is logged and tried at the next refresh.
    """
    try:
        if docs and drifted(live_mean, reference):
            pending = await move_reference(pool, live_mean, reference) or pending
        if pending and docs <= INLINE_ROWS:
            await catch_up(pool)
            return False
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as e:
        log.warning("BM25 weight upkeep failed, retried at the next refresh: %s", e)
        return False
    return pending


async def background(pool: asyncpg.Pool) -> None:
    """A rewrite run as a task: errors are logged, and the next corpus_stats resumes it."""
    try:
        n = await catch_up(pool)
        log.info("rewrote the BM25 weights of %d memories at the new reference length", n)
    except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as e:  # the next corpus_stats resumes it
        log.warning("BM25 weight rewrite stopped, resumes later: %s", e)


async def settle(pool: asyncpg.Pool, *, only_if_due: bool = False) -> float:
    """Move the reference to the live mean now and rewrite every row, waiting for it; returns the mean.

    The store's `settle_weights` calls this after stopping its own background rewrite (so this
    process never rewrites twice at once). `only_if_due` moves the reference only past `DRIFT` and
    only finishes a rewrite already due.
    """
    mean = float(
        await pool.fetchval("SELECT coalesce(avg(length(tsv)), 1) FROM memories WHERE status = 'active'")
        or 1.0
    )
    seen = await reference(pool)
    if not only_if_due or drifted(mean, seen):
        await move_reference(pool, mean, seen)
    while (n := await rewrite_batch(pool)) != 0:
        if n < 0:
            await asyncio.sleep(0.05)  # another session holds the rewrite: wait for it to finish
    return max(mean, 1.0)
