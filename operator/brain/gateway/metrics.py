"""Gateway metrics (default registry, next to the retrieval metrics of `brain.metrics`).

Retrieval latency by stage, hits / no-hits, injected tokens and degradations live in
`brain.metrics`; these add what only the gateway sees: requests by memory outcome, the hook's own
time, captures, the queue, routing decisions, auth failures, heartbeats and the index gauges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

requests = Counter(
    "brain_gateway_requests_total",
    "Model requests seen by the brain hook, by API and memory outcome "
    "(injected, none, off, degraded, skipped).",
    ["api", "memory"],
)
hook_seconds = Histogram(
    "brain_gateway_hook_duration_seconds",
    "Time the brain added to a request before it went upstream (pre-call hook, all of it).",
    ["hook"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
captures = Counter("brain_captures_stored_total", "Entries stored by capture and learn, by kind.", ["kind"])
captures_filtered = Counter(
    "brain_captures_filtered_total",
    "Exchanges not captured, by reason (venting, noise, echo_of_memory, too_short, nothing_worth_keeping, "
    "secret, instruction_like, read_only_key, opted_out, error).",
    ["reason"],
)
queue_dropped = Counter(
    "brain_capture_queue_dropped_total",
    "Work dropped because the capture queue was full, by kind of work.",
    ["work"],
)
queue_depth = Gauge("brain_capture_queue_depth", "Jobs waiting in the capture queue.")
capture_errors = Counter("brain_capture_errors_total", "Capture jobs that failed (the database, usually).")
router_decisions = Counter(
    "brain_router_decisions_total",
    "Routed requests by router, tier (SIMPLE/MEDIUM/COMPLEX/REASONING, or override) and model.",
    ["router", "tier", "model"],
)
auth_failures = Counter(
    "brain_auth_failures_total", "Refused credentials, by surface and reason.", ["surface", "reason"]
)
heartbeats = Counter("brain_sse_heartbeats_total", "SSE heartbeat comments sent on silent streams.")
early_stream_starts = Counter(
    "brain_sse_early_starts_total",
    "Streams whose headers the gateway sent itself while the upstream was silent.",
)


class IndexCollector(Collector):
    """`brain_gateway_index_entries{kind,memory_namespace}` from the last index stats the runtime fetched (no
    query on scrape). Not `brain_index_*`: the operator exports those per Brain, and the same name from
    two jobs double-counts in every `sum`; not `namespace`: a scrape's target label would rename it."""

    def __init__(self, source: Callable[[], dict[str, Any] | None]) -> None:
        self.source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = self.source() or {}
        entries = GaugeMetricFamily(
            "brain_gateway_index_entries",
            "Active memory entries, by kind and memory namespace.",
            labels=["kind", "memory_namespace"],
        )
        for e in stats.get("entries", []):
            entries.add_metric([str(e["kind"]), str(e["namespace"])], float(e["count"]))
        yield entries
        ratio = GaugeMetricFamily(
            "brain_gateway_index_embedded_ratio", "Share of active entries that have a vector."
        )
        if "embeddedRatio" in stats:
            ratio.add_metric([], float(stats["embeddedRatio"]))
        yield ratio


_index_collector: IndexCollector | None = None


def register_index_collector(source: Callable[[], dict[str, Any] | None]) -> None:
    """Idempotent: one collector per process, pointing at the latest source."""
    global _index_collector
    if _index_collector is None:
        _index_collector = IndexCollector(source)
        REGISTRY.register(_index_collector)
    else:
        _index_collector.source = source
