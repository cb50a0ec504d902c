"""The digest's read door: the newest stored digest and the gauges its numbers set.

Both the digest job (after it writes one) and the gateway's `GET /brain/v1/digest/latest` (which
refreshes the gauges of its own process) use it; the job itself (jobs.digest) writes through
MemoryService like every other writer.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Gauge

from brain.store import digest_rows
from brain.store.store import Store

hit_rate_gauge = Gauge(
    "brain_digest_retrieval_hit_rate", "Share of retrievals that found memory (last digest)."
)
acceptance_gauge = Gauge(
    "brain_digest_proposal_acceptance_rate", "Approved / decided proposals (last digest)."
)
stale_gauge = Gauge("brain_digest_stale_memories", "Active memories never retrieved in the stale window.")
no_hit_gauge = Gauge("brain_digest_no_hit_queries", "Retrievals that found nothing (last digest week).")


def set_metrics(stats: dict[str, Any]) -> None:
    """The digest gauges, from a stats dict (the job's, or a stored digest's attrs in the gateway)."""
    if stats.get("hitRate") is not None:
        hit_rate_gauge.set(stats["hitRate"])
    if stats.get("acceptanceRate") is not None:
        acceptance_gauge.set(stats["acceptanceRate"])
    stale_gauge.set(sum((stats.get("staleByKind") or {}).values()))
    no_hit_gauge.set(stats.get("noHits") or 0)


async def latest_digest(store: Store, namespace: str | None = None) -> dict[str, Any] | None:
    """For `brainctl digest --show`: the newest digest's Markdown and numbers (of one namespace)."""
    r = await digest_rows.latest(store, namespace)
    if r is None:
        return None
    stats = r["attrs"].get("stats", {})
    # `gauges`: the figures over every namespace (counts only), which each namespace's digest carries
    return {"id": r["id"], "title": r["title"], "markdown": r["body"], "stats": stats,
            "gauges": r["attrs"].get("overall") or stats, "created_at": r["created_at"]}  # fmt: skip
