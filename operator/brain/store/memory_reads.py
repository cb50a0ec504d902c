"""Memories, read: one entry with its history, point-in-time versions, listings, hits by id, pinned entries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from brain.core.errors import InvalidInput
from brain.core.models import Hit, Memory, MemoryDetail, MemorySummary
from brain.store.base import (
    _COLUMNS,
    _HIT_COLUMNS,
    Scope,
    StoreBase,
    _record_to_hit,
    _record_to_memory,
)


class MemoryReads(StoreBase):
    """Reads of the memories aggregate that every surface and the retrieval pipeline share."""

    async def get(self, memory_id: str) -> MemoryDetail:
        async with self._pool.acquire() as conn:
            row = await self._current(conn, memory_id, lock=False)
            history = await conn.fetch(
                f"SELECT {_COLUMNS} FROM memories WHERE lineage_id = $1 ORDER BY version", row["lineage_id"]
            )
        return MemoryDetail(memory=_record_to_memory(row), history=[_record_to_memory(h) for h in history])

    async def as_of(self, memory_id: str, when: datetime) -> Memory | None:
        """The version of this entry's lineage that was true at `when`."""
        row = await self._pool.fetchrow(
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
        rows = await self._pool.fetch(
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

    async def hits(self, ids: Sequence[str]) -> dict[str, Hit]:
        if not ids:
            return {}
        rows = await self._pool.fetch(
            f"SELECT {_HIT_COLUMNS} FROM memories WHERE id = ANY($1::text[])", list(ids)
        )
        return {r["id"]: _record_to_hit(r) for r in rows}

    async def standing(self, scope: Scope, limit: int = 50) -> list[Hit]:
        """Required and standing entries: pinned facts that beat any retriever on indirect questions."""
        where, args = scope.where(2)
        rows = await self._pool.fetch(
            f"""SELECT {_HIT_COLUMNS} FROM memories m WHERE (m.standing OR m.required) AND m.origin <> 'untrusted'
                  AND {where} ORDER BY m.required DESC, m.importance DESC, m.valid_from DESC LIMIT $1""",
            limit,
            *args,
        )
        return [_record_to_hit(r, 1.0) for r in rows]

    async def latest(self, scope: Scope, kind: str, limit: int) -> list[Hit]:
        where, args = scope.where(3)
        rows = await self._pool.fetch(
            f"SELECT {_HIT_COLUMNS} FROM memories m WHERE m.kind = $1 AND {where} ORDER BY m.valid_from DESC LIMIT $2",
            kind,
            limit,
            *args,
        )
        return [_record_to_hit(r) for r in rows]
