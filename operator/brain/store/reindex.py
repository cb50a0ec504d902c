"""Model and index migrations: a new model's vectors are built beside the live ones, then swapped in.

The live index is one column (`memories.embedding`) with one HNSW index, and every vector in it
comes from the model named in `brain_meta.embedding_model` (a trigger refuses any other; a query
compares only vectors of its own model). Changing the model is therefore a migration, in steps:

1. `start`: add `embedding_next vector(<new dim>)` beside the live column and record a run.
2. `fill`: embed every active entry with the new model into it, in batches; serving goes on from
   the live column untouched, and progress (done / total) is kept in `reindex_runs`.
3. `build_index`: `CREATE INDEX CONCURRENTLY` on the new column (writes keep going).
4. `swap`: one short transaction locks the table, embeds what was written since the last fill
   (a handful of rows), renames the new column and index into place, drops the old ones and names
   the new model live. Requests arriving meanwhile wait for it; none fails.

A client still running the old model after the swap finds its model no longer live: its queries
skip the vector leg (lexical and the other legs still answer) and its writes store no vector (the
backfill embeds them); nothing it does fails, and nothing it does mixes two models.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import numpy as np
from prometheus_client import Gauge

from brain.core.contract import EMBED_INPUT_MAX_CHARS
from brain.core.errors import BrainError

log = logging.getLogger("brain.reindex")
BATCH = 256
NEXT = "embedding_next"
NEXT_MODEL = "embedding_next_model"
NEXT_INDEX = "memories_embedding_next"
LIVE_TTL = 1.0
# Every version a query can reach (as_of reads superseded and retired ones), not only the active.
# A purged version (brain.store.writer's purge marks it so): it keeps no vector of the text it
# removed, so no fill, migration or mend may embed it, not even its tombstone.
PURGED = "attrs ? 'purged_by'"
# The rows that hold a vector: not forgotten, and not purged.
_INDEXED = f"status <> 'forgotten' AND NOT {PURGED}"

reindex_total = Gauge(
    "brain_reindex_total",
    "Entries (every version a query can reach) the running reindex has to embed; 0 when none runs.",
)
reindex_done = Gauge("brain_reindex_done", "Entries the running reindex has embedded so far.")

Progress = Callable[[str, int, int], None]


class Embedder(Protocol):
    dim: int
    model: str

    async def embed(self, texts: list[str]) -> np.ndarray: ...


class ModelMismatch(BrainError):
    """The client's model is not the one the operation needs; the message names both."""

    code = "model_mismatch"
    status = 409


def embed_text(title: str, body: str) -> str:
    """What gets embedded for an entry: the title adds the context a short body lacks, and the text
    is cut to what the embedder takes (`EMBED_INPUT_MAX_CHARS`; a longer one was refused, and the
    entry kept no vector)."""
    return (f"{title}\n{body}" if title else body)[:EMBED_INPUT_MAX_CHARS]


def stored_input(row: Mapping[str, Any]) -> str:
    """What a stored entry is embedded as again (a migration, the mend): what its writer embedded,
    when that was not its title and body (an import's code card, skill or persona: migration 0007)."""
    return row["embed_input"] or embed_text(row["title"], row["body"])


#: the columns `stored_input` reads
INPUT_COLUMNS = "title, body, embed_input"


# ---------------------------------------------------------------------- the live model


async def adopt_model(conn: asyncpg.Connection, model: str) -> str:
    """The brain's live model; a brain that has none yet (new, or no vectors so far) takes `model`."""
    return str(await conn.fetchval("SELECT brain_live_model($1)", model) or "")


@dataclass
class LiveModel:
    """A store's view of the live model, re-read at most every LIVE_TTL seconds (or when told stale)."""

    model: str = ""
    dim: int = 0
    read_at: float = float("-inf")

    async def get(self, pool: asyncpg.Pool) -> tuple[str, int]:
        if time.monotonic() - self.read_at > LIVE_TTL:
            rows = await pool.fetch(
                "SELECT key, value FROM brain_meta WHERE key IN ('embedding_model', 'embedding_dim')"
            )
            meta = {r["key"]: r["value"] for r in rows}
            self.model, self.dim = meta.get("embedding_model", ""), int(meta.get("embedding_dim") or 0)
            # Unclaimed (no vector yet) is read again next time: the first write claims it any moment.
            self.read_at = time.monotonic() if self.model else float("-inf")
        return self.model, self.dim

    def stale(self) -> None:
        self.read_at = float("-inf")


