"""The `job_runs` table: one row per ingest/distill/digest run (the operator's last-success status)."""

from __future__ import annotations

import json
from typing import Any

from brain.store.store import Store


async def start(store: Store, job: str, source: str | None = None) -> int:
    return int(
        await store._pool.fetchval(
            "INSERT INTO job_runs (job, source) VALUES ($1, $2) RETURNING id", job, source
        )
    )


async def finish(store: Store, run_id: int, status: str, summary: dict[str, Any]) -> None:
    """status: ok | deferred | failed. Only `ok` runs count as the last ingest/distill/digest."""
    await store._pool.execute(
        "UPDATE job_runs SET finished_at = now(), status = $2, summary = $3::jsonb WHERE id = $1",
        run_id,
        status,
        json.dumps(summary, default=str),
    )
