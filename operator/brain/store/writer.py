"""The store's one writer: memories (note, supersede with compare-and-set, forget/retire/restore,
purge, promote), their front-matter flags and the edges between lineages.

Only `brain.services` imports this module (`.importlinter`, contract only-services-write; pinned by
tests/test_architecture_boundaries.py): the `Store` facade every room holds reads, and writes go
through the door, which authorises and screens every field a row will hold before it gets here.

Nothing is overwritten: supersede closes the old version (valid_to, status) and inserts the next one
in the same lineage; forget and retire are status changes with a reason. Every change of another
author's entry is audited in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np

from brain.core.errors import Conflict, Forbidden, InvalidInput
from brain.core.models import Actor, Memory, MemoryIn, NoteResult
from brain.store.base import (
    _COLUMNS,
    StoreBase,
    _record_to_memory,
    content_hash,
    new_id,
)
from brain.store.reindex import vector_for_write


def _require_author(old: asyncpg.Record, memory_id: str, only_author: str | None) -> None:
    """An import (services.memory.may_replace) changes only its own entries; checked again here, in the
    write's transaction, on the version it locked."""
    if only_author is not None and (
        old["author"] != only_author or old["origin"] not in ("import", "untrusted")
    ):
        raise Forbidden(
            f"memory {memory_id} was written by {old['author']!r}; {only_author!r} is an import and "
            "supersedes or retires only its own entries",
            field="id",
        )


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


