"""The gateway: LiteLLM config ConfigMap, Deployment (+ cloudflared sidecar), Service.

The pod template carries a hash of the rendered config, so any config change (a model, a routing
policy, a retrieval knob) rolls the pods, while a replicas change touches only ``spec.replicas``.
"""

from __future__ import annotations

from typing import Any

import yaml

from brain.core.contract import Env
from brain_operator.render import names
from brain_operator.render.common import (
    CLOUDFLARED_METRICS_PORT,
    CONFIG_HASH_ANNOTATION,
    GATEWAY_PORT,
    TMP_MOUNT,
    Manifest,
    RenderInput,
    container_security_context,
    http_probes,
    labels,
    meta,
    pod_spec,
    resources,
    secret_env,
    selector_labels,
    service,
    stable_hash,
    traces_env,
)
from brain_operator.render.embedder import embedder_url
from brain_operator.render.litellm_config import MASTER_KEY_ENV, model_api_key_env, render_litellm_config
from brain_operator.render.secrets import db_roles, dsn_secret_ref, master_key_ref, needs_db_roles

#: Seconds a terminating gateway keeps serving before it is told to stop (preStop).
DRAIN_SECONDS = 5
COMPONENT = "gateway"
CONFIG_KEY = "litellm.yaml"
CONFIG_DIR = "/etc/brain"
#: where the migration step reads each login's password (the role Secrets, projected)
DB_PASSWORDS_DIR = "/etc/brain/db-roles"


def data_plane_env(inp: RenderInput, role: str | None) -> list[dict[str, Any]]:
    """Environment shared by the gateway and the jobs: where the database and embedder are.
    ``role``: whose login the DSN is (brain.core.contract.DB_ROLES); None, the superuser's."""
    secret, key = dsn_secret_ref(inp, role)
    emb = inp.brain.spec.embedding
    return [
        {"name": "HOME", "value": "/tmp"},
        secret_env(Env.DATABASE_URL, secret, key),
        {"name": Env.EMBEDDER_URL, "value": embedder_url(inp)},
        {"name": Env.EMBEDDING_MODEL, "value": emb.model},
        {"name": Env.EMBEDDING_DIM, "value": str(emb.dim)},
        *traces_env(inp, role or "migrate"),
    ]


def gateway_url(inp: RenderInput) -> str:
    return f"http://{names.gateway(inp.name)}:{GATEWAY_PORT}"


def config_text(inp: RenderInput) -> str:
    config = render_litellm_config(inp.brain, inp.routing_policies)
    return yaml.safe_dump(config, sort_keys=False, width=120)


def config_hash(inp: RenderInput) -> str:
    return stable_hash(config_text(inp))


def _cloudflared(inp: RenderInput) -> dict[str, Any] | None:
    """The tunnel sidecar, deliberately without probes.

    A pod is Ready only while every container is running and passes its readiness probe, so any
    probe here would tie the gateway's place in its Service to Cloudflare being reachable:
    cloudflared's ``/ready`` answers 503 until an edge connection is up, and a liveness failure or
    an exit puts the container into CrashLoopBackOff (not running, so not Ready). Our image's
    entrypoint restarts cloudflared inside the container instead (images/cloudflared/supervise.sh);
    the tunnel's state shows in that container's log and in cloudflared's metrics on
    ``tunnel-metrics`` (docs/operations.md, "When the tunnel cannot connect").
    """
    tunnel = inp.brain.spec.tunnel
    if tunnel is None or tunnel.token_secret_ref is None:
        return None
    ref = tunnel.token_secret_ref
    return {
        "name": "cloudflared",
        "image": inp.images.cloudflared,
        "args": [
            "tunnel",
            "--no-autoupdate",
            "--metrics",
            f"0.0.0.0:{CLOUDFLARED_METRICS_PORT}",
            "run",
            "--url",
            f"http://127.0.0.1:{GATEWAY_PORT}",
        ],
        "env": [secret_env("TUNNEL_TOKEN", ref.name, ref.key)],
        "ports": [{"name": "tunnel-metrics", "containerPort": CLOUDFLARED_METRICS_PORT}],
        "resources": resources("cloudflared", None),
        "securityContext": container_security_context(),
        "volumeMounts": [TMP_MOUNT],
    }


