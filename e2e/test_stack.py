"""The cluster path of the README: install the chart, apply the samples, the operator builds the
stack and reports it; its metrics carry every operator series the dashboards and alerts query."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.kit.poll import wait_for

from brain.local.devdb import free_port

from .conftest import E2ECluster
from .story import helm_installed_operator

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


@pytest.fixture
def operator_metrics(e2e_cluster: E2ECluster, team_ns: str, tmp_path: Path) -> Iterator[str]:
    """local: helm-install the chart into the team namespace (namespaced mode), then run the operator
    process with the Deployment's own arguments (pods are fake there). kind: port-forward the real one."""
    env = e2e_cluster.kubectl_env
    if e2e_cluster.kind == "kind":
        port = free_port()
        pf = subprocess.Popen(
            ["kubectl", "-n", "brain-system", "port-forward", "deploy/brain-operator", f"{port}:8080"],
            env=env,
        )
        try:
            yield f"http://127.0.0.1:{port}/metrics"
        finally:
            pf.terminate()
            pf.wait(timeout=30)
        return
    with helm_installed_operator(e2e_cluster, team_ns, tmp_path) as op:
        yield op.metrics_url


@pytest.mark.e2e
def test_samples_become_a_stack_and_metrics_flow(
    e2e_cluster: E2ECluster, team_ns: str, operator_metrics: str
) -> None:
    k = e2e_cluster.kubectl
    if e2e_cluster.kind == "local":
        for sample in ("brain.yaml", "routingpolicy.yaml", "memorysource-git.yaml"):
            k("apply", "-n", team_ns, "-f", str(SAMPLES / sample))

    def children() -> bool:
        out = k(
            "get", "deploy,statefulset,cronjob", "-n", team_ns, "-l", "brain.dev/brain=team", "-o", "name"
        )
        names = set(out.split())
        return {"deployment.apps/team-gateway", "deployment.apps/team-embedder"} <= names

    wait_for("the operator to render the Brain's children", children, timeout=180)

    def has_conditions() -> bool:
        brain = json.loads(k("get", "brain", "team", "-n", team_ns, "-o", "json"))
        types = {c["type"] for c in (brain.get("status") or {}).get("conditions") or []}
        return {"Ready", "DatabaseReady", "EmbedderReady", "GatewayReady"} <= types

    wait_for("Brain status conditions", has_conditions, timeout=180)

    def scrape() -> str | None:
        try:
            with urllib.request.urlopen(operator_metrics, timeout=5) as r:
                body = r.read().decode()
        except OSError:
            return None
        return body if "brain_operator_reconcile_total{" in body else None

    body = wait_for("operator metrics", scrape, timeout=120)
    exposed = set(re.findall(r"^# TYPE (\S+) ", body, re.M))
    for name in (
        "brain_operator_reconcile_total",
        "brain_operator_reconcile_duration_seconds",
        "brain_operator_reconcile_errors_total",
        "brain_operator_healthy",
        "brain_ready",
        "brain_index_entries",
    ):
        assert name in exposed or f"{name.removesuffix('_total')}" in exposed, name
    if e2e_cluster.kind == "kind":
        k("wait", "brain/team", "-n", team_ns, "--for=condition=Ready", "--timeout=600s")
