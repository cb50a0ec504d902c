"""The cluster path of the README: install the chart, apply the samples, the operator builds the
stack and reports it; its metrics carry every operator series the dashboards and alerts query."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import E2ECluster
from .story import wait_for

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "brain-operator"
SAMPLES = ROOT / "samples"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def operator_metrics(e2e_cluster: E2ECluster, team_ns: str) -> Iterator[str]:
    """local: helm-install the chart into the team namespace (namespaced mode), then run the operator
    process with the Deployment's own arguments (pods are fake there). kind: port-forward the real one."""
    env = e2e_cluster.kubectl_env
    if e2e_cluster.kind == "kind":
        port = _free_port()
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
    rel = f"e2e-{uuid.uuid4().hex[:6]}"
    subprocess.run(
        ["helm", "install", rel, str(CHART), "-n", team_ns, "--set", "watch.scope=namespaced"],
        check=True,
        env=env,
        capture_output=True,
        timeout=180,
    )
    dep = json.loads(
        e2e_cluster.kubectl("get", "deploy", f"{rel}-brain-operator", "-n", team_ns, "-o", "json")
    )
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    port = _free_port()
    args = [a for a in args if not a.startswith("--metrics-port")] + [f"--metrics-port={port}"]
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"{rel}-operator.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "brain_operator", *args], env=env, stdout=log, stderr=log)
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        subprocess.run(["helm", "uninstall", rel, "-n", team_ns], env=env, capture_output=True, timeout=120)


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
