"""The chart against the local control plane: install, upgrade, uninstall, and every rendered object
accepted by the real API server (server-side dry run)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import CHART, KUBE_VERSION, ROOT, set_args

pytestmark = pytest.mark.cluster


def _release() -> str:
    return f"bo-{uuid.uuid4().hex[:8]}"


def _has_crd(kube_cluster: Any, name: str) -> bool:
    return kube_cluster.kubectl("get", "crd", name, check=False).returncode == 0


def _can(kube_cluster: Any, sa: str, verb: str, res: str, ns: str | None) -> str:
    where = ["-n", ns] if ns else ["--all-namespaces"]
    proc = kube_cluster.kubectl("auth", "can-i", verb, res, "--as", sa, *where, check=False)
    return str(proc.stdout.strip())


def test_install_upgrade_uninstall(kube_cluster: Any, kube_namespace: str) -> None:
    """The default install (issue #26): the operator's ServiceAccount can do what a Brain in the
    release namespace needs, there only; nothing in another namespace, no Secret listed anywhere."""
    rel, ns = _release(), kube_namespace
    helm = kube_cluster.run
    out = helm(
        "helm", "install", rel, str(CHART), "-n", ns, "--wait", "--timeout", "300s", timeout=360
    ).stdout
    assert f"It watches only: {ns} " in out  # NOTES.txt
    assert f"kubectl apply -n {ns} -f samples/brain.yaml" in out
    full = f"{rel}-brain-operator"
    dep = json.loads(kube_cluster.kubectl("get", "deployment", full, "-n", ns, "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 2
    assert dep["status"].get("readyReplicas") == 2
    for crd in ("brains.brain.dev", "memorysources.brain.dev", "routingpolicies.brain.dev"):
        assert _has_crd(kube_cluster, crd)
    kube_cluster.kubectl("get", "kopfpeering", full, "-n", ns)
    assert kube_cluster.kubectl("get", "clusterkopfpeering", full, check=False).returncode != 0
    # the operator's ServiceAccount really has what the operator needs, and not more
    sa = f"system:serviceaccount:{ns}:{full}"
    needed = (
        ("patch", "brains.brain.dev"),
        ("create", "deployments.apps"),
        ("patch", "brains/status"),
        ("create", "secrets"),
        ("get", "secrets"),
    )
    for verb, res in needed:
        assert _can(kube_cluster, sa, verb, res, ns) == "yes", (verb, res)
        assert _can(kube_cluster, sa, verb, res, "default") == "no", (verb, res)
    for verb, res in (
        ("list", "secrets"),
        ("watch", "secrets"),
        ("delete", "pods"),
        ("create", "clusterroles"),
        ("create", "pods"),
    ):
        assert _can(kube_cluster, sa, verb, res, ns) == "no", (verb, res)
    assert _can(kube_cluster, sa, "list", "namespaces", None) == "yes"  # kopf resolves namespaces
    assert _can(kube_cluster, sa, "get", "secrets", None) == "no"

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


def test_cluster_scope_install(kube_cluster: Any, kube_namespace: str) -> None:
    """The opt-in: every namespace, yet Secrets are still never listed or watched."""
    rel, ns = _release(), kube_namespace
    out = kube_cluster.run(
        "helm", "install", rel, str(CHART), "-n", ns, "--set", "watch.scope=cluster", timeout=240
    ).stdout
    assert "It watches every namespace" in out and "kubectl apply -n <team-namespace>" in out
    full = f"{rel}-brain-operator"
    kube_cluster.kubectl("get", "clusterkopfpeering", full)
    sa = f"system:serviceaccount:{ns}:{full}"
    for where in (ns, "default"):
        assert _can(kube_cluster, sa, "create", "deployments.apps", where) == "yes"
        assert _can(kube_cluster, sa, "get", "secrets", where) == "yes"
        assert _can(kube_cluster, sa, "list", "secrets", where) == "no"
    assert _can(kube_cluster, sa, "list", "secrets", None) == "no"
    assert _can(kube_cluster, sa, "watch", "secrets", None) == "no"
    kube_cluster.run("helm", "uninstall", rel, "-n", ns, "--wait", "--timeout", "120s", timeout=180)


def _token_kubeconfig(kube_cluster: Any, sa_ns: str, sa: str, path: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount (a bound token), as the pod would."""
    token = kube_cluster.kubectl("create", "token", sa, "-n", sa_ns, "--duration=30m").stdout.strip()
    cfg = json.loads(kube_cluster.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = cfg["clusters"][0]["cluster"]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "sa", "namespace": sa_ns}}],
        "current-context": "c",
    }
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


