"""Shared pieces of the pure renderers: names, labels, hashes, pod hardening, resources.

Everything here is deterministic: the same input renders byte-identical manifests, which is what
lets the reconciler compare desired and live state and write nothing when they agree.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from brain.core.contract import Env
from brain_operator import __version__
from brain_operator.api import Brain, MemorySource, Resources, RoutingPolicy
from brain_operator.diff import parse_quantity

Manifest = dict[str, Any]

APP_NAME = "brain"
PART_OF = "brain-operator"
MANAGED_BY = "brain-operator"
BRAIN_LABEL = "brain.dev/brain"
SOURCE_LABEL = "brain.dev/memorysource"
CONFIG_HASH_ANNOTATION = "brain.dev/config-hash"
SPEC_HASH_ANNOTATION = "brain.dev/spec-hash"

GATEWAY_PORT = 4000
EMBEDDER_PORT = 8080
POSTGRES_PORT = 5432
CLOUDFLARED_METRICS_PORT = 2000
APP_UID = 65532  # the uid the images in images/ create and run as
POSTGRES_UID = 999

DEFAULT_IMAGES = {
    "gateway": f"ghcr.io/brain-operator/gateway:{__version__}",
    "embedder": f"ghcr.io/brain-operator/embedder:{__version__}",
    "jobs": f"ghcr.io/brain-operator/jobs:{__version__}",
    "operator": f"ghcr.io/brain-operator/operator:{__version__}",
    "postgres": "pgvector/pgvector:pg17",
    "cloudflared": f"ghcr.io/brain-operator/cloudflared:{__version__}",  # images/cloudflared: restarts in place
    "cnpg": "ghcr.io/cloudnative-pg/postgresql:17-standard-bookworm",
}

#: (requests, limits) per component when the spec leaves them out.
DEFAULT_RESOURCES: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "gateway": ({"cpu": "250m", "memory": "512Mi"}, {"cpu": "2", "memory": "2Gi"}),
    "embedder": ({"cpu": "250m", "memory": "1Gi"}, {"cpu": "2", "memory": "2Gi"}),
    "database": ({"cpu": "250m", "memory": "512Mi"}, {"cpu": "2", "memory": "4Gi"}),
    "jobs": ({"cpu": "100m", "memory": "256Mi"}, {"cpu": "1", "memory": "1Gi"}),
    "cloudflared": ({"cpu": "10m", "memory": "64Mi"}, {"cpu": "500m", "memory": "256Mi"}),
}


@dataclass(frozen=True)
class Images:
    """Container images; the operator reads overrides from its environment (see ``config``)."""

    gateway: str = DEFAULT_IMAGES["gateway"]
    embedder: str = DEFAULT_IMAGES["embedder"]
    jobs: str = DEFAULT_IMAGES["jobs"]
    postgres: str = DEFAULT_IMAGES["postgres"]
    cloudflared: str = DEFAULT_IMAGES["cloudflared"]
    cnpg: str = DEFAULT_IMAGES["cnpg"]


@dataclass(frozen=True)
class GeneratedSecrets:
    """Random values the handler generated (or read back from the live Secrets).

    The renderer never invents them, so it stays pure and a re-render does not rotate passwords.
    """

    db_password: str | None = None
    master_key: str | None = None
    #: role (brain.core.contract.DB_ROLES) -> password of its Postgres login (managed databases)
    db_role_passwords: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Capabilities:
    """Optional APIs present in the cluster."""

    service_monitor: bool = False
    cnpg: bool = False


@dataclass(frozen=True)
class RenderInput:
    """Everything one Brain's stack is rendered from."""

    brain: Brain
    routing_policies: tuple[RoutingPolicy, ...] = ()
    memory_sources: tuple[MemorySource, ...] = ()
    secrets: GeneratedSecrets = field(default_factory=GeneratedSecrets)
    images: Images = field(default_factory=Images)
    capabilities: Capabilities = field(default_factory=Capabilities)
    #: --allow-insecure-git-urls: http:// and file:// git sources are rendered, and their jobs told so
    allow_insecure_git_urls: bool = False
    #: the operator's --traces-endpoint, for a Brain that names no collector of its own
    traces_endpoint: str | None = None

    @property
    def name(self) -> str:
        return self.brain.metadata.name

    @property
    def namespace(self) -> str:
        return self.brain.metadata.namespace or "default"


