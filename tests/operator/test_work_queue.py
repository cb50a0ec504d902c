"""The work queue when peering pauses this replica: the paused replica must stop exporting the
Brain's series even if a reconcile was running or queued at that moment (kopf delivers events that
sneak in while pausing). Otherwise a Deployment-wide sum() counts the Brain twice, one of them
frozen (the CI failure of test_ha's paused-replica test)."""

from __future__ import annotations

import asyncio
import threading

from prometheus_client import generate_latest

from brain_operator.config import OperatorConfig
from brain_operator.metrics import HealthState
from brain_operator.reconciler import Emit, Reconciler, Result
from brain_operator.runtime import WorkQueue

from .fakekube import FakeKube
from .helpers import sample

NS = "team-ns"
SERIES = f'brain="{NS}/team"'


def exported() -> str:
    return generate_latest().decode()


def queue_over_real_reconciler() -> tuple[WorkQueue, list[str], threading.Event, threading.Event]:
    """A queue whose reconcile is the real Reconciler on the fake API, held at its start until
    `release` is set (so a test can pause the replica while it runs)."""
    kube = FakeKube()
    kube.put(sample("brain.yaml"))
    rec = Reconciler(kube, OperatorConfig())  # type: ignore[arg-type]
    calls: list[str] = []
    running, release = threading.Event(), threading.Event()

    def reconcile(namespace: str, name: str, emit: Emit) -> Result | None:
        calls.append(name)
        running.set()
        release.wait(timeout=10)
        return rec.reconcile(namespace, name, emit)

    return WorkQueue(reconcile, lambda *a, **k: None, HealthState(), debounce=0.01), calls, running, release


async def test_a_reconcile_that_finishes_after_the_pause_leaves_no_series() -> None:
    queue, _, running, release = queue_over_real_reconciler()
    release.set()
    await queue.run(NS, "team")
    assert SERIES in exported()  # the active replica exports brain_ready
    release.clear()
    running.clear()

    inflight = asyncio.create_task(queue.run(NS, "team"))
    await asyncio.to_thread(running.wait, 5)
    queue.pause(NS, "team")
    assert SERIES not in exported()
    release.set()
    await inflight
    assert SERIES not in exported(), "the reconcile running at the pause set the gauges again"


async def test_a_paused_brain_is_not_reconciled_until_resumed() -> None:
    queue, calls, _, release = queue_over_real_reconciler()
    release.set()
    queue.pause(NS, "team")
    queue.enqueue(NS, "team")  # an event that sneaked in while pausing
    await queue.run(NS, "team")  # a timer that fired at the same moment
    await asyncio.sleep(0.1)
    assert calls == [] and SERIES not in exported()

    queue.resume(NS, "team")
    await queue.run(NS, "team")
    assert calls == ["team"] and SERIES in exported()