def test_default_install_reconciles_brains_of_its_namespace_only(
    kube_cluster: Any, kube_namespace: str, tmp_path: Path
) -> None:
    """The chart's default, run for real: the operator with the Deployment's own arguments and the
    ServiceAccount's own token (pods on this control plane are fake, so it runs as a process). A
    Brain in the release namespace gets its stack; a Brain in another namespace is never touched,
    and the operator meets no Forbidden on the way."""
    kube_cluster.ensure_crds()
    rel, ns = _release(), kube_namespace
    other = f"t-{uuid.uuid4().hex[:10]}"
    kube_cluster.kubectl("create", "namespace", other)
    kube_cluster.run("helm", "install", rel, str(CHART), "-n", ns, timeout=240)
    full = f"{rel}-brain-operator"
    dep = json.loads(kube_cluster.kubectl("get", "deployment", full, "-n", ns, "-o", "json").stdout)
    args = [
        a
        for a in dep["spec"]["template"]["spec"]["containers"][0]["args"]
        if not a.startswith(("--metrics-port", "--resync-seconds"))
    ]
    assert f"--namespace={ns}" in args, args
    kubeconfig = _token_kubeconfig(kube_cluster, ns, full, tmp_path / "sa.kubeconfig")
    env = {**kube_cluster.env, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1"}
    env.pop("KUBERNETES_SERVICE_HOST", None)  # never the in-cluster config of a CI pod
    log = tmp_path / "operator.log"
    brain = (ROOT / "samples" / "brain.yaml").read_text()
    with log.open("ab") as out:
        op = subprocess.Popen(
            [sys.executable, "-m", "brain_operator", *args, "--metrics-port=0", "--resync-seconds=5"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        for where in (ns, other):
            kube_cluster.kubectl("apply", "-n", where, "-f", "-", input=brain)
        wanted = {"team-db-credentials", "team-master-key"}
        deadline = time.monotonic() + 180
        while True:
            secrets = kube_cluster.kubectl(
                "get", "secrets", "-n", ns, "-l", "brain.dev/brain=team", "-o", "json"
            ).stdout
            names = {s["metadata"]["name"] for s in json.loads(secrets)["items"]}
            deploys = kube_cluster.kubectl("get", "deploy", "-n", ns, "-o", "name").stdout.split()
            # the status is patched after the handler has applied the children: wait for it too
            status = json.loads(kube_cluster.kubectl("get", "brain", "team", "-n", ns, "-o", "json").stdout)
            conditions = (status.get("status") or {}).get("conditions")
            if wanted <= names and "deployment.apps/team-gateway" in deploys and conditions:
                break
            assert op.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, (
                f"the Brain in {ns} was not reconciled (secrets {names}, deployments {deploys}, "
                f"status {status.get('status')}):\n" + log.read_text()[-4000:]
            )
            time.sleep(1)
        # the other namespace's Brain: no finalizer, no status, no children
        left = json.loads(kube_cluster.kubectl("get", "brain", "team", "-n", other, "-o", "json").stdout)
        assert not left["metadata"].get("finalizers") and not left.get("status"), left
        assert not kube_cluster.kubectl("get", "deploy,secrets", "-n", other, "-l", "brain.dev/brain=team",
                                        "-o", "name").stdout.strip()  # fmt: skip
        text = log.read_text()
        assert "Forbidden" not in text and " 403" not in text, text[-4000:]
        kube_cluster.kubectl("delete", "brain", "team", "-n", ns, "--wait=true", "--timeout=90s", timeout=120)
    finally:
        op.terminate()
        try:
            op.wait(timeout=30)
        except subprocess.TimeoutExpired:
            op.kill()
            op.wait(10)
        for where in (ns, other):  # whatever still carries kopf's finalizer
            kube_cluster.kubectl(
                "patch", "brain", "team", "-n", where, "--type=merge", "-p",
                '{"metadata":{"finalizers":null}}', check=False,
            )  # fmt: skip
        kube_cluster.run("helm", "uninstall", rel, "-n", ns, "--wait", "--timeout", "120s", timeout=180)
        kube_cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)


@pytest.mark.parametrize("scope", ["cluster", "namespaced"])
def test_every_rendered_object_is_accepted_by_the_api_server(
    kube_cluster: Any, foreign_crds: Any, kube_namespace: str, scope: str
) -> None:
    """ServiceMonitor and PrometheusRule are checked against prometheus-operator's own CRDs."""
    kube_cluster.ensure_crds()
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
    kube_cluster.ensure_crds()
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
