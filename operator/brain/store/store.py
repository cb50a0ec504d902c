"""The memory store: governed writes with compare-and-set, point-in-time reads and retrieval legs.

Nothing is overwritten: supersede closes the old version (valid_to, status) and inserts the next one
in the same lineage; forget and retire are status changes with a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector
from ulid import ULID

from brain.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from brain.core.models import SHARED, Actor, Hit, Memory, MemoryDetail, MemoryIn, MemorySummary, NoteResult
from brain.store.migrate import migrate
from brain.store.reindex import LiveModel, is_dimension_error, vector_for_write
from brain.store.reindex import running as reindex_running

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


# Bounds the lexical leg when every query word is common (then lexical carries little signal anyway).
LEXICAL_CANDIDATE_CAP = 3000


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
            clauses.append(
                f"m.status IN ('active', 'superseded', 'retired') AND m.valid_from <= ${n} "
                f"AND (m.valid_to IS NULL OR m.valid_to > ${n})"
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
    """Corpus numbers BM25 needs; refreshed lazily because exact counts are not worth a query each time."""

    docs: int = 0
    avg_len: float = 1.0
    refreshed: float = 0.0


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


def _record_to_memory(r: asyncpg.Record) -> Memory:
    d = dict(r)
    d["attrs"] = json.loads(d["attrs"]) if isinstance(d["attrs"], str) else d["attrs"]
    return Memory.model_validate(d)


def _record_to_hit(r: asyncpg.Record, score: float = 0.0) -> Hit:
    return Hit.model_validate({**dict(r), "score": score})


class Store:
    def __init__(
        self, pool: asyncpg.Pool, *, dim: int, embedding_model: str, acquire_timeout: float | None = None
    ) -> None:
        self.pool = pool
        self.dim = dim
        self.embedding_model = embedding_model
        self.acquire_timeout = acquire_timeout
        self.lexical = LexicalStats()
        self.live = LiveModel()  # the brain's live embedding model (brain/store/reindex.py)

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        dim: int = 384,
        embedding_model: str = "sentence-transformers/all-MiniLM-L6-v2",
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        statement_timeout_ms: int | None = None,
        command_timeout: float | None = None,
    ) -> Store:
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
            await c.execute("SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = 100")

        settings = {"statement_timeout": str(int(statement_timeout_ms))} if statement_timeout_ms else {}
        pool = AbandoningPool(
            dsn,
            connection_class=asyncpg.Connection,
            record_class=asyncpg.Record,
            min_size=min_size,
            max_size=max_size,
            max_queries=50000,
            max_inactive_connection_lifetime=300.0,
            loop=None,
            init=init,
            timeout=timeout,
            command_timeout=command_timeout,
            server_settings=settings,
        )
        await pool
        return cls(
            pool,
            dim=dim,
            embedding_model=embedding_model,
            acquire_timeout=timeout if command_timeout is not None else None,
        )

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection in a transaction that is abandoned, not rolled back, when the server stops answering.

        `conn.transaction()` alone would send ROLLBACK to a frozen server on cancellation and wait
        for it; closing the socket makes the server roll back on its own when it runs again.
        """
        async with self.pool.acquire(timeout=self.acquire_timeout) as conn:
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

    async def close(self) -> None:
        await self.pool.close()

    async def ping(self) -> None:
        """One round trip (`SELECT 1`): whether the server answers at all (the gateway's DatabaseWatch)."""
        await self.pool.fetchval("SELECT 1")

    async def analyze(self) -> None:
        """Fresh planner statistics after a bulk load (brainctl eval), so plans match a settled database."""
        await self.pool.execute("ANALYZE memories, lexeme_stats")

    # ------------------------------------------------------------------ writes

    def _check_embedding(self, embedding: np.ndarray | None) -> np.ndarray | None:
        if embedding is not None and embedding.shape != (self.dim,):
            raise InvalidInput(
                f"embedding has shape {embedding.shape}, this brain stores {self.dim} dimensions"
            )
        return embedding

    async def _insert(
        self,
        conn: asyncpg.Connection,
        item: MemoryIn,
        *,
        actor: Actor,
        tier: str,
        embedding: np.ndarray | None,
        lineage_id: str | None = None,
        version: int = 1,
        supersedes: str | None = None,
        standing: bool = False,
        required: bool = False,
    ) -> Memory:
        mid = new_id()
        embedding = await vector_for_write(conn, self.embedding_model, self._check_embedding(embedding))
        row = await conn.fetchrow(
            f"""INSERT INTO memories (id, lineage_id, version, kind, namespace, tier, origin, author, title, body,
                   tags, attrs, source_key, content_hash, valid_from, supersedes, importance, standing, required,
                   domain_keywords, embedding, embedding_model, promoted_by, promoted_at, episode, seq)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, coalesce($15, now()),
                   $16, $17, $18, $19, $20, $21, $22, $23, $24, $25::text,
                   CASE WHEN $25::text IS NOT NULL THEN coalesce($26::integer,
                     (SELECT coalesce(max(seq) + 1, 0) FROM memories WHERE episode = $25::text AND namespace = $5))
                   END)
               RETURNING {_COLUMNS}""",
            mid,
            lineage_id or mid,
            version,
            item.kind,
            item.namespace,
            tier,
            actor.origin,
            actor.name,
            item.title,
            item.body,
            item.tags,
            json.dumps(item.attrs),
            item.source_key,
            content_hash(item.body),
            item.valid_from,
            supersedes,
            item.importance,
            standing,
            required,
            [k.lower() for k in item.domain_keywords],
            embedding,
            self.embedding_model if embedding is not None else None,
            actor.name if tier == "curated" else None,
            datetime.now(UTC) if tier == "curated" else None,
            item.episode,
            item.seq,
        )
        return _record_to_memory(row)

    async def note(
        self,
        item: MemoryIn,
        *,
        actor: Actor,
        tier: str = "episodic",
        embedding: np.ndarray | None = None,
        standing: bool = False,
        required: bool = False,
    ) -> NoteResult:
        """Insert, unless an identical body already lives in the namespace: then return that entry."""
        h = content_hash(item.body)
        async with self._tx() as conn:
            # Serialise writers of the same body so two concurrent identical notes cannot both insert.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"{item.namespace}|{h}")
            existing = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM memories WHERE namespace = $1 AND content_hash = $2 AND status = 'active' "
                "ORDER BY created_at LIMIT 1",
                item.namespace,
                h,
            )
            if existing is not None:
                return NoteResult(memory=_record_to_memory(existing), created=False)
            mem = await self._insert(
                conn, item, actor=actor, tier=tier, embedding=embedding, standing=standing, required=required
            )
            return NoteResult(memory=mem, created=True)

    async def note_many(
        self, items: Sequence[tuple[MemoryIn, np.ndarray | None]], *, actor: Actor, tier: str = "episodic"
    ) -> list[Memory]:
        """Bulk insert for imports and evaluation: one transaction, no dedup (callers dedup on identity)."""
        out = []
        async with self._tx() as conn:
            for item, emb in items:
                out.append(await self._insert(conn, item, actor=actor, tier=tier, embedding=emb))
        return out

    async def _current(self, conn: asyncpg.Connection, memory_id: str, *, lock: bool) -> asyncpg.Record:
        row = await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM memories WHERE id = $1" + (" FOR UPDATE" if lock else ""), memory_id
        )
        if row is None:
            raise NotFound(f"no memory with id {memory_id!r}", field="id")
        return row

    async def supersede(
        self,
        memory_id: str,
        item: MemoryIn,
        *,
        expected_hash: str | None,
        actor: Actor,
        tier: str | None = None,
        embedding: np.ndarray | None = None,
    ) -> Memory:
        """Compare-and-set: refuse if the current version's hash is not the one the caller read."""
        async with self._tx() as conn:
            old = await self._current(conn, memory_id, lock=True)
            if old["status"] != "active":
                current = await conn.fetchval(
                    "SELECT id FROM memories WHERE lineage_id = $1 AND status = 'active'", old["lineage_id"]
                )
                hint = f"; the current version is {current}" if current else ""
                raise Conflict(
                    f"memory {memory_id} is {old['status']}, not the current version{hint}", field="id"
                )
            _require_cas(old, memory_id, expected_hash, actor, "supersede")
            if expected_hash is not None and old["content_hash"] != expected_hash:
                raise Conflict(
                    f"memory {memory_id} changed since you read it (content_hash is {old['content_hash'][:12]}…, "
                    f"you sent {expected_hash[:12]}…); get it again and reapply your change",
                    field="expected_hash",
                )
            if item.namespace != old["namespace"]:
                raise InvalidInput(
                    f"supersede keeps the namespace ({old['namespace']!r}); got {item.namespace!r}",
                    field="namespace",
                )
            now = item.valid_from or datetime.now(UTC)
            await conn.execute(
                "UPDATE memories SET status = 'superseded', valid_to = $2, updated_at = now() WHERE id = $1",
                memory_id,
                now,
            )
            update: dict[str, Any] = {"valid_from": now}
            if item.episode is None:  # a new version keeps its place in the episode it was recorded in
                update |= {"episode": old["episode"], "seq": old["seq"]}
            item = item.model_copy(update=update)
            new = await self._insert(
                conn,
                item,
                actor=actor,
                tier=tier or old["tier"],
                embedding=embedding,
                lineage_id=old["lineage_id"],
                version=old["version"] + 1,
                supersedes=memory_id,
                standing=old["standing"],
                required=old["required"],
            )
            await _audit(conn, "memory_superseded", old, actor, new_id=new.id, cas=expected_hash is not None)
            return new

    async def set_status(
        self, memory_id: str, status: str, reason: str, *, actor: Actor, expected_hash: str | None = None
    ) -> Memory:
        """forget / retire: a soft delete that keeps the row and says why and who (`restore` undoes it)."""
        if not reason.strip():
            raise InvalidInput(f"{status} needs a reason", field="reason")
        async with self._tx() as conn:
            old = await self._current(conn, memory_id, lock=True)
            if old["status"] != "active":
                raise Conflict(f"memory {memory_id} is already {old['status']}", field="id")
            _require_cas(old, memory_id, expected_hash, actor, "forget" if status == "forgotten" else status)
            if expected_hash is not None and old["content_hash"] != expected_hash:
                raise Conflict(
                    f"memory {memory_id} is not the text you read (content_hash is {old['content_hash'][:12]}…, "
                    f"you sent {expected_hash[:12]}…); get it again",
                    field="expected_hash",
                )
            await _audit(
                conn, f"memory_{status}", old, actor, reason=reason.strip(), cas=expected_hash is not None
            )
            row = await conn.fetchrow(
                f"""UPDATE memories SET status = $2, status_reason = $3, valid_to = now(), updated_at = now(),
                        attrs = attrs || jsonb_build_object('status_by', $4::text)
                    WHERE id = $1 RETURNING {_COLUMNS}""",
                memory_id,
                status,
                reason.strip(),
                actor.name,
            )
            return _record_to_memory(row)

    async def restore(self, memory_id: str, reason: str, *, actor: Actor) -> Memory:
        """Owner only: a forgotten (or retired) entry becomes the current version of its lineage again."""
        if actor.role != "owner":
            raise Forbidden("only an owner key can restore a memory")
        if not reason.strip():
            raise InvalidInput("restore needs a reason", field="reason")
        async with self._tx() as conn:
            old = await self._current(conn, memory_id, lock=True)
            if old["status"] not in ("forgotten", "retired"):
                raise Conflict(
                    f"memory {memory_id} is {old['status']}; only a forgotten or retired entry can be restored",
                    field="id",
                )
            current = await conn.fetchval(
                "SELECT id FROM memories WHERE lineage_id = $1 AND (status = 'active' OR version > $2) "
                "ORDER BY version DESC LIMIT 1",
                old["lineage_id"],
                old["version"],
            )
            if current is not None:
                raise Conflict(
                    f"memory {memory_id} is not the newest version of its entry ({current} is); restore that one",
                    field="id",
                )
            await _audit(conn, "memory_restored", old, actor, reason=reason.strip())
            row = await conn.fetchrow(
                f"""UPDATE memories SET status = 'active', status_reason = $2, valid_to = NULL, updated_at = now(),
                        attrs = (attrs - 'status_by') || jsonb_build_object('restored_by', $3::text)
                    WHERE id = $1 RETURNING {_COLUMNS}""",
                memory_id,
                f"restored: {reason.strip()}",
                actor.name,
            )
            return _record_to_memory(row)

    async def promote(
        self, memory_id: str, *, actor: Actor, standing: bool | None = None, required: bool | None = None
    ) -> Memory:
        """Owner only. Untrusted text is never promoted and never standing."""
        if actor.role != "owner":
            raise Forbidden("only an owner key can promote a memory to the curated tier")
        async with self._tx() as conn:
            old = await self._current(conn, memory_id, lock=True)
            if old["status"] != "active":
                raise Conflict(
                    f"memory {memory_id} is {old['status']}; promote the current version", field="id"
                )
            if old["origin"] == "untrusted":
                raise Forbidden(f"memory {memory_id} is untrusted (imported text); it cannot be promoted")
            row = await conn.fetchrow(
                f"""UPDATE memories SET tier = 'curated', promoted_by = $2, promoted_at = now(), updated_at = now(),
                        standing = coalesce($3, standing), required = coalesce($4, required)
                    WHERE id = $1 RETURNING {_COLUMNS}""",
                memory_id,
                actor.name,
                standing,
                required,
            )
            return _record_to_memory(row)

    async def set_embedding(self, memory_id: str, embedding: np.ndarray) -> None:
        async with self._tx() as conn:
            vec = await vector_for_write(conn, self.embedding_model, self._check_embedding(embedding))
            if vec is not None:
                await conn.execute(
                    "UPDATE memories SET embedding = $2, embedding_model = $3 WHERE id = $1",
                    memory_id,
                    vec,
                    self.embedding_model,
                )

    async def unembedded(self, limit: int = 256) -> list[tuple[str, str]]:
        """Active entries without a vector of this store's model (none when its model is not live)."""
        rows = await self.pool.fetch(
            "SELECT id, title, body FROM memories WHERE (embedding IS NULL OR embedding_model IS DISTINCT FROM $2)"
            " AND status = 'active' AND $2 = (SELECT value FROM brain_meta WHERE key = 'embedding_model') LIMIT $1",
            limit,
            self.embedding_model,
        )
        return [(r["id"], embed_text(r["title"], r["body"])) for r in rows]

    # ------------------------------------------------------------------ reads

    async def model_is_live(self) -> bool:
        """Whether this client's model is the brain's live one (vectors compare only within one model)."""
        return (await self.live.get(self.pool))[0] == self.embedding_model

    async def get(self, memory_id: str) -> MemoryDetail:
        async with self.pool.acquire() as conn:
            row = await self._current(conn, memory_id, lock=False)
            history = await conn.fetch(
                f"SELECT {_COLUMNS} FROM memories WHERE lineage_id = $1 ORDER BY version", row["lineage_id"]
            )
        return MemoryDetail(memory=_record_to_memory(row), history=[_record_to_memory(h) for h in history])

    async def as_of(self, memory_id: str, when: datetime) -> Memory | None:
        """The version of this entry's lineage that was true at `when`."""
        row = await self.pool.fetchrow(
            f"""SELECT {_COLUMNS} FROM memories WHERE lineage_id = (SELECT lineage_id FROM memories WHERE id = $1)
                  AND valid_from <= $2 AND (valid_to IS NULL OR valid_to > $2) AND status <> 'forgotten'
                ORDER BY version DESC LIMIT 1""",
            memory_id,
            when,
        )
        return _record_to_memory(row) if row else None

    async def list_memories(
        self,
        namespaces: Sequence[str],
        *,
        kind: str | None = None,
        status: str = "active",
        limit: int = 50,
        before: datetime | None = None,
    ) -> list[MemorySummary]:
        if not 1 <= limit <= 500:
            raise InvalidInput(f"limit must be between 1 and 500, got {limit}", field="limit")
        rows = await self.pool.fetch(
            """SELECT id, kind, namespace, tier, origin, author, title, status, valid_from, content_hash
                 FROM memories WHERE namespace = ANY($1::text[]) AND status = $2
                  AND ($3::text IS NULL OR kind = $3) AND ($4::timestamptz IS NULL OR created_at < $4)
                ORDER BY created_at DESC, id DESC LIMIT $5""",
            list(namespaces),
            status,
            kind,
            before,
            limit,
        )
        return [MemorySummary.model_validate(dict(r)) for r in rows]

    # ------------------------------------------------------------------ retrieval legs

    async def vector_leg(self, embedding: np.ndarray, scope: Scope, n: int) -> list[tuple[str, float]]:
        """Nearest entries by this store's model; none while another model's index is live (a query
        is only ever compared with vectors of the model that embedded it)."""
        live, _ = await self.live.get(self.pool)
        if live != self.embedding_model:
            return []
        where, args = scope.where(4)
        try:
            rows = await self.pool.fetch(
                f"""SELECT m.id, 1 - (m.embedding <=> $1) AS sim FROM memories m
                     WHERE m.embedding IS NOT NULL AND m.embedding_model = $3 AND {where}
                     ORDER BY m.embedding <=> $1 LIMIT $2""",
                embedding,
                n,
                self.embedding_model,
                *args,
            )
        except asyncpg.PostgresError as e:
            if not is_dimension_error(e):
                raise
            self.live.stale()  # the index was swapped to another model's dimension a moment ago
            return []
        return [(r["id"], float(r["sim"])) for r in rows]

    async def _refresh_lexical(self, max_age: float = 30.0) -> LexicalStats:
        import time

        st = self.lexical
        if time.monotonic() - st.refreshed > max_age:
            row = await self.pool.fetchrow(
                "SELECT count(*) AS n, coalesce(avg(length(tsv)), 1) AS avg FROM memories WHERE status = 'active'"
            )
            st.docs, st.avg_len, st.refreshed = int(row["n"]), float(row["avg"]) or 1.0, time.monotonic()
        return st

    async def lexical_leg(self, query: str, scope: Scope, n: int) -> list[tuple[str, float]]:
        """BM25 (k1 1.2, b 0.3: memories are short, so length matters less) over the full-text index.

        IDF comes from `lexeme_stats`, term frequency from the tsvector's positions.
        Candidates come from the GIN index using the query's rarer lexemes only, so a word that
        appears everywhere cannot turn the candidate set into a scan.
        """
        stats = await self._refresh_lexical()
        where, args = scope.where(5)
        # One round trip: the query's lexemes with their document frequency, IDF, the selective subset
        # (df within 5% of the corpus, else the rarest) as the GIN candidate filter, then BM25.
        rows = await self.pool.fetch(
            f"""WITH q AS (
                    SELECT l.lexeme, s.df,
                           ln(1 + ($2::float8 - s.df + 0.5) / (s.df + 0.5)) AS idf,
                           row_number() OVER (ORDER BY s.df, l.lexeme) AS rarity
                      FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
                      JOIN lexeme_stats s ON s.lexeme = l.lexeme AND s.df > 0),
                sel AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM q
                         WHERE df <= greatest(0.05 * $2::float8, 50) OR rarity = 1),
                cand AS (SELECT m.id, m.tsv FROM memories m, sel WHERE m.tsv @@ sel.tsq AND {where}
                          LIMIT {LEXICAL_CANDIDATE_CAP})
                SELECT c.id, sum(q.idf * (tf * 2.2) / (tf + 1.2 * (0.7 + 0.3 * length(c.tsv) / $3::float8)))
                         AS score
                  FROM cand c
                 CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
                                       FROM unnest(c.tsv) u) t
                  JOIN q ON q.lexeme = t.lexeme
                 GROUP BY c.id ORDER BY score DESC, c.id LIMIT $4""",
            query,
            max(stats.docs, 1),
            stats.avg_len,
            n,
            *args,
        )
        return [(r["id"], float(r["score"])) for r in rows]

    async def query_idf(self, query: str) -> float:
        """The BM25 score a document matching every query term once, at average length, would get.

        `lexical_leg`'s scores divided by this are the share of the query's information a memory
        covers, comparable across queries and corpora. A term no memory contains counts at the highest
        IDF, so "write a haiku" against an engineering brain covers almost nothing.
        """
        stats = await self._refresh_lexical()
        value = await self.pool.fetchval(
            """SELECT coalesce(sum(ln(1 + ($2::float8 - coalesce(s.df, 0) + 0.5) / (coalesce(s.df, 0) + 0.5))), 0)
                 FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
                 LEFT JOIN lexeme_stats s ON s.lexeme = l.lexeme""",
            query,
            max(stats.docs, 1),
        )
        return float(value or 0.0)

    async def trigram_leg(self, tokens: Sequence[str], scope: Scope, n: int) -> list[tuple[str, float]]:
        """Exact identifier lookups (ports, flags, host names, env vars, error codes) via the trigram index."""
        if not tokens:
            return []
        where, args = scope.where(3)
        patterns = ["%" + re.sub(r"([%_\\])", r"\\\1", t) + "%" for t in tokens]
        rows = await self.pool.fetch(
            f"""SELECT m.id, count(*)::float8 AS score FROM memories m
                  JOIN unnest($1::text[]) AS p(pattern) ON m.body ILIKE p.pattern
                 WHERE {where} GROUP BY m.id ORDER BY score DESC, max(m.created_at) DESC LIMIT $2""",
            patterns,
            n,
            *args,
        )
        return [(r["id"], float(r["score"])) for r in rows]

    async def hits(self, ids: Sequence[str]) -> dict[str, Hit]:
        if not ids:
            return {}
        rows = await self.pool.fetch(
            f"SELECT {_HIT_COLUMNS} FROM memories WHERE id = ANY($1::text[])", list(ids)
        )
        return {r["id"]: _record_to_hit(r) for r in rows}

    async def standing(self, scope: Scope, limit: int = 50) -> list[Hit]:
        """Required and standing entries: pinned facts that beat any retriever on indirect questions."""
        where, args = scope.where(2)
        rows = await self.pool.fetch(
            f"""SELECT {_HIT_COLUMNS} FROM memories m WHERE (m.standing OR m.required) AND m.origin <> 'untrusted'
                  AND {where} ORDER BY m.required DESC, m.importance DESC, m.valid_from DESC LIMIT $1""",
            limit,
            *args,
        )
        return [_record_to_hit(r, 1.0) for r in rows]

    async def latest(self, scope: Scope, kind: str, limit: int) -> list[Hit]:
        where, args = scope.where(3)
        rows = await self.pool.fetch(
            f"SELECT {_HIT_COLUMNS} FROM memories m WHERE m.kind = $1 AND {where} ORDER BY m.valid_from DESC LIMIT $2",
            kind,
            limit,
            *args,
        )
        return [_record_to_hit(r) for r in rows]

    async def neighbours(self, lineage_ids: Sequence[str], scope: Scope, limit: int) -> list[tuple[str, Hit]]:
        """Entries one edge away (either direction) from the given lineages: (from lineage, neighbour)."""
        if not lineage_ids:
            return []
        where, args = scope.where(3)
        rows = await self.pool.fetch(
            f"""SELECT e.origin_lineage, {", ".join("m." + c.strip() for c in _HIT_COLUMNS.split(","))}
                  FROM (SELECT source_id AS origin_lineage, target_id AS other, confidence FROM edges
                         WHERE source_id = ANY($1::text[])
                        UNION ALL
                        SELECT target_id, source_id, confidence FROM edges WHERE target_id = ANY($1::text[])) e
                  JOIN memories m ON m.lineage_id = e.other
                 WHERE {where} ORDER BY e.confidence DESC LIMIT $2""",
            list(lineage_ids),
            limit,
            *args,
        )
        return [(r["origin_lineage"], _record_to_hit(r)) for r in rows]

    async def episode_context(
        self, ids: Sequence[str], scope: Scope, window: int
    ) -> dict[str, tuple[str, int]]:
        """(episode, seq) of the given entries and of their in-scope episode neighbours within `window`.

        An episode lives in one namespace: the same episode name in two namespaces is two episodes
        (the returned key is "<namespace> <episode>"; namespaces hold no spaces).
        """
        if not ids:
            return {}
        where, args = scope.where(3)
        rows = await self.pool.fetch(
            # LIMIT keeps the subquery from being flattened, so each candidate gets one (episode, seq) range scan.
            f"""SELECT DISTINCT m.id, m.namespace || ' ' || m.episode AS episode, m.seq
                  FROM (SELECT namespace, episode, seq FROM memories
                         WHERE id = ANY($1::text[]) AND episode IS NOT NULL) c
                 CROSS JOIN LATERAL (
                       SELECT m.id, m.namespace, m.episode, m.seq FROM memories m
                        WHERE m.episode = c.episode AND m.namespace = c.namespace
                          AND m.seq BETWEEN c.seq - $2 AND c.seq + $2 AND {where}
                        LIMIT 4 * $2 + 2) m""",
            list(ids),
            window,
            *args,
        )
        return {r["id"]: (r["episode"], r["seq"]) for r in rows}

    async def add_edge(self, source: str, target: str, relation: str, confidence: float = 1.0) -> None:
        """Edges join lineages, so they survive a supersede."""
        await self.pool.execute(
            """INSERT INTO edges (source_id, target_id, relation, confidence) VALUES ($1, $2, $3, $4)
               ON CONFLICT (source_id, target_id, relation) DO UPDATE SET confidence = excluded.confidence""",
            source,
            target,
            relation,
            confidence,
        )

    async def touch(self, ids: Sequence[str]) -> None:
        if ids:
            await self.pool.execute(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = now() "
                "WHERE id = ANY($1::text[])",
                list(ids),
            )

    # ------------------------------------------------------------------ events and health

    async def record_event(
        self, type_: str, *, key_name: str | None, namespace: str | None, payload: dict
    ) -> None:
        await self.pool.execute(
            "INSERT INTO events (type, key_name, namespace, payload) VALUES ($1, $2, $3, $4::jsonb)",
            type_,
            key_name,
            namespace,
            json.dumps(payload, default=str),
        )

    async def index_stats(self, stale_days: int = 90) -> dict[str, Any]:
        """The numbers `Brain.status.index` shows; cheap enough for a health endpoint."""
        async with self.pool.acquire() as conn:
            by = await conn.fetch(
                "SELECT namespace, kind, count(*) AS n, count(embedding) AS e FROM memories "
                "WHERE status = 'active' GROUP BY namespace, kind"
            )
            stale = await conn.fetchval(
                "SELECT count(*) FROM memories WHERE status = 'active' AND created_at < now() - make_interval(days => $1)"
                " AND (last_accessed_at IS NULL OR last_accessed_at < now() - make_interval(days => $1))",
                stale_days,
            )
            pending = await conn.fetchval("SELECT count(*) FROM proposals WHERE status = 'pending'")
            runs = await conn.fetch(
                "SELECT job, max(finished_at) AS at FROM job_runs WHERE status = 'ok' GROUP BY job"
            )
            live_model = await conn.fetchval("SELECT value FROM brain_meta WHERE key = 'embedding_model'")
            reindexing = await reindex_running(conn)
        by_kind: dict[str, int] = {}
        by_ns: dict[str, int] = {}
        total = embedded = 0
        for r in by:
            by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + r["n"]
            by_ns[r["namespace"]] = by_ns.get(r["namespace"], 0) + r["n"]
            total += r["n"]
            embedded += r["e"]
        last = {r["job"]: r["at"].isoformat() if r["at"] else None for r in runs}
        return {
            "entries": [{"namespace": r["namespace"], "kind": r["kind"], "count": r["n"]} for r in by],
            "entriesByKind": by_kind,
            "entriesByNamespace": by_ns,
            "embeddedRatio": round(embedded / total, 4) if total else 1.0,
            "staleEntries": int(stale),
            "pendingProposals": int(pending),
            "lastIngest": last.get("ingest"),
            "lastDistill": last.get("distill"),
            "lastDigest": last.get("digest"),
            "embeddingModel": self.embedding_model,
            "embeddingDim": self.dim,
            "liveModel": live_model,
            "reindex": reindexing,
        }


