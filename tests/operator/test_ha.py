"""HA by kopf peering on the real control plane: two replicas share a KopfPeering, exactly one
reconciles; when the active one is killed (SIGKILL: no goodbye) the other takes over once the dead
peer's keep-alive expires, and the Brain gets Ready at its new generation through the survivor."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.kit.poll import wait_for

from .conftest import Kubectl, Operator
from .test_cluster_reconcile import apply_samples, wait_ready

pytestmark = pytest.mark.cluster

PEERING = "brain-operator"
#: kopf forgets a peer that stopped touching the peering object after its lifetime (60 s).
TAKEOVER_TIMEOUT = 150
#: The `replicas` pair's --peering-lifetime-seconds: a SIGKILLed peer holds the standby back at
#: most this long (at kopf's 60 s this test waited a minute for it).
LIFETIME = 15


class PeeredOperator(Operator):
    """An operator replica in a peering group (the conftest Operator always runs --standalone)."""

    def mode_args(self) -> list[str]:
        # The health URL is loopback and refused at once: there is no gateway here.
        return ["--peering", PEERING, "--health-url-template", "http://127.0.0.1:9/{namespace}/{name}"]

    def reconciles(self) -> float:
        return self.metric("brain_operator_reconcile_total", kind="Brain")


@pytest.fixture
def peered(kc: Kubectl, tmp_path: Path) -> Iterator[Callable[..., PeeredOperator]]:
    """Start peered replicas in the test namespace (stopped, and Brains unfinalized, afterwards)."""
    kc.apply({"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}})
    started: list[PeeredOperator] = []

    def start(name: str, *extra: str) -> PeeredOperator:
        op = PeeredOperator(kc.cluster, kc.ns, tmp_path / f"{name}.log", *extra)
        started.append(op)
        return op.start()

    try:
        yield start
    finally:
        for op in started:
            op.stop()
        for brain in (kc.get("brains") or {}).get("items", []):
            kc(
                "patch",
                "brain",
                brain["metadata"]["name"],
                "--type=merge",
                "-p",
                '{"metadata":{"finalizers":null}}',
                check=False,
            )


@pytest.fixture
def replicas(peered: Callable[..., PeeredOperator]) -> tuple[PeeredOperator, PeeredOperator]:
    # kopf elects by priority: the higher one is active (equal priorities pause every peer, see
    # test_identical_replicas_elect_one).
    # A 2 s resync (the fixture's is 5 s): the resyncs the tests count come round sooner.
    fast = ("--resync-seconds", "2", "--peering-lifetime-seconds", str(LIFETIME))
    return peered("active", "--priority", "200", *fast), peered("standby", "--priority", "100", *fast)


def test_one_replica_reconciles_and_the_other_takes_over(
    kc: Kubectl, replicas: tuple[PeeredOperator, PeeredOperator]
) -> None:
    active, standby = replicas
    apply_samples(kc)
    wait_ready(kc)
    # Several resync periods: the active one keeps reconciling, the standby never does.
    seen = active.reconciles()
    wait_for("three more resyncs", lambda: active.reconciles() >= seen + 3, timeout=60)
    assert standby.reconciles() == 0, standby.log()
    assert "Resuming operations" not in standby.log()  # kopf starts paused until peering says go

    active.kill(signal.SIGKILL)
    killed = time.monotonic()
    # While nobody is active: change the spec and delete a child. The survivor must catch up.
    kc("patch", "brain", "team", "--type=merge", "-p", '{"spec":{"embedding":{"replicas":2}}}')
    generation = kc.get("brain", "team")["metadata"]["generation"]
    svc_uid = kc.get("service", "team-gateway")["metadata"]["uid"]
    kc("delete", "service", "team-gateway")

    wait_for("the standby takes over", lambda: standby.reconciles() > 0, timeout=TAKEOVER_TIMEOUT)
    # Within the configured lifetime, not kopf's 60 s (which alone would take at least 50 s here).
    assert time.monotonic() - killed < 3 * LIFETIME, standby.log()
    brain = wait_ready(kc, generation=generation, timeout=90)
    assert brain["status"]["phase"] == "Ready"
    assert kc.get("deployment", "team-embedder")["spec"]["replicas"] == 2
    restored = wait_for("service restored", lambda: kc.get("service", "team-gateway"))
    assert restored["metadata"]["uid"] != svc_uid
    assert "Resuming operations after the pause" in standby.log()


def test_a_graceful_stop_hands_over(kc: Kubectl, replicas: tuple[PeeredOperator, PeeredOperator]) -> None:
    """SIGTERM: the active replica removes itself from the peering object on the way out, so the
    standby need not wait for its keep-alive to expire."""
    active, standby = replicas
    apply_samples(kc)
    wait_ready(kc)
    assert len(kc.get("kopfpeering", PEERING)["status"]) == 2
    assert standby.reconciles() == 0, standby.log()
    active.stop()
    assert active.proc is not None and active.proc.returncode == 0, active.log()
    wait_for("one peer left", lambda: len(kc.get("kopfpeering", PEERING)["status"]) == 1, timeout=30)
    kc("delete", "service", "team-gateway")
    wait_for("the standby takes over", lambda: standby.reconciles() > 0, timeout=TAKEOVER_TIMEOUT)
    wait_for("service restored", lambda: kc.get("service", "team-gateway"), timeout=60)


def test_identical_replicas_elect_one(kc: Kubectl, peered: Callable[..., PeeredOperator]) -> None:
    """Two replicas started the same way (as a Deployment starts them): exactly one reconciles."""
    first, second = peered("first"), peered("second")
    apply_samples(kc)
    wait_for("a replica reconciles", lambda: first.reconciles() + second.reconciles() > 0, timeout=60)
    wait_ready(kc)
    assert (first.reconciles() > 0) != (second.reconciles() > 0)


def test_a_paused_replica_drops_its_series_of_the_brain(
    kc: Kubectl, peered: Callable[..., PeeredOperator]
) -> None:
    """After a hand-over the replica that stopped being active must not keep exporting the Brain's
    gauges it set while active: a Deployment-wide sum() would count the Brain twice, one of them
    frozen. A higher-priority replica joining pauses the one that reconciled."""
    label = f"{kc.ns}/team"
    first = peered("first", "--priority", "100")
    apply_samples(kc)
    wait_ready(kc)
    wait_for("the active replica exports brain_ready", lambda: first.metric("brain_ready", brain=label) == 1)
    higher = peered("higher", "--priority", "200")
    wait_for(
        "the higher replica exports brain_ready",
        lambda: higher.metric("brain_ready", brain=label) == 1,
        timeout=TAKEOVER_TIMEOUT,
    )
    wait_for(
        "the paused replica drops its series of the Brain",
        lambda: f'brain="{label}"' not in first.metrics(),
        timeout=60,
    )
    assert "dropped this replica's series" in first.log(), first.log()
