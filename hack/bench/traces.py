"""What traces cost: retrieval at 100k memories with the exporter off and on, side by side (#31).

    .venv/bin/python -m hack.bench.traces [--memories 100000] [--queries 200] [--runs 2]

The corpus is hack/bench/scale.py's (LoCoMo turns copied to N with their texts' real embeddings
jittered, all in the team's `shared`, the scope the questions ask). Each question goes through the
gateway's retrieval path (retrieve + render, the query embedded for real by the one-thread query
model) inside a `search_memory` span, as the gateway's hook opens it. Off: no endpoint
(brain.core.tracing hands out a non-recording span). On: every span sent over OTLP/HTTP to a real
OpenTelemetry Collector (hack/otelcol-build.sh) on loopback. The arms alternate in blocks of 20
questions (off, on, on, off, ...), so both see the same drift in the machine's load.

Also timed, in the on arm: the exposure receipt the gateway records for each injection
(brain.gateway.retractions.Exposure.receipt, the request path's part), with its batches written
to Postgres in the background as a replica does.

Checked, so that the table cannot be printed for a run that measured something else: every
retrieval's outcome is counted (hack/bench/check.py; degraded, timed out or failed fails the run);
in the on arm, the collector must have received one `search_memory` span per question and no span
may have been dropped; in the off arm, none. Loopback only, bounded. Prints Markdown for
docs/benchmarks.md, and its figures to the run's record (hack/bench/results.py).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.bench import check, corpus, parser, results, scale, vectors
from tests.kit.database import postgres

from brain.local.stats import percentile

BLOCK = 20


async def main(a: argparse.Namespace) -> None:
    from tests.kit.traces import Collector, build_collector

    from brain.core import tracing
    from brain.core.tracing import TraceSettings
    from brain.embedder import LocalEmbedder
    from brain.embedder.model import QUERY_THREADS
    from brain.gateway.retractions import Exposure
    from brain.gateway.settings import ExposureSettings
    from brain.local.eval import load_dataset
    from brain.retrieval import Retriever, render_block
    from brain.retrieval.render import within_budget
    from brain.store import Store
    from brain.store.store import embed_text

    ds = load_dataset(json.loads(scale.LOCOMO.read_text()))
    embedder = LocalEmbedder(threads=QUERY_THREADS)
    base = await vectors.vectors(embedder, [embed_text(m.title, m.body) for m in ds.memories])
    queries = [q.query for q in ds.queries[: a.queries]]
    fates: collections.Counter[str] = collections.Counter()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
        collector = Collector(build_collector(), Path(tmp) / "otel", grpc=False)
        collector.start()
        with postgres() as pg:
            dsn = await pg.create_database("bench_traces")
            built = await scale.build(dsn, a.memories, ds, base, embedder.model, "shared")
            print(f"built {a.memories:,}: {built}", file=sys.stderr, flush=True)
            on = TraceSettings(endpoint=f"{collector.endpoint}/v1/traces", service="brain-bench")
            store = await Store.open(dsn, dim=embedder.dim)
            exposure = Exposure(ExposureSettings())
            flusher = asyncio.create_task(exposure.run(store))
            try:
                retriever = Retriever(store, embedder)
                scope = corpus.scope("shared")
                await retriever.warm(scope)
                for q in queries[:10]:
                    await retriever.retrieve(q, scope, include_pinned=True)
                times: dict[str, list[float]] = {"off": [], "on": []}
                receipts: list[float] = []
                counts = {arm: check.Counts() for arm in times}
                sent = {"off": 0, "on": 0}
                plan = [q for _ in range(a.runs) for q in queries]
                for b in range(0, len(plan), BLOCK):
                    arm = "on" if (b // BLOCK) % 4 in (1, 2) else "off"  # off, on, on, off, ...
                    tracing.configure(
                        on if arm == "on" else TraceSettings(), counted=lambda r, n: fates.update({r: n})
                    )
                    for i, q in enumerate(plan[b : b + BLOCK]):
                        t = time.perf_counter()
                        with tracing.span("search_memory", {tracing.OPERATION: "search_memory"}):
                            res = await retriever.retrieve(q, scope, include_pinned=True)
                            render_block(within_budget(res.all_hits, 1500))
                        times[arm].append((time.perf_counter() - t) * 1000)
                        counts[arm].add_result(res)
                        sent[arm] += 1
                        if arm == "on" and res.hits:
                            t = time.perf_counter()
                            exposure.receipt([h.id for h in res.hits[:3]], "bench", f"conv-{b}-{i}", "chat")
                            receipts.append((time.perf_counter() - t) * 1000)
                tracing.shutdown(10)
            finally:
                flusher.cancel()
                await asyncio.gather(flusher, return_exceptions=True)
                await exposure.flush(store)
                written = await store.pool_for_tests.fetchval("SELECT count(*) FROM memory_exposures")
                await store.close()
        arrived = collector.wait_spans(lambda s: s["name"] == "search_memory", timeout=30, count=sent["on"])
        collector.stop()
    load1 = os.getloadavg()
    p50 = {arm: percentile(v, 0.5) for arm, v in times.items()}
    p95 = {arm: percentile(v, 0.95) for arm, v in times.items()}
    overhead = p50["on"] / p50["off"] - 1
    lines = [
        f"## Traces: off against on at {a.memories:,} memories (#31)",
        "",
        f"`hack/bench/traces.py`: {len(queries)} LoCoMo questions × {a.runs} runs over {a.memories:,} "
        "memories in one scope (hack/bench/scale.py's corpus), each through retrieve + render inside a "
        "`search_memory` span; off: no endpoint; on: every span over OTLP/HTTP to a real OpenTelemetry "
        f"Collector on loopback. Arms alternate in blocks of {BLOCK} questions. {os.cpu_count()} CPUs; load "
        f"average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end.",
        "",
        "| traces | questions | p50 ms | p95 ms | spans sent | spans dropped | outcomes |",
        "|---|---|---|---|---|---|---|",
        f"| off | {sent['off']} | {p50['off']:.2f} | {p95['off']:.2f} | 0 | 0 | {counts['off'].summary()} |",
        f"| on | {sent['on']} | {p50['on']:.2f} | {p95['on']:.2f} | {fates['exported']} | "
        f"{fates['queue_full'] + fates['export_failed']} | {counts['on'].summary()} |",
        "",
        f"- p50 overhead of traces on: **{overhead:+.1%}** (goal ≤ 2 %); the collector received "
        f"{len(arrived)} `search_memory` spans for {sent['on']} questions.",
        f"- Exposure receipt on the request path: p50 **{percentile(receipts, 0.5) * 1000:.1f} µs**, "
        f"p95 {percentile(receipts, 0.95) * 1000:.1f} µs over {len(receipts)} injections (goal ≤ 1 ms p50); "
        f"{written} receipts written by the background flush.",
    ]
    print("\n".join(lines))
    figures: dict[str, Any] = {
        "memories": a.memories,
        "queries": len(queries),
        "runs": a.runs,
        "load": [load0, load1],
        "built": built,
        "p50_ms": p50,
        "p95_ms": p95,
        "overhead_p50": overhead,
        "spans": dict(fates),
        "search_memory_spans": len(arrived),
        "receipt_us": [percentile(receipts, 0.5) * 1000, percentile(receipts, 0.95) * 1000],
        "receipts_written": written,
        "outcomes": {arm: c.as_dict() for arm, c in counts.items()},
    }
    checks = [(counts[arm], check.retrieval(f"traces {arm}", sent[arm])) for arm in ("off", "on")]
    results.emit("traces", figures, markdown="\n".join(lines), checks=checks)
    dropped = fates["queue_full"] + fates["export_failed"]
    if dropped or len(arrived) != sent["on"]:
        raise SystemExit(f"traces: {dropped} spans dropped, {len(arrived)} of {sent['on']} arrived")
    if not written:
        raise SystemExit("traces: no exposure receipt was written")
    check.expect_all(checks)


if __name__ == "__main__":
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=2)
    asyncio.run(main(ap.parse_args()))
