"""An OpenAI-compatible `POST /v1/embeddings` over fastembed, with micro-batching across requests."""

from __future__ import annotations

import asyncio
import base64
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel

from brain.core import tracing
from brain.core.contract import EMBED_INPUT_MAX_CHARS
from brain.core.tracing import TraceSettings
from brain.embedder.model import Embedder


class EmbeddingRequest(BaseModel):
    input: str | list[str]
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None


@dataclass
class Limits:
    max_inputs: int = 256
    max_chars: int = EMBED_INPUT_MAX_CHARS
    max_batch: int = 64
    batch_wait_s: float = 0.004


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "brain_embedder_requests_total",
            "Embedding requests by HTTP status code.",
            ["code"],
            registry=registry,
        )
        self.texts = Counter("brain_embedder_texts_total", "Texts embedded.", registry=registry)
        self.batch = Histogram(
            "brain_embedder_batch_size",
            "Texts per model call.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=registry,
        )
        self.latency = Histogram(
            "brain_embedder_request_duration_seconds",
            "Time to answer one embedding request.",
            registry=registry,
            buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.spans_exported = Counter(
            "brain_trace_spans_exported_total", "Spans sent to the OTLP collector.", registry=registry
        )
        self.spans_dropped = Counter(
            "brain_trace_spans_dropped_total",
            "Spans dropped instead of slowing a request, by reason (queue_full, export_failed).",
            ["reason"],
            registry=registry,
        )
        for reason in ("queue_full", "export_failed"):
            self.spans_dropped.labels(reason)

    def trace_spans(self, reason: str, n: int) -> None:
        if reason == "exported":
            self.spans_exported.inc(n)
        else:
            self.spans_dropped.labels(reason).inc(n)


class Batcher:
    """Gathers texts from concurrent requests into one model call: throughput without client changes."""

    def __init__(self, embedder: Embedder, limits: Limits, metrics: _Metrics) -> None:
        self.embedder = embedder
        self.limits = limits
        self.metrics = metrics
        self.queue: asyncio.Queue[tuple[list[str], asyncio.Future[np.ndarray]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()

    async def submit(self, texts: list[str]) -> np.ndarray:
        fut: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        await self.queue.put((texts, fut))
        return await fut

    async def _run(self) -> None:
        while True:
            first = await self.queue.get()
            batch = [first]
            size = len(first[0])
            deadline = time.monotonic() + self.limits.batch_wait_s
            while size < self.limits.max_batch:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    break
                try:
                    queued = await asyncio.wait_for(self.queue.get(), timeout)
                except TimeoutError:
                    break
                batch.append(queued)
                size += len(queued[0])
            texts = [t for item, _ in batch for t in item]
            self.metrics.batch.observe(len(texts))
            try:
                vectors = await self.embedder.embed(texts)
            except Exception as e:  # the model failed: every waiting request gets the error
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            offset = 0
            for item, fut in batch:
                if not fut.done():
                    fut.set_result(vectors[offset : offset + len(item)])
                offset += len(item)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def create_app(
    embedder_factory: Any, limits: Limits | None = None, traces: TraceSettings | None = None
) -> FastAPI:
    """`embedder_factory` is called at startup, so the port answers /healthz while the model loads."""
    limits = limits or Limits()
    registry = CollectorRegistry()
    metrics = _Metrics(registry)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        if traces is not None:
            tracing.configure(traces, counted=metrics.trace_spans)
        state["embedder"] = await asyncio.to_thread(embedder_factory)
        state["batcher"] = Batcher(state["embedder"], limits, metrics)
        state["batcher"].start()
        yield
        await state["batcher"].stop()
        if traces is not None:
            await asyncio.to_thread(tracing.shutdown, 2.0)

    app = FastAPI(title="brain embedder", version="1", lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        if "batcher" not in state:
            return JSONResponse({"status": "loading"}, status_code=503)
        e = state["embedder"]
        return JSONResponse({"status": "ready", "model": e.model, "dim": e.dim})

    @app.get("/metrics")
    async def prom() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(registry).decode(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> JSONResponse:
        model = state["embedder"].model if "embedder" in state else ""
        attrs = {tracing.OPERATION: "embeddings", tracing.MODEL: model}
        # the caller's trace (its traceparent) continues here: one chat, one trace
        with tracing.span(
            f"embeddings {model}".strip(), attrs, kind=tracing.SERVER, parent=tracing.extract(request.headers)
        ) as span:
            response = await embed(request)
            tracing.set_attrs(span, {"http.response.status_code": response.status_code})
            return response

    async def embed(request: Request) -> JSONResponse:
        started = time.perf_counter()
        try:
            req = EmbeddingRequest.model_validate(await request.json())
        except Exception as e:
            metrics.requests.labels("422").inc()
            return _error(422, f"invalid request: {e}".splitlines()[0] + " (expected {'input': str | [str]})")
        texts = [req.input] if isinstance(req.input, str) else req.input
        if not texts or any(not t for t in texts):
            metrics.requests.labels("422").inc()
            return _error(422, "input must be a non-empty string or a non-empty list of non-empty strings")
        if len(texts) > limits.max_inputs:
            metrics.requests.labels("413").inc()
            return _error(413, f"{len(texts)} inputs in one request; the limit is {limits.max_inputs}")
        longest = max(len(t) for t in texts)
        if longest > limits.max_chars:
            metrics.requests.labels("413").inc()
            return _error(
                413, f"an input has {longest} characters; the limit is {limits.max_chars} per input"
            )
        if "batcher" not in state:
            metrics.requests.labels("503").inc()
            return _error(503, "the model is still loading", "server_error")
        vectors = await state["batcher"].submit(texts)
        metrics.texts.inc(len(texts))
        metrics.requests.labels("200").inc()
        metrics.latency.observe(time.perf_counter() - started)

        def enc(v: np.ndarray) -> Any:
            return (
                base64.b64encode(v.astype(np.float32).tobytes()).decode()
                if req.encoding_format == "base64"
                else v.tolist()
            )

        tokens = sum(len(t.split()) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": enc(v)} for i, v in enumerate(vectors)
                ],
                "model": state["embedder"].model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    return app
