"""The chart against the local control plane: install, upgrade, uninstall, and every rendered object
accepted by the real API server (server-side dry run)."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest
import yaml

from .conftest import CHART, KUBE_VERSION, ROOT, set_args

pytestmark = pytest.mark.cluster


def _release() -> str:
    return f"bo-{uuid.uuid4().hex[:8]}"


def _has_crd(kube_cluster: Any, name: str) -> bool:
    return kube_cluster.kubectl("get", "crd", name, check=False).returncode == 0


def _ensure_crds(kube_cluster: Any) -> None:
    """The chart's CRDs, created if missing (never replaced: other suites share the cluster)."""
    for path in sorted((CHART / "crds").glob("*.yaml")):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        if not _has_crd(kube_cluster, name):
            proc = kube_cluster.kubectl("create", "-f", str(path), check=False)
            assert proc.returncode == 0 or "AlreadyExists" in proc.stderr, proc.stderr
        kube_cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


def test_install_upgrade_uninstall(kube_cluster: Any, kube_namespace: str) -> None:
    rel, ns = _release(), kube_namespace
    helm = kube_cluster.run
    out = helm(
        "helm", "install", rel, str(CHART), "-n", ns, "--wait", "--timeout", "300s", timeout=360
    ).stdout
    assert "kubectl apply -n <team-namespace> -f samples/brain.yaml" in out  # NOTES.txt
    full = f"{rel}-brain-operator"
    dep = json.loads(kube_cluster.kubectl("get", "deployment", full, "-n", ns, "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 2
    assert dep["status"].get("readyReplicas") == 2
    for crd in ("brains.brain.dev", "memorysources.brain.dev", "routingpolicies.brain.dev"):
        assert _has_crd(kube_cluster, crd)
    kube_cluster.kubectl("get", "clusterkopfpeering", full)
    # the operator's ServiceAccount really has what the operator needs, and not more
    sa = f"system:serviceaccount:{ns}:{full}"
    for verb, res in (
        ("patch", "brains.brain.dev"),
        ("create", "deployments.apps"),
        ("patch", "brains/status"),
    ):
        can = kube_cluster.kubectl("auth", "can-i", verb, res, "--as", sa, "-n", "default", check=False)
        assert can.stdout.strip() == "yes", (verb, res, can.stdout, can.stderr)
    for verb, res in (("delete", "pods"), ("create", "clusterroles"), ("get", "persistentvolumeclaims")):
        can = kube_cluster.kubectl("auth", "can-i", verb, res, "--as", sa, check=False)
        assert can.stdout.strip() == "no", (verb, res)

    helm(
        "helm",
        "upgrade",
        rel,
        str(CHART),
        "-n",
        ns,
        "--set",
        "replicaCount=3",
        "--set",
        "monitoring.grafanaDashboards.enabled=true",
        "--wait",
        "--timeout",
        "300s",
        timeout=360,
    )
    dep = json.loads(kube_cluster.kubectl("get", "deployment", full, "-n", ns, "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 3
    cms = kube_cluster.kubectl(
        "get", "configmap", "-n", ns, "-l", "grafana_dashboard=1", "-o", "name"
    ).stdout.split()
    assert sorted(cms) == [
        f"configmap/{full}-dashboard-brain-operator",
        f"configmap/{full}-dashboard-brain-overview",
    ]
    history = json.loads(helm("helm", "history", rel, "-n", ns, "-o", "json").stdout)
    assert [h["status"] for h in history] == ["superseded", "deployed"]

    helm("helm", "uninstall", rel, "-n", ns, "--wait", "--timeout", "120s", timeout=180)
    assert kube_cluster.kubectl("get", "deployment", full, "-n", ns, check=False).returncode != 0
    assert kube_cluster.kubectl("get", "clusterrole", full, check=False).returncode != 0
    assert _has_crd(kube_cluster, "brains.brain.dev")  # helm keeps CRDs (and so every Brain) on uninstall


def test_namespaced_install(kube_cluster: Any, kube_namespace: str) -> None:
    rel, ns = _release(), kube_namespace
    kube_cluster.run(
        "helm",
        "install",
        rel,
        str(CHART),
        "-n",
        ns,
        "--set",
        "watch.scope=namespaced",
        timeout=240,
    )
    full = f"{rel}-brain-operator"
    kube_cluster.kubectl("get", "kopfpeering", full, "-n", ns)
    sa = f"system:serviceaccount:{ns}:{full}"
    here = kube_cluster.kubectl(
        "auth", "can-i", "create", "deployments.apps", "--as", sa, "-n", ns, check=False
    )
    there = kube_cluster.kubectl(
        "auth", "can-i", "create", "deployments.apps", "--as", sa, "-n", "default", check=False
    )
    assert (here.stdout.strip(), there.stdout.strip()) == ("yes", "no")
    kube_cluster.run("helm", "uninstall", rel, "-n", ns, "--wait", "--timeout", "120s", timeout=180)


@pytest.mark.parametrize("scope", ["cluster", "namespaced"])
def test_every_rendered_object_is_accepted_by_the_api_server(
    kube_cluster: Any, foreign_crds: Any, kube_namespace: str, scope: str
) -> None:
    """ServiceMonitor and PrometheusRule are checked against prometheus-operator's own CRDs."""
    _ensure_crds(kube_cluster)
    values: dict[str, Any] = {
        "watch.scope": scope,
        "monitoring.serviceMonitor.enabled": True,
        "monitoring.prometheusRule.enabled": True,
        "monitoring.grafanaDashboards.enabled": True,
        "sampleBrain.enabled": True,
        "dataPlaneImages.gateway": "registry.local/brain/gateway:1",
    }
    if scope == "namespaced":
        values["watch.namespaces"] = [kube_namespace]
    rendered = kube_cluster.run(
        "helm",
        "template",
        _release(),
        str(CHART),
        "--kube-version",
        KUBE_VERSION,
        "-n",
        kube_namespace,
        *set_args(values),
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert {
        "Deployment",
        "ClusterRole",
        "Brain",
        "ConfigMap",
        "PodDisruptionBudget",
        "Service",
        "ServiceMonitor",
        "PrometheusRule",
    } <= {d["kind"] for d in docs}
    proc = kube_cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(docs), check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("(server dry run)") == len(docs), proc.stdout
    crds = kube_cluster.kubectl(
        "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-f", str(CHART / "crds")
    )
    assert crds.stdout.count("serverside-applied (server dry run)") == len(
        list((ROOT / "crds").glob("*.yaml"))
    )


def test_samples_are_accepted_next_to_the_chart(kube_cluster: Any, kube_namespace: str) -> None:
    """What NOTES.txt tells people to apply next is valid against the CRDs the chart ships."""
    _ensure_crds(kube_cluster)
    for sample in ("brain.yaml", "memorysource-git.yaml", "routingpolicy.yaml"):
        proc = subprocess.run(
            [
                kube_cluster.tool("kubectl"),
                "apply",
                "--dry-run=server",
                "-n",
                kube_namespace,
                "-f",
                str(ROOT / "samples" / sample),
            ],
            capture_output=True,
            text=True,
            env=kube_cluster.env,
            timeout=60,
        )
        assert proc.returncode == 0, (sample, proc.stderr)
