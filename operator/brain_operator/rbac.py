"""Least-privilege RBAC for the operator, rule by rule, and a plain install manifest.

The Helm chart reuses :func:`rules`. Each rule says why the operator needs it; nothing uses ``*``.
Read-only on Pods (readiness comes from workloads; logs give ingest summaries). The database's
PersistentVolumeClaims are the StatefulSet controller's; the operator writes only spec.backup's
`<brain>-backups` claim.
"""

from __future__ import annotations

from typing import Any

from brain_operator import __version__
from brain_operator.render.common import DEFAULT_IMAGES

READ = ["get", "list", "watch"]
WRITE = ["get", "list", "watch", "create", "patch", "delete"]

#: (apiGroups, resources, verbs, why)
RULES: list[tuple[list[str], list[str], list[str], str]] = [
    (
        ["brain.dev"],
        ["brains", "memorysources", "routingpolicies"],
        [*READ, "patch"],
        "watch the API objects; kopf patches its finalizer onto Brains",
    ),
    (
        ["brain.dev"],
        ["brains/status", "memorysources/status", "routingpolicies/status"],
        ["get", "patch"],
        "write status",
    ),
    (
        [""],
        ["secrets"],
        ["get", "create", "patch", "delete"],
        "generated DB credentials and master key, read by name (never listed or watched: no Secret "
        "in a watched namespace is readable without knowing its name; resync covers drift)",
    ),
    (
        [""],
        ["configmaps"],
        ["get", "list", "create", "patch", "delete"],
        "gateway config, source specs, dashboards",
    ),
    ([""], ["services"], WRITE, "database, embedder and gateway Services"),
    ([""], ["persistentvolumeclaims"], WRITE, "spec.backup's <brain>-backups volume"),
    ([""], ["pods"], READ, "find an ingest Job's pod"),
    ([""], ["pods/log"], ["get"], "read an ingest Job's JSON summary line"),
    ([""], ["events"], ["create", "patch"], "report transitions and errors as Kubernetes Events"),
    ([""], ["namespaces"], READ, "kopf: resolve watched namespace patterns"),
    (["apps"], ["deployments", "statefulsets"], WRITE, "embedder, gateway and managed Postgres"),
    (["batch"], ["cronjobs", "jobs"], WRITE, "ingest, distill and digest"),
    (["policy"], ["poddisruptionbudgets"], WRITE, "PDBs for multi-replica Deployments"),
    (["networking.k8s.io"], ["networkpolicies"], WRITE, "fence the database and embedder"),
    (["monitoring.coreos.com"], ["servicemonitors"], WRITE, "optional ServiceMonitor"),
    (["postgresql.cnpg.io"], ["clusters"], WRITE, "optional CloudNativePG database"),
    (["apiextensions.k8s.io"], ["customresourcedefinitions"], READ, "kopf: discover served resources"),
    (["kopf.dev"], ["kopfpeerings", "clusterkopfpeerings"], [*READ, "patch"], "kopf peering (HA)"),
]


#: Cluster-scoped resources among RULES: a namespaced Role cannot grant them.
CLUSTER_SCOPED = frozenset({"namespaces", "customresourcedefinitions", "clusterkopfpeerings"})
#: The cluster-scoped reads an operator watching only some namespaces still needs (kopf resolves
#: namespace patterns and discovers CRDs). clusterkopfpeerings is not among them: a namespaced
#: operator peers through a KopfPeering in each watched namespace.
NAMESPACED_MODE_CLUSTER = frozenset({"namespaces", "customresourcedefinitions"})


def rules() -> list[dict[str, Any]]:
    return [{"apiGroups": g, "resources": r, "verbs": v} for g, r, v, _ in RULES]


def _split(keep: frozenset[str] | None, cluster_scoped: bool) -> list[dict[str, Any]]:
    out = []
    for groups, resources, verbs, _ in RULES:
        picked = [
            r
            for r in resources
            if (r.split("/")[0] in CLUSTER_SCOPED) == cluster_scoped and (keep is None or r in keep)
        ]
        if picked:
            out.append({"apiGroups": groups, "resources": picked, "verbs": verbs})
    return out


def namespaced_rules() -> list[dict[str, Any]]:
    """The Role granted in each watched namespace: every namespaced rule, nothing cluster-scoped."""
    return _split(None, cluster_scoped=False)


def namespaced_mode_cluster_rules() -> list[dict[str, Any]]:
    """The small ClusterRole a namespaced install still needs: read Namespaces and CRDs."""
    return _split(NAMESPACED_MODE_CLUSTER, cluster_scoped=True)


def _namespaced_rbac(
    operator_namespace: str, watched: list[str], labels: dict[str, str]
) -> list[dict[str, Any]]:
    """A Role + RoleBinding (to the operator's ServiceAccount) and a KopfPeering per watched namespace."""
    out: list[dict[str, Any]] = []
    subject = {"kind": "ServiceAccount", "name": "brain-operator", "namespace": operator_namespace}
    for ns in watched:
        meta = {"name": "brain-operator", "namespace": ns, "labels": labels}
        out += [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta,
                "rules": namespaced_rules(),
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta,
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "brain-operator",
                },
                "subjects": [subject],
            },
            {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": meta},
        ]
    return out


def install_manifests(
    namespace: str = "brain-system",
    image: str = DEFAULT_IMAGES["operator"],
    *,
    watch_namespaces: list[str] | None = None,
) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole(+Binding), peering object and a two-replica Deployment.

    With ``watch_namespaces`` the install is namespaced: the operator watches only those
    namespaces, gets a Role (+RoleBinding) and a KopfPeering in each, and keeps a ClusterRole only
    for reading Namespaces and CRDs. Without it, one ClusterRole and a ClusterKopfPeering.
    """
    labels = {"app.kubernetes.io/name": "brain-operator", "app.kubernetes.io/part-of": "brain-operator"}
    meta = {"name": "brain-operator", "namespace": namespace, "labels": labels}
    watched = list(dict.fromkeys(watch_namespaces or []))
    if watch_namespaces is not None and not watched:
        raise ValueError("watch_namespaces: name at least one namespace (or pass None for all)")
    if any("*" in ns or "?" in ns or ns.startswith("!") for ns in watched):
        raise ValueError("watch_namespaces: a namespaced install needs literal names (a Role per namespace)")
    scope = [f"--namespace={ns}" for ns in watched] if watched else ["--all-namespaces"]
    peering: list[dict[str, Any]] = (
        _namespaced_rbac(namespace, watched, labels)
        if watched
        else [
            {
                "apiVersion": "kopf.dev/v1",
                "kind": "ClusterKopfPeering",
                "metadata": {"name": "brain-operator", "labels": labels},
            }
        ]
    )
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "brain-operator", "labels": labels},
            "rules": namespaced_mode_cluster_rules() if watched else rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "brain-operator", "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "brain-operator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "brain-operator", "namespace": namespace}],
        },
        *peering,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "brain-operator"}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "brain-operator",
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "operator",
                                "image": image,
                                "args": [*scope, "--peering", "brain-operator"],
                                "ports": [{"name": "metrics", "containerPort": 8080}],
                                "env": [{"name": "BRAIN_OPERATOR_VERSION", "value": __version__}],
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "96Mi"},
                                    "limits": {"cpu": "1", "memory": "256Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "livenessProbe": {
                                    "httpGet": {"path": "/healthz", "port": "metrics"},
                                    "periodSeconds": 20,
                                },
                                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}},
                                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                            }
                        ],
                        "volumes": [{"name": "tmp", "emptyDir": {}}],
                    },
                },
            },
        },
    ]
