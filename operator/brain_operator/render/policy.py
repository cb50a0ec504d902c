"""PodDisruptionBudgets and NetworkPolicies.

Network model: only the gateway accepts traffic from outside the Brain, and only on its API port
(the cloudflared sidecar's metrics and debug port in the same pod admits only the metrics scrapers
below); the database only
from the pods that hold its DSN (the gateway, the ingest/distill/digest jobs, the reindex
migration and spec.backup's pg_dump job); the embedder only from those (the backup job aside) and
from Prometheus (its /metrics shares the embedder's port, so without that rule `EmbedderDown`
fired wherever policies are enforced); job pods accept nothing. Egress stays open (providers, git remotes).

Which scrapers get in: pods labelled ``app.kubernetes.io/name: prometheus`` in the namespace
``spec.networkPolicies.prometheusNamespace`` names (``monitoring`` by default), matched by its
``kubernetes.io/metadata.name``, which the API server sets and nobody can change: what
prometheus-operator, kube-prometheus-stack and the prometheus-community chart label their server
pods, but a pod label anyone who can create a pod anywhere can copy, so the label alone would let
any namespace in, to ``/v1/embeddings`` too. And every pod of a namespace labelled
``brain.dev/metrics: scrape`` (any other scraper: labelling a namespace takes rights over the
namespace itself, not just over pods in it).

Inside the Brain's namespace a peer is recognised by its labels, which anyone allowed to create a
pod there can set (a NetworkPolicy cannot select by ServiceAccount). Such a person can already
mount the DSN Secret into that pod, so the labels give nothing the pod-create right does not; what
the rules keep out are other namespaces and the namespace's other workloads (docs/security.md,
"Network policies").
"""

from __future__ import annotations

from typing import Any

from brain_operator.render import names
from brain_operator.render.common import (
    BRAIN_LABEL,
    CLOUDFLARED_METRICS_PORT,
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
    """Pods of this Brain in its own namespace (no namespaceSelector), of the named components."""
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
#: The label the API server puts on every namespace (its name; immutable since Kubernetes 1.22).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: Components whose pods get gateway.data_plane_env (the DSN and the embedder's URL): the only
#: clients of the database and of the embedder.
DATA_PLANE_CLIENTS = ["gateway", "ingest", "distill", "digest", "reindex"]
#: The database's clients: those, and spec.backup's pg_dump job (which never calls the embedder).
DATABASE_CLIENTS = [*DATA_PLANE_CLIENTS, "backup"]
#: Job components: they accept nothing.
JOBS = ["ingest", "distill", "digest", "reindex", "backup"]


def metrics_scrapers(prometheus_namespace: str) -> list[dict[str, Any]]:
    """The peers allowed to reach a component's metrics port from outside the Brain: Prometheus in
    its namespace (both selectors in one peer: namespace AND label), or any pod of a namespace
    labelled for scraping."""
    return [
        {
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: prometheus_namespace}},
            "podSelector": {"matchLabels": dict([PROMETHEUS_POD_LABEL])},
        },
        {"namespaceSelector": {"matchLabels": dict([METRICS_SCRAPE_NAMESPACE_LABEL])}},
    ]


def render_network_policies(inp: RenderInput) -> list[Manifest]:
    settings = inp.brain.spec.network_policies
    if not settings.enabled:
        return []
    scrapers = metrics_scrapers(settings.prometheus_namespace)
    gateway: list[dict[str, Any]] = [{"ports": [{"port": GATEWAY_PORT, "protocol": "TCP"}]}]
    if inp.brain.spec.tunnel is not None:
        # The cloudflared sidecar's port serves its metrics (what docs/operations.md says to scrape
        # with a PodMonitor) and its /debug/pprof: the scrapers only, never anyone else.
        gateway.append({"from": scrapers, "ports": [{"port": CLOUDFLARED_METRICS_PORT, "protocol": "TCP"}]})
    out = [
        # Anyone on the API port; the pod's other ports only as listed above.
        _policy(inp, "gateway", gateway),
        _policy(
            inp,
            "embedder",
            [
                {
                    "from": [_from_components(inp, DATA_PLANE_CLIENTS)],
                    "ports": [{"port": EMBEDDER_PORT, "protocol": "TCP"}],
                },
                {"from": scrapers, "ports": [{"port": EMBEDDER_PORT, "protocol": "TCP"}]},
            ],
        ),
        *[_policy(inp, job, None) for job in JOBS],
    ]
    if inp.brain.spec.database.mode == "managed":
        # CloudNativePG instances also talk to each other and to their operator (port 8000); that
        # operator ships its own policies, so only the StatefulSet database is fenced here.
        out.append(
            _policy(
                inp,
                "database",
                [
                    {
                        "from": [_from_components(inp, DATABASE_CLIENTS)],
                        "ports": [{"port": POSTGRES_PORT, "protocol": "TCP"}],
                    }
                ],
            )
        )
    return out
