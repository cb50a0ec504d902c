"""The operator's in-process machinery: a per-Brain work queue in front of the reconciler.

kopf delivers events (Brain, children, MemorySource, RoutingPolicy); each event only *enqueues*
its Brain. The queue coalesces bursts (debounce), runs at most one reconcile per Brain at a time
(in a worker thread; the Kubernetes client blocks), retries failures with capped exponential
backoff, and records metrics. Because reconciles are level-triggered, coalescing loses nothing.

When peering pauses this replica, its Brains are marked paused here: kopf still delivers events
that sneaked in while pausing (kopf #1266), and a reconcile already running finishes after the
pause, so both would set the gauges of a Brain this replica no longer serves. A paused Brain is
not reconciled, and a reconcile that finishes after the pause drops what it set.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from brain_operator.config import OperatorConfig
from brain_operator.kube import Kube, KubeError
from brain_operator.metrics import (
    RECONCILE_DURATION,
    RECONCILE_ERRORS,
    RECONCILE_TOTAL,
    HealthState,
    forget_brain,
)
from brain_operator.reconciler import Emit, Reconciler, Result

log = logging.getLogger("brain_operator.runtime")
Key = tuple[str, str]


class WorkQueue:
    def __init__(
        self,
        reconcile: Callable[[str, str, Emit], Result | None],
        emit: Emit,
        health: HealthState,
        debounce: float = 0.2,
        max_backoff: float = 60.0,
    ) -> None:
        self._reconcile = reconcile
        self._emit = emit
        self._health = health
        self.debounce = debounce
        self.max_backoff = max_backoff
        self._locks: dict[Key, asyncio.Lock] = {}
        self._pending: dict[Key, asyncio.Task[None]] = {}
        self._failures: dict[Key, int] = {}
        self._paused: set[Key] = set()

    def pause(self, namespace: str, name: str) -> None:
        """Peering paused this replica: stop reconciling the Brain and drop its series."""
        self._paused.add((namespace, name))
        forget_brain(namespace, name)

    def resume(self, namespace: str, name: str) -> None:
        self._paused.discard((namespace, name))

    def enqueue(self, namespace: str, name: str, delay: float | None = None) -> None:
        """Ask for a reconcile soon; a request already waiting absorbs this one."""
        key = (namespace, name)
        task = self._pending.get(key)
        if task is not None and not task.done():
            return
        self._pending[key] = asyncio.create_task(self._later(key, self.debounce if delay is None else delay))

    async def _later(self, key: Key, delay: float) -> None:
        await asyncio.sleep(delay)
        self._pending.pop(key, None)  # events arriving from now on schedule another pass
        await self.run(*key)

    async def run(self, namespace: str, name: str) -> Result | None:
        """Reconcile now (waiting for a running reconcile of the same Brain to finish first);
        nothing while peering pauses this replica for the Brain."""
        key = (namespace, name)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._paused:  # checked under the lock: a pause may come while waiting for it
                return None
            started = time.perf_counter()
            try:
                result = await asyncio.to_thread(self._reconcile, namespace, name, self._emit)
            except Exception as exc:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                reason = f"http{exc.status}" if isinstance(exc, KubeError) else type(exc).__name__
                RECONCILE_TOTAL.labels(kind="Brain", result="error").inc()
                RECONCILE_ERRORS.labels(kind="Brain", reason=reason).inc()
                backoff = min(self.max_backoff, 2.0 ** min(failures, 10))
                log.warning("reconcile %s/%s failed (%s); retry in %.0fs", namespace, name, exc, backoff)
                self.enqueue(namespace, name, delay=backoff)
                return None
            finally:
                RECONCILE_DURATION.labels(kind="Brain").observe(time.perf_counter() - started)
                if key in self._paused:  # paused while this reconcile ran: it set the gauges again
                    forget_brain(namespace, name)
            self._failures.pop(key, None)
            self._health.ok()
            if result is None:
                self._locks.pop(key, None)
                RECONCILE_TOTAL.labels(kind="Brain", result="gone").inc()
            else:
                RECONCILE_TOTAL.labels(kind="Brain", result="ok" if result.wrote else "noop").inc()
            return result


class Runtime:
    """Everything the handlers share; built once at operator startup."""

    def __init__(self, cfg: OperatorConfig, kube: Kube, emit: Emit) -> None:
        self.cfg = cfg
        self.kube = kube
        self.health_state = HealthState()
        self.reconciler = Reconciler(kube, cfg)
        self.emit = emit
        self.queue = WorkQueue(self.reconciler.reconcile, emit, self.health_state)
        self.http_runner: Any = None


_RUNTIME: Runtime | None = None


def set_runtime(rt: Runtime | None) -> None:
    global _RUNTIME
    _RUNTIME = rt


def get_runtime() -> Runtime:
    if _RUNTIME is None:
        raise RuntimeError("the operator runtime is not started")
    return _RUNTIME
