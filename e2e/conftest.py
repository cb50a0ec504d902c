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
from tests.kit.cluster import KubeCluster, kube_cluster, kube_namespace, run_tool  # noqa: F401 (fixtures)

# Also registered by tests/conftest.py; here too for `pytest e2e ...` alone (xdist workers apart).
pytest_plugins = ["tests.kit.workers", "tests.kit.skip_budget"]

CLUSTERS = ["local", "kind"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kind: needs a kind cluster (Docker)")
    config.addinivalue_line("markers", "e2e: end-to-end")


def _wanted() -> list[str]:
    only = os.environ.get("BRAIN_E2E_CLUSTER")
    return [only] if only else CLUSTERS


KIND_CLUSTER = os.environ.get("KIND_CLUSTER", "brain")


def docker_engine() -> str | None:
    """None when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    return None if proc.returncode == 0 else "no Docker engine reachable (docker info failed)"


def kind_skip_reason(
    engine: str | None, kind_cli: bool, clusters: list[str], node_images: list[str], cluster: str
) -> str | None:
    """Why the kind e2e cannot run here, or None. Pure, so each case is tested without a cluster.
    A Docker engine alone is not enough: kind needs its node image (kindest/node), which comes
    from a registry; where none is reachable and none is loaded, there is no cluster to test."""
    if engine:
        return engine
    if not kind_cli:
        return "kind/kubectl not on PATH"
    if cluster in clusters:
        return None
    if not node_images:
        return (
            f"no kind cluster {cluster!r} and no kind node image can be had here: none is loaded "
            "(docker images kindest/node); hack/kind-up.sh pulls one where a registry is reachable"
        )
    return f"no kind cluster {cluster!r} yet (node image {node_images[0]} is here): run bash hack/kind-up.sh"


def kind_probe(cluster: str = KIND_CLUSTER) -> str | None:
    """kind_skip_reason() over what this machine has."""
    engine = docker_engine()
    kind_cli = shutil.which("kind") is not None and shutil.which("kubectl") is not None
    clusters: list[str] = []
    images: list[str] = []
    if engine is None:
        out = subprocess.run(
            ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "kindest/node"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        images = out.stdout.split()
    if engine is None and kind_cli:
        out = subprocess.run(["kind", "get", "clusters"], capture_output=True, text=True, timeout=30)
        clusters = out.stdout.split()
    return kind_skip_reason(engine, kind_cli, clusters, images, cluster)


@dataclass
class E2ECluster:
    kind: str  # "local" | "kind"
    kubectl_env: dict[str, str]

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        return run_tool("kubectl", *args, env=self.kubectl_env, input=input, check=check).stdout


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
        why = kind_probe()
        if why:
            pytest.skip(f"kind e2e skipped: {why}. It runs in CI (.github/workflows/e2e-kind.yml).")
        env = dict(os.environ)
        subprocess.run(["kubectl", "config", "use-context", f"kind-{KIND_CLUSTER}"], check=True, env=env)
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
