"""One chat, one trace (#31): a real gateway process and a real embedder process, both sending OTLP
to a real OpenTelemetry Collector (tests/kit/traces.py), read back from its file exporter.

- the trace holds the gateway's request span, retrieval with a span per leg, fusion, compose,
  inject, capture, and the embedder's own span, linked to the gateway's by `traceparent`;
- a caller's `traceparent` continues: the request span is its child;
- with `content` off no span attribute holds the memory's body, the question, or a key;
- a collector that is stopped under traffic costs spans, counted in /metrics, never a chat.

The gateway here is its own (the shared one in tests/kit/gateway.py sends no traces).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from brain.local.devdb import EmbeddedPostgres, free_port
from brain.local.fakeupstream import FakeState
from brain.local.fakeupstream import create_app as fake_app
from brain.local.up import spawn, stop, wait_http
from brain.store import Store
from brain_operator.render.common import traces_url
from tests.kit.gateway import MASTER, Served, make_keys, metric, start_gateway
from tests.kit.traces import Collector, Span

BODY = "The {tag} cluster's ingress certificates renew from the vault-7 issuer every 21 days."
QUESTION = "How often do the {tag} ingress certificates renew?"


@dataclass
class Traced:
    url: str
    keys: dict[str, str]
    collector: Collector

    async def chat(self, text: str, **headers: str) -> httpx.Response:
        body = {"model": "echo", "messages": [{"role": "user", "content": text}]}
        h = {"authorization": f"Bearer {self.keys['agent']}", **headers}
        async with httpx.AsyncClient(timeout=60) as c:
            return await c.post(f"{self.url}/v1/chat/completions", json=body, headers=h)

    async def note(self, body: str, ns: str) -> None:
        h = {"authorization": f"Bearer {self.keys['owner']}"}
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.post(f"{self.url}/brain/v1/memories", json={"body": body, "namespace": ns}, headers=h)
        assert r.status_code in (200, 201), r.text


def _otel_env(collector: Collector, service: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces_url(collector.endpoint),
        "OTEL_SERVICE_NAME": service,
        "OTEL_RESOURCE_ATTRIBUTES": "brain.name=traced,k8s.namespace.name=test",
    }


@pytest_asyncio.fixture(loop_scope="session")
async def traced(tmp_path: Path, pg: EmbeddedPostgres, otel_collector: Collector) -> AsyncIterator[Traced]:
    fake = FakeState()
    fake_srv = await Served(fake_app(fake)).start()
    emb_port = free_port()
    emb_log = tmp_path / "embedder.log"
    embedder = spawn(
        [sys.executable, "-m", "brain.embedder", "--port", str(emb_port), "--threads", "1"],
        {**os.environ, **_otel_env(otel_collector, "brain-embedder")},
        emb_log,
    )
    gateway = None
    store = None
    try:
        await wait_http(f"http://127.0.0.1:{emb_port}/readyz", proc=embedder, timeout=120)
        dsn = await pg.create_database(f"traced_{uuid.uuid4().hex[:8]}")
        gateway, url, _ = await start_gateway(
            tmp_path,
            dsn,
            fake_srv.url,
            f"http://127.0.0.1:{emb_port}",
            _otel_env(otel_collector, "brain-gateway"),
        )
        store = await Store.open(dsn, dim=384)
        yield Traced(url=url, keys=await make_keys(store), collector=otel_collector)
    finally:
        if store is not None:
            with contextlib.suppress(Exception):
                await store.close()
        await asyncio.to_thread(stop, gateway)
        await asyncio.to_thread(stop, embedder)
        await fake_srv.stop()


async def test_one_chat_is_one_trace_across_gateway_and_embedder_without_text(traced: Traced) -> None:
    tag = uuid.uuid4().hex[:8]
    ns = "shared"
    body, question = BODY.format(tag=tag), QUESTION.format(tag=tag)
    await traced.note(body, ns)
    # the caller's own trace: the gateway's request span must continue it
    caller_trace, caller_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    r = await traced.chat(question, traceparent=f"00-{caller_trace}-{caller_span}-01")
    assert r.status_code == 200, r.text
    assert r.headers.get("x-brain-memory") == "injected", r.headers
    assert "vault-7" in r.text  # the echo upstream repeats the injected memory

    def complete(spans: list[Span]) -> bool:
        """The request's steps and capture there, and every embedder span's parent too (the two
        processes export on their own clocks)."""
        mine = [s for s in spans if s["trace_id"] == caller_trace]
        ids = {s["span_id"] for s in mine}
        served = [s for s in mine if s["service"] == "brain-embedder"]
        return (
            {"chat echo", "search_memory", "capture"} <= {s["name"] for s in mine}
            and bool(served)
            and all(s["parent_span_id"] in ids for s in served)
        )

    spans = traced.collector.wait_until(complete, timeout=30)
    mine = [s for s in spans if s["trace_id"] == caller_trace]
    by = {(s["service"], s["name"], s["kind"]): s for s in mine}
    request = by[("brain-gateway", "chat echo", "SERVER")]
    assert request["parent_span_id"] == caller_span  # the caller's trace continues
    assert request["attributes"]["gen_ai.operation.name"] == "chat"
    assert request["attributes"]["gen_ai.request.model"] == "echo"
    assert request["attributes"]["brain.memory.outcome"] == "injected"
    assert request["attributes"]["brain.memory.count"] >= 1
    assert request["attributes"]["gen_ai.usage.input_tokens"] > 0
    assert request["resource"]["brain.name"] == "traced"
    names = {s["name"] for s in mine if s["service"] == "brain-gateway"}
    for step in ("search_memory", "retrieve.embed", "retrieve.vector", "retrieve.lexical", "retrieve.fuse",
                 "compose", "inject", "capture", "capture.gate"):  # fmt: skip
        assert step in names, (step, sorted(names))
    search = by[("brain-gateway", "search_memory", "INTERNAL")]
    assert search["attributes"]["gen_ai.operation.name"] == "search_memory"
    assert search["parent_span_id"] == request["span_id"]
    # the embedder's spans are children of the gateway's client spans: linked by trace context (the
    # question's embedding, and the scope's first floor calibration beside it)
    clients = {s["span_id"]: s for s in mine if s["kind"] == "CLIENT" and s["name"].startswith("embeddings ")}
    servers = [s for s in mine if s["service"] == "brain-embedder" and s["kind"] == "SERVER"]
    assert servers and all(s["parent_span_id"] in clients for s in servers), (servers, list(clients))
    assert all(s["attributes"]["gen_ai.operation.name"] == "embeddings" for s in servers)
    embed_step = by[("brain-gateway", "retrieve.embed", "INTERNAL")]
    asked = [c for c in clients.values() if c["parent_span_id"] == embed_step["span_id"]]
    assert len(asked) == 1 and any(s["parent_span_id"] == asked[0]["span_id"] for s in servers)
    # content off: no body, no question, no key anywhere in any span the collector got
    secrets = ("vault-7", tag, "ingress certificates", *traced.keys.values(), MASTER)
    values = [str(v) for s in spans for v in (*s["attributes"].values(), *s["resource"].values())]
    leaked = [v for v in values if any(x in v for x in secrets)]
    assert not leaked, leaked


async def test_a_stopped_collector_costs_spans_counted_never_a_chat(traced: Traced) -> None:
    tag = uuid.uuid4().hex[:8]
    await traced.note(BODY.format(tag=tag), "shared")
    traced.collector.stop()
    try:
        answers: list[Any] = []
        for i in range(12):  # bounded: 12 chats while nothing listens on the collector's port
            answers.append(await traced.chat(QUESTION.format(tag=tag) + f" ({i % 2})"))
        assert [a.status_code for a in answers] == [200] * 12
        assert all("vault-7" in a.text for a in answers)
        async with httpx.AsyncClient(timeout=10) as c:
            for _ in range(100):  # the export thread gives a batch up after its 2 s budget
                text = (await c.get(f"{traced.url}/metrics")).text
                if metric(text, "brain_trace_spans_dropped_total", reason="export_failed") > 0:
                    break
                await asyncio.sleep(0.2)
        assert metric(text, "brain_trace_spans_dropped_total", reason="export_failed") > 0
    finally:
        traced.collector.start()
    r = await traced.chat(QUESTION.format(tag=tag) + " again", traceparent=f"00-{'ab' * 16}-{'cd' * 8}-01")
    assert r.status_code == 200
    traced.collector.wait_spans(lambda s: s["trace_id"] == "ab" * 16 and s["name"] == "chat echo", timeout=30)
