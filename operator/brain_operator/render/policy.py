"""PodDisruptionBudgets and NetworkPolicies.

Network model: only the gateway accepts traffic from outside the Brain; the database only from
this Brain's own pods; the embedder only from the gateway and the jobs, and from Prometheus (its
/metrics shares the embedder's port, so without that rule `EmbedderDown` fired wherever policies
are enforced); job pods accept nothing. Egress stays open (providers, git remotes).

Which scrapers get in: pods labelled ``app.kubernetes.io/name: prometheus`` in any namespace (what
prometheus-operator, kube-prometheus-stack and the prometheus-community chart label their server
pods), and every pod of a namespace labelled ``brain.dev/metrics: scrape`` (any other scraper:
label its namespace). Not "any namespace on the port": the port also serves /v1/embeddings.
"""

from __future__ import annotations

from typing import Any

from brain_operator.render import names
from brain_operator.render.common import (
    BRAIN_LABEL,
    EMBEDDER_PORT,
    GATEWAY_PORT,
    POSTGRES_PORT,
    Manifest,
    RenderInput,
    child_name,
    meta,
    selector_labels,
)


def render_pdbs(inp: RenderInput) -> list[Manifest]:
    """One PDB per multi-replica Deployment; a single replica would make a PDB block node drains."""
    out = []
    spec = inp.brain.spec
    for component, name, replicas in (
        ("gateway", names.gateway(inp.name), spec.gateway.replicas),
        ("embedder", names.embedder(inp.name), spec.embedding.replicas),
    ):
        if replicas < 2:
            continue
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": meta(inp, name, component),
                "spec": {
                    "maxUnavailable": 1,
                    "selector": {"matchLabels": selector_labels(inp.name, component)},
                },
            }
        )
    return out


def _policy(inp: RenderInput, component: str, ingress: list[dict[str, Any]] | None) -> Manifest:
    spec: dict[str, Any] = {
        "podSelector": {"matchLabels": selector_labels(inp.name, component)},
        "policyTypes": ["Ingress"],
    }
    if ingress:
        spec["ingress"] = ingress
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(inp, child_name(inp.name, component), component),
        "spec": spec,
    }


def _from_components(inp: RenderInput, components: list[str]) -> dict[str, Any]:
    return {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/instance": inp.name, BRAIN_LABEL: inp.name},
            "matchExpressions": [
                {"key": "app.kubernetes.io/component", "operator": "In", "values": sorted(components)}
            ],
        }
    }


METRICS_SCRAPE_NAMESPACE_LABEL = ("brain.dev/metrics", "scrape")
PROMETHEUS_POD_LABEL = ("app.kubernetes.io/name", "prometheus")


def metrics_scrapers() -> list[dict[str, Any]]:
    """The peers allowed to reach a component's metrics port from outside the Brain."""
    return [
        {"namespaceSelector": {}, "podSelector": {"matchLabels": dict([PROMETHEUS_POD_LABEL])}},
        {"namespaceSelector": {"matchLabels": dict([METRICS_SCRAPE_NAMESPACE_LABEL])}},
    ]


def render_network_policies(inp: RenderInput) -> list[Manifest]:
    if not inp.brain.spec.network_policies.enabled:
        return []
    brain_pods = {
        "podSelector": {"matchLabels": {"app.kubernetes.io/instance": inp.name, BRAIN_LABEL: inp.name}}
    }
    out = [
        _policy(inp, "gateway", [{"ports": [{"port": GATEWAY_PORT, "protocol": "TCP"}]}]),
        _policy(
            inp,
            "embedder",
            [
                {
                    "from": [_from_components(inp, ["gateway", "ingest", "distill", "digest"])],
                    "ports": [{"port": EMBEDDER_PORT, "protocol": "TCP"}],
                },
                {"from": metrics_scrapers(), "ports": [{"port": EMBEDDER_PORT, "protocol": "TCP"}]},
            ],
        ),
        *[_policy(inp, job, None) for job in ("ingest", "distill", "digest")],
    ]
    if inp.brain.spec.database.mode == "managed":
        # CloudNativePG instances also talk to each other and to their operator (port 8000); that
        # operator ships its own policies, so only the StatefulSet database is fenced here.
        out.append(
            _policy(
                inp,
                "database",
                [{"from": [brain_pods], "ports": [{"port": POSTGRES_PORT, "protocol": "TCP"}]}],
            )
        )
    return out
