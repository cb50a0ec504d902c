"""Who the rendered NetworkPolicies let in, evaluated the way a CNI does (labels, namespaces, ports).
The embedder's /metrics shares its port: Prometheus must get in, an arbitrary pod must not, and a
pod that only copies Prometheus's label in another namespace must not either. The same rules are
enforced by kube-router on the real node in e2e/pods/test_pods_story.py
(test_network_policies_on_real_pods)."""

from __future__ import annotations

from typing import Any

from .helpers import brain, by_key, deep_set, everything_on, render, sample

MON_NS = {"kubernetes.io/metadata.name": "monitoring"}
TEAM_NS = {"kubernetes.io/metadata.name": "team-ns"}
OTHER_NS = {"kubernetes.io/metadata.name": "other-team"}
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


def _database_policy() -> dict[str, Any]:
    return by_key(render())[("NetworkPolicy", "team-database")]


def test_prometheus_from_the_monitoring_namespace_scrapes_the_embedder() -> None:
    pol = _embedder_policy()
    assert admits(pol, ns=MON_NS, pod=PROMETHEUS, port=8080)


def test_a_scraper_in_a_labelled_namespace_scrapes_the_embedder() -> None:
    ns = {"kubernetes.io/metadata.name": "observability", "brain.dev/metrics": "scrape"}
    assert admits(_embedder_policy(), ns=ns, pod={"app": "vmagent"}, port=8080)


def test_a_pod_copying_prometheus_label_in_another_namespace_is_refused() -> None:
    # Anyone who can create a pod in some namespace can give it this label: the namespace is what
    # the label cannot forge (kubernetes.io/metadata.name is set by the API server).
    assert not admits(_embedder_policy(), ns=OTHER_NS, pod=PROMETHEUS, port=8080)
    assert not admits(_embedder_policy(), ns=TEAM_NS, pod=PROMETHEUS, port=8080)


def test_the_prometheus_namespace_is_the_one_the_spec_names() -> None:
    spec = deep_set(sample("brain.yaml"), "spec.networkPolicies.prometheusNamespace", "observability")
    pol = by_key(render(brain(spec)))[("NetworkPolicy", "team-embedder")]
    assert admits(pol, ns={"kubernetes.io/metadata.name": "observability"}, pod=PROMETHEUS, port=8080)
    assert not admits(pol, ns=MON_NS, pod=PROMETHEUS, port=8080)


def test_the_embedder_stays_closed_to_other_pods() -> None:
    pol = _embedder_policy()
    assert not admits(pol, ns=MON_NS, pod={"app": "grafana"}, port=8080)
    assert not admits(pol, ns=OTHER_NS, pod={"app": "x"}, port=8080)
    assert not admits(pol, ns=TEAM_NS, pod={"app": "not-the-brain"}, port=8080)
    assert not admits(pol, ns=MON_NS, pod=PROMETHEUS, port=5432)


def test_the_brain_itself_still_reaches_the_embedder() -> None:
    pol = _embedder_policy()
    assert admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "gateway"}, port=8080)
    assert admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "ingest"}, port=8080)
    assert not admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "database"}, port=8080)


def test_the_reindex_migration_reaches_the_embedder() -> None:
    # It embeds the whole index with the new model: without it a model change never finished
    # wherever policies are enforced.
    pol = _embedder_policy()
    assert admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "reindex"}, port=8080)


def test_the_backup_job_reaches_the_database_not_the_embedder() -> None:
    """spec.backup's pg_dump pod holds the backup login's DSN: the database admits it; it never
    embeds, so the embedder does not; like every job pod it accepts nothing."""
    pod = {**BRAIN, "app.kubernetes.io/component": "backup"}
    assert admits(_database_policy(), ns=TEAM_NS, pod=pod, port=5432)
    assert not admits(_embedder_policy(), ns=TEAM_NS, pod=pod, port=8080)
    assert "ingress" not in by_key(render())[("NetworkPolicy", "team-backup")]["spec"]


def test_only_the_pods_holding_the_dsn_reach_the_database() -> None:
    pol = _database_policy()
    for component in ("gateway", "ingest", "distill", "digest", "reindex", "backup"):
        assert admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": component}, port=5432)
    # The Brain's other pods hold no DSN; nor does anything else in the namespace or elsewhere.
    for component in ("embedder", "database"):
        assert not admits(pol, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": component}, port=5432)
    assert not admits(pol, ns=TEAM_NS, pod={"app": "fake-llm"}, port=5432)
    assert not admits(pol, ns=OTHER_NS, pod={**BRAIN, "app.kubernetes.io/component": "gateway"}, port=5432)
    assert not admits(pol, ns=MON_NS, pod=PROMETHEUS, port=5432)


def test_prometheus_reaches_the_gateway_too() -> None:
    gw = by_key(render())[("NetworkPolicy", "team-gateway")]
    assert admits(gw, ns=MON_NS, pod=PROMETHEUS, port=4000)


def test_the_gateway_pod_is_open_only_on_its_api_port() -> None:
    gw = by_key(render())[("NetworkPolicy", "team-gateway")]
    assert admits(gw, ns=OTHER_NS, pod={"app": "x"}, port=4000)
    assert not admits(gw, ns=OTHER_NS, pod={"app": "x"}, port=2000)
    assert not admits(gw, ns=MON_NS, pod=PROMETHEUS, port=2000)  # no tunnel, no sidecar port


def test_the_tunnel_metrics_port_admits_only_the_scrapers() -> None:
    # cloudflared's port serves its metrics (scraped with a PodMonitor) and its /debug/pprof.
    gw = by_key(render(everything_on()))[("NetworkPolicy", "team-gateway")]
    assert admits(gw, ns=MON_NS, pod=PROMETHEUS, port=2000)
    assert not admits(gw, ns=OTHER_NS, pod=PROMETHEUS, port=2000)
    assert not admits(gw, ns=TEAM_NS, pod={**BRAIN, "app.kubernetes.io/component": "ingest"}, port=2000)
    assert admits(gw, ns=OTHER_NS, pod={"app": "x"}, port=4000)
