"""The local control plane (hack/cluster-up.sh) behaves like a real cluster for the operator:
scheduling onto kwok fake nodes, controllers (deployment, garbage collector, cronjob, job),
service-account tokens and RBAC, and the helm/kind binaries next to kubectl."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.kit.cluster import HACK, KubeCluster, parse_exports
from tests.kit.poll import wait_for

pytestmark = pytest.mark.cluster


def get_json(kube: KubeCluster, *args: str) -> dict:
    return json.loads(kube.kubectl("get", *args, "-o", "json").stdout)


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 10m, memory: 16Mi}}
"""


def test_deployment_pods_run_on_fake_node(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    kube_cluster.apply(DEPLOYMENT, kube_namespace)
    kube_cluster.kubectl(
        "wait", "-n", kube_namespace, "--for=condition=Available", "deployment/web", "--timeout=90s"
    )
    pods = get_json(kube_cluster, "pods", "-n", kube_namespace, "-l", "app=web")["items"]
    assert len(pods) == 3
    nodes = {n["metadata"]["name"] for n in get_json(kube_cluster, "nodes")["items"]}
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["nodeName"] in nodes
        assert pod["status"].get("podIP")
        # the ServiceAccount admission plugin + token controller mounted a projected token
        assert any(v.get("projected") for v in pod["spec"]["volumes"])
    dep = get_json(kube_cluster, "deployment/web", "-n", kube_namespace)
    assert dep["status"]["availableReplicas"] == 3


def test_deleting_owner_garbage_collects_children(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    kube_cluster.apply(DEPLOYMENT, ns)
    kube_cluster.kubectl("wait", "-n", ns, "--for=condition=Available", "deployment/web", "--timeout=90s")
    assert get_json(kube_cluster, "replicasets", "-n", ns, "-l", "app=web")["items"]

    kube_cluster.kubectl("delete", "deployment/web", "-n", ns, "--cascade=background", "--wait=false")

    def children_gone() -> bool:
        rs = get_json(kube_cluster, "replicasets", "-n", ns, "-l", "app=web")["items"]
        pods = get_json(kube_cluster, "pods", "-n", ns, "-l", "app=web")["items"]
        return not rs and not pods

    wait_for("ReplicaSet and Pods to be garbage-collected", children_gone, timeout=90)


CRONJOB = """
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  successfulJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: tick
            image: registry.k8s.io/pause:3.10
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_cronjob_controller_creates_jobs_that_complete(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    ns = kube_namespace
    kube_cluster.apply(CRONJOB, ns)

    # A manual run from the template: job controller + kwok's pod-complete stage finish it.
    kube_cluster.kubectl("create", "job", "manual", "--from=cronjob/tick", "-n", ns)
    kube_cluster.kubectl("wait", "-n", ns, "--for=condition=Complete", "job/manual", "--timeout=90s")

    # The CronJob controller itself schedules one at the next minute boundary (<= 60 s).
    def scheduled_jobs() -> list[dict]:
        jobs = get_json(kube_cluster, "jobs", "-n", ns)["items"]
        return [
            j
            for j in jobs
            if any(
                o["kind"] == "CronJob" and o["name"] == "tick"
                for o in j["metadata"].get("ownerReferences", [])
            )
        ]

    wait_for("the CronJob controller to create a Job", lambda: bool(scheduled_jobs()), timeout=90, every=1)
    name = scheduled_jobs()[0]["metadata"]["name"]
    kube_cluster.kubectl("wait", "-n", ns, "--for=condition=Complete", f"job/{name}", "--timeout=90s")
    wait_for(
        "CronJob status.lastSuccessfulTime",
        lambda: bool(get_json(kube_cluster, "cronjob/tick", "-n", ns)["status"].get("lastSuccessfulTime")),
        timeout=30,
    )


def test_rbac_forbids_unauthorised_service_account(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    kube_cluster.kubectl("create", "serviceaccount", "nobody", "-n", ns)
    token = kube_cluster.kubectl("create", "token", "nobody", "-n", ns, "--duration=10m").stdout.strip()
    cfg = json.loads(kube_cluster.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    server = cfg["clusters"][0]["cluster"]["server"]

    def as_sa(*args: str) -> subprocess.CompletedProcess[str]:
        return kube_cluster.kubectl(
            "--kubeconfig=/dev/null",
            f"--server={server}",
            "--insecure-skip-tls-verify=true",
            f"--token={token}",
            *args,
            check=False,
        )

    who = as_sa("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert who.returncode == 0, who.stderr
    assert who.stdout == f"system:serviceaccount:{ns}:nobody"

    denied = as_sa("get", "secrets", "-n", ns)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()
    denied = as_sa("get", "nodes")
    assert "forbidden" in denied.stderr.lower()

    kube_cluster.kubectl("create", "role", "read-secrets", "--verb=get,list", "--resource=secrets", "-n", ns)
    kube_cluster.kubectl(
        "create",
        "rolebinding",
        "nobody-reads",
        "--role=read-secrets",
        f"--serviceaccount={ns}:nobody",
        "-n",
        ns,
    )

    wait_for("the RoleBinding to take effect", lambda: as_sa("get", "secrets", "-n", ns).returncode == 0, 30)
    assert "forbidden" in as_sa("get", "secrets", "-n", "default").stderr.lower()


def test_helm_installs_a_chart_and_kind_runs(
    kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    helm = kube_cluster.run("helm", "version", "--short").stdout
    assert helm.startswith("v3."), helm
    kind = kube_cluster.run("kind", "version").stdout
    assert kind.startswith("kind v0."), kind

    chart = tmp_path / "demo"
    kube_cluster.run("helm", "create", str(chart))
    kube_cluster.run(
        "helm",
        "install",
        "demo",
        str(chart),
        "-n",
        kube_namespace,
        "--set",
        "image.repository=registry.k8s.io/pause,image.tag=3.10",
        "--wait",
        "--timeout=120s",
        timeout=180,
    )
    status = json.loads(kube_cluster.run("helm", "status", "demo", "-n", kube_namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    kube_cluster.kubectl(
        "wait", "-n", kube_namespace, "--for=condition=Available", "deployment/demo", "--timeout=30s"
    )
    kube_cluster.run("helm", "uninstall", "demo", "-n", kube_namespace, "--wait", timeout=120)


def test_server_version_is_pinned_release(kube_cluster: KubeCluster) -> None:
    ver = json.loads(kube_cluster.kubectl("version", "-o", "json").stdout)
    assert ver["serverVersion"]["gitVersion"].startswith("v1.")
    assert ver["serverVersion"]["gitVersion"] == ver["clientVersion"]["gitVersion"]
    assert ver["serverVersion"]["gitVersion"] != "v0.0.0-master+$Format:%H$"


def test_cluster_up_is_idempotent(kube_cluster: KubeCluster) -> None:
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(HACK / "cluster-up.sh")], capture_output=True, text=True, timeout=120, check=True
    )
    assert time.monotonic() - start < 20
    assert "already running" in proc.stderr
    lines = proc.stdout.splitlines()
    assert (
        len(lines) == 2 and lines[0].startswith("export KUBECONFIG=") and lines[1].startswith("export PATH=")
    )
    assert parse_exports(proc.stdout) == (kube_cluster.kubeconfig, kube_cluster.bin_dir)
