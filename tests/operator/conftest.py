"""Fixtures for the operator's cluster tests: CRDs installed once, an operator per test namespace.

The cluster is the local control plane (``kube_cluster`` from tests/kit/cluster.py, imported
here so these tests work whether or not the root conftest registers that plugin), or any cluster
named by ``BRAIN_TEST_KUBECONFIG`` (kubectl from ``BRAIN_TEST_KUBE_BIN`` or PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import httpx
import pytest

from tests.kit.cluster import KubeCluster, kube_cluster
from tests.kit.poll import wait_for

from .helpers import ROOT

__all__ = ["kube_cluster"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Kubectl:
    """kubectl bound to one cluster and namespace, JSON in and out."""

    def __init__(self, cluster: KubeCluster, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace

    def __call__(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl("-n", self.ns, *args, check=check, input=input)

    def get(self, kind: str, name: str | None = None, selector: str | None = None) -> Any:
        args = ["get", kind] + ([name] if name else []) + (["-l", selector] if selector else [])
        proc = self(*args, "-o", "json", "--show-managed-fields", check=False)
        if proc.returncode != 0:
            if "NotFound" in proc.stderr:
                return None
            raise AssertionError(proc.stderr)
        return json.loads(proc.stdout)

    def apply(self, doc: dict[str, Any] | str) -> subprocess.CompletedProcess[str]:
        text = doc if isinstance(doc, str) else json.dumps(doc)
        return self("apply", "-f", "-", input=text)

    def provide_volume(self, claim: str, size: str = "10Gi") -> None:
        """A PersistentVolume pre-bound to ``claim``: the local control plane has no provisioner."""
        pv = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"pv-{self.ns}-{claim}"[:63], "labels": {"brain-test-namespace": self.ns}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": f"/tmp/brain-test-pv/{self.ns}/{claim}"},
                "claimRef": {"namespace": self.ns, "name": claim},
            },
        }
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(pv))

    def try_create(self, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        """``kubectl create`` with strict field validation; the caller inspects rc and stderr."""
        return self("create", "--validate=strict", "-f", "-", check=False, input=json.dumps(doc))


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> KubeCluster:
    # A private kubectl discovery cache: a CRD change must not hide behind a 10-minute-old cache.
    os.environ["KUBECACHEDIR"] = str(tmp_path_factory.mktemp("kubecache"))
    kubeconfig = os.environ.get("BRAIN_TEST_KUBECONFIG")
    if not kubeconfig:
        local: KubeCluster = request.getfixturevalue("kube_cluster")
        return local
    kubectl = shutil.which("kubectl")
    bin_dir = os.environ.get("BRAIN_TEST_KUBE_BIN") or (str(Path(kubectl).parent) if kubectl else "/usr/bin")
    return KubeCluster(kubeconfig, bin_dir, started_here=False)


@pytest.fixture(scope="session")
def crds(cluster: KubeCluster) -> KubeCluster:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        cluster.kubectl("wait", "--for=condition=Established", "-f", str(path), "--timeout=60s")
    return cluster


@pytest.fixture
def kc(crds: KubeCluster) -> Iterator[Kubectl]:
    """A fresh namespace (deleted afterwards) with kubectl bound to it."""
    name = f"op-{uuid.uuid4().hex[:10]}"
    crds.kubectl("create", "namespace", name)
    try:
        yield Kubectl(crds, name)
    finally:
        crds.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
        crds.kubectl("delete", "pv", "-l", f"brain-test-namespace={name}", "--wait=false", check=False)


class Operator:
    """``python -m brain_operator`` as a subprocess watching one namespace."""

    def __init__(self, cluster: KubeCluster, namespace: str, log: Path, *extra: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.log_path = log
        self.extra = extra
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def mode_args(self) -> list[str]:
        """How this replica coordinates with others; subclasses run it peered."""
        return ["--standalone"]

    def start(self) -> Self:
        env = dict(self.cluster.env)
        env["PYTHONUNBUFFERED"] = "1"
        args = [
            sys.executable,
            "-m",
            "brain_operator",
            "--namespace",
            self.namespace,
            *self.mode_args(),
            "--resync-seconds",
            "5",
            "--health-seconds",
            "1",
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.port),
            *self.extra,
        ]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            wait_for("operator /healthz", self._healthy, timeout=60)
        except AssertionError:
            self.kill()
            raise
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"operator exited {self.proc.returncode}:\n{self.log()}")
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def metrics(self) -> str:
        # Prometheus's own default scrape timeout: with both cores busy (the suite's other worker,
        # the image builds beside it) a 3 s limit failed a scrape the operator answered later.
        return httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=10).text

    def samples(self, name: str) -> dict[str, float]:
        """Each sample of ``name``, keyed by its name and label set as exposed."""
        out: dict[str, float] = {}
        for line in self.metrics().splitlines():
            if line.startswith((name + "{", name + " ")):
                head, _, value = line.rpartition(" ")
                out[head] = float(value)
        return out

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        return sum(
            value
            for head, value in self.samples(name).items()
            if all(f'{k}="{v}"' in head for k, v in labels.items())
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "operator_args(*args): extra arguments for the `operator` fixture's process"
    )


@pytest.fixture
def operator(kc: Kubectl, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Operator]:
    marker = request.node.get_closest_marker("operator_args")
    extra = [str(a) for a in marker.args] if marker else []
    op = Operator(kc.cluster, kc.ns, tmp_path / "operator.log", *extra).start()
    try:
        yield op
    finally:
        op.stop()
        # Brains carry kopf's finalizer: let a clean namespace deletion proceed without an operator.
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
