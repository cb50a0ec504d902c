"""Reads for the owners' review page (gateway/review.py): session records by id, namespaces with
their sizes, entries by namespace/author/kind/status, and who wrote how much.

Namespace visibility is the caller's rule (the page filters what a key may read); `visible`
narrows the SQL to a confined key's namespaces so a large foreign namespace is never read.
"""

from __future__ import annotations

from typing import Any

from brain.store.store import Store

RECORD_COLS = "id, kind, namespace, author, origin, title, body, status, episode, created_at"


async def records(store: Store, ids: list[str]) -> list[dict[str, Any]]:
    rows = await store._pool.fetch(f"SELECT {RECORD_COLS} FROM memories WHERE id = ANY($1::text[])", ids)
    return [dict(r) for r in rows]


async def namespace_sizes(store: Store) -> list[tuple[str, int]]:
    rows = await store._pool.fetch(
        "SELECT namespace, count(*) AS n FROM memories WHERE status = 'active' GROUP BY namespace "
        "ORDER BY namespace"
    )
    return [(r["namespace"], int(r["n"])) for r in rows]


async def entries(
    store: Store,
    *,
    namespaces: list[str] | None,
    visible: list[str] | None,
    author: str | None,
    kind: str | None,
    status: str,
    limit: int,
) -> list[dict[str, Any]]:
    """Newest first; `status` 'any' reads every status."""
    rows = await store._pool.fetch(
        """SELECT id, lineage_id, version, kind, namespace, tier, origin, author, title, status, promoted_by,
                  created_at, left(body, 120) AS excerpt
             FROM memories
            WHERE ($1::text[] IS NULL OR namespace = ANY($1::text[]))
              AND ($2::text[] IS NULL OR namespace = ANY($2::text[]))
              AND ($3::text IS NULL OR author = $3) AND ($4::text IS NULL OR kind = $4)
              AND ($5 = 'any' OR status = $5)
            ORDER BY created_at DESC, id DESC LIMIT $6""",
        namespaces,
        visible,
        author,
        kind,
        status,
        limit,
    )
    return [dict(r) for r in rows]


async def authors(store: Store, visible: list[str] | None) -> list[tuple[str, int]]:
    rows = await store._pool.fetch(
        """SELECT author, count(*) AS n FROM memories
            WHERE ($1::text[] IS NULL OR namespace = ANY($1::text[])) AND status = 'active'
            GROUP BY author ORDER BY n DESC, author LIMIT 100""",
        visible,
    )
    return [(r["author"], int(r["n"])) for r in rows]
