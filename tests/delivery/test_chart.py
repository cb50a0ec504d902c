"""The Helm chart, rendered with `helm template` and checked object by object (no cluster needed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from brain_operator import __version__, rbac

from .conftest import (
    CHART,
    DASHBOARDS,
    HACK,
    KUBE_VERSION,
    ROOT,
    Render,
    by_kind,
    helm,
    load_rules,
    one,
    set_args,
)

ALL_ON = {
    "monitoring.serviceMonitor.enabled": True,
    "monitoring.prometheusRule.enabled": True,
    "monitoring.grafanaDashboards.enabled": True,
    "sampleBrain.enabled": True,
}
NAMESPACED = {"watch.scope": "namespaced", "watch.namespaces": ["team-a", "team-b"]}
#: the opt-in (issue #26): every namespace, through one ClusterRole
CLUSTER = {"watch.scope": "cluster"}


def test_chart_crds_and_rbac_rules_are_in_sync_with_the_operator() -> None:
    proc = subprocess.run(
        [sys.executable, str(HACK / "chart-sync.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    shipped = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert shipped == sorted(p.name for p in (ROOT / "crds").glob("*.yaml"))
    for name in shipped:
        assert (CHART / "crds" / name).read_bytes() == (ROOT / "crds" / name).read_bytes(), name


def test_dashboards_are_generated() -> None:
    proc = subprocess.run(
        [sys.executable, str(HACK / "dashboards.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "values",
    [{}, NAMESPACED, CLUSTER, ALL_ON, {**NAMESPACED, **ALL_ON}, {**CLUSTER, **ALL_ON}],
    ids=["default", "ns", "cluster", "all", "ns-all", "cluster-all"],
)
def test_helm_lint(helm_bin: str, values: dict[str, Any]) -> None:
    proc = helm(
        helm_bin,
        "lint",
        "--strict",
        "--kube-version",
        KUBE_VERSION,
        str(CHART),
        *set_args(values),
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_default_render_has_the_operator_pieces(render: Render) -> None:
    """The default install watches its own namespace only (issue #26): a Role, a RoleBinding and a
    KopfPeering there, and the operator told so by its flags."""
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "KopfPeering",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
        ]
    )
    for kind in ("Role", "RoleBinding", "KopfPeering"):
        assert one(docs, kind)["metadata"]["namespace"] == "brain-system", kind
    dep = one(docs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["python", "-m", "brain_operator"]
    assert "--namespace=brain-system" in c["args"] and "--all-namespaces" not in c["args"]
    assert f"--peering={one(docs, 'KopfPeering')['metadata']['name']}" in c["args"]
    assert c["image"] == f"ghcr.io/brain-operator/operator:{__version__}"  # the appVersion
    # the flags the chart passes are flags the operator accepts, and mean what the RBAC grants
    from brain_operator.main import config_from_args, parse_args

    parsed = parse_args(c["args"])
    assert not parsed.all_namespaces and parsed.namespaces == ["brain-system"]
    assert config_from_args(parsed).namespaces == ["brain-system"]
    assert parsed.peering == "brain-brain-operator" and parsed.metrics_port == 8080
    assert parsed.peering_lifetime_seconds == 60
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    svc = one(docs, "Service")
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics"
    assert {p["name"] for p in c["ports"]} == {"metrics"}


@pytest.mark.parametrize("values", [{}, {**NAMESPACED, **ALL_ON}], ids=["default", "everything"])
def test_every_object_is_labelled(render: Render, values: dict[str, Any]) -> None:
    for d in render(values):
        labels = d["metadata"].get("labels") or {}
        where = f"{d['kind']}/{d['metadata']['name']}"
        assert labels.get("app.kubernetes.io/part-of") == "brain-operator", where
        assert labels.get("app.kubernetes.io/instance") == "brain", where
        assert labels.get("app.kubernetes.io/managed-by") == "Helm", where
        if d["kind"] != "Brain":
            assert labels.get("app.kubernetes.io/name") == "brain-operator", where
            assert labels.get("helm.sh/chart") == f"brain-operator-{__version__}", where


def test_pod_is_hardened(render: Render) -> None:
    pod = one(render(), "Deployment")["spec"]["template"]["spec"]
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 65532
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # a slow start (busy node) is not restarted by liveness: 5 minutes of startup probe first
    assert c["startupProbe"]["httpGet"] == c["livenessProbe"]["httpGet"]
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 300
    assert c["readinessProbe"]["httpGet"]["port"] == "metrics"
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    assert any(v["name"] == "tmp" and "emptyDir" in v for v in pod["volumes"])
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HOME"] == "/tmp" and env["TMPDIR"] == "/tmp"
    assert all("hostPath" not in v for v in pod["volumes"])


def _rules(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("apiGroups", "resources", "verbs")} for r in doc["rules"]]


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_cluster_mode_rbac_is_exactly_the_operators_rules(render: Render) -> None:
    docs = render(CLUSTER)
    assert _rules(one(docs, "ClusterRole")) == rbac.rules()
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": one(docs, "ServiceAccount")["metadata"]["name"],
            "namespace": "brain-system",
        }
    ]
    assert not by_kind(docs, "Role")
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" in args and not [a for a in args if a.startswith("--namespace")]
    assert one(docs, "ClusterKopfPeering")


def _secret_verbs(rules: list[dict[str, Any]]) -> set[str]:
    return {v for g, r, v in _grants(rules) if g == "" and r == "secrets"}


def test_default_values_grant_no_secrets_cluster_wide(render: Render) -> None:
    """Issue #26: with the default values nothing outside the release namespace can be read or
    written through the operator's token: no ClusterRole grants Secrets (nor anything but reads of
    Namespaces and CRDs), and the Role that does never lists or watches them."""
    docs = render(namespace="team-x")
    for role in by_kind(docs, "ClusterRole"):
        grants = _grants(_rules(role))
        assert not _secret_verbs(_rules(role)), role["metadata"]["name"]
        assert {r for _, r, _ in grants} == {"namespaces", "customresourcedefinitions"}
        assert {v for _, _, v in grants} <= {"get", "list", "watch"}
    (role,) = by_kind(docs, "Role")
    assert role["metadata"]["namespace"] == "team-x"
    assert _secret_verbs(_rules(role)) == {"get", "create", "patch", "delete"}


def test_cluster_scope_clusterrole_never_lists_secrets(render: Render) -> None:
    """The opt-in ClusterRole writes the generated Secrets of any namespace but cannot list or
    watch Secrets: a stolen operator token still needs each Secret's name to read it."""
    (role,) = by_kind(render(CLUSTER), "ClusterRole")
    verbs = _secret_verbs(_rules(role))
    assert verbs == {"get", "create", "patch", "delete"}
    assert not verbs & {"list", "watch", "*"}


