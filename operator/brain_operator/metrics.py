"""Prometheus metrics of the operator and the ``/metrics`` + ``/healthz`` HTTP server."""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from brain_operator.render.names import brain_label

RECONCILE_TOTAL = Counter(
    "brain_operator_reconcile_total",
    "Reconciles by resource kind and result (ok, noop, error).",
    ["kind", "result"],
)
RECONCILE_DURATION = Histogram(
    "brain_operator_reconcile_duration_seconds",
    "Time spent in one reconcile.",
    ["kind"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RECONCILE_ERRORS = Counter("brain_operator_reconcile_errors_total", "Failed reconciles.", ["kind", "reason"])
API_WRITES = Counter(
    "brain_operator_api_writes_total",
    "Write calls to the API server (apply, create, delete, status).",
    ["verb", "kind"],
)
OPERATOR_HEALTHY = Gauge(
    "brain_operator_healthy", "1 while the operator process serves (its event loop answers)."
)
OPERATOR_LAST_SUCCESS = Gauge(
    "brain_operator_last_success_timestamp_seconds", "Unix time of the last successful reconcile."
)
# `memory_namespace`, not `namespace`: Prometheus sets `namespace` on every scraped target (the pod's).
INDEX_ENTRIES = Gauge("brain_index_entries", "Live index entries.", ["brain", "memory_namespace", "kind"])
INDEX_STALE = Gauge("brain_index_stale_entries", "Entries past their review date.", ["brain"])
INDEX_EMBEDDED_RATIO = Gauge("brain_index_embedded_ratio", "Share of entries with an embedding.", ["brain"])
INDEX_PENDING = Gauge("brain_index_pending_proposals", "Proposals awaiting an owner.", ["brain"])
BRAIN_READY = Gauge("brain_ready", "1 when the Brain's Ready condition is True.", ["brain"])
REINDEX_DONE = Gauge(
    "brain_index_reindex_done", "Entries a running model migration has embedded so far.", ["brain"]
)
REINDEX_TOTAL = Gauge(
    "brain_index_reindex_total", "Entries a running model migration must embed (0: none runs).", ["brain"]
)

# spec.backup (render/backup.py): the alerts BrainBackupFailed and BrainBackupMissing read these.
BACKUP_LAST_SUCCESS = Gauge(
    "brain_backup_last_success_timestamp_seconds",
    "Unix time of the last good backup (a Brain never backed up counts from its creation).",
    ["brain"],
)
BACKUP_LAST_FAILED = Gauge(
    "brain_backup_last_run_failed", "1 when the newest backup run failed, else 0.", ["brain"]
)
BACKUP_MAX_AGE = Gauge(
    "brain_backup_max_age_seconds",
    "spec.backup.maxAgeHours in seconds: an older last backup is missed.",
    ["brain"],
)
_BACKUP_GAUGES = (BACKUP_LAST_SUCCESS, BACKUP_LAST_FAILED, BACKUP_MAX_AGE)


def _epoch(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def set_backup(namespace: str, name: str, max_age_hours: int | None, index: Any, created: str | None) -> None:
    """The backup series of a Brain with spec.backup (`max_age_hours`); none without it."""
    label = brain_label(namespace, name)
    if max_age_hours is None:
        for gauge in _BACKUP_GAUGES:
            with contextlib.suppress(KeyError):
                gauge.remove(label)
        return
    BACKUP_MAX_AGE.labels(brain=label).set(max_age_hours * 3600)
    if index is None:
        return  # the gateway was not read: keep what was last known
    last = _epoch(index.last_backup) or _epoch(created)
    if last is not None:
        BACKUP_LAST_SUCCESS.labels(brain=label).set(last)
    BACKUP_LAST_FAILED.labels(brain=label).set(1 if index.last_backup_result == "failed" else 0)


def forget_brain(namespace: str, name: str) -> None:
    """Drop every series of a Brain: it was deleted, or peering paused this replica."""
    label = brain_label(namespace, name)
    for gauge in (INDEX_STALE, INDEX_EMBEDDED_RATIO, INDEX_PENDING, BRAIN_READY, REINDEX_DONE, REINDEX_TOTAL,
                  *_BACKUP_GAUGES):  # fmt: skip
        with contextlib.suppress(KeyError):
            gauge.remove(label)
    for labels in list(INDEX_ENTRIES._metrics):  # prometheus-client exposes no public iterator
        if labels[0] == label:
            INDEX_ENTRIES.remove(*labels)


def set_index(
    namespace: str, name: str, by_kind: dict[str, int], by_namespace: dict[str, int], index: Any
) -> None:
    """``brain_index_entries`` per kind (memory_namespace="*") and per memory namespace (kind="*")."""
    label = brain_label(namespace, name)
    for labels in list(INDEX_ENTRIES._metrics):
        if labels[0] == label:
            INDEX_ENTRIES.remove(*labels)
    for kind, count in by_kind.items():
        INDEX_ENTRIES.labels(brain=label, memory_namespace="*", kind=kind).set(count)
    for ns, count in by_namespace.items():
        INDEX_ENTRIES.labels(brain=label, memory_namespace=ns, kind="*").set(count)
    if index.stale_entries is not None:
        INDEX_STALE.labels(brain=label).set(index.stale_entries)
    if index.embedded_ratio is not None:
        INDEX_EMBEDDED_RATIO.labels(brain=label).set(index.embedded_ratio)
    if index.pending_proposals is not None:
        INDEX_PENDING.labels(brain=label).set(index.pending_proposals)


class HealthState:
    """What ``/healthz`` reports. Liveness means "the event loop answers": the handler runs on the
    loop kopf runs on, so a blocked or dead loop fails the probe by its timeout. It does not mean
    "recently reconciled": an idle operator (nothing changed) and the paused standby of a peering
    pair reconcile nothing for hours, and a staleness rule restarted both every few minutes.
    The age of the last reconcile stays visible (body, ``brain_operator_last_success_timestamp_seconds``)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.last_ok: float | None = None

    def ok(self) -> None:
        self.last_ok = time.monotonic()
        OPERATOR_LAST_SUCCESS.set(time.time())

    def report(self) -> dict[str, Any]:
        now = time.monotonic()
        age = None if self.last_ok is None else round(now - self.last_ok, 1)
        return {"status": "ok", "uptimeSeconds": round(now - self.started, 1), "lastReconcileAgeSeconds": age}


async def start_http_server(host: str, port: int, health: HealthState) -> web.AppRunner:
    """Serve ``/metrics`` and ``/healthz``; returns the runner so the caller can stop it."""

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response(health.report())

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    OPERATOR_HEALTHY.set(1)
    return runner
