"""Spec changes touch only what they affect; config changes roll the gateway; features appear on demand."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from brain_operator.render import Capabilities, GeneratedSecrets, RenderInput, render_brain
from brain_operator.render.common import CONFIG_HASH_ANNOTATION

from .helpers import brain, by_key, deep_set, everything_on, policy, render, sample, source


def _changed(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> set[str]:
    a, b = by_key(before), by_key(after)
    return {f"{k[0]}/{k[1]}" for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def _hash(manifests: list[dict[str, Any]]) -> str:
    dep = by_key(manifests)[("Deployment", "team-gateway")]
    return str(dep["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION])


def test_rendering_is_deterministic() -> None:
    assert render() == render()


def test_gateway_replicas_change_touches_only_the_gateway_deployment() -> None:
    before = render()
    after = render(brain(deep_set(sample("brain.yaml"), "spec.gateway.replicas", 3)))
    assert _changed(before, after) == {"Deployment/team-gateway"}
    assert _hash(before) == _hash(after)  # no pod roll for a scale change


def test_embedder_replicas_change_adds_its_pdb() -> None:
    before = render()
    after = render(brain(deep_set(sample("brain.yaml"), "spec.embedding.replicas", 2)))
    assert _changed(before, after) == {"Deployment/team-embedder", "PodDisruptionBudget/team-embedder"}


def test_config_change_rolls_the_gateway() -> None:
    before = render()
    after = render(brain(deep_set(sample("brain.yaml"), "spec.gateway.retrieval.topK", 8)))
    assert _changed(before, after) == {"ConfigMap/team-gateway-config", "Deployment/team-gateway"}
    assert _hash(before) != _hash(after)


def test_routing_policy_changes_only_the_gateway_config() -> None:
    before = render()
    after = render(policies=(policy(),))
    assert _changed(before, after) == {"ConfigMap/team-gateway-config", "Deployment/team-gateway"}
    assert _hash(before) != _hash(after)


def test_memory_source_adds_its_own_cronjob_and_config() -> None:
    assert _changed(render(), render(sources=(source(),))) == {
        "ConfigMap/team-source-team-memories",
        "CronJob/team-ingest-team-memories",
    }


def test_tunnel_adds_cloudflared_sidecar_with_token_from_secret() -> None:
    doc = deep_set(sample("brain.yaml"), "spec.tunnel", {"tokenSecretRef": {"name": "cf", "key": "token"}})
    dep = by_key(render(brain(doc)))[("Deployment", "team-gateway")]
    containers = dep["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["gateway", "cloudflared"]
    assert containers[1]["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "cf", "key": "token"}


def test_service_monitor_needs_both_the_flag_and_the_crd() -> None:
    b = everything_on()
    assert ("ServiceMonitor", "team") not in by_key(render(b, caps=Capabilities(service_monitor=False)))
    assert ("ServiceMonitor", "team") in by_key(render(b, caps=Capabilities(service_monitor=True)))
    assert ("ServiceMonitor", "team") not in by_key(render(caps=Capabilities(service_monitor=True)))


def test_external_database_renders_no_database_and_reads_the_users_secret() -> None:
    ext = {"external": {"secretRef": {"name": "pg", "key": "url"}}}
    out = by_key(render(brain(deep_set(sample("brain.yaml"), "spec.database", ext))))
    assert not [k for k in out if k[0] in ("StatefulSet", "Cluster") or k[1] == "team-db-credentials"]
    env = {
        e["name"]: e
        for e in out[("Deployment", "team-gateway")]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["BRAIN_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "pg", "key": "url"}
    assert ("NetworkPolicy", "team-database") not in out


def test_cloudnativepg_database_is_a_cluster() -> None:
    out = by_key(
        render(brain(deep_set(sample("brain.yaml"), "spec.database", {"cloudNativePG": {"instances": 2}})))
    )
    cluster = out[("Cluster", "team-db")]
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1" and cluster["spec"]["instances"] == 2
    assert (
        "CREATE EXTENSION IF NOT EXISTS vector"
        in cluster["spec"]["bootstrap"]["initdb"]["postInitApplicationSQL"]
    )
    env = {
        e["name"]: e
        for e in out[("Deployment", "team-gateway")]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    # Each pod connects as its own login (CNPG's managed roles, issue #26; its DSN names the -rw
    # Service); CNPG's application owner `brain` is for the migration step only.
    assert env["BRAIN_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "team-db-role-gateway",
        "key": "dsn",
    }
    cronjobs = [m for (kind, _), m in out.items() if kind == "CronJob"]
    assert cronjobs
    for cj in cronjobs:
        [job] = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        refs = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in job["env"]}
        component = cj["metadata"]["labels"]["app.kubernetes.io/component"]
        assert refs["BRAIN_DATABASE_URL"] == {"name": f"team-db-role-{component}", "key": "dsn"}, cj[
            "metadata"
        ]["name"]
    # Two instances: an acknowledged write waits for the standby, so a failover loses none.
    assert cluster["spec"]["postgresql"]["synchronous"] == {
        "method": "any",
        "number": 1,
        "dataDurability": "preferred",
    }
    single = by_key(
        render(brain(deep_set(sample("brain.yaml"), "spec.database", {"cloudNativePG": {"instances": 1}})))
    )
    assert "postgresql" not in single[("Cluster", "team-db")]["spec"]
    # A busy node must not fail the primary's isolation check (1 s by default) and restart it.
    assert cluster["spec"]["probes"]["liveness"]["isolationCheck"]["requestTimeout"] >= 5000
    # A deleted primary must not wait CNPG's 180 s for the gateways' pooled sessions to leave.
    assert cluster["spec"]["smartShutdownTimeout"] <= 15


def test_secrets_are_rendered_only_when_not_supplied() -> None:
    out = by_key(render())
    creds = out[("Secret", "team-db-credentials")]["data"]
    dsn = base64.b64decode(creds["dsn"]).decode()
    assert dsn == "postgresql://brain:pw-123@team-db.team-ns.svc:5432/brain"
    doc = deep_set(
        sample("brain.yaml"), "spec.gateway.auth", {"masterKeySecretRef": {"name": "mk", "key": "k"}}
    )
    assert ("Secret", "team-master-key") not in by_key(render(brain(doc)))


def test_renderer_never_invents_secrets() -> None:
    with pytest.raises(ValueError, match="generated password"):
        render_brain(RenderInput(brain=brain(), secrets=GeneratedSecrets()))


def test_network_policies_fence_database_and_embedder() -> None:
    out = by_key(render())
    clients = ["digest", "distill", "gateway", "ingest", "reindex"]  # the pods holding the DSN
    db = out[("NetworkPolicy", "team-database")]["spec"]["ingress"][0]["from"][0]["podSelector"]
    assert db["matchLabels"] == {"app.kubernetes.io/instance": "team", "brain.dev/brain": "team"}
    assert db["matchExpressions"] == [
        {"key": "app.kubernetes.io/component", "operator": "In", "values": sorted([*clients, "backup"])}
    ]
    emb = out[("NetworkPolicy", "team-embedder")]["spec"]["ingress"][0]["from"][0]["podSelector"]
    assert emb["matchExpressions"][0]["values"] == clients  # pg_dump never embeds
    for job in ("ingest", "distill", "digest", "reindex", "backup"):  # job pods accept nothing
        assert "ingress" not in out[("NetworkPolicy", f"team-{job}")]["spec"]
    off = deep_set(sample("brain.yaml"), "spec.networkPolicies", {"enabled": False})
    assert not [k for k in by_key(render(brain(off))) if k[0] == "NetworkPolicy"]


def test_the_embedders_thread_pool_follows_its_own_cpu_limit_not_the_nodes_cores() -> None:
    from brain.embedder.model import threads_from_env

    spec = sample("brain.yaml")
    spec = deep_set(spec, "spec.embedding.resources", {"limits": {"cpu": "1500m", "memory": "2Gi"}})
    dep = by_key(render(brain(spec)))[("Deployment", "team-embedder")]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    ref = env["BRAIN_EMBEDDER_THREADS"]["valueFrom"]["resourceFieldRef"]
    assert ref == {"containerName": container["name"], "resource": "limits.cpu", "divisor": "1"}
    assert container["resources"]["limits"]["cpu"] == "1500m"
    # the kubelet hands 1500m over as "2" (rounded up to whole cores); the embedder takes it as its pool
    assert threads_from_env(None, {"BRAIN_EMBEDDER_THREADS": "2"}) == 2
