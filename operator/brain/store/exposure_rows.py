"""Exposure receipts (`memory_exposures`, migration 0005) and the retractions they are checked against.

A receipt is (memory id, version, lineage, namespace, key name, conversation, API, times): which
conversation was given which memory, never what it said. The conversation is a hash of its turns
(brain.gateway.retractions says which). A retraction is not a table of its own: it is the audit event
the store already writes in the transaction of every retire, forget and purge (`events`, types
`memory_retired` / `memory_forgotten` / `memory_purged`, `by_role` in the payload), undone by a later
`memory_restored`. Only an owner's counts: a MemorySource retiring an entry its files dropped did not
say the entry was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from brain.store.store import Store

Row = Mapping[str, Any]

RETRACTED = ("memory_retired", "memory_forgotten", "memory_purged")
RESTORED = "memory_restored"
_TYPES = [*RETRACTED, RESTORED]
#: action names by event type, as the notice, the API and the digest say them
ACTIONS = {"memory_retired": "retired", "memory_forgotten": "forgotten", "memory_purged": "purged"}


async def record(store: Store, receipts: Sequence[tuple[str, str, str, str, datetime]]) -> int:
    """Write (memory_id, key_name, conversation, api, at) receipts in one statement; how many rows.

    Version, lineage and namespace come from the memory row itself. A memory given twice to one
    conversation counts up; a receipt for an id the store does not hold is dropped."""
    if not receipts:
        return 0
    merged: dict[tuple[str, str, str], tuple[str, datetime, datetime, int]] = {}
    for mid, key, conv, api, at in receipts:
        k = (mid, key, conv)
        if k in merged:
            _, first, last, n = merged[k]
            merged[k] = (api, min(first, at), max(last, at), n + 1)
        else:
            merged[k] = (api, at, at, 1)
    cols: list[list[Any]] = [[], [], [], [], [], [], []]
    for (mid, key, conv), (api, first, last, n) in merged.items():
        for col, value in zip(cols, (mid, key, conv, api, first, last, n), strict=True):
            col.append(value)
    result = await store._pool.execute(
        """INSERT INTO memory_exposures AS e (memory_id, lineage_id, version, namespace, key_name,
                                             conversation, api, first_at, last_at, injections)
           SELECT m.id, m.lineage_id, m.version, m.namespace, r.key, r.conv, r.api, r.first, r.last, r.n
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[],
                         $6::timestamptz[], $7::int[]) AS r(mid, key, conv, api, first, last, n)
             JOIN memories m ON m.id = r.mid
           ON CONFLICT (memory_id, key_name, conversation) DO UPDATE
              SET injections = e.injections + excluded.injections,
                  last_at = greatest(e.last_at, excluded.last_at)""",
        *cols,
    )
    return int(result.split()[-1])


async def mark_noticed(store: Store, notices: Sequence[tuple[str, str, str]], at: datetime) -> None:
    """(lineage_id, key_name, conversation): the conversation was told its memory was retracted."""
    if not notices:
        return
    await store._pool.execute(
        """UPDATE memory_exposures e SET noticed_at = $4
             FROM unnest($1::text[], $2::text[], $3::text[]) AS n(lineage, key, conv)
            WHERE e.lineage_id = n.lineage AND e.key_name = n.key AND e.conversation = n.conv
              AND e.noticed_at IS NULL""",
        [n[0] for n in notices],
        [n[1] for n in notices],
        [n[2] for n in notices],
        at,
    )


async def fingerprint(store: Store, days: int) -> tuple[Any, ...]:
    """Changes whenever a retraction or a restore is recorded (one index range of `events`)."""
    row = await store._pool.fetchrow(
        "SELECT count(*) AS n, max(id) AS top FROM events WHERE type = ANY($1::text[]) "
        "AND created_at > now() - make_interval(days => $2)",
        _TYPES,
        days,
    )
    return (row["n"], row["top"]) if row else (0, None)


async def retractions(store: Store, days: int) -> list[Row]:
    """The lineages an owner retracted in the last `days` and did not restore since: lineage_id,
    memory_id, action, reason, by, at (newest event per lineage decides)."""
    rows = await store._pool.fetch(
        """SELECT * FROM (
             SELECT DISTINCT ON (payload->>'lineage_id') payload->>'lineage_id' AS lineage_id,
                    payload->>'id' AS memory_id, type, coalesce(payload->>'reason', '') AS reason,
                    key_name AS by, payload->>'by_role' AS by_role, namespace, created_at AS at
               FROM events
              WHERE type = ANY($1::text[]) AND created_at > now() - make_interval(days => $2)
              ORDER BY payload->>'lineage_id', id DESC) latest
           WHERE type <> $3 AND by_role = 'owner' AND lineage_id IS NOT NULL""",
        _TYPES,
        days,
        RESTORED,
    )
    return [{**dict(r), "action": ACTIONS.get(r["type"], r["type"])} for r in rows]


async def unnoticed(store: Store, lineages: Sequence[str], limit: int) -> list[Row]:
    """Conversations given one of `lineages` and not told yet: key_name, conversation, lineage_id,
    memory_id (the version they were given; the newest when several)."""
    if not lineages:
        return []
    rows: list[Row] = await store._pool.fetch(
        """SELECT DISTINCT ON (key_name, conversation, lineage_id) key_name, conversation, lineage_id, memory_id
             FROM memory_exposures WHERE lineage_id = ANY($1::text[]) AND noticed_at IS NULL
            ORDER BY key_name, conversation, lineage_id, version DESC LIMIT $2""",
        list(lineages),
        limit,
    )
    return rows


async def prune(store: Store, days: int, batch: int = 10_000) -> int:
    """Delete receipts not renewed in `days`, in batches; how many went."""
    total = 0
    while True:
        result = await store._pool.execute(
            """DELETE FROM memory_exposures WHERE ctid IN (
                 SELECT ctid FROM memory_exposures WHERE last_at < now() - make_interval(days => $1) LIMIT $2)""",
            days,
            batch,
        )
        n = int(result.split()[-1])
        total += n
        if n < batch:
            return total


async def of_lineage(store: Store, lineage_id: str, limit: int = 500) -> list[Row]:
    """Every receipt of a lineage, newest first: memory_id, version, key_name, conversation, api,
    injections, first_at, last_at, noticed_at."""
    rows: list[Row] = await store._pool.fetch(
        """SELECT memory_id, version, key_name, conversation, api, injections, first_at, last_at, noticed_at
             FROM memory_exposures WHERE lineage_id = $1 ORDER BY last_at DESC, conversation LIMIT $2""",
        lineage_id,
        limit,
    )
    return rows


async def retracted_between(
    store: Store, start: datetime, end: datetime, namespace: str | None = None
) -> list[Row]:
    """Owner retractions recorded in [start, end) (of one namespace), one per lineage (the newest),
    with how many conversations had been given the memory and how many were told: memory_id, action,
    reason, at, conversations, noticed. A lineage restored since is left out."""
    rows: list[Row] = await store._pool.fetch(
        """SELECT r.memory_id, r.type, r.reason, r.at,
                  (SELECT count(DISTINCT (e.key_name, e.conversation)) FROM memory_exposures e
                    WHERE e.lineage_id = r.lineage_id) AS conversations,
                  (SELECT count(DISTINCT (e.key_name, e.conversation)) FROM memory_exposures e
                    WHERE e.lineage_id = r.lineage_id AND e.noticed_at IS NOT NULL) AS noticed
             FROM (SELECT DISTINCT ON (payload->>'lineage_id') payload->>'lineage_id' AS lineage_id,
                          payload->>'id' AS memory_id, type, coalesce(payload->>'reason', '') AS reason,
                          payload->>'by_role' AS by_role, created_at AS at
                     FROM events
                    WHERE type = ANY($1::text[]) AND created_at >= $2 AND created_at < $3"""
        + ("" if namespace is None else " AND namespace = $5")
        + """
                    ORDER BY payload->>'lineage_id', id DESC) r
            WHERE r.type <> $4 AND r.by_role = 'owner' AND r.lineage_id IS NOT NULL
            ORDER BY r.at""",
        _TYPES,
        start,
        end,
        RESTORED,
        *(() if namespace is None else (namespace,)),
    )
    return rows


async def retraction_namespaces(store: Store, start: datetime, end: datetime) -> list[str]:
    """Namespaces where an owner retracted something in [start, end)."""
    rows = await store._pool.fetch(
        "SELECT DISTINCT namespace FROM events WHERE type = ANY($1::text[]) AND created_at >= $2 "
        "AND created_at < $3 AND payload->>'by_role' = 'owner' AND namespace IS NOT NULL",
        list(RETRACTED),
        start,
        end,
    )
    return [str(r["namespace"]) for r in rows]
