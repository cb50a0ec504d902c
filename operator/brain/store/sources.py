"""What a source sync (ingest) reads and writes besides memories themselves: the entries a source
already has, front-matter flags, and the source's derived edges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from brain.store.store import Store


async def active_under(store: Store, prefix: str, *, with_vectors: bool) -> list[Mapping[str, Any]]:
    """Active entries whose source key starts with `prefix` (LIKE-escaped here)."""
    rows: list[Mapping[str, Any]] = await store._pool.fetch(
        f"""SELECT id, lineage_id, content_hash, attrs->>'ingest_hash' AS fp, namespace, kind, access_count, author, origin,
                   source_key{", embedding" if with_vectors else ""}
              FROM memories WHERE status = 'active' AND source_key LIKE $1""",
        prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",
    )
    return rows


async def set_flags(store: Store, memory_id: str, *, standing: bool, required: bool) -> None:
    await store._pool.execute(
        "UPDATE memories SET standing = $2, required = $3 WHERE id = $1", memory_id, standing, required
    )


async def replace_edges(
    store: Store, sources: list[str], relations: Iterable[str], rows: Mapping[tuple[str, str, str], float]
) -> None:
    """In one transaction: drop the `relations` edges out of `sources`, insert `rows` (upserting)."""
    async with store._pool.acquire() as conn, conn.transaction():
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
