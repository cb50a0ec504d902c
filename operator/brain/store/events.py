"""Events, access tracking and the index numbers `Brain.status.index` and /health show."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from brain.store import reindex
from brain.store.base import (
    StoreBase,
)


class Events(StoreBase):
    """The audit/event log, access counts, and the index numbers."""

    async def touch(self, ids: Sequence[str]) -> None:
        if ids:
            await self._pool.execute(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = now() "
                "WHERE id = ANY($1::text[])",
                list(ids),
            )

    async def record_event(
        self, type_: str, *, key_name: str | None, namespace: str | None, payload: dict
    ) -> None:
        await self._pool.execute(
            "INSERT INTO events (type, key_name, namespace, payload) VALUES ($1, $2, $3, $4::jsonb)",
            type_,
            key_name,
            namespace,
            json.dumps(payload, default=str),
        )

    async def index_stats(self, stale_days: int = 90) -> dict[str, Any]:
        """The numbers `Brain.status.index` shows; cheap enough for a health endpoint."""
        async with self._pool.acquire() as conn:
            by = await conn.fetch(
                "SELECT namespace, kind, count(*) AS n, count(embedding) AS e, "
                f"count(*) FILTER (WHERE embedding IS NULL AND NOT {reindex.PURGED}) AS bare FROM memories "
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
            # spec.backup's runs (render/backup.py): the newest run's result, the last good one's time and size
            newest_backup = await conn.fetchval(
                "SELECT status FROM job_runs WHERE job = 'backup' AND status IN ('ok', 'failed')"
                " ORDER BY finished_at DESC NULLS LAST, id DESC LIMIT 1"
            )
            good_backup = await conn.fetchrow(
                "SELECT finished_at, summary->>'bytes' AS bytes FROM job_runs WHERE job = 'backup'"
                " AND status = 'ok' ORDER BY finished_at DESC NULLS LAST, id DESC LIMIT 1"
            )
            live_model = await conn.fetchval("SELECT value FROM brain_meta WHERE key = 'embedding_model'")
            reindexing = await reindex.running(conn)
        by_kind: dict[str, int] = {}
        by_ns: dict[str, int] = {}
        total = embedded = bare = 0
        for r in by:
            by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + r["n"]
            by_ns[r["namespace"]] = by_ns.get(r["namespace"], 0) + r["n"]
            total += r["n"]
            embedded += r["e"]
            bare += r["bare"]  # what a fill can still embed: a restored purged entry stays without one
        last = {r["job"]: r["at"].isoformat() if r["at"] else None for r in runs}
        return {
            "entries": [{"namespace": r["namespace"], "kind": r["kind"], "count": r["n"]} for r in by],
            "entriesByKind": by_kind,
            "entriesByNamespace": by_ns,
            "embeddedRatio": round(embedded / total, 4) if total else 1.0,
            "entriesWithoutVector": bare,  # exact (the ratio rounds one in 20k away): wakes the mend
            "staleEntries": int(stale),
            "pendingProposals": int(pending),
            "lastIngest": last.get("ingest"),
            "lastDistill": last.get("distill"),
            "lastDigest": last.get("digest"),
            "lastBackup": good_backup["finished_at"].isoformat() if good_backup else None,
            "lastBackupResult": newest_backup,
            "lastBackupBytes": int(good_backup["bytes"]) if good_backup and good_backup["bytes"] else None,
            "embeddingModel": self.embedding_model,
            "embeddingDim": self.dim,
            "liveModel": live_model,
            "reindex": reindexing,
        }