def _migrate_init(inp: RenderInput) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The migration step (issue #26) and its volume: the only container given the superuser's DSN
    (managed) or CloudNativePG's application owner's (CNPG creates the logins, `--as-owner`).

    It creates or updates the per-job logins, migrates the schema as its owner and grants each login
    its tables (brain.store.roles), in the gateway's image so the schema it writes is the one the
    gateway that starts next expects. Every gateway pod runs it (idempotent, serialised by a lock),
    so a new image's migrations are applied before its gateway opens the store as `brain_gateway`.
    """
    cnpg = inp.brain.spec.database.mode == "cloudNativePG"
    how = ["--as-owner"] if cnpg else ["--passwords-dir", DB_PASSWORDS_DIR]
    mounts = [] if cnpg else [{"name": "db-roles", "mountPath": DB_PASSWORDS_DIR, "readOnly": True}]
    container = {
        "name": "migrate",
        "image": inp.images.gateway,
        "command": ["python", "-m", "brain.store.roles", *how],
        "env": [
            {"name": "HOME", "value": "/tmp"},
            secret_env(Env.DATABASE_URL, *dsn_secret_ref(inp, None)),
            {"name": Env.EMBEDDING_DIM, "value": str(inp.brain.spec.embedding.dim)},
        ],
        "resources": resources("gateway", inp.brain.spec.gateway.resources),
        "securityContext": container_security_context(),
        "volumeMounts": [*mounts, TMP_MOUNT],
    }
    if cnpg:
        return container, None
    volume = {
        "name": "db-roles",
        "projected": {
            "defaultMode": 0o440,  # group: the pod's fsGroup, so uid 65532 reads them, nobody else
            "sources": [
                {"secret": {"name": names.db_role(inp.name, r), "items": [{"key": "password", "path": r}]}}
                for r in db_roles(inp)
            ],
        },
    }
    return container, volume


def render_gateway(inp: RenderInput) -> list[Manifest]:
    spec = inp.brain.spec.gateway
    name = names.gateway(inp.name)
    text = config_text(inp)
    key_secret, key_key = master_key_ref(inp)
    env = [
        *data_plane_env(inp, "gateway"),
        secret_env(MASTER_KEY_ENV, key_secret, key_key),
    ]
    for m in spec.models:
        if m.api_key_secret_ref is not None:
            env.append(
                secret_env(model_api_key_env(m.name), m.api_key_secret_ref.name, m.api_key_secret_ref.key)
            )
    gateway = {
        "name": "gateway",
        "image": inp.images.gateway,
        "command": ["python", "-m", "brain.gateway"],
        "args": [
            "--config",
            f"{CONFIG_DIR}/{CONFIG_KEY}",
            "--host",
            "0.0.0.0",
            "--port",
            str(GATEWAY_PORT),
        ],
        "ports": [{"name": "http", "containerPort": GATEWAY_PORT}],
        "env": env,
        "resources": resources("gateway", spec.resources),
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}, TMP_MOUNT],
        # A terminating pod leaves the Service's endpoints while the proxies catch up (a second or
        # so); uvicorn stops listening at SIGTERM, so without a pause the chats routed to it in that
        # window were refused: 4 of 1,140 in the upgrade e2e (e2e/pods/test_upgrade.py). An exec
        # pause, not the `sleep` action, which clusters before 1.30 (the chart allows 1.27) refuse.
        "lifecycle": {
            "preStop": {"exec": {"command": ["python", "-c", f"import time; time.sleep({DRAIN_SECONDS})"]}}
        },
        **http_probes("http"),
    }
    containers = [gateway]
    sidecar = _cloudflared(inp)
    if sidecar is not None:
        containers.append(sidecar)
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": names.gateway_config(inp.name)}}
    ]
    init: list[dict[str, Any]] = []
    if needs_db_roles(inp):
        migrate, volume = _migrate_init(inp)
        init.append(migrate)
        if volume is not None:
            volumes.append(volume)
    pod = pod_spec(containers, volumes=volumes)
    if init:
        pod["initContainers"] = init
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(inp, names.gateway_config(inp.name), COMPONENT),
        "data": {CONFIG_KEY: text},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(inp, name, COMPONENT),
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector_labels(inp.name, COMPONENT)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {
                    "labels": labels(inp.name, COMPONENT),
                    "annotations": {CONFIG_HASH_ANNOTATION: stable_hash(text)},
                },
                "spec": pod,
            },
        },
    }
    svc = service(inp, name, COMPONENT, "http", GATEWAY_PORT, type_=spec.service_type)
    return [configmap, deployment, svc]