def test_namespaced_mode_rbac_is_least_privilege(render: Render) -> None:
    docs = render(NAMESPACED)
    roles = by_kind(docs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    assert sorted(b["metadata"]["namespace"] for b in by_kind(docs, "RoleBinding")) == ["team-a", "team-b"]
    cluster = _grants(_rules(one(docs, "ClusterRole")))
    # cluster-wide only read access to cluster-scoped resources
    assert {r for _, r, _ in cluster} == {"namespaces", "customresourcedefinitions"}
    assert {v for _, _, v in cluster} <= {"get", "list", "watch"}
    for role in roles:
        granted = _grants(_rules(role)) | cluster
        wanted = {g for g in _grants(rbac.rules()) if g[1] != "clusterkopfpeerings"}
        assert granted == wanted
    peerings = by_kind(docs, "KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["team-a", "team-b"]
    assert not by_kind(docs, "ClusterKopfPeering")
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args and "--all-namespaces" not in args


def test_namespaced_mode_defaults_to_the_release_namespace(render: Render) -> None:
    for values in ({}, {"watch.scope": "namespaced"}):
        docs = render(values, namespace="team-x")
        assert [r["metadata"]["namespace"] for r in by_kind(docs, "Role")] == ["team-x"]
        assert [p["metadata"]["namespace"] for p in by_kind(docs, "KopfPeering")] == ["team-x"]


def test_no_wildcards_anywhere_in_rbac(render: Render) -> None:
    for values in ({}, NAMESPACED, CLUSTER):
        for d in render(values):
            for rule in d.get("rules", []):
                for key in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[key], (d["kind"], rule)


def test_monitoring_objects_when_enabled(render: Render) -> None:
    docs = render({**ALL_ON, "monitoring.serviceMonitor.labels": {"release": "kps"}})
    sm = one(docs, "ServiceMonitor")
    svc = one(docs, "Service")
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"]

    pr = one(docs, "PrometheusRule")
    assert pr["spec"]["groups"] == load_rules()["groups"]

    cms = {c["metadata"]["name"]: c for c in by_kind(docs, "ConfigMap")}
    assert set(cms) == {
        "brain-brain-operator-dashboard-brain-overview",
        "brain-brain-operator-dashboard-brain-operator",
    }
    for cm in cms.values():
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((key, body),) = cm["data"].items()
        assert json.loads(body) == json.loads((DASHBOARDS / key).read_text())

    brain = one(docs, "Brain")
    assert brain["apiVersion"] == "brain.dev/v1alpha1" and brain["metadata"]["namespace"] == "brain-system"


def test_runbook_base_url_is_configurable(render: Render) -> None:
    docs = render(
        {
            "monitoring.prometheusRule.enabled": True,
            "monitoring.prometheusRule.runbookBaseUrl": "https://wiki.example/rb/",
        }
    )
    urls = [
        r["annotations"]["runbook_url"]
        for g in one(docs, "PrometheusRule")["spec"]["groups"]
        for r in g["rules"]
    ]
    assert urls and all(re.fullmatch(r"https://wiki\.example/rb/[A-Za-z]+\.md", u) for u in urls), urls


def test_data_plane_images_reach_the_operator_env(render: Render) -> None:
    docs = render({"dataPlaneImages.gateway": "registry.local/gw:1", "image.digest": "sha256:" + "a" * 64})
    c = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "BRAIN_OPERATOR_GATEWAY_IMAGE", "value": "registry.local/gw:1"} in c["env"]
    assert not [e for e in c["env"] if e["name"] == "BRAIN_OPERATOR_EMBEDDER_IMAGE"]
    assert c["image"] == "ghcr.io/brain-operator/operator@sha256:" + "a" * 64
    from brain_operator.settings import images_from_env  # the names the operator reads

    assert "gateway" in images_from_env().__dataclass_fields__


def test_health_url_template_reaches_the_operator_args(render: Render) -> None:
    """The operator's own health URL (the one the master key may go to) is a chart setting; a Brain's
    annotation is not followed by an operator the chart installs (no --allow-health-url-override)."""

    def args(docs: list[dict[str, Any]]) -> list[str]:
        return list(one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])

    default = args(render({}))
    assert not [a for a in default if a.startswith("--health-url-template")]
    assert "--allow-health-url-override" not in default
    custom = args(render({"operator.healthUrlTemplate": "http://{gateway}.{namespace}.svc.mesh:4000/h"}))
    assert "--health-url-template=http://{gateway}.{namespace}.svc.mesh:4000/h" in custom