async def vector_for_write(
    conn: asyncpg.Connection, model: str, embedding: np.ndarray | None
) -> np.ndarray | None:
    """The vector to store with a write in `conn`'s transaction: None unless `model` is live.

    Asked inside the writer's transaction (see brain_vector_model_live), so a swap cannot slip
    between the answer and the insert.
    """
    if embedding is None:
        return None
    live = await conn.fetchval("SELECT brain_vector_model_live($1)", model)
    return embedding if live else None


def is_dimension_error(e: BaseException) -> bool:
    """pgvector's refusal to compare vectors of two dimensions (a query that raced a swap)."""
    return isinstance(e, asyncpg.PostgresError) and "dimensions" in str(e)


# ---------------------------------------------------------------------- progress


async def running(pool: asyncpg.Pool | asyncpg.Connection) -> dict[str, Any] | None:
    """The running reindex as `status` shows it, or None."""
    row = await pool.fetchrow(
        "SELECT id, from_model, to_model, to_dim, total, done, started_at, updated_at FROM reindex_runs "
        "WHERE status = 'running'"
    )
    if row is None:
        reindex_total.set(0)
        reindex_done.set(0)
        return None
    reindex_total.set(row["total"])
    reindex_done.set(row["done"])
    return {
        "id": row["id"],
        "fromModel": row["from_model"],
        "toModel": row["to_model"],
        "toDim": row["to_dim"],
        "total": row["total"],
        "done": row["done"],
        "startedAt": row["started_at"].isoformat(),
        "updatedAt": row["updated_at"].isoformat(),
    }


# ---------------------------------------------------------------------- the steps


async def start(pool: asyncpg.Pool, to_model: str, to_dim: int) -> int:
    """Open (or resume) the run toward `to_model`; another run in progress is refused by name."""
    if not to_model or not 1 <= to_dim <= 16000:
        raise BrainError(
            f"a reindex needs a model name and a dimension in 1..16000, got {to_model!r}/{to_dim}"
        )
    async with pool.acquire() as conn, conn.transaction():
        live = await adopt_model(conn, to_model)
        if live == to_model:
            raise BrainError(f"the brain's index is already built by {to_model}; nothing to migrate")
        cur = await conn.fetchrow("SELECT id, to_model, to_dim FROM reindex_runs WHERE status = 'running'")
        if cur is not None and (cur["to_model"], cur["to_dim"]) == (to_model, to_dim):
            return int(cur["id"])  # resume: rows already embedded are kept
        if cur is not None:
            raise BrainError(
                f"a reindex to {cur['to_model']} ({cur['to_dim']} dimensions) is running (run {cur['id']}); "
                f"finish it or abandon it (brainctl reindex --abandon) before starting one to {to_model}"
            )
        await conn.execute("SET LOCAL lock_timeout = '5s'")
        await conn.execute(
            f"ALTER TABLE memories DROP COLUMN IF EXISTS {NEXT}, DROP COLUMN IF EXISTS {NEXT_MODEL}"
        )
        await conn.execute(
            f"ALTER TABLE memories ADD COLUMN {NEXT} vector({int(to_dim)}), ADD COLUMN {NEXT_MODEL} text"
        )
        total = await conn.fetchval(f"SELECT count(*) FROM memories WHERE {_INDEXED}")
        return int(
            await conn.fetchval(
                "INSERT INTO reindex_runs (from_model, to_model, to_dim, total) VALUES ($1, $2, $3, $4) RETURNING id",
                live,
                to_model,
                to_dim,
                total,
            )
        )


async def _pending(conn: asyncpg.Connection | asyncpg.Pool, limit: int) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"SELECT id, {INPUT_COLUMNS} FROM memories WHERE {_INDEXED} AND {NEXT} IS NULL ORDER BY id LIMIT $1",
            limit,
        )
    )


async def _write_next(
    conn: asyncpg.Connection | asyncpg.Pool, rows: list[asyncpg.Record], vectors: np.ndarray, model: str
) -> None:
    await conn.executemany(
        f"UPDATE memories SET {NEXT} = $2, {NEXT_MODEL} = $3 WHERE id = $1",
        [(r["id"], v, model) for r, v in zip(rows, vectors, strict=True)],
    )


def _check_client(embedder: Embedder, to_model: str, to_dim: int) -> None:
    if embedder.model != to_model or embedder.dim != to_dim:
        raise ModelMismatch(
            f"this reindex builds the index for {to_model} ({to_dim} dimensions), but this client embeds with "
            f"{embedder.model} ({embedder.dim} dimensions); run it with {to_model}"
        )