class StoreWriter:
    """The writes of the memories aggregate, over a store's pool (the door, services, holds one).

    A `Store` alone cannot write: the facade has no write method, so a room that holds a store but
    may not import this module (everything but `brain.services`) has no way to change a memory.
    """

    def __init__(self, store: StoreBase) -> None:
        self._base = store

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
        embed_input: str | None = None,
    ) -> Memory:
        mid = new_id()
        embedding = await vector_for_write(
            conn, self._base.embedding_model, self._base._check_embedding(embedding)
        )
        row = await conn.fetchrow(
            f"""INSERT INTO memories (id, lineage_id, version, kind, namespace, tier, origin, author, title, body,
                   tags, attrs, source_key, content_hash, valid_from, supersedes, importance, standing, required,
                   domain_keywords, embedding, embedding_model, promoted_by, promoted_at, episode, seq,
                   embed_input)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14, coalesce($15, now()),
                   $16, $17, $18, $19, $20, $21, $22, $23, $24, $25::text,
                   CASE WHEN $25::text IS NOT NULL THEN coalesce($26::integer,
                     (SELECT coalesce(max(seq) + 1, 0) FROM memories WHERE episode = $25::text AND namespace = $5))
                   END, $27)
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
            self._base.embedding_model if embedding is not None else None,
            actor.name if tier == "curated" else None,
            datetime.now(UTC) if tier == "curated" else None,
            item.episode,
            item.seq,
            embed_input,
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
        async with self._base._tx() as conn:
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
        self,
        items: Sequence[tuple[MemoryIn, np.ndarray | None]],
        *,
        actor: Actor,
        tier: str = "episodic",
        inputs: Sequence[str | None] | None = None,
    ) -> list[Memory]:
        """Bulk insert for imports and evaluation: one transaction, no dedup (callers dedup on identity).
        `inputs`, one per item: the text its vector was made of, when not its title and body."""
        out = []
        async with self._base._tx() as conn:
            for (item, emb), text in zip(items, inputs or [None] * len(items), strict=True):
                out.append(
                    await self._insert(conn, item, actor=actor, tier=tier, embedding=emb, embed_input=text)
                )
        return out

    async def supersede(
        self,
        memory_id: str,
        item: MemoryIn,
        *,
        expected_hash: str | None,
        actor: Actor,
        tier: str | None = None,
        embedding: np.ndarray | None = None,
        only_author: str | None = None,
        embed_input: str | None = None,
    ) -> Memory:
        """Compare-and-set: refuse if the current version's hash is not the one the caller read (and,
        with `only_author`, if another author wrote the current version)."""
        async with self._base._tx() as conn:
            old = await self._base._current(conn, memory_id, lock=True)
            if old["status"] != "active":
                current = await conn.fetchval(
                    "SELECT id FROM memories WHERE lineage_id = $1 AND status = 'active'", old["lineage_id"]
                )
                hint = f"; the current version is {current}" if current else ""
                raise Conflict(
                    f"memory {memory_id} is {old['status']}, not the current version{hint}", field="id"
                )
            _require_author(old, memory_id, only_author)
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
                embed_input=embed_input,
            )
            await _audit(conn, "memory_superseded", old, actor, new_id=new.id, cas=expected_hash is not None)
            return new

    async def set_status(
        self,
        memory_id: str,
        status: str,
        reason: str,
        *,
        actor: Actor,
        expected_hash: str | None = None,
        only_author: str | None = None,
    ) -> Memory:
        """forget / retire: a soft delete that keeps the row and says why and who (`restore` undoes it)."""
        if not reason.strip():
            raise InvalidInput(f"{status} needs a reason", field="reason")
        async with self._base._tx() as conn:
            old = await self._base._current(conn, memory_id, lock=True)
            if old["status"] != "active":
                raise Conflict(f"memory {memory_id} is already {old['status']}", field="id")
            _require_author(old, memory_id, only_author)
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
        async with self._base._tx() as conn:
            old = await self._base._current(conn, memory_id, lock=True)
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

    async def purge(self, memory_id: str, reason: str, tombstone: str, *, actor: Actor) -> int:
        """Owner only: every version of a forgotten entry's lineage loses its text (body and title become
        `tombstone`, the vector goes); content hashes, authors, times and events stay. How many versions."""
        if actor.role != "owner":
            raise Forbidden("only an owner key can purge a memory")
        if not reason.strip():
            raise InvalidInput("purge needs a reason", field="reason")
        async with self._base._tx() as conn:
            old = await self._base._current(conn, memory_id, lock=True)
            served = await conn.fetchval(
                "SELECT id FROM memories WHERE lineage_id = $1 AND status = 'active' LIMIT 1",
                old["lineage_id"],
            )
            if served is not None:
                raise Conflict(
                    f"memory {served} is still served; forget it first (`brainctl forget`), then purge",
                    field="id",
                )
            await _audit(conn, "memory_purged", old, actor, reason=reason.strip())
            # what an import embedded (`embed_input`) goes with the text: migration 0007's trigger
            result = await conn.execute(
                """UPDATE memories SET body = $2, title = $2, embedding = NULL, embedding_model = NULL,
                        updated_at = now(),
                        attrs = jsonb_build_object('purged_by', $3::text, 'purged_at', now()::text)
                    WHERE lineage_id = $1""",
                old["lineage_id"],
                tombstone,
                actor.name,
            )
            # A proposal citing one of these versions quoted its title in its evidence: that goes too.
            await conn.execute(
                """UPDATE proposals p SET evidence = (
                         SELECT jsonb_agg(CASE WHEN e->>'memory_id' = ANY(v.ids) AND e ? 'title'
                                               THEN e || jsonb_build_object('title', $2::text) ELSE e END
                                          ORDER BY n)
                           FROM jsonb_array_elements(p.evidence) WITH ORDINALITY AS x(e, n))
                     FROM (SELECT array_agg(id) AS ids FROM memories WHERE lineage_id = $1) v
                    WHERE jsonb_typeof(p.evidence) = 'array' AND jsonb_array_length(p.evidence) > 0
                      AND EXISTS (SELECT 1 FROM jsonb_array_elements(p.evidence) e
                                   WHERE e->>'memory_id' = ANY(v.ids))""",
                old["lineage_id"],
                tombstone,
            )
            return int(result.split()[-1])

    async def promote(
        self, memory_id: str, *, actor: Actor, standing: bool | None = None, required: bool | None = None
    ) -> Memory:
        """Owner only. Untrusted text is never promoted and never standing."""
        if actor.role != "owner":
            raise Forbidden("only an owner key can promote a memory to the curated tier")
        async with self._base._tx() as conn:
            old = await self._base._current(conn, memory_id, lock=True)
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

    # ------------------------------------------------------------------ flags and edges

    async def set_flags(self, memory_id: str, *, standing: bool, required: bool) -> None:
        """A sync's front-matter pins on an entry it just wrote (the door decides who may pin)."""
        await self._base._pool.execute(
            "UPDATE memories SET standing = $2, required = $3 WHERE id = $1", memory_id, standing, required
        )

    async def add_edge(self, source: str, target: str, relation: str, confidence: float = 1.0) -> None:
        """Edges join lineages, so they survive a supersede."""
        await self._base._pool.execute(
            """INSERT INTO edges (source_id, target_id, relation, confidence) VALUES ($1, $2, $3, $4)
               ON CONFLICT (source_id, target_id, relation) DO UPDATE SET confidence = excluded.confidence""",
            source,
            target,
            relation,
            confidence,
        )

    async def replace_edges(
        self, sources: list[str], relations: Iterable[str], rows: Mapping[tuple[str, str, str], float]
    ) -> None:
        """In one transaction: drop the `relations` edges out of `sources`, insert `rows` (upserting)."""
        async with self._base._tx() as conn:
            await conn.execute(
                "DELETE FROM edges WHERE source_id = ANY($1::text[]) AND relation = ANY($2::text[])",
                sources,
                list(relations),
            )
            await conn.executemany(
                """INSERT INTO edges (source_id, target_id, relation, confidence) VALUES ($1, $2, $3, $4)
                   ON CONFLICT (source_id, target_id, relation) DO UPDATE SET confidence = excluded.confidence""",
                [(s, t, r, c) for (s, t, r), c in rows.items()],
            )