def test_single_replica_has_no_pdb(render: Render) -> None:
    assert not by_kind(render({"replicaCount": 1}), "PodDisruptionBudget")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": -1}, "/replicaCount"),
        ({"replicaCount": "two"}, "/replicaCount"),
        ({"watch.scope": "galaxy"}, "/watch/scope"),
        ({"watch.namespaces": ["Not_A_Namespace"]}, "/watch/namespaces/0"),
        ({"image.pullPolicy": "Sometimes"}, "/image/pullPolicy"),
        ({"image.digest": "md5:abc"}, "/image/digest"),
        ({"operator.metricsPort": 80}, "/operator/metricsPort"),
        ({"securityContext.allowPrivilegeEscalation": True}, "/securityContext/allowPrivilegeEscalation"),
        ({"podSecurityContext.runAsUser": 0}, "/podSecurityContext/runAsUser"),
        ({"monitoring.serviceMonitor.interval": "often"}, "/monitoring/serviceMonitor/interval"),
        (
            {"monitoring.prometheusRule.proposalMaxAgeDays": 0},
            "/monitoring/prometheusRule/proposalMaxAgeDays",
        ),
        (
            {"monitoring.prometheusRule.proposalMaxAgeDays": "a week"},
            "/monitoring/prometheusRule/proposalMaxAgeDays",
        ),
        ({"resources.limits.memory": "lots"}, "/resources/limits/memory"),
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"peering.lifetimeSeconds": 5}, "/peering/lifetimeSeconds"),
    ],
)
def test_bad_values_are_refused_with_the_field_named(
    helm_bin: str, values: dict[str, Any], message: str
) -> None:
    proc = helm(
        helm_bin,
        "template",
        "brain",
        str(CHART),
        "--kube-version",
        KUBE_VERSION,
        *set_args(values),
        check=False,
    )
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert message in proc.stderr, proc.stderr


