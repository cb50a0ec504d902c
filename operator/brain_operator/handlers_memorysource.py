"""kopf wiring for MemorySources: re-render the Brain's ingest CronJob; read finished Jobs' results."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from brain_operator import GROUP, VERSION
from brain_operator.metrics import RECONCILE_TOTAL
from brain_operator.render.common import MANAGED_BY, SOURCE_LABEL
from brain_operator.runtime import get_runtime


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.event(GROUP, VERSION, "memorysources", registry=registry, id="memorysource-event")
    async def source_event(spec: Any, namespace: str | None, **_: Any) -> None:
        brain = (spec.get("brainRef") or {}).get("name")
        if brain and namespace:
            get_runtime().queue.enqueue(namespace, brain)

    @kopf.on.event(
        "batch",
        "v1",
        "jobs",
        labels={"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "ingest"},
        registry=registry,
        id="ingest-job",
    )
    async def ingest_job(body: Any, labels: Any, **_: Any) -> None:
        if not labels.get(SOURCE_LABEL):
            return
        rt = get_runtime()
        wrote = await asyncio.to_thread(rt.reconciler.record_ingest, dict(body), rt.emit)
        if wrote:
            RECONCILE_TOTAL.labels(kind="MemorySource", result="ok").inc()
