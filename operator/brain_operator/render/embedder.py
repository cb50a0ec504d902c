"""The embedder: fastembed behind an OpenAI-compatible ``/v1/embeddings``."""

from __future__ import annotations

from brain.core.contract import Env
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
    traces_env,
)

COMPONENT = "embedder"

# onnxruntime sizes its pool by the node's cores, not the pod's CPU limit; on a node with more cores
# than the limit its spinning threads are throttled by the CFS quota (docs/performance.md, "The
# query model's threads"). The downward API gives the limit rounded up to whole cores (the node's
# allocatable CPU when no limit is set), which brain.embedder reads as its thread count.
THREADS_FROM_CPU_LIMIT = {
    "name": Env.EMBEDDER_THREADS,
    "valueFrom": {
        "resourceFieldRef": {"containerName": "embedder", "resource": "limits.cpu", "divisor": "1"}
    },
}


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
        # --model fixes the dimension
        "env": [{"name": "HOME", "value": "/tmp"}, THREADS_FROM_CPU_LIMIT, *traces_env(inp, "embedder")],
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