async def fill(
    pool: asyncpg.Pool, embedder: Embedder, run_id: int, *, progress: Progress | None = None
) -> int:
    """Embed every active entry that has no new-model vector yet; returns how many were embedded."""
    run = await pool.fetchrow("SELECT to_model, to_dim, total FROM reindex_runs WHERE id = $1", run_id)
    _check_client(embedder, run["to_model"], run["to_dim"])
    embedded = 0
    while rows := await _pending(pool, BATCH):
        vectors = await embedder.embed([stored_input(r) for r in rows])
        await _write_next(pool, rows, vectors, embedder.model)
        embedded += len(rows)
        done = await pool.fetchval(
            f"""UPDATE reindex_runs SET updated_at = now(),
                    done = (SELECT count(*) FROM memories WHERE {_INDEXED} AND {NEXT} IS NOT NULL),
                    total = (SELECT count(*) FROM memories WHERE {_INDEXED})
                WHERE id = $1 RETURNING done""",
            run_id,
        )
        reindex_done.set(done)
        if progress:
            progress("reindexing", int(done), max(int(run["total"]), int(done)))
    return embedded


async def build_index(pool: asyncpg.Pool) -> None:
    """The new column's HNSW index, built without blocking writes (the same parameters as the live one)."""
    async with pool.acquire() as conn:
        valid = await conn.fetchval(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1",
            NEXT_INDEX,
        )
        if valid is False:  # an earlier build was interrupted: CONCURRENTLY leaves an invalid index
            await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NEXT_INDEX}")
        await conn.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NEXT_INDEX} ON memories "
            f"USING hnsw ({NEXT} vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )


async def swap(pool: asyncpg.Pool, embedder: Embedder, run_id: int) -> dict[str, Any]:
    """One transaction: the stragglers are embedded, the new column and index go live."""
    run = await pool.fetchrow(
        "SELECT from_model, to_model, to_dim, status FROM reindex_runs WHERE id = $1", run_id
    )
    if run is None or run["status"] != "running":
        raise BrainError(f"reindex run {run_id} is not running")
    _check_client(embedder, run["to_model"], run["to_dim"])
    async with pool.acquire() as conn, conn.transaction():
        # One lock request, taken at once: holding a weaker lock and upgrading would deadlock with a
        # writer that read before it wrote. Callers fill first, so the stragglers embedded under the
        # lock are the few written in the last moments; readers wait that long, none fails.
        await conn.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        stragglers = 0
        while rows := await _pending(conn, BATCH):
            await _write_next(
                conn,
                rows,
                await embedder.embed([stored_input(r) for r in rows]),
                embedder.model,
            )
            stragglers += len(rows)
        # a purge that landed after its row's new vector was written: that vector was of the text
        await conn.execute(f"UPDATE memories SET {NEXT} = NULL, {NEXT_MODEL} = NULL WHERE {PURGED}")
        await conn.execute(
            f"""DROP TRIGGER memories_vector_model ON memories;
                ALTER TABLE memories RENAME COLUMN embedding TO embedding_retired;
                ALTER TABLE memories RENAME COLUMN embedding_model TO embedding_model_retired;
                ALTER TABLE memories RENAME COLUMN {NEXT} TO embedding;
                ALTER TABLE memories RENAME COLUMN {NEXT_MODEL} TO embedding_model;
                ALTER TABLE memories DROP COLUMN embedding_retired, DROP COLUMN embedding_model_retired;
                ALTER INDEX IF EXISTS {NEXT_INDEX} RENAME TO memories_embedding;
                CREATE TRIGGER memories_vector_model BEFORE INSERT OR UPDATE OF embedding, embedding_model
                  ON memories FOR EACH ROW EXECUTE FUNCTION brain_vector_model_check();"""
        )
        await conn.execute("UPDATE brain_meta SET value = $1 WHERE key = 'embedding_model'", run["to_model"])
        await conn.execute("UPDATE brain_meta SET value = $1 WHERE key = 'embedding_dim'", str(run["to_dim"]))
        done = await conn.fetchval(
            "UPDATE reindex_runs SET status = 'swapped', finished_at = now(), updated_at = now(),"
            f" done = (SELECT count(*) FROM memories WHERE {_INDEXED} AND embedding IS NOT NULL)"
            " WHERE id = $1 RETURNING done",
            run_id,
        )
    reindex_total.set(0)
    reindex_done.set(0)
    return {"run": run_id, "from": run["from_model"], "to": run["to_model"], "dim": run["to_dim"],
            "embedded": int(done), "stragglers": stragglers}  # fmt: skip


async def abandon(pool: asyncpg.Pool) -> bool:
    """Drop a running reindex's column and index; the live index was never touched."""
    async with pool.acquire() as conn, conn.transaction():
        n = await conn.execute(
            "UPDATE reindex_runs SET status = 'abandoned', finished_at = now() WHERE status = 'running'"
        )
        await conn.execute(
            f"ALTER TABLE memories DROP COLUMN IF EXISTS {NEXT}, DROP COLUMN IF EXISTS {NEXT_MODEL}"
        )
    return n != "UPDATE 0"


