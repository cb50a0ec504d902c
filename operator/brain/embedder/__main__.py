"""`python -m brain.embedder`: serve embeddings over HTTP."""

from __future__ import annotations

import argparse
import os

import uvicorn

from brain.core.contract import EMBED_INPUT_MAX_CHARS, Env
from brain.core.tracing import TraceSettings
from brain.embedder.model import DEFAULT_MODEL, THREADS_ENV, LocalEmbedder, threads_from_env
from brain.embedder.server import Limits, create_app

HELD_MODEL_ENV = "BRAIN_EMBEDDER_HELD_MODEL"


def unheld_model(requested: str, held: str | None) -> str | None:
    """Why this embedder must not start, or None. An image bakes one model (offline, air-gapped)
    and names it in $BRAIN_EMBEDDER_HELD_MODEL; asked for another, fastembed would either download
    (no network in the pod) or load the baked files under the wrong name, and every vector would
    be labelled with a model that did not make it."""
    if not held or requested == held:
        return None
    return (
        f"embedder: spec.embedding.model is {requested!r}, but this image holds only {held!r}. "
        f"Set spec.embedding.model: {held}, or use an embedder image built with "
        f"--build-arg MODEL_SOURCE=hub --build-arg EMBEDDING_MODEL={requested} (docs/operations.md, Images)."
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m brain.embedder",
        description="OpenAI-compatible embedding server (POST /v1/embeddings) over fastembed, with /healthz, "
        "/readyz and Prometheus /metrics. Concurrent requests are batched into one model call.",
    )
    p.add_argument("--host", default=os.environ.get("BRAIN_EMBEDDER_HOST", "127.0.0.1"), help="bind address")
    p.add_argument("--port", type=int, default=int(os.environ.get("BRAIN_EMBEDDER_PORT", "8080")))
    p.add_argument(
        "--model",
        default=os.environ.get(Env.EMBEDDING_MODEL, DEFAULT_MODEL),
        help="fastembed model name (default %(default)s)",
    )
    p.add_argument(
        "--model-path",
        default=os.environ.get("BRAIN_EMBEDDING_MODEL_PATH"),
        help="a local model directory; loads offline, never downloads",
    )
    p.add_argument(
        "--cache-dir",
        default=os.environ.get("FASTEMBED_CACHE_PATH"),
        help="fastembed cache directory holding a baked model",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=threads_from_env(None),
        help=f"onnxruntime threads (default: ${THREADS_ENV}, else all cores)",
    )
    p.add_argument("--max-inputs", type=int, default=256, help="inputs per request before 413")
    p.add_argument(
        "--max-chars",
        type=int,
        default=EMBED_INPUT_MAX_CHARS,
        help="characters per input before 413 (stored texts are cut to the default before they are sent)",
    )
    p.add_argument("--max-batch", type=int, default=64, help="texts per model call")
    a = p.parse_args(argv)
    refusal = unheld_model(a.model, os.environ.get(HELD_MODEL_ENV))
    if refusal:
        p.exit(2, refusal + "\n")
    app = create_app(
        lambda: LocalEmbedder(a.model, model_path=a.model_path, cache_dir=a.cache_dir, threads=a.threads),
        Limits(max_inputs=a.max_inputs, max_chars=a.max_chars, max_batch=a.max_batch),
        TraceSettings.from_env(os.environ, "brain-embedder"),
    )
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