def _require_cas(
    old: asyncpg.Record, memory_id: str, expected_hash: str | None, actor: Actor, what: str
) -> None:
    """Another author's entry is changed only by a caller that shows it read the current text.

    Owner keys are exempt: they moderate (and can restore what they forget); they may still send a
    hash to get compare-and-set. Either way the change is recorded with both authors (`_audit`).
    """
    if expected_hash is None and old["author"] != actor.name and actor.role != "owner":
        raise Conflict(
            f"memory {memory_id} was written by {old['author']!r}, not {actor.name!r}; to {what} another "
            "author's entry send expected_hash (its content_hash, from brain_get or GET /memories/{id}), "
            "so a change you have not read is never overwritten",
            field="expected_hash",
        )


async def _audit(
    conn: asyncpg.Connection,
    type_: str,
    old: asyncpg.Record,
    actor: Actor,
    *,
    new_id: str | None = None,
    reason: str | None = None,
    cas: bool = False,
) -> None:
    """Who changed whose entry: one `events` row in the same transaction as the change."""
    payload = {
        "id": old["id"],
        "lineage_id": old["lineage_id"],
        "by": actor.name,
        "by_role": actor.role,
        "author": old["author"],
        "cross_author": old["author"] != actor.name,
        "compare_and_set": cas,
    }
    if new_id is not None:
        payload["new_id"] = new_id
    if reason is not None:
        payload["reason"] = reason
    await conn.execute(
        "INSERT INTO events (type, key_name, namespace, payload) VALUES ($1, $2, $3, $4::jsonb)",
        type_,
        actor.name,
        old["namespace"],
        json.dumps(payload),
    )


def embed_text(title: str, body: str) -> str:
    """What gets embedded for an entry: the title adds the context a short body lacks."""
    return f"{title}\n{body}" if title else body
