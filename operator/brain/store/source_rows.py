"""What a source sync (ingest) reads besides memories themselves: the entries a source already has.
Its writes (front-matter flags, derived edges) are the writer's (`brain.store.writer`), which only
the door imports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


async def lineage_owners(store: Store, lineage_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """(author, origin) of each lineage's newest version: whose edges a sync may replace."""
    rows = await store._pool.fetch(
        """SELECT DISTINCT ON (lineage_id) lineage_id, author, origin FROM memories
            WHERE lineage_id = ANY($1::text[]) ORDER BY lineage_id, version DESC""",
        list(lineage_ids),
    )
    return {r["lineage_id"]: (r["author"], r["origin"]) for r in rows}
