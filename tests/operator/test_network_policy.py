"""Who the rendered NetworkPolicies let in, evaluated the way a CNI does (labels, namespaces, ports).
The embedder's /metrics shares its port: Prometheus must get in, an arbitrary pod must not."""

from __future__ import annotations

from typing import Any

from .helpers import by_key, render

MON_NS = {"kubernetes.io/metadata.name": "monitoring"}
TEAM_NS = {"kubernetes.io/metadata.name": "team-ns"}
PROMETHEUS = {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}
BRAIN = {"app.kubernetes.io/instance": "team", "brain.dev/brain": "team"}


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        present, value = expr["key"] in labels, labels.get(expr["key"])
        op = expr["operator"]
        if (op == "In" and value not in expr["values"]) or (op == "NotIn" and value in expr["values"]):
            return False
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def admits(policy: dict[str, Any], *, ns: dict[str, str], pod: dict[str, str], port: int) -> bool:
    """NetworkPolicy ingress semantics: any rule whose ports and peers both match; a peer without a
    namespaceSelector means the policy's own namespace."""
    own_ns = policy["metadata"]["namespace"]
    for rule in policy["spec"].get("ingress") or []:
        if rule.get("ports") and not any(p["port"] == port for p in rule["ports"]):
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            ns_sel = peer.get("namespaceSelector")
            ns_ok = (
                ns.get("kubernetes.io/metadata.name") == own_ns if ns_sel is None else _matches(ns_sel, ns)
            )
            if ns_ok and _matches(peer.get("podSelector") or {}, pod):
                return True
    return False


def _embedder_policy() -> dict[str, Any]:
    return by_key(render())[("NetworkPolicy", "team-embedder")]


def test_prometheus_from_the_monitoring_namespace_scrapes_the_embedder() -> None:
    pol = _embedder_policy()
    assert admits(pol, ns=MON_NS, pod=PROMETHEUS, port=8080)


def test_a_scraper_in_a_labelled_namespace_scrapes_the_embedder() -> None:
    ns = {"kubernetes.io/metadata.name": "observability", "brain.dev/metrics": "scrape"}
    assert admits(_embedder_policy(), ns=ns, pod={"app": "vmagent"}, port=8080)


def test_the_embedder_stays_closed_to_other_pods() -> None:
    pol = _embedder_policy()
    assert not admits(pol, ns=MON_NS, pod={"app": "grafana"}, port=8080)
    assert not admits(pol, ns={"kubernetes.io/metadata.name": "other-team"}, pod={"app": "x"}, port=8080)
    assert not admits(pol, ns=TEAM_NS, pod={"app": "not-the-brain"}, port=8080)
    assert not admits(pol, ns=MON_NS, pod=PROMETHEUS, port=5432)


def test_the_brain_itself_still_reaches_the_embedder() -> None:
    pol = _embedder_policy()
    assert admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "gateway"}, port=8080)
    assert admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "ingest"}, port=8080)
    assert not admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "database"}, port=8080)


def test_prometheus_reaches_the_gateway_too() -> None:
    gw = by_key(render())[("NetworkPolicy", "team-gateway")]
    assert admits(gw, ns=MON_NS, pod=PROMETHEUS, port=4000)
