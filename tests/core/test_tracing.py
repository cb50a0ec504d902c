"""Traces on real parts (#31): retrieval and writes on real Postgres and the real model, spans sent
over OTLP/HTTP to a real OpenTelemetry Collector (tests/kit/traces.py) and read back from its
file exporter; and what a collector that is down or hung costs: spans, counted, never the caller.

The gateway's own trace (one chat: the gateway's and the embedder's spans in one trace) is
tests/gateway/test_traces.py.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

from brain.core import tracing
from brain.core.contract import Env
from brain.core.models import Actor, MemoryIn
from brain.core.redact import SecretGate
from brain.core.tracing import TraceSettings
from brain.retrieval.catalog import Catalog
from brain.retrieval.compose import ComposeConfig, compose
from brain.services.memory import MemoryService
from brain.store import Scope, Store
from brain_operator.render.common import traces_url
from tests.kit.traces import Collector

BODY = "The nightly {tag} export writes to the quartz bucket in eu-west-3, never to the default region."
QUESTION = "Where does the nightly {tag} export write to?"


def _texts(spans: list[Any]) -> list[str]:
    return [str(v) for s in spans for v in (s["name"], *s["attributes"].values())]


def test_off_there_is_no_exporter_and_no_context() -> None:
    """Without an endpoint: no export thread, no propagation header, a span that records nothing."""
    tracing.configure(TraceSettings())
    assert not tracing.enabled()
    with tracing.span("anything", {"brain.x": 1}) as s:
        assert not s.is_recording()
        assert tracing.inject({}) == {}
        assert tracing.current() is None
    assert not [t for t in threading.enumerate() if t.name == "brain-trace-export"]


async def test_a_retrieval_is_one_trace_of_its_stages_without_text(
    span_fates: collections.Counter[str],
    otel_collector: Collector,
    service: MemoryService,
    owner: Actor,
) -> None:
    tag = uuid.uuid4().hex[:8]
    ns = f"test:{tag}"
    body, question = BODY.format(tag=tag), QUESTION.format(tag=tag)
    with tracing.span("test root") as root:
        await service.note(MemoryIn(body=body, namespace=ns, kind="fact"), owner)
        injection = await compose(
            service.retriever, Catalog(), Scope.of([ns]), question, ComposeConfig(), SecretGate("redact")
        )
    assert "quartz bucket" in injection.text  # the retrieval itself worked
    trace_id = format(root.get_span_context().trace_id, "032x")
    tracing.flush()
    want = {"retrieve.embed", "retrieve.vector", "retrieve.lexical", "retrieve.fuse", "compose",
            "memory.secret_gate", "memory.lint"}  # fmt: skip
    spans = otel_collector.wait_until(
        lambda ss: want <= {s["name"] for s in ss if s["trace_id"] == trace_id}, timeout=20
    )
    mine = [s for s in spans if s["trace_id"] == trace_id]
    by_name = {s["name"]: s for s in mine}
    assert by_name["retrieve.embed"]["attributes"]["gen_ai.operation.name"] == "embeddings"
    assert by_name["retrieve.lexical"]["attributes"]["brain.retrieval.leg"] == "lexical"
    assert by_name["retrieve.vector"]["attributes"]["brain.retrieval.candidates"] >= 1
    assert by_name["compose"]["attributes"]["brain.memory.count"] >= 1
    assert all(s["service"] == "brain-test" for s in mine)
    ids = {s["span_id"] for s in mine}
    assert all(s["parent_span_id"] in ids for s in mine if s["name"] != "test root")  # one tree
    leaked = [t for t in _texts(mine) if "quartz" in t or tag in t or "nightly" in t]
    assert not leaked, leaked  # content off: no memory text, no query text
    assert (
        span_fates["exported"] >= len(want)
        and not span_fates["queue_full"]
        and not span_fates["export_failed"]
    )


async def test_content_on_puts_the_injected_memory_on_the_compose_span(
    otel_collector: Collector, service: MemoryService, owner: Actor
) -> None:
    settings = TraceSettings(endpoint=traces_url(otel_collector.endpoint), content=True, interval_s=0.1)
    tracing.configure(settings)
    try:
        tag = uuid.uuid4().hex[:8]
        ns = f"test:{tag}"
        await service.note(MemoryIn(body=BODY.format(tag=tag), namespace=ns, kind="fact"), owner)
        await compose(
            service.retriever,
            Catalog(),
            Scope.of([ns]),
            QUESTION.format(tag=tag),
            ComposeConfig(),
            SecretGate("redact"),
        )
        tracing.flush()
        spans = otel_collector.wait_spans(lambda s: tag in str(s["attributes"].get("brain.memory.text", "")))
        assert any("quartz bucket" in str(s["attributes"].get("brain.memory.text", "")) for s in spans)
    finally:
        tracing.configure(TraceSettings())


def _burst(n: int) -> None:
    for i in range(n):
        with tracing.span("burst", {"brain.i": i}):
            pass


def test_a_collector_that_is_down_or_hung_costs_spans_counted_never_the_caller(
    otel_collector: Collector,
) -> None:
    fates: collections.Counter[str] = collections.Counter()
    settings = TraceSettings(
        endpoint=traces_url(otel_collector.endpoint),
        queue_size=20,
        batch_size=10,
        interval_s=0.05,
        export_timeout_s=0.5,
    )
    tracing.configure(settings, counted=lambda reason, n: fates.update({reason: n}))
    try:
        # hung: the collector accepts the connection and never answers
        otel_collector.pause()
        _burst(500)
        # Every span past the queue and the batch in flight was dropped at once, not waited for:
        # an ended span never waits on the exporter.
        assert fates["queue_full"] >= 500 - settings.queue_size - settings.batch_size, fates
        deadline = time.monotonic() + 15
        while not fates["export_failed"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert fates["export_failed"] > 0, fates  # the batch in flight gave up at its timeout
        otel_collector.resume()

        # down: nothing listens
        otel_collector.stop()
        before = fates["export_failed"]
        _burst(5)
        deadline = time.monotonic() + 15
        while fates["export_failed"] == before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert fates["export_failed"] > before, fates

        # back: spans flow again
        otel_collector.start()
        exported = fates["exported"]
        with tracing.span("after the outage"):
            pass
        otel_collector.wait_spans(lambda s: s["name"] == "after the outage", timeout=20)
        deadline = time.monotonic() + 5
        while fates["exported"] == exported and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fates["exported"] > exported
    finally:
        tracing.configure(TraceSettings())


async def test_a_job_run_is_one_trace_with_its_summary_counts(
    otel_collector: Collector, store: Store, dsn: str
) -> None:
    """`python -m brain.jobs.digest` as its CronJob runs it, with the operator's trace variables."""
    env = {
        **os.environ,
        Env.DATABASE_URL: dsn,
        Env.TRACES_ENDPOINT: traces_url(otel_collector.endpoint),
        Env.SERVICE_NAME: "brain-digest",
    }
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "brain.jobs.digest"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    (run,) = otel_collector.wait_spans(lambda s: s["name"] == "job digest", timeout=20)
    assert run["service"] == "brain-digest" and run["parent_span_id"] is None
    assert run["attributes"]["brain.job.exit_code"] == 0
    assert run["attributes"]["brain.job.error"] is False
    counted = {k: v for k, v in summary.items() if isinstance(v, int) and not isinstance(v, bool)}
    assert counted and all(run["attributes"][f"brain.job.{k}"] == v for k, v in counted.items())


def test_a_callers_unsampled_traceparent_does_not_turn_tracing_off(otel_collector: Collector) -> None:
    """An agent that sends `traceparent: ...-00` (not sampled) is traced all the same."""
    tracing.configure(TraceSettings(endpoint=traces_url(otel_collector.endpoint), interval_s=0.1))
    try:
        trace_id, parent = "cd" * 16, "ef" * 8
        caller = tracing.extract({"traceparent": f"00-{trace_id}-{parent}-00"})
        with tracing.span("chat echo", parent=caller) as s:
            assert s.is_recording()
        (got,) = otel_collector.wait_spans(lambda s: s["trace_id"] == trace_id, timeout=20)
        assert got["parent_span_id"] == parent
    finally:
        tracing.configure(TraceSettings())
