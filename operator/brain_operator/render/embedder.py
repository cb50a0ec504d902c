"""The embedder: fastembed behind an OpenAI-compatible ``/v1/embeddings``."""

from __future__ import annotations

from brain_operator.render import names
from brain_operator.render.common import (
    EMBEDDER_PORT,
    TMP_MOUNT,
    Manifest,
    RenderInput,
    container_security_context,
    http_probes,
    labels,
    meta,
    pod_spec,
    resources,
    selector_labels,
    service,
)

COMPONENT = "embedder"


def embedder_url(inp: RenderInput) -> str:
    return f"http://{names.embedder(inp.name)}:{EMBEDDER_PORT}"


def render_embedder(inp: RenderInput) -> list[Manifest]:
    emb = inp.brain.spec.embedding
    name = names.embedder(inp.name)
    container = {
        "name": "embedder",
        "image": inp.images.embedder,
        "command": ["python", "-m", "brain.embedder"],
        "args": ["--host", "0.0.0.0", "--port", str(EMBEDDER_PORT), "--model", emb.model],
        "ports": [{"name": "http", "containerPort": EMBEDDER_PORT}],
        "env": [{"name": "HOME", "value": "/tmp"}],  # the model (--model) fixes the dimension
        "resources": resources("embedder", emb.resources),
        "securityContext": container_security_context(),
        "volumeMounts": [TMP_MOUNT],
        **http_probes("http"),
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(inp, name, COMPONENT),
        "spec": {
            "replicas": emb.replicas,
            "selector": {"matchLabels": selector_labels(inp.name, COMPONENT)},
            "template": {
                "metadata": {"labels": labels(inp.name, COMPONENT)},
                "spec": pod_spec([container]),
            },
        },
    }
    svc = service(inp, name, COMPONENT, "http", EMBEDDER_PORT)
    return [deployment, svc]
