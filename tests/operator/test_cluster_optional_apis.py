"""The optional APIs on the real control plane, with the projects' own CRDs installed: a Brain on
CloudNativePG becomes a `Cluster` those CRDs accept, its readiness follows the Cluster's status, and
`monitoring.serviceMonitor` creates, updates and removes a ServiceMonitor. (CloudNativePG's own
controller cannot run here, so the test writes the Cluster status it would write.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.kit.cluster import KubeCluster
from tests.kit.poll import wait_for

from .conftest import Kubectl, Operator
from .helpers import deep_set, sample

pytestmark = pytest.mark.cluster


@pytest.fixture
def kc_with_apis(foreign_crds: KubeCluster, kc: Kubectl) -> Iterator[Kubectl]:
    yield kc


def condition(kc: Kubectl, type_: str) -> dict[str, str]:
    brain = kc.get("brain", "team")
    return next((c for c in (brain.get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


def settles(operator: Operator) -> None:
    """Two reconciles in a row that write nothing: what was applied is exactly what the foreign
    CRD's schema keeps (a pruned or defaulted field would be re-applied on every pass)."""
    noops = operator.metric("brain_operator_reconcile_total", result="noop")
    wait_for(
        "two no-op reconciles",
        lambda: operator.metric("brain_operator_reconcile_total", result="noop") >= noops + 2,
        timeout=45,
    )


def test_cloudnativepg_brain_becomes_a_cluster_and_follows_its_status(
    kc_with_apis: Kubectl, operator: Operator
) -> None:
    kc = kc_with_apis
    doc = sample("brain.yaml")
    doc["spec"]["database"] = {"cloudNativePG": {"instances": 2, "storage": "5Gi"}}
    kc.apply(doc)
    cluster = wait_for("the CloudNativePG Cluster", lambda: kc.get("clusters.postgresql.cnpg.io", "team-db"))
    assert cluster["spec"]["instances"] == 2 and cluster["spec"]["storage"]["size"] == "5Gi"
    assert "CREATE EXTENSION IF NOT EXISTS vector" in " ".join(
        cluster["spec"]["bootstrap"]["initdb"]["postInitApplicationSQL"]
    )
    assert cluster["metadata"]["ownerReferences"][0]["kind"] == "Brain"
    assert kc.get("statefulset", "team-db") is None  # no managed Postgres beside it
    gateway = wait_for("gateway Deployment", lambda: kc.get("deployment", "team-gateway"))
    env = {e["name"]: e for e in gateway["spec"]["template"]["spec"]["containers"][0]["env"]}
    # its own login (issue #26): CNPG's managed role, accepted by CNPG's own CRD, whose password
    # Secret the operator generated and CNPG's application owner only for the migration step
    assert env["BRAIN_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "team-db-role-gateway",
        "key": "dsn",
    }
    roles = {r["name"]: r for r in cluster["spec"]["managed"]["roles"]}
    assert roles["brain_gateway"]["passwordSecret"] == {"name": "team-db-role-gateway"}
    assert kc.get("secret", "team-db-role-gateway")["type"] == "kubernetes.io/basic-auth"
    (init,) = gateway["spec"]["template"]["spec"]["initContainers"]
    init_env = {e["name"]: e for e in init["env"]}
    assert init_env["BRAIN_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "team-db-app",
        "key": "uri",
    }

    wait_for(
        "DatabaseReady False", lambda: condition(kc, "DatabaseReady").get("reason") == "InstancesNotReady"
    )
    kc(
        "patch",
        "clusters.postgresql.cnpg.io",
        "team-db",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"instances": 2, "readyInstances": 2, "phase": "Cluster in healthy state"}}),
    )
    wait_for("DatabaseReady True", lambda: condition(kc, "DatabaseReady").get("status") == "True")
    assert condition(kc, "DatabaseReady")["reason"] == "InstancesReady"
    settles(operator)


def test_service_monitor_follows_the_spec(kc_with_apis: Kubectl, operator: Operator) -> None:
    kc = kc_with_apis
    doc = deep_set(
        sample("brain.yaml"),
        "spec.monitoring",
        {"serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "kube-prometheus"}}},
    )
    kc.apply(doc)
    sm = wait_for("ServiceMonitor", lambda: kc.get("servicemonitors.monitoring.coreos.com", "team"))
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus"
    assert {e["interval"] for e in sm["spec"]["endpoints"]} == {"15s"}
    sel = sm["spec"]["selector"]
    selector = ",".join(
        [f"{k}={v}" for k, v in sel["matchLabels"].items()]
        + [f"{e['key']} in ({','.join(e['values'])})" for e in sel.get("matchExpressions", [])]
    )
    scraped = wait_for("selected Services", lambda: kc.get("services", selector=selector)["items"])
    assert {s["metadata"]["name"] for s in scraped} == {"team-gateway", "team-embedder"}
    assert all("http" in {p.get("name") for p in s["spec"]["ports"]} for s in scraped)
    settles(operator)

    kc.apply(deep_set(doc, "spec.monitoring.serviceMonitor.interval", "1m"))
    wait_for(
        "interval updated",
        lambda: (
            {
                e["interval"]
                for e in kc.get("servicemonitors.monitoring.coreos.com", "team")["spec"]["endpoints"]
            }
            == {"1m"}
        ),
    )
    kc.apply(deep_set(doc, "spec.monitoring.serviceMonitor.enabled", False))
    wait_for("ServiceMonitor pruned", lambda: kc.get("servicemonitors.monitoring.coreos.com", "team") is None)
