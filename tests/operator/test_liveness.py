"""The operator's /healthz means "the event loop answers", not "reconciled recently": an idle
operator and the paused standby replica reconcile nothing for hours and must not be restarted."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from brain_operator.metrics import HealthState, start_http_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """The real /healthz server on its own event loop, in a thread, like kopf's loop in the pod."""

    def __init__(self, health: HealthState) -> None:
        self.port = _free_port()
        self.loop = asyncio.new_event_loop()
        self.health = health
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Served:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(
            start_http_server("127.0.0.1", self.port, self.health), self.loop
        )
        self.runner = fut.result(timeout=10)
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    def get(self, timeout: float = 5.0) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=timeout)


@pytest.fixture
def served() -> Iterator[Served]:
    with Served(HealthState()) as s:
        yield s


def test_idle_operator_stays_live_long_after_its_last_reconcile(served: Served) -> None:
    served.health.ok()
    served.health.last_ok = time.monotonic() - 6 * 3600  # six idle hours (the old rule: 300 s)
    rsp = served.get()
    assert rsp.status_code == 200, rsp.text
    assert rsp.json()["status"] == "ok" and rsp.json()["lastReconcileAgeSeconds"] >= 6 * 3600


def test_standby_that_never_reconciled_is_live(served: Served) -> None:
    served.health.started = time.monotonic() - 3600  # a paused peering standby, up for an hour
    rsp = served.get()
    assert rsp.status_code == 200 and rsp.json()["lastReconcileAgeSeconds"] is None


def test_blocked_event_loop_fails_the_probe(served: Served) -> None:
    """What liveness is for: a loop that no longer answers gets the pod restarted (probe timeout)."""
    assert served.get().status_code == 200
    served.loop.call_soon_threadsafe(time.sleep, 3)  # something blocks kopf's loop
    with pytest.raises(httpx.TimeoutException):
        served.get(timeout=1)
    time.sleep(2.5)
    assert served.get().status_code == 200  # answers again once the loop does