def stable_hash(obj: Any, length: int = 16) -> str:
    """Short sha256 of a JSON-able object, independent of key order."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(data).hexdigest()[:length]


def child_name(*parts: str, max_len: int = 63) -> str:
    """``<brain>-<part>...``, shortened with a hash suffix when it would exceed ``max_len``."""
    name = "-".join(p for p in parts if p)
    if len(name) <= max_len:
        return name
    digest = stable_hash(name, 8)
    return f"{name[: max_len - 9].rstrip('-')}-{digest}"


def selector_labels(brain: str, component: str) -> dict[str, str]:
    """Labels a workload selects its pods by; they never change for a given child."""
    return {
        "app.kubernetes.io/name": APP_NAME,
        "app.kubernetes.io/instance": brain,
        "app.kubernetes.io/component": component,
    }


def labels(brain: str, component: str, **extra: str) -> dict[str, str]:
    """The full label set of every child (and pod)."""
    return {
        **selector_labels(brain, component),
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        BRAIN_LABEL: brain,
        **extra,
    }


def meta(
    inp: RenderInput,
    name: str,
    component: str,
    *,
    extra_labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "namespace": inp.namespace,
        "labels": labels(inp.name, component, **(extra_labels or {})),
    }
    if annotations:
        out["annotations"] = annotations
    return out


def service(
    inp: RenderInput, name: str, component: str, port_name: str, port: int, *, type_: str | None = None
) -> Manifest:
    """A Service selecting one component's pods, its one port targeted by name."""
    spec: dict[str, Any] = {
        "selector": selector_labels(inp.name, component),
        "ports": [{"name": port_name, "port": port, "targetPort": port_name}],
    }
    if type_ is not None:
        spec = {"type": type_, **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(inp, name, component), "spec": spec}


def resources(component: str, spec: Resources | None) -> dict[str, dict[str, str]]:
    """Component defaults overlaid with whatever the spec sets, key by key. A request above the
    default limit, with no limit set, raises that limit to it: a pod whose request exceeds its
    limit is refused by the API server, and one MemorySource's would stop its Brain's apply."""
    requests, limits = (dict(d) for d in DEFAULT_RESOURCES[component])
    set_limits: set[str] = set()
    if spec is not None:
        for target, given in ((requests, spec.requests), (limits, spec.limits)):
            if given is not None:
                target.update({k: v for k, v in given.model_dump(exclude_none=True).items()})
        set_limits = set(spec.limits.model_dump(exclude_none=True)) if spec.limits is not None else set()
    for key, want in requests.items():
        asked, cap = parse_quantity(want), parse_quantity(limits.get(key))
        if key not in set_limits and asked is not None and cap is not None and asked > cap:
            limits[key] = want
    return {"requests": requests, "limits": limits}


def pod_security_context(uid: int = APP_UID) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


TMP_VOLUME = {"name": "tmp", "emptyDir": {}}
TMP_MOUNT = {"name": "tmp", "mountPath": "/tmp"}


#: How long a container may take to start before liveness may restart it (startupProbe budget).
STARTUP_BUDGET_SECONDS = 300


def http_probes(port: str, *, live: str = "/healthz", ready: str = "/readyz") -> dict[str, Any]:
    """Liveness only begins once the startup probe has passed: on a real node with 2 busy CPUs,
    three gateways booting LiteLLM at once took over the 70 s liveness allowed and were restarted
    in a loop (e2e/pods). The startup probe gives a slow start STARTUP_BUDGET_SECONDS instead."""
    return {
        "startupProbe": {
            "httpGet": {"path": live, "port": port},
            "periodSeconds": 2,
            "timeoutSeconds": 3,
            "failureThreshold": STARTUP_BUDGET_SECONDS // 2,
        },
        "livenessProbe": {
            "httpGet": {"path": live, "port": port},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 3,
            "failureThreshold": 6,
        },
        "readinessProbe": {
            "httpGet": {"path": ready, "port": port},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
    }


def pod_spec(
    containers: list[dict[str, Any]],
    *,
    volumes: list[dict[str, Any]] | None = None,
    uid: int = APP_UID,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    """A hardened pod spec: no service account token, no service links, non-root, seccomp."""
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(uid),
        "containers": containers,
        "volumes": [TMP_VOLUME, *(volumes or [])],
    }
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def owner_reference(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    """A controller owner reference (so deleting the owner garbage-collects the child)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def env_name(prefix: str, name: str, suffix: str) -> str:
    """An environment variable name derived from a user-chosen name (``gpt-4o`` → ``GPT_4O``)."""
    cleaned = "".join(c if c.isalnum() else "_" for c in name.upper()).strip("_")
    return f"{prefix}_{cleaned}_{suffix}"


def secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (or of the traces URL itself)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def traces_env(inp: RenderInput, component: str) -> list[dict[str, Any]]:
    """Where a pod sends its spans (brain.core.tracing reads these): nothing when no collector is
    named, so a Brain without traces runs no exporter. The resource attributes say which Brain a
    span came from, for a collector that serves many."""
    traces = inp.brain.spec.observability.traces
    endpoint = traces.endpoint or inp.traces_endpoint
    if not endpoint:
        return []
    env = [
        {"name": Env.TRACES_ENDPOINT, "value": traces_url(endpoint)},
        {"name": Env.SERVICE_NAME, "value": f"brain-{component}"},
        {
            "name": Env.RESOURCE_ATTRIBUTES,
            "value": f"brain.name={inp.name},k8s.namespace.name={inp.namespace}",
        },
    ]
    if traces.content:
        env.append({"name": Env.TRACES_CONTENT, "value": "1"})
    return env
