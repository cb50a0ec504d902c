"""Pytest plugin: the suite on several pytest-xdist workers (`make test` runs ``-n 2``) without two
workers ever sharing a thing only one of them may own.

About half of a serial run's wall time is waiting (processes and pods starting, polls, timeouts hit
on purpose), so a second worker uses it. Each worker is a separate pytest session with its own
session fixtures: its own embedded Postgres (a free port, its own data dir under /tmp), shared
gateway, LiteLLM, fake upstream and Prometheus (all on ``free_port()``), and temp dirs. What is
left to separate is done here:

- **The kwok control plane.** hack/cluster-up.sh takes its state folder and ports from
  ``BRAIN_KUBE_STATE`` and ``BRAIN_KUBE_{ETCD,ETCD_PEER,APISERVER}_PORT``. Worker ``gwN`` uses the
  values it was started with (or cluster-up's defaults) plus ``N × PORT_STEP`` and the folder
  ``<state>-gwN``; ``gw0`` keeps them as they are, so ``-n 2`` on the defaults (22379/22380/26443)
  gives 22379… and 22389…, clear of the real node's 23379/23380/27443. Set in ``os.environ`` at
  configure time, so every script and docs command a test runs (``make cluster-up`` included)
  meets its own worker's cluster.
- **The real node and Docker.** hack/node-up.sh has one state folder, one network namespace and
  fixed addresses, and cleans a "stale" node first, so two workers starting it would destroy each
  other's. Every test under ``NODE_TESTS`` is one work unit (one worker runs them all, in order)
  and is scheduled first: those are the longest waits, and the other worker fills them.
- **Everything else** is scheduled a module at a time, so a module-scoped fixture (the docs'
  ``make up`` stack, Prometheus and its operator) starts once, as in a serial run. Longest first:
  each run records every unit's seconds in pytest's cache (``brain/unit-seconds``, serial runs
  too), and the next run hands out the slow modules before the quick ones, so the run does not
  end with one worker alone in a long module. A fresh clone has no cache: collection order.

Serial runs (no ``-n``, or ``-n 0``) are untouched: no worker id, no change of order or env.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest

#: Tests that need the machine's single real node or its Docker engine (images, containers).
NODE_TESTS = ("tests/delivery/test_containers.py", "e2e/pods/")
REAL_NODE_UNIT = "real-node"
#: Port offset between two workers' control planes (each uses three ports).
PORT_STEP = 10
KUBE_DEFAULTS = {
    "BRAIN_KUBE_STATE": "/tmp/brain-kube",
    "BRAIN_KUBE_ETCD_PORT": "22379",
    "BRAIN_KUBE_ETCD_PEER_PORT": "22380",
    "BRAIN_KUBE_APISERVER_PORT": "26443",
}


def worker_number(worker_id: str | None) -> int | None:
    """3 for xdist's ``gw3``; None outside a worker (a serial run, or the controller)."""
    if not worker_id:
        return None
    if not (worker_id.startswith("gw") and worker_id[2:].isdigit()):
        raise ValueError(
            f"PYTEST_XDIST_WORKER={worker_id!r}: expected gw<number>, as pytest-xdist names workers"
        )
    return int(worker_id[2:])


def kube_env_for_worker(env: Mapping[str, str], number: int) -> dict[str, str]:
    """The control-plane variables worker ``number`` runs with, from the ones it inherited."""
    base = {k: env.get(k) or default for k, default in KUBE_DEFAULTS.items()}
    if number == 0:
        return base
    out = {"BRAIN_KUBE_STATE": f"{base['BRAIN_KUBE_STATE'].rstrip('/')}-gw{number}"}
    for key in ("BRAIN_KUBE_ETCD_PORT", "BRAIN_KUBE_ETCD_PEER_PORT", "BRAIN_KUBE_APISERVER_PORT"):
        try:
            port = int(base[key]) + number * PORT_STEP
        except ValueError:
            raise ValueError(f"{key}={base[key]!r}: expected a port number") from None
        if not 0 < port < 65536:
            raise ValueError(f"{key}={base[key]} + {number * PORT_STEP} (worker gw{number}) is not a port")
        out[key] = str(port)
    return out


def needs_real_node(nodeid: str) -> bool:
    return nodeid.startswith(NODE_TESTS)


def work_unit(nodeid: str) -> str:
    """What the scheduler hands a worker whole: the real node's tests, or one module."""
    if needs_real_node(nodeid):
        return REAL_NODE_UNIT
    return nodeid.split("::", 1)[0]


UNIT_SECONDS_KEY = "brain/unit-seconds"


def schedule_order(nodeids: list[str], unit_seconds: Mapping[str, float]) -> list[int]:
    """The indices of ``nodeids`` in run order: the real node's first, then whole units from the
    slowest (last run's seconds) to the unknown ones; within a unit, and among equals, collection
    order."""
    first_seen: dict[str, int] = {}
    for i, nodeid in enumerate(nodeids):
        first_seen.setdefault(work_unit(nodeid), i)

    def key(i: int) -> tuple[bool, float, int, int]:
        unit = work_unit(nodeids[i])
        return (unit != REAL_NODE_UNIT, -float(unit_seconds.get(unit, 0.0)), first_seen[unit], i)

    return sorted(range(len(nodeids)), key=key)


def _cached_seconds(config: pytest.Config) -> dict[str, float]:
    cache = getattr(config, "cache", None)
    seen = cache.get(UNIT_SECONDS_KEY, {}) if cache is not None else {}
    if not isinstance(seen, dict):
        return {}
    return {str(k): float(v) for k, v in seen.items() if isinstance(v, int | float)}


class UnitClock:
    """Adds up each unit's setup + call + teardown seconds where reports arrive (the controller
    under xdist, the one process in a serial run) and keeps them in pytest's cache for the next
    run's order."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        unit = work_unit(report.nodeid)
        self.seconds[unit] = self.seconds.get(unit, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(session.config, "cache", None)
        if cache is None or not self.seconds:
            return
        merged = {**_cached_seconds(session.config), **{k: round(v, 1) for k, v in self.seconds.items()}}
        cache.set(UNIT_SECONDS_KEY, merged)


def pytest_configure(config: pytest.Config) -> None:
    number = worker_number(os.environ.get("PYTEST_XDIST_WORKER"))
    if number is not None:
        os.environ.update(kube_env_for_worker(os.environ, number))
    elif not config.pluginmanager.has_plugin("brain-unit-clock"):
        config.pluginmanager.register(UnitClock(), "brain-unit-clock")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Workers only (each reads the same cache, so their collections still match)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        order = schedule_order([item.nodeid for item in items], _cached_seconds(config))
        items[:] = [items[i] for i in order]


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Any load-balancing ``--dist``: units from `work_unit`, in collection order (the node's first).
    ``--dist each`` (every test on every worker) is left to xdist."""
    if config.getoption("dist") == "each":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class NodeAwareScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the node's unit first, not the biggest module
    return NodeAwareScheduling(config, log)
