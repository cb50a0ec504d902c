"""Prometheus metrics of the data plane (gateway process). Names follow Prometheus conventions."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

retrieval_stage_seconds = Histogram(
    "brain_retrieval_stage_duration_seconds",
    "Time spent in each retrieval stage (embed, vector, lexical, trigram, fuse, fetch, expand, render, total).",
    ["stage"],
    buckets=STAGE_BUCKETS,
)
retrieval_queries = Counter(
    "brain_retrieval_queries_total", "Retrievals by result: hit (something injected) or no_hit.", ["result"]
)
retrieval_degraded = Counter(
    "brain_retrieval_degraded_total",
    "Retrievals that lost a part and went on without it, by cause "
    "(timeout, embedder_down, db_down, secret_in_query, error).",
    ["cause"],
)
injected_tokens = Histogram(
    "brain_injected_tokens",
    "Estimated tokens of memory injected into one request.",
    buckets=(0, 100, 250, 500, 1000, 1500, 2000, 4000, 8000),
)
