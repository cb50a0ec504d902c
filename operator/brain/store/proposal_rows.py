"""The `proposals` table: what distillation drafted, and how an owner decided it.

The rules (who may decide, what approval writes) are services.proposals'; this holds the SQL,
including the row lock that makes two owners approving at once produce one memory and one conflict.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from brain.store.store import Store, new_id

COLUMNS = (
    "id, status, kind, namespace, title, body, supersedes, evidence, authors, score, created_at, decided_by, "
    "decided_at, reason, memory_id"
)


def _row(r: Any) -> dict[str, Any]:
    d = dict(r)
    if isinstance(d.get("evidence"), str):
        d["evidence"] = json.loads(d["evidence"])
    return d


async def insert(
    store: Store,
    *,
    kind: str,
    namespace: str,
    title: str,
    body: str,
    evidence: list[dict[str, Any]],
    authors: list[str],
    score: float,
    supersedes: str | None = None,
) -> str:
    pid = new_id()
    await store._pool.execute(
        """INSERT INTO proposals (id, kind, namespace, title, body, supersedes, evidence, authors, score)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)""",
        pid,
        kind,
        namespace,
        title,
        body,
        supersedes,
        json.dumps(evidence, default=str),
        sorted(set(authors)),
        score,
    )
    return pid


async def by_status(store: Store, status: str, limit: int) -> list[dict[str, Any]]:
    rows = await store._pool.fetch(
        f"SELECT {COLUMNS} FROM proposals WHERE status = $1 ORDER BY score DESC, created_at DESC LIMIT $2",
        status,
        limit,
    )
    return [_row(r) for r in rows]


async def get(store: Store, proposal_id: str) -> dict[str, Any] | None:
    r = await store._pool.fetchrow(f"SELECT {COLUMNS} FROM proposals WHERE id = $1", proposal_id)
    return None if r is None else _row(r)


async def memory_brief(store: Store, memory_id: str) -> dict[str, Any] | None:
    """The memory a supersede proposal would replace, for showing both texts side by side."""
    cur = await store._pool.fetchrow(
        "SELECT id, namespace, kind, title, body, status, content_hash, tier, author FROM memories WHERE id = $1",
        memory_id,
    )
    return dict(cur) if cur is not None else None


async def pending_texts(store: Store) -> list[dict[str, Any]]:
    """Title, body and namespace of every pending proposal (distill skips what is already proposed)."""
    rows = await store._pool.fetch("SELECT title, body, namespace FROM proposals WHERE status = 'pending'")
    return [dict(r) for r in rows]


@dataclass
class Decision:
    """A proposal row held under FOR UPDATE until the `deciding` block ends."""

    conn: Any
    proposal_id: str
    row: dict[str, Any] | None

    async def approved(self, by: str, reason: str | None, memory_id: str) -> None:
        await self.conn.execute(
            """UPDATE proposals SET status = 'approved', decided_by = $2, decided_at = now(), reason = $3,
                      memory_id = $4 WHERE id = $1""",
            self.proposal_id,
            by,
            reason,
            memory_id,
        )


@asynccontextmanager
async def deciding(store: Store, proposal_id: str) -> AsyncIterator[Decision]:
    """Lock one proposal for the length of the block (one transaction)."""
    async with store._pool.acquire() as conn, conn.transaction():
        r = await conn.fetchrow(f"SELECT {COLUMNS} FROM proposals WHERE id = $1 FOR UPDATE", proposal_id)
        yield Decision(conn, proposal_id, None if r is None else _row(r))


async def reject(store: Store, proposal_id: str, by: str, reason: str) -> bool:
    """Whether a pending proposal was rejected (False: it is absent or already decided)."""
    row = await store._pool.fetchrow(
        """UPDATE proposals SET status = 'rejected', decided_by = $2, decided_at = now(), reason = $3
            WHERE id = $1 AND status = 'pending' RETURNING id""",
        proposal_id,
        by,
        reason,
    )
    return row is not None


async def status(store: Store, proposal_id: str) -> str | None:
    value = await store._pool.fetchval("SELECT status FROM proposals WHERE id = $1", proposal_id)
    return None if value is None else str(value)


async def backlog(store: Store) -> tuple[int, float | None]:
    """Pending proposals: how many, and the unix time the oldest was made (None when none waits)."""
    row = await store._pool.fetchrow(
        "SELECT count(*) AS n, extract(epoch FROM min(created_at)) AS oldest FROM proposals "
        "WHERE status = 'pending'"
    )
    oldest = row["oldest"]
    return int(row["n"]), None if oldest is None else float(oldest)
