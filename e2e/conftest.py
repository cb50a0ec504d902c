"""End-to-end suite, parameterised by cluster.

    pytest e2e                          # local control plane; kind skipped without Docker
    BRAIN_E2E_CLUSTER=kind pytest e2e   # only kind (after `bash hack/kind-up.sh`)

`local`: the local control plane (hack/cluster-up.sh, kwok fakes pods), the chart installed with
helm, the operator run as a local process with the chart's arguments. `kind`: the cluster that
hack/kind-up.sh built (real images, real pods, chart and samples installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from tests.kube_fixtures import KubeCluster, kube_cluster, kube_namespace  # noqa: F401 (fixtures)

CLUSTERS = ["local", "kind"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kind: needs a kind cluster (Docker)")
    config.addinivalue_line("markers", "e2e: end-to-end")


def _wanted() -> list[str]:
    only = os.environ.get("BRAIN_E2E_CLUSTER")
    return [only] if only else CLUSTERS


def docker_engine() -> str | None:
    """None when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    return None if proc.returncode == 0 else "no Docker engine reachable (docker info failed)"


@dataclass
class E2ECluster:
    kind: str  # "local" | "kind"
    kubectl_env: dict[str, str]

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        proc = subprocess.run(
            ["kubectl", *args], capture_output=True, text=True, env=self.kubectl_env, input=input, timeout=120
        )
        if check and proc.returncode:
            raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
        return proc.stdout


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "e2e_cluster_kind" in metafunc.fixturenames:
        params = [
            pytest.param(c, marks=[pytest.mark.kind] if c == "kind" else [pytest.mark.cluster], id=c)
            for c in _wanted()
        ]
        metafunc.parametrize("e2e_cluster_kind", params)


@pytest.fixture
def e2e_cluster(e2e_cluster_kind: str, request: pytest.FixtureRequest) -> Iterator[E2ECluster]:
    if e2e_cluster_kind == "kind":
        why = docker_engine()
        if why:
            pytest.skip(f"kind e2e skipped: {why}. It runs in CI (.github/workflows/e2e-kind.yml).")
        if shutil.which("kind") is None or shutil.which("kubectl") is None:
            pytest.skip("kind e2e skipped: kind/kubectl not on PATH")
        env = dict(os.environ)
        subprocess.run(["kubectl", "config", "use-context", "kind-brain"], check=True, env=env)
        yield E2ECluster("kind", env)
        return
    kc: KubeCluster = request.getfixturevalue("kube_cluster")
    yield E2ECluster("local", kc.env)


@pytest.fixture
def team_ns(e2e_cluster: E2ECluster) -> Iterator[str]:
    if e2e_cluster.kind == "kind":
        yield os.environ.get("TEAM_NS", "team")  # hack/kind-up.sh installed chart and samples there
        return
    ns = f"e2e-{uuid.uuid4().hex[:8]}"
    e2e_cluster.kubectl("create", "namespace", ns)
    yield ns
    e2e_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
