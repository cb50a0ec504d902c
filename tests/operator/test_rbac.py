"""The install manifests' RBAC: cluster-wide (one ClusterRole) and namespaced (a Role per watched
namespace, a ClusterRole only for the cluster-scoped reads kopf needs)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from brain_operator import rbac

from .helpers import ROOT


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def kinds(docs: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(d["kind"], d["metadata"].get("namespace")) for d in docs]


def test_no_wildcards_and_every_rule_says_why() -> None:
    for groups, resources, verbs, why in rbac.RULES:
        assert "*" not in groups + resources + verbs
        assert why


def test_cluster_install_is_unchanged_by_default() -> None:
    docs = rbac.install_manifests()
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert role["rules"] == rbac.rules()
    assert ("ClusterKopfPeering", None) in kinds(docs)
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding", "KopfPeering")]
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deploy["spec"]["template"]["spec"]["containers"][0]["args"][0] == "--all-namespaces"


def test_namespaced_install_grants_a_role_per_watched_namespace() -> None:
    docs = rbac.install_manifests("ops", watch_namespaces=["team-a", "team-b", "team-a"])
    roles = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "Role"}
    bindings = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "RoleBinding"}
    peerings = {d["metadata"]["namespace"] for d in docs if d["kind"] == "KopfPeering"}
    assert set(roles) == set(bindings) == peerings == {"team-a", "team-b"}
    for ns, binding in bindings.items():
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": roles[ns]["metadata"]["name"],
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "brain-operator", "namespace": "ops"}
        ]

    role_grants = grants(roles["team-a"]["rules"])
    assert not {r for _, r, _ in role_grants} & rbac.CLUSTER_SCOPED  # a Role cannot grant them anyway
    # Namespaced + the small ClusterRole = the cluster install, less ClusterKopfPeerings.
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    cluster_grants = grants(cluster_role["rules"])
    assert {r for _, r, _ in cluster_grants} == {"namespaces", "customresourcedefinitions"}
    assert {v for _, _, v in cluster_grants} == {"get", "list", "watch"}
    wanted = {g for g in grants(rbac.rules()) if g[1] != "clusterkopfpeerings"}
    assert role_grants | cluster_grants == wanted
    assert "ClusterKopfPeering" not in [d["kind"] for d in docs]

    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--namespace=team-a", "--namespace=team-b", "--peering", "brain-operator"]
    assert deploy["metadata"]["namespace"] == "ops"


@pytest.mark.parametrize("bad", [[], ["team-*"], ["!kube-system"]])
def test_namespaced_install_needs_literal_namespaces(bad: list[str]) -> None:
    with pytest.raises(ValueError, match="watch_namespaces"):
        rbac.install_manifests(watch_namespaces=bad)


def test_the_chart_splits_the_rules_the_same_way() -> None:
    """charts/brain-operator/files/rbac-rules.json (hack/chart-sync.py) and rbac.py agree."""
    path = ROOT / "charts" / "brain-operator" / "files" / "rbac-rules.json"
    if not path.exists():
        pytest.skip("no chart in this checkout")
    chart = json.loads(path.read_text())
    assert grants(chart["namespacedMode"]) == grants(rbac.namespaced_rules())
    assert grants(chart["namespacedModeCluster"]) == grants(rbac.namespaced_mode_cluster_rules())