def test_replicas_without_peering_are_refused(helm_bin: str) -> None:
    proc = helm(
        helm_bin,
        "template",
        "brain",
        str(CHART),
        "--kube-version",
        KUBE_VERSION,
        "--set",
        "peering.enabled=false",
        check=False,
    )
    assert proc.returncode != 0 and "needs peering.enabled=true" in proc.stderr
    docs = yaml.safe_load_all(
        helm(
            helm_bin,
            "template",
            "b",
            str(CHART),
            "--kube-version",
            KUBE_VERSION,
            "--set",
            "peering.enabled=false",
            "--set",
            "replicaCount=1",
        ).stdout
    )
    dep = next(d for d in docs if d and d["kind"] == "Deployment")
    assert "--standalone" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


OPAQUE = {"resources", "podSecurityContext", "securityContext", "sampleBrain.spec"}


def test_values_yaml_is_documented_line_by_line() -> None:
    """Every key down to the second level has a comment right above it (maps we pass through are exempt)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    path: list[tuple[int, str]] = []
    missing = []
    for i, line in enumerate(lines):
        m = re.match(r"^( *)([A-Za-z][\w.-]*):", line)
        if not m:
            continue
        indent = len(m.group(1))
        path = [p for p in path if p[0] < indent] + [(indent, m.group(2))]
        dotted = ".".join(k for _, k in path)
        if any(dotted == o or dotted.startswith(o + ".") for o in OPAQUE if dotted != o) or len(path) > 3:
            continue
        if not lines[i - 1].strip().startswith("#"):
            missing.append(dotted)
    assert not missing, f"values.yaml keys without a comment: {missing}"


def test_every_values_key_is_in_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(v: Any, s: dict[str, Any], where: str) -> None:
        if not isinstance(v, dict) or s.get("additionalProperties") is not False:  # closed maps only
            return
        for k, sub in v.items():
            assert k in s["properties"], f"{where}.{k} missing from values.schema.json"
            walk(sub, s["properties"][k], f"{where}.{k}")

    walk(values, schema, "")


def test_operator_pod_gets_no_service_links(render: Render) -> None:
    """Found on a real pod (e2e/pods): with service links, a release named brain-operator got
    BRAIN_OPERATOR_METRICS_PORT=tcp://<ip>:8080 from its own metrics Service, the very variable the
    operator reads its --metrics-port default from, and crashed at start."""
    docs = render(release="brain-operator")
    services = [d["metadata"]["name"] for d in docs if d["kind"] == "Service"]
    assert "brain-operator-metrics" in services  # the collision this guards against
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["enableServiceLinks"] is False


def test_insecure_git_urls_are_off_unless_the_value_asks(render: Render) -> None:
    """operator.allowInsecureGitUrls (tests only) is the operator's --allow-insecure-git-urls; by
    default http:// and file:// MemorySources are refused (docs/security.md, "Git sources")."""
    from brain_operator.main import parse_args

    def args(values: dict[str, Any]) -> list[str]:
        return one(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]

    assert not parse_args(args({})).allow_insecure_git_urls
    on = args({"operator.allowInsecureGitUrls": True})
    assert "--allow-insecure-git-urls" in on and parse_args(on).allow_insecure_git_urls


OPERATIONS_MD = ROOT / "docs" / "operations.md"
RIGHTS_HEAD = "| API group | Resources | Verbs | Namespaced install | Why |"


def _rights_rows() -> list[str]:
    """docs/operations.md's rights table as rbac.RULES says it should read, row by row."""
    rows = []
    for groups, resources, verbs, why in rbac.RULES:
        namespaced = [r for r in resources if r.split("/")[0] not in rbac.CLUSTER_SCOPED]
        cluster = [r for r in resources if r.split("/")[0] in rbac.CLUSTER_SCOPED]
        for part, where in (
            (namespaced, "Role in each watched namespace"),
            (cluster, "ClusterRole" if set(cluster) <= rbac.NAMESPACED_MODE_CLUSTER else "not granted"),
        ):
            if part:
                names = ", ".join(f"`{r}`" for r in part)
                rows.append(f"| `{groups[0] or 'core'}` | {names} | {' '.join(verbs)} | {where} | {why} |")
    return rows


def test_operations_md_lists_exactly_the_rights_granted() -> None:
    """The rights a reviewer reads before opting in are the rights the chart grants (rbac.RULES,
    which the tests above compare with the rendered Roles): a new rule fails here until documented."""
    lines = OPERATIONS_MD.read_text().splitlines()
    start = lines.index(RIGHTS_HEAD) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    expected = _rights_rows()
    assert lines[start:end] == expected, "docs/operations.md rights table, expected:\n" + "\n".join(expected)
