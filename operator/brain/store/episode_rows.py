"""What distillation reads: recent episodic memories not yet cited by a proposal, the capture
sessions that stored them, no-hit questions since the last good run, and curated neighbours."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from brain.store.store import Store

Row = Mapping[str, Any]


async def unproposed(store: Store, kinds: Sequence[str], lookback_days: int, limit: int) -> list[Row]:
    """Active episodic agent/gateway entries of `kinds`, oldest first, that no proposal cites yet."""
    rows: list[Row] = await store._pool.fetch(
        """SELECT m.id, m.kind, m.namespace, m.title, m.body, m.author, m.embedding FROM memories m
            WHERE m.status = 'active' AND m.tier = 'episodic' AND m.origin IN ('agent', 'gateway')
              AND m.kind = ANY($1::text[]) AND m.created_at > now() - make_interval(days => $2)
              AND NOT EXISTS (SELECT 1 FROM proposals p, jsonb_array_elements(p.evidence) e
                               WHERE e->>'memory_id' = m.id)
            ORDER BY m.created_at LIMIT $3""",
        list(kinds),
        lookback_days,
        limit,
    )
    return rows


async def capture_sessions(store: Store, lookback_days: int) -> list[Row]:
    """Capture events of the window: id, payload (as stored)."""
    rows: list[Row] = await store._pool.fetch(
        """SELECT id, payload FROM events WHERE type = 'capture'
            AND created_at > now() - make_interval(days => $1)""",
        lookback_days,
    )
    return rows


async def last_ok_distill(store: Store) -> datetime | None:
    since: datetime | None = await store._pool.fetchval(
        "SELECT max(started_at) FROM job_runs WHERE job = 'distill' AND status = 'ok'"
    )
    return since


async def no_hit_questions(store: Store, since: datetime | None, lookback_days: int) -> list[Row]:
    """No-hit questions after `since` (else within the lookback): id, namespace, key_name, q."""
    rows: list[Row] = await store._pool.fetch(
        """SELECT id, namespace, key_name, payload->>'query' AS q FROM events
            WHERE type = 'query_no_hit' AND created_at > coalesce($1, now() - make_interval(days => $2))
            ORDER BY id LIMIT 2000""",
        since,
        lookback_days,
    )
    return rows


async def curated_near(
    store: Store, vec: np.ndarray, namespaces: list[str], limit: int
) -> list[dict[str, Any]]:
    """Curated memories nearest `vec` (catalog, digest and derived kinds aside), with their similarity."""
    rows = await store._pool.fetch(
        """SELECT id, namespace, title, body, content_hash, 1 - (embedding <=> $1) AS sim FROM memories
            WHERE status = 'active' AND tier = 'curated' AND namespace = ANY($2::text[]) AND embedding IS NOT NULL
              AND kind <> ALL('{persona,skill,digest,code,map,summary}'::text[]) AND embedding_model = $4
            ORDER BY embedding <=> $1 LIMIT $3""",
        vec,
        namespaces,
        limit,
        store.embedding_model,
    )
    return [dict(r) for r in rows]


async def nearest_curated_similarity(
    store: Store, vec: np.ndarray, namespaces: list[str], exclude: str | None
) -> float | None:
    sim = await store._pool.fetchval(
        """SELECT max(s) FROM (
             SELECT 1 - (embedding <=> $1) AS s FROM memories
              WHERE status = 'active' AND namespace = ANY($2::text[]) AND embedding IS NOT NULL
                AND id IS DISTINCT FROM $3 AND tier = 'curated' AND embedding_model = $4
              ORDER BY embedding <=> $1 LIMIT 1) t""",
        vec,
        namespaces,
        exclude,
        store.embedding_model,
    )
    return None if sim is None else float(sim)