async def migrate_model(
    pool: asyncpg.Pool, embedder: Embedder, *, progress: Progress | None = None
) -> dict[str, Any]:
    """The whole migration to `embedder`'s model: start (or resume), fill, index, swap."""
    run_id = await start(pool, embedder.model, embedder.dim)
    await fill(pool, embedder, run_id, progress=progress)
    await build_index(pool)
    await fill(pool, embedder, run_id, progress=progress)  # what was written while the index was built
    return await swap(pool, embedder, run_id)


async def fill_live(
    pool: asyncpg.Pool, embedder: Embedder, *, limit: int | None = None, wait: bool = True
) -> int:
    """Embed entries that have no live vector (an embedder outage); refused for another model.

    Reading the live model claims nothing: on a brain with no vector yet, the first vector written
    claims it (`vector_for_write`), as every writer's does. A row is written only if it is still the
    text that was embedded and still needs a vector, so a purge that lands while a batch is being
    embedded (its tombstone text, its vectors gone) is never given the purged text's vector back.

    One fill at a time per brain (an advisory lock, held on a connection of its own): every gateway
    replica's mend is woken by the same index refresh, and each embedded the same oldest rows. With
    `wait` False (the mend) a fill that finds another running returns 0 at once, since that one
    takes the rows; `brainctl reindex` waits for it, then fills what is left."""
    async with pool.acquire() as conn:
        live = str(await conn.fetchval("SELECT brain_live_model(NULL)") or "") or embedder.model
    if live != embedder.model:
        raise ModelMismatch(
            f"this brain's index is built by {live}, but this client embeds with {embedder.model}; vectors "
            f"from two models are never mixed. Configure {live} here, or migrate the brain to "
            f"{embedder.model} with `brainctl reindex --to-model {embedder.model}`"
        )
    async with pool.acquire() as held:  # released to the pool, asyncpg's reset unlocks it in any case
        if wait:
            await held.execute("SELECT pg_advisory_lock(hashtext('brain_fill_live'))")
        elif not await held.fetchval("SELECT pg_try_advisory_lock(hashtext('brain_fill_live'))"):
            return 0
        try:
            return await _fill(pool, embedder, live, limit)
        finally:
            # A failed unlock (the database hung) must not replace what is propagating, a cancellation
            # or ModelMismatch: the pool's reset, or the connection's end, unlocks it then.
            with contextlib.suppress(Exception):
                await held.execute("SELECT pg_advisory_unlock(hashtext('brain_fill_live'))")


async def _fill(pool: asyncpg.Pool, embedder: Embedder, live: str, limit: int | None) -> int:
    wanted = f"{_INDEXED} AND (embedding IS NULL OR embedding_model IS DISTINCT FROM $1)"
    done = 0
    while rows := await pool.fetch(
        f"SELECT id, {INPUT_COLUMNS} FROM memories WHERE {wanted} ORDER BY id LIMIT $2",
        live,
        min(BATCH, limit or BATCH),
    ):
        vectors = await embedder.embed([stored_input(r) for r in rows])
        async with pool.acquire() as conn, conn.transaction():
            if await vector_for_write(conn, live, vectors) is None:
                raise ModelMismatch(
                    f"the brain's index moved off {live} while this reindex ran; run it again"
                )
            await conn.executemany(
                f"UPDATE memories SET embedding = $2, embedding_model = $1 WHERE {wanted} "
                "AND id = $3 AND title = $4 AND body = $5 AND embed_input IS NOT DISTINCT FROM $6",
                [
                    (live, v, r["id"], r["title"], r["body"], r["embed_input"])
                    for r, v in zip(rows, vectors, strict=True)
                ],
            )
            written = await conn.fetchval(  # what was written, not what was read: a purge may have won
                "SELECT count(*) FROM memories WHERE id = ANY($1::text[]) AND embedding_model = $2",
                [r["id"] for r in rows],
                live,
            )
        done += int(written)
        if limit is not None and done >= limit:
            break
    return done


async def stored_dim(dsn: str) -> int | None:
    """The dimension a brain's index was made with, read before opening the store (whose column
    type depends on it); None for a database no brain has used yet."""
    conn = await asyncpg.connect(dsn)
    try:
        stored = await conn.fetchval("SELECT value FROM brain_meta WHERE key = 'embedding_dim'")
    except asyncpg.UndefinedTableError:
        stored = None
    finally:
        await conn.close()
    return None if stored is None else int(stored)
