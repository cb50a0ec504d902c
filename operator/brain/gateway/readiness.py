"""Is the gateway's memory there: the database watch and `/health`, through public interfaces only.

`/health` asks the store for its index numbers and the embedding client whether it is ready
(`EmbeddingClient.ready`, whose transport tests inject), so a check never reaches into a client's
private parts. `DatabaseWatch` turns a retrieval that ran out of budget into one probe, so a hung
database costs the budget once rather than on every request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from brain.embedder.client import EmbeddingClient
from brain.embedder.model import Embedder
from brain.store.store import Store

log = logging.getLogger("brain.gateway")


class DatabaseWatch:
    """Whether the database answers at all, so a hang costs the retrieval budget once, not per request.

    A retrieval that runs out of budget may have been slow for any reason (the embedder, load), so it
    only raises a suspicion: a probe (`SELECT 1` within `probe_timeout`) then decides. While probes
    go unanswered the database counts as hung and retrieval is skipped at once (`db_down`); the
    first answered probe ends that. A refused connection needs none of this: it fails fast anyway.
    """

    def __init__(self, probe_timeout: float = 1.0, interval: float = 0.5) -> None:
        self.probe_timeout = probe_timeout
        self.interval = interval
        self.hung = False
        self._probe: asyncio.Task[None] | None = None

    def suspect(self, store: Store | None) -> None:
        if store is not None and (self._probe is None or self._probe.done()):
            self._probe = asyncio.create_task(self._watch(store))

    async def _watch(self, store: Store) -> None:
        while True:
            try:
                await asyncio.wait_for(store.ping(), self.probe_timeout)
            except Exception:
                if not self.hung:
                    log.warning("the database does not answer; retrieval is skipped until it does")
                self.hung = True
                await asyncio.sleep(self.interval)
                continue
            if self.hung:
                log.warning("the database answers again; retrieval resumes")
            self.hung = False
            return

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.cancel()


async def health(
    store: Store | None,
    watch: DatabaseWatch,
    embedder: Embedder | None,
    client: EmbeddingClient | None,
) -> dict[str, Any]:
    """`status` ok only when both the database and the embedder answer; `index` is the store's numbers."""
    database, index = "down", None
    if store is not None and not watch.hung:  # hung: say so now, not after 3 s
        try:
            index = await asyncio.wait_for(store.index_stats(), 3)
            database = "ok"
        except Exception:
            database = "down"
    embedder_state = await embedder_health(embedder, client)
    status = "ok" if database == "ok" and embedder_state == "ok" else "degraded"
    return {"status": status, "database": database, "embedder": embedder_state, "index": index}


def public_health(doc: dict[str, Any]) -> dict[str, Any]:
    """The health anyone may read: no memory namespace names (they name teams and projects)."""
    index = doc.get("index")
    if not isinstance(index, dict):
        return doc
    private = ("entries", "entriesByNamespace")
    return {**doc, "index": {k: v for k, v in index.items() if k not in private}}


async def embedder_health(embedder: Embedder | None, client: EmbeddingClient | None) -> str:
    """A remote embedder is asked (`ready`); an in-process one is ok once loaded."""
    if client is None:
        return "ok" if embedder is not None else "down"
    try:
        return "ok" if await client.ready(timeout=2.0) else "down"
    except Exception:
        return "down"
