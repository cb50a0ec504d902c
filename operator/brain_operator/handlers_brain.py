"""kopf wiring for Brains and their children. Thin: every handler only enqueues or polls.

- any Brain event → reconcile that Brain (debounced);
- any event of a child we manage (Deployment status, a deleted Service, ...) → reconcile its Brain,
  which restores drift and refreshes readiness;
- a resync timer → reconcile (catches drift on kinds we do not watch: Secrets, ConfigMaps);
- a health timer → read the gateway's /brain/v1/health, and reconcile when the answer changed;
- a per-Brain daemon that only waits: kopf stops it when peering pauses this replica, and then
  this replica's gauges of that Brain are dropped (see `drops_series`).

Timers make kopf put a finalizer on each Brain; deleting a Brain while no operator runs waits
for one to come back (or for the finalizer to be removed by hand).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from brain_operator import GROUP, VERSION
from brain_operator.config import OperatorConfig
from brain_operator.health import fetch_health
from brain_operator.render.common import BRAIN_LABEL, MANAGED_BY
from brain_operator.runtime import get_runtime

log = logging.getLogger("brain_operator.handlers")

#: Children whose changes are watched (cheap kinds; Secrets and ConfigMaps are left to the resync).
WATCHED_CHILDREN = (
    ("apps", "v1", "deployments"),
    ("apps", "v1", "statefulsets"),
    ("", "v1", "services"),
    ("batch", "v1", "cronjobs"),
    ("networking.k8s.io", "v1", "networkpolicies"),
    ("policy", "v1", "poddisruptionbudgets"),
)
MANAGED = {"app.kubernetes.io/managed-by": MANAGED_BY}


def drops_series(reason: kopf.DaemonStoppingReason | None) -> bool:
    """A replica that peering pauses stops reconciling but would keep serving the last
    ``brain_index_*`` and ``brain_ready`` values it set: after a hand-over both replicas export the
    Brain, one of them frozen, and a ``sum()`` over the Deployment counts it twice. Only a pause
    drops them; a deleted Brain is forgotten by the reconciler, an exiting process takes its
    series with it."""
    return reason is not None and bool(reason & kopf.DaemonStoppingReason.OPERATOR_PAUSING)


def register(registry: kopf.OperatorRegistry, cfg: OperatorConfig) -> None:
    @kopf.on.event(GROUP, VERSION, "brains", registry=registry, id="brain-event")
    async def brain_event(name: str, namespace: str | None, **_: Any) -> None:
        if namespace:
            get_runtime().queue.enqueue(namespace, name)

    @kopf.timer(GROUP, VERSION, "brains", interval=cfg.resync_seconds, registry=registry, id="resync")
    async def resync(name: str, namespace: str | None, **_: Any) -> None:
        if namespace:
            await get_runtime().queue.run(namespace, name)

    @kopf.timer(
        GROUP,
        VERSION,
        "brains",
        interval=cfg.health_seconds,
        initial_delay=1.0,
        registry=registry,
        id="index-health",
    )
    async def index_health(name: str, namespace: str | None, annotations: Any, **kw: Any) -> None:
        if not namespace:
            return
        rt = get_runtime()
        url = rt.cfg.health_url(name, namespace, dict(annotations))
        master_key = None  # only the operator-rendered gateway URL ever gets the key
        if rt.cfg.health_url_is_gateway(name, namespace, dict(annotations)):
            master_key = await asyncio.to_thread(rt.reconciler.master_key, dict(kw.get("body") or {}))
        health = await fetch_health(url, key=master_key)
        if kw.get("stopped"):  # kopf passes timers their stop flag too (TimerFn does not say so)
            # Paused by peering while reading: kopf leaves a timer that overruns orphaned, and its
            # reconcile would set this standby's gauges again (seen on real pods after a hand-over).
            return
        key = (namespace, name)
        if rt.reconciler.health.get(key) != health:
            rt.reconciler.health[key] = health
            await rt.queue.run(namespace, name)

    @kopf.daemon(GROUP, VERSION, "brains", registry=registry, id="active-series", cancellation_timeout=5.0)
    async def active_series(name: str, namespace: str | None, stopped: kopf.DaemonStopped, **_: Any) -> None:
        if not namespace:
            return
        rt = get_runtime()
        rt.queue.resume(namespace, name)  # kopf (re)spawns daemons only while this replica is active
        await stopped.wait()
        if drops_series(stopped.reason):
            rt.queue.pause(namespace, name)
            # Forget the last health answer too: after resuming, the first read differs from
            # "nothing" and reconciles, which sets the gauges again from fresh figures.
            rt.reconciler.health.pop((namespace, name), None)
            log.info("paused by peering: dropped this replica's series of %s/%s", namespace, name)

    for group, version, plural in WATCHED_CHILDREN:

        @kopf.on.event(group, version, plural, labels=MANAGED, registry=registry, id=f"child-{plural}")
        async def child_event(labels: Any, namespace: str | None, **_: Any) -> None:
            brain = labels.get(BRAIN_LABEL)
            if brain and namespace:
                get_runtime().queue.enqueue(namespace, brain)
