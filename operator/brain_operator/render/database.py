"""The database: a pgvector StatefulSet (managed), nothing (external) or a CloudNativePG Cluster."""

from __future__ import annotations

from brain_operator.render import names
from brain_operator.render.common import (
    POSTGRES_PORT,
    POSTGRES_UID,
    TMP_MOUNT,
    Manifest,
    RenderInput,
    container_security_context,
    labels,
    meta,
    pod_spec,
    resources,
    secret_env,
    selector_labels,
    service,
)
from brain_operator.render.secrets import DB_NAME, DB_USER, db_login, db_roles

COMPONENT = "database"
EXTENSIONS_SQL = ["CREATE EXTENSION IF NOT EXISTS vector", "CREATE EXTENSION IF NOT EXISTS pg_trgm"]


def _managed(inp: RenderInput) -> list[Manifest]:
    managed = inp.brain.spec.database.managed
    assert managed is not None
    name = names.database(inp.name)
    secret = names.db_credentials(inp.name)
    ready = ["pg_isready", "-h", "127.0.0.1", "-U", DB_USER, "-d", DB_NAME]
    container = {
        "name": "postgres",
        "image": inp.images.postgres,
        "ports": [{"name": "postgres", "containerPort": POSTGRES_PORT}],
        "env": [
            secret_env("POSTGRES_USER", secret, "username"),
            secret_env("POSTGRES_PASSWORD", secret, "password"),
            secret_env("POSTGRES_DB", secret, "database"),
            {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
        ],
        "resources": resources("database", managed.resources),
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/postgresql/data"},
            {"name": "run", "mountPath": "/var/run/postgresql"},
            TMP_MOUNT,
        ],
        "livenessProbe": {
            "exec": {"command": ready},
            "initialDelaySeconds": 30,
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 6,
        },
        "readinessProbe": {"exec": {"command": ready}, "periodSeconds": 5, "timeoutSeconds": 5},
    }
    claim_spec: dict[str, object] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": managed.storage}},
    }
    if managed.storage_class_name:
        claim_spec["storageClassName"] = managed.storage_class_name
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta(inp, name, COMPONENT),
        "spec": {
            "serviceName": name,
            "replicas": 1,
            "selector": {"matchLabels": selector_labels(inp.name, COMPONENT)},
            "template": {
                "metadata": {"labels": labels(inp.name, COMPONENT)},
                "spec": pod_spec([container], volumes=[{"name": "run", "emptyDir": {}}], uid=POSTGRES_UID),
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data", "labels": labels(inp.name, COMPONENT)},
                    "spec": claim_spec,
                }
            ],
        },
    }
    svc = service(inp, name, COMPONENT, "postgres", POSTGRES_PORT)
    return [statefulset, svc]


#: CNPG's probes allow 1 s for the instance manager's isolation check (can the primary reach the
#: API server and its peers?) and restart a primary that fails it. On a busy node (e2e/pods, a load
#: of 30 on 2 CPUs) that restarted a healthy primary: an unplanned failover. These allow 5 s; a
#: deleted or crashed primary is still replaced at once (the pod is gone, no probe is waited for).
CNPG_PROBES: dict[str, object] = {
    "liveness": {
        "timeoutSeconds": 10,
        "isolationCheck": {"enabled": True, "requestTimeout": 5000, "connectionTimeout": 5000},
    },
    "readiness": {"timeoutSeconds": 10},
}


CNPG_SMART_SHUTDOWN_SECONDS = 10


def cnpg_managed_roles(inp: RenderInput) -> list[dict[str, object]]:
    """CloudNativePG's `spec.managed.roles`: one login per workload (issue #26), its password from
    the Secret the operator generated (basic-auth, username = the login). None may do more than
    log in; the gateway's migration step grants each its tables (brain.store.roles, --as-owner).
    `brain_reindex` is in the owner's role: it renames and drops columns of `memories`."""
    return [
        {
            "name": db_login(role),
            "ensure": "present",
            "login": True,
            "superuser": False,
            "createdb": False,
            "createrole": False,
            "inherit": True,
            "replication": False,
            "bypassrls": False,
            "passwordSecret": {"name": names.db_role(inp.name, role)},
            **({"inRoles": [DB_USER]} if role == "reindex" else {}),
        }
        for role in db_roles(inp)
    ]


def _cnpg(inp: RenderInput) -> list[Manifest]:
    cnpg = inp.brain.spec.database.cloud_native_pg
    assert cnpg is not None
    storage: dict[str, object] = {"size": cnpg.storage}
    if cnpg.storage_class_name:
        storage["storageClass"] = cnpg.storage_class_name
    postgresql: dict[str, object] = {}
    if cnpg.instances >= 2:
        # Quorum commit to one standby: a write the gateway acknowledged is on two instances, so
        # deleting (or killing) the primary loses none (e2e/pods/test_ha.py). "preferred" lets the
        # surviving primary keep accepting writes while it is alone, instead of blocking them
        # until a standby is back; those are async until the standby rejoins (docs/operations.md).
        postgresql["synchronous"] = {"method": "any", "number": 1, "dataDurability": "preferred"}
    return [
        {
            "apiVersion": "postgresql.cnpg.io/v1",
            "kind": "Cluster",
            "metadata": meta(inp, names.database(inp.name), COMPONENT),
            "spec": {
                "instances": cnpg.instances,
                "imageName": inp.images.cnpg,
                "storage": storage,
                **({"postgresql": postgresql} if postgresql else {}),
                "probes": CNPG_PROBES,
                # A deleted primary first gets a *smart* shutdown, which waits for every client
                # to disconnect; the gateways' pools never do, so CNPG's 180 s default was the
                # failover time (measured on the real node). Past 10 s a fast shutdown ends the
                # sessions; what they had in flight was never acknowledged (quorum commit).
                "smartShutdownTimeout": CNPG_SMART_SHUTDOWN_SECONDS,
                "bootstrap": {
                    "initdb": {
                        "database": DB_NAME,
                        "owner": DB_USER,
                        "postInitApplicationSQL": list(EXTENSIONS_SQL),
                    }
                },
                "managed": {"roles": cnpg_managed_roles(inp)},
                "inheritedMetadata": {"labels": labels(inp.name, COMPONENT)},
            },
        }
    ]


def render_database(inp: RenderInput) -> list[Manifest]:
    """External databases render nothing: the pods read the DSN from the user's Secret."""
    mode = inp.brain.spec.database.mode
    if mode == "managed":
        return _managed(inp)
    if mode == "cloudNativePG":
        return _cnpg(inp)
    return []
