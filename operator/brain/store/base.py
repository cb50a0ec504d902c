"""What every part of the store shares: the pool, its transactions, scopes and row shapes.

`StoreBase` opens (and migrates) the database and hands out connections that are abandoned, not
rolled back, when the server stops answering; the memories aggregate is split by job into
`memory_reads`, `legs`, `lineage` and `events`, which `brain.store.store.Store` puts back together
as one object for callers, and `writer`, which only the door (brain.services) holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector
from ulid import ULID

from brain.core.contract import DEFAULT_EMBEDDING_DIM, DEFAULT_EMBEDDING_MODEL
from brain.core.errors import InvalidInput, NotFound
from brain.core.models import SHARED, Hit, Memory
from brain.store import lexical_weights
from brain.store.lexical_mirror import LexicalMirror
from brain.store.migrate import migrate
from brain.store.reindex import LiveModel

_COLUMNS = (
    "id, lineage_id, version, kind, namespace, tier, origin, author, title, body, tags, attrs, source_key, "
    "content_hash, valid_from, valid_to, supersedes, status, status_reason, importance, standing, required, "
    "access_count, last_accessed_at, promoted_by, created_at, domain_keywords, embedding IS NOT NULL AS embedded, "
    "episode, seq"
)
_HIT_COLUMNS = (
    "id, kind, namespace, tier, origin, author, title, body, valid_from, importance, standing, required, "
    "lineage_id, content_hash"
)


def content_hash(body: str) -> str:
    """Identity of a body: whitespace at the ends and line-ending style do not make a new entry."""
    normalized = body.strip().replace("\r\n", "\n")
    return hashlib.sha256(normalized.encode()).hexdigest()


def new_id() -> str:
    return str(ULID()).lower()


@dataclass(frozen=True)
class Scope:
    """What a read may see: namespaces (plus `shared`), current versions or those valid at `as_of`."""

    namespaces: tuple[str, ...]
    as_of: datetime | None = None
    kinds: tuple[str, ...] | None = None
    exclude_kinds: tuple[str, ...] = ("persona", "skill", "digest")

    @staticmethod
    def of(namespaces: Iterable[str], **kw: Any) -> Scope:
        ns = tuple(dict.fromkeys([*namespaces, SHARED]))
        return Scope(namespaces=ns, **kw)

    def where(self, start: int) -> tuple[str, list[Any]]:
        """SQL predicate over alias `m` and its parameters, numbered from `start`."""
        args: list[Any] = [list(self.namespaces)]
        clauses = [f"m.namespace = ANY(${start}::text[])"]
        if self.as_of is None:
            clauses.append("m.status = 'active'")
        else:
            args.append(self.as_of)
            n = start + 1
            # A forgotten entry is gone for every version: its older versions are not answers either.
            clauses.append(
                f"m.status IN ('active', 'superseded', 'retired') AND m.valid_from <= ${n} "
                f"AND (m.valid_to IS NULL OR m.valid_to > ${n}) AND NOT EXISTS (SELECT 1 FROM memories f "
                "WHERE f.lineage_id = m.lineage_id AND f.status = 'forgotten')"
            )
        if self.kinds is not None:
            args.append(list(self.kinds))
            clauses.append(f"m.kind = ANY(${start + len(args) - 1}::text[])")
        elif self.exclude_kinds:
            args.append(list(self.exclude_kinds))
            clauses.append(f"m.kind <> ALL(${start + len(args) - 1}::text[])")
        return " AND ".join(clauses), args


@dataclass
class LexicalStats:
    """Corpus numbers BM25 needs; refreshed lazily because exact counts are not worth a query each time.

    `reference` is the length the stored BM25 weights were computed with (brain/store/lexical_weights.py).
    """

    docs: int = 0
    avg_len: float = 1.0
    refreshed: float = 0.0
    reference: float | None = None


# What says the server is gone or frozen (rather than that a statement failed): the connection is abandoned.
ABANDON_ON = (asyncio.CancelledError, TimeoutError, OSError, asyncpg.InterfaceError)


class AbandoningPool(asyncpg.Pool):
    """A pool that never waits on a connection whose statement was interrupted.

    asyncpg's own release of such a connection first waits for the server to acknowledge the
    cancel request, then runs a reset query. Against a server that hangs (SIGSTOP, a black-holed
    network, a stuck disk) both wait for the whole outage, and so does everything awaiting the
    release: a request whose retrieval budget ran out stayed in flight until the database came back.
    Here an interrupted connection is terminated (its socket closed; the server rolls back whatever
    it held) and the pool opens a fresh one when it next needs it. A release that is not
    interrupted still gets `release_timeout` for its reset, after which asyncpg terminates it too.
    """

    release_timeout = 1.0

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:
        con = getattr(connection, "_con", None)
        protocol = getattr(con, "_protocol", None)
        if con is not None and not con.is_closed() and protocol is not None and protocol._is_cancelling():
            con.terminate()
        await super().release(connection, timeout=self.release_timeout if timeout is None else timeout)


async def _opened(pool: asyncpg.Pool) -> asyncpg.Pool:
    await pool
    return pool


def _record_to_memory(r: asyncpg.Record) -> Memory:
    d = dict(r)
    d["attrs"] = json.loads(d["attrs"]) if isinstance(d["attrs"], str) else d["attrs"]
    return Memory.model_validate(d)


def _record_to_hit(r: asyncpg.Record | Mapping[str, Any], score: float = 0.0) -> Hit:
    return Hit.model_validate({**dict(r), "score": score})


class StoreBase:
    def __init__(
        self, pool: asyncpg.Pool, *, dim: int, embedding_model: str, acquire_timeout: float | None = None
    ) -> None:
        self._pool = pool  # private: nothing outside brain.store receives the pool or a connection
        self.dim = dim
        self.embedding_model = embedding_model
        self.acquire_timeout = acquire_timeout
        self.lexical = LexicalStats()
        self.weights_task: asyncio.Task[None] | None = None  # a BM25 weight rewrite (lexical_weights)
        self.stats_task: asyncio.Task[None] | None = None  # a corpus statistics refresh (legs.corpus_stats)
        self.live = LiveModel()  # the brain's live embedding model (brain/store/reindex.py)
        self.mirror: LexicalMirror | None = None  # the lexical leg's in-memory candidates, when started
        self._open_look_pool: Callable[[], Awaitable[asyncpg.Pool]] | None = None  # set by `open`

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        dim: int = DEFAULT_EMBEDDING_DIM,
        embedding_model: str = DEFAULT_EMBEDDING_MODEL,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        statement_timeout_ms: int | None = None,
        command_timeout: float | None = None,
    ) -> Self:
        """Migrate, then open the pool.

        `statement_timeout_ms` is the server's own limit (a slow statement is cancelled there and
        the connection stays usable); `command_timeout` is the client's, for a server that does not
        answer at all (the connection is then abandoned, see `AbandoningPool`). Set the client's a
        little above the server's so a merely slow statement is stopped by the server. `timeout`
        bounds connecting and, when `command_timeout` is set, waiting for a free connection.
        """
        conn = await asyncpg.connect(dsn, timeout=timeout)
        try:
            await migrate(conn, dim=dim)
        finally:
            await conn.close()

        async def init(c: asyncpg.Connection) -> None:
            await register_vector(c)

        # Connection parameters, not SETs in `init`: the pool's reset on every release runs RESET ALL,
        # which undid a SET after a connection's first use, so the vector leg ran at pgvector's
        # defaults (ef_search 40, so at most 40 of its 80 candidates, and no iterative scan past rows
        # the scope filters out). A startup parameter is what RESET goes back to.
        settings = {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "100"}
        # A client gone without closing (its node lost) keeps its session, and the session's advisory
        # locks (one vector fill at a time, reindex.fill_live), until TCP notices: about 90 s with
        # these, about two hours at the kernel's defaults.
        settings |= {
            "tcp_keepalives_idle": "60",
            "tcp_keepalives_interval": "10",
            "tcp_keepalives_count": "3",
        }
        if statement_timeout_ms:
            settings["statement_timeout"] = str(int(statement_timeout_ms))

        def pool_of(size: int, extra: Mapping[str, str]) -> AbandoningPool:
            return AbandoningPool(
                dsn,
                connection_class=asyncpg.Connection,
                record_class=asyncpg.Record,
                min_size=min(min_size, size),
                max_size=size,
                max_queries=50000,
                max_inactive_connection_lifetime=300.0,
                loop=None,
                init=init,
                timeout=timeout,
                command_timeout=command_timeout,
                server_settings=settings | dict(extra),
            )

        pool = pool_of(max_size, {})
        await pool
        store = cls(
            pool,
            dim=dim,
            embedding_model=embedding_model,
            acquire_timeout=timeout if command_timeout is not None else None,
        )
        # The mirror's looks, one at a time, on a connection of their own that plans the look once: in
        # the pool every look was planned again (a custom plan for each snapshot), 1.0 of its 1.05 ms
        # at 100k memories (#33). Opened on the mirror's first look.
        store._open_look_pool = lambda: _opened(pool_of(1, {"plan_cache_mode": "force_generic_plan"}))
        return store

    @property
    def pool_for_tests(self) -> asyncpg.Pool:
        """The pool itself, for tests/, e2e/ and hack/ only: fixtures that read rows to check a result
        or seed a benchmark. Code under operator/ never uses it (tests/store/test_store.py checks); a caller
        there gets a method of the store instead."""
        return self._pool

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection in a transaction that is abandoned, not rolled back, when the server stops answering.

        `conn.transaction()` alone would send ROLLBACK to a frozen server on cancellation and wait
        for it; closing the socket makes the server roll back on its own when it runs again.
        """
        async with self._pool.acquire(timeout=self.acquire_timeout) as conn:
            tx = conn.transaction()
            await tx.start()
            try:
                yield conn
            except ABANDON_ON:
                conn.terminate()
                raise
            except BaseException:
                await tx.rollback()
                raise
            else:
                await tx.commit()

    def start_mirror(self) -> LexicalMirror:
        """Keep the lexical leg's candidates in memory (a long-running server: the gateway, `brainctl
        up`): it loads in the background, and the leg runs in SQL until it is ready."""
        if self.mirror is None:
            self.mirror = LexicalMirror(self._pool, open_look_pool=self._open_look_pool)
            self.mirror.start()
        return self.mirror

    async def close(self) -> None:
        if self.mirror is not None:
            await self.mirror.stop()
        if self.stats_task is not None and not self.stats_task.done():
            self.stats_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.stats_task
        await self._stop_weights()
        await self._pool.close()

    async def ping(self) -> None:
        """One round trip (`SELECT 1`): whether the server answers at all (the gateway's DatabaseWatch)."""
        await self._pool.fetchval("SELECT 1")

    async def analyze(self) -> None:
        """After a bulk load (brainctl eval): the BM25 weights at the loaded corpus's mean length and
        fresh planner statistics, so ranking and plans match a settled database."""
        await self.settle_weights()
        await self._pool.execute("ANALYZE memories, lexeme_stats")

    async def settle_weights(self, *, only_if_due: bool = False) -> float:
        """Move the BM25 reference to the live mean now and rewrite every row, waiting for it; returns the mean.

        For a bulk load that wants exact BM25 at once (hack/bench*.py, `brainctl eval`) and for tests;
        serving never needs it (`corpus_stats` does the same past `lexical_weights.DRIFT`, in the
        background). `only_if_due` moves the reference only past the drift bound and only finishes a
        rewrite already due (a bench's cached seed, which must not rewrite in the background while
        it is timed). See `brain.store.lexical_weights.settle`.
        """
        await self._stop_weights()
        mean = await lexical_weights.settle(self._pool, only_if_due=only_if_due)
        self.lexical.refreshed = 0.0  # the next corpus_stats reads the new reference
        return mean

    async def _keep_weights(
        self, live_mean: float, docs: int, reference: float | None, pending: bool
    ) -> None:
        """With each fresh corpus_stats: `lexical_weights.keep`, and the rewrite it leaves due run in
        this process's one background task."""
        if not await lexical_weights.keep(self._pool, live_mean, docs, reference, pending):
            return
        task = self.weights_task
        if task is None or task.done():
            self.weights_task = asyncio.create_task(
                lexical_weights.background(self._pool), name="bm25-rewrite"
            )

    async def _stop_weights(self) -> None:
        """Cancel this process's rewrite (its open batch rolls back; the cursor keeps what committed)."""
        task, self.weights_task = self.weights_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _check_embedding(self, embedding: np.ndarray | None) -> np.ndarray | None:
        if embedding is not None and embedding.shape != (self.dim,):
            raise InvalidInput(
                f"embedding has shape {embedding.shape}, this brain stores {self.dim} dimensions"
            )
        return embedding

    async def model_is_live(self) -> bool:
        """Whether this client's model is the brain's live one (vectors compare only within one model)."""
        return (await self.live.get(self._pool))[0] == self.embedding_model

    async def _current(self, conn: asyncpg.Connection, memory_id: str, *, lock: bool) -> asyncpg.Record:
        row = await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM memories WHERE id = $1" + (" FOR UPDATE" if lock else ""), memory_id
        )
        if row is None:
            raise NotFound(f"no memory with id {memory_id!r}", field="id")
        return row
