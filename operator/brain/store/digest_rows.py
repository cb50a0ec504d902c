"""What the weekly digest reads: events, memories and proposals of a window, and the stored digests.

The rows keep their identity columns out of the SELECTs (jobs.digest builds anonymous signals from
them); the JSON columns come back decoded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from brain.store.store import Store

Row = Mapping[str, Any]


def payload(raw: Any) -> dict[str, Any]:
    """A jsonb column as a dict, whichever way the driver handed it over."""
    decoded: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    return decoded


def _in(namespace: str | None, arg: int) -> str:
    """The namespace predicate of one digest's reads (none: every namespace, for the gauges)."""
    return "" if namespace is None else f" AND namespace = ${arg}"


def _args(namespace: str | None) -> tuple[str, ...]:
    return () if namespace is None else (namespace,)


async def namespaces(store: Store, start: datetime, end: datetime) -> list[str]:
    """Namespaces with something to report in [start, end): events, new entries, proposals."""
    rows = await store._pool.fetch(
        "SELECT namespace FROM events WHERE type IN ('capture', 'query_no_hit') AND created_at >= $1 "
        "AND created_at < $2 "
        "UNION SELECT namespace FROM memories WHERE created_at >= $1 AND created_at < $2 AND version = 1 "
        "AND kind <> 'digest' "
        "UNION SELECT namespace FROM proposals WHERE (decided_at >= $1 AND decided_at < $2) "
        "OR (status = 'pending' AND created_at < $2) ORDER BY 1",
        start,
        end,
    )
    return [str(r["namespace"]) for r in rows if r["namespace"]]


async def events(store: Store, start: datetime, end: datetime, namespace: str | None = None) -> list[Row]:
    """Captures and no-hit queries in [start, end) (of one namespace): type, payload (decoded), created_at."""
    rows = await store._pool.fetch(
        "SELECT type, payload, created_at FROM events WHERE type IN ('capture', 'query_no_hit') "
        "AND created_at >= $1 AND created_at < $2" + _in(namespace, 3),
        start,
        end,
        *_args(namespace),
    )
    return [{**dict(r), "payload": payload(r["payload"])} for r in rows]


async def created(store: Store, start: datetime, end: datetime, namespace: str | None = None) -> list[Row]:
    """First versions created in [start, end): kind, outcome (experiences), created_at."""
    rows: list[Row] = await store._pool.fetch(
        "SELECT kind, attrs->>'outcome' AS outcome, created_at FROM memories WHERE created_at >= $1 "
        "AND created_at < $2 AND version = 1" + _in(namespace, 3),
        start,
        end,
        *_args(namespace),
    )
    return rows


async def decided(store: Store, start: datetime, end: datetime, namespace: str | None = None) -> list[Row]:
    """Proposals decided in [start, end): status, created_at, decided_at."""
    rows: list[Row] = await store._pool.fetch(
        "SELECT status, created_at, decided_at FROM proposals WHERE decided_at >= $1 AND decided_at < $2"
        + _in(namespace, 3),
        start,
        end,
        *_args(namespace),
    )
    return rows


async def pending(store: Store, end: datetime, namespace: str | None = None) -> list[Row]:
    """Proposals still waiting for an owner that were made before `end`: title, created_at."""
    rows: list[Row] = await store._pool.fetch(
        "SELECT title, created_at FROM proposals WHERE status = 'pending' AND created_at < $1"
        + _in(namespace, 2),
        end,
        *_args(namespace),
    )
    return rows


async def stale(store: Store, stale_days: int, namespace: str | None = None) -> list[Row]:
    """Active memories (digests aside) neither created nor read in the last `stale_days`: kind."""
    rows: list[Row] = await store._pool.fetch(
        "SELECT kind FROM memories WHERE status = 'active' AND kind <> 'digest' "
        "AND created_at < now() - make_interval(days => $1) "
        "AND (last_accessed_at IS NULL OR last_accessed_at < now() - make_interval(days => $1))"
        + _in(namespace, 2),
        stale_days,
        *_args(namespace),
    )
    return rows


async def current(store: Store, source_key: str) -> Row | None:
    """The active digest of one week (its source key): id, content_hash."""
    row: Row | None = await store._pool.fetchrow(
        "SELECT id, content_hash FROM memories WHERE source_key = $1 AND status = 'active' AND kind = 'digest' "
        "AND author = 'digest' AND origin = 'import'",
        source_key,
    )
    return row


async def latest(store: Store, namespace: str | None = None) -> Row | None:
    """The newest active digest (of one namespace) the digest job wrote (author `digest`, origin
    `import`: no key can write as it), so no other entry of kind digest can pass for it: id, title,
    body, attrs (decoded), created_at."""
    r = await store._pool.fetchrow(
        "SELECT id, title, body, attrs, created_at FROM memories WHERE kind = 'digest' AND status = 'active' "
        "AND author = 'digest' AND origin = 'import'"
        + _in(namespace, 1)
        + " ORDER BY created_at DESC LIMIT 1",
        *_args(namespace),
    )
    return None if r is None else {**dict(r), "attrs": payload(r["attrs"])}
