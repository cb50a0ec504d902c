"""What waits for an owner, and the latest digest's numbers, on the gateway's `/metrics`.

Prometheus scrapes the gateway, not the jobs: the digest is a CronJob that exits before any scrape,
so its gauges, set in the job's process, were never seen. The gateway reads both figures from the
database on its own clock (`BRAIN_BACKLOG_REFRESH_S`, 30 s by default), never on a scrape, so a
scrape costs no query and a slow database cannot stall it:

- `brain_proposals_pending`: proposals waiting for an owner;
- `brain_proposals_oldest_pending_age_seconds`: how long the oldest of them has waited, computed at
  scrape time from the stored creation time, so it keeps growing between refreshes (0 when none wait);
- `brain_digest_*` (defined in `brain.services.digests`): the newest stored digest's figures.

No labels: per memory namespace would name teams on the public `/metrics` (docs/security.md). The
scrape adds `namespace` and `job`, which say which Brain.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brain.gateway.settings import refresh_interval
from brain.services import digests
from brain.store import proposal_rows

log = logging.getLogger("brain.gateway.backlog")


@dataclass(frozen=True)
class Backlog:
    pending: int
    oldest_created: float | None  # unix time of the oldest pending proposal


async def read_backlog(store: Any) -> Backlog:
    pending, oldest = await proposal_rows.backlog(store)
    return Backlog(pending=pending, oldest_created=oldest)


def oldest_age(backlog: Backlog | None, now: float) -> float:
    if backlog is None or backlog.oldest_created is None:
        return 0.0
    return max(0.0, now - backlog.oldest_created)


class BacklogCollector(Collector):
    def __init__(self, source: Callable[[], Backlog | None], clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        backlog = self.source()
        pending = GaugeMetricFamily("brain_proposals_pending", "Proposals waiting for an owner's decision.")
        age = GaugeMetricFamily(
            "brain_proposals_oldest_pending_age_seconds",
            "How long the oldest pending proposal has waited for an owner (0 when none wait).",
        )
        if backlog is not None:  # nothing read yet (database not reached): no sample, not a false 0
            pending.add_metric([], float(backlog.pending))
            age.add_metric([], oldest_age(backlog, self.clock()))
        yield pending
        yield age


class BacklogWatch:
    """Keeps `latest` fresh from the database; one per gateway process."""

    def __init__(self, store: Callable[[], Any], interval: float | None = None) -> None:
        self.store = store
        self.interval = interval if interval is not None else refresh_interval()
        self.latest: Backlog | None = None

    async def refresh(self) -> None:
        store = self.store()
        if store is None:
            return
        self.latest = await read_backlog(store)
        latest = await digests.latest_digest(store)
        if latest is not None:
            digests.set_metrics(latest["gauges"])

    async def run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.refresh(), 10)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the database is down: keep the last figures, try again
                log.debug("backlog refresh failed: %s", e)
            await asyncio.sleep(self.interval)


_collector: BacklogCollector | None = None


@contextlib.asynccontextmanager
async def watching(store: Callable[[], Any]) -> AsyncIterator[BacklogWatch]:
    """Register the collector (once per process) and refresh it until the gateway stops."""
    global _collector
    watch = BacklogWatch(store)
    if _collector is None:
        _collector = BacklogCollector(lambda: watch.latest)
        REGISTRY.register(_collector)
    else:
        _collector.source = lambda: watch.latest
    task = asyncio.create_task(watch.run())
    try:
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
