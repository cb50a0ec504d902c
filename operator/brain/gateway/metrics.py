"""Gateway metrics (default registry, next to the retrieval metrics of `brain.retrieval.telemetry`).

Retrieval latency by stage, hits / no-hits, injected tokens and degradations live in
`brain.retrieval.telemetry`; these add what only the gateway sees: requests by memory outcome, the hook's own
time, captures, the queue, routing decisions, auth failures, heartbeats and the index gauges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

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
blocks_put_back = Counter(
    "brain_memory_blocks_put_back_total",
    "Memory blocks of earlier turns put back, byte for byte, so the provider's prompt cache holds.",
)
upstream_input_tokens = Counter(
    "brain_upstream_input_tokens_total",
    "Input tokens the upstream provider billed, by model and prompt-cache outcome "
    "(read: served from its cache, write: written to it, none: neither).",
    ["model", "cache"],
)
queue_depth = Gauge("brain_capture_queue_depth", "Jobs waiting in the capture queue.")
calls_open = Gauge(
    "brain_gateway_calls_open",
    "Requests this replica holds a context for: from the pre-call hook until both the response's "
    "headers and its success log have had it, or the request failed.",
)
vectors_mended = Counter(
    "brain_gateway_vectors_mended_total",
    "Entries stored without a vector (the embedder was away) that this replica embedded afterwards.",
)
vectors_mend_failures = Counter(
    "brain_gateway_vectors_mend_failures_total",
    "Tries to embed entries stored without a vector that failed (embedder or database still away).",
)
exposure_recorded = Counter(
    "brain_exposure_receipts_recorded_total",
    "Exposure receipts written (a memory given to a conversation; brain.gateway.retractions).",
)
exposure_dropped = Counter(
    "brain_exposure_receipts_dropped_total",
    "Exposure receipts dropped instead of slowing or failing a request, by reason (queue_full, "
    "db_error, no_database).",
    ["reason"],
)
retraction_notices = Counter(
    "brain_retraction_notices_total",
    "Notices put into a conversation that a memory it was given earlier was retracted (once per "
    "conversation and memory, counted when the request succeeded).",
)
retractions_pending = Gauge(
    "brain_retraction_notices_pending",
    "Conversations given a since-retracted memory that have not been told yet (this replica's view).",
)
capture_errors = Counter("brain_capture_errors_total", "Capture jobs that failed (the database, usually).")
router_decisions = Counter(
    "brain_router_decisions_total",
    "Routed requests by router, tier (SIMPLE/MEDIUM/COMPLEX/REASONING, or override) and model.",
    ["router", "tier", "model"],
)
auth_failures = Counter(
    "brain_auth_failures_total", "Refused credentials, by surface and reason.", ["surface", "reason"]
)
trace_spans_exported = Counter(
    "brain_trace_spans_exported_total", "Spans this gateway sent to the OTLP collector (brain.core.tracing)."
)
trace_spans_dropped = Counter(
    "brain_trace_spans_dropped_total",
    "Spans this gateway dropped instead of slowing a request, by reason (queue_full: the collector is "
    "slower than the spans come; export_failed: it refused, was down or did not answer in time).",
    ["reason"],
)
for _reason in ("queue_full", "export_failed"):  # a series from the start: a rate, an alert, a panel
    trace_spans_dropped.labels(_reason)


def trace_spans(reason: str, n: int) -> None:
    """brain.core.tracing's counter callback."""
    if reason == "exported":
        trace_spans_exported.inc(n)
    else:
        trace_spans_dropped.labels(reason).inc(n)


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


# ----------------------------------------------------------------------------------- the public view

#: Labels that name a key, a person, a team, a memory namespace or an upstream: never on the public
#: `/metrics` (an owner key sees them). LiteLLM's Prometheus callback sets most of these per request.
SENSITIVE_LABELS = frozenset(
    {
        "hashed_api_key",
        "api_key_alias",
        "api_key",
        "key_alias",
        "key_name",
        "user",
        "user_id",
        "user_email",
        "user_alias",
        "end_user",
        "team",
        "team_alias",
        "org_id",
        "org_alias",
        "project_id",
        "project_alias",
        "api_base",
        "client_ip",
        "user_agent",
        "tag",
        "model_id",
        "memory_namespace",
    }
)
#: Gauges whose series partition a whole, so dropping a label and summing keeps their meaning.
PARTITION_GAUGES = frozenset({"brain_gateway_index_entries"})


def sensitive(label: str, value: str) -> bool:
    """A label hidden from the public view: a known identity label, or any value holding a URL."""
    return label in SENSITIVE_LABELS or "://" in value


def scrub(families: Iterable[Metric]) -> Iterator[Metric]:
    """Families without sensitive labels: the label is dropped and its series summed (min for `_created`).

    A gauge that does not partition a whole (a per-key budget, say) means nothing summed, so a gauge
    family carrying a sensitive label is left out instead.
    """
    for fam in families:
        drop = {k for s in fam.samples for k, v in s.labels.items() if sensitive(k, v)}
        if not drop:
            yield fam
            continue
        if fam.type in ("gauge", "info", "stateset", "unknown") and fam.name not in PARTITION_GAUGES:
            continue
        merged: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for s in fam.samples:
            key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in drop)))
            if key in merged and s.name.endswith("_created"):
                merged[key] = min(merged[key], s.value)
            else:
                merged[key] = merged.get(key, 0.0) + s.value
        out = Metric(fam.name, fam.documentation, fam.type, fam.unit)
        out.samples = [Sample(name, dict(labels), value) for (name, labels), value in merged.items()]
        yield out


class _Scrubbed(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        return scrub(self.registry.collect())


def public_exposition(registry: CollectorRegistry = REGISTRY) -> bytes:
    """The `/metrics` text anyone on the network may read: every metric, no identity labels."""
    view = CollectorRegistry(auto_describe=False)
    view.register(_Scrubbed(registry))
    return generate_latest(view)
