"""Retrieval latency at scale: LoCoMo copied to N memories in one scope, the gateway's path timed per stage."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from typing import Any

import numpy as np
from hack.bench import LOCOMO, check, corpus, vectors
from tests.kit.database import fresh_database, open_store, postgres

from brain.core.models import Actor, MemoryIn
from brain.embedder import LocalEmbedder
from brain.local.eval import load_dataset
from brain.local.stats import percentile
from brain.retrieval import Retriever, render_block
from brain.retrieval.render import within_budget
from brain.store import Scope
from brain.store.store import embed_text
from brain.store.writer import StoreWriter


async def with_mirror(store: Any) -> float:
    """The gateway's path: its lexical leg ranks in its in-memory copy of the BM25 weights
    (brain/store/lexical_mirror.py), loaded before the timings; returns the load's seconds."""
    t0 = time.perf_counter()
    mirror = store.start_mirror()
    while not mirror.ready:
        await asyncio.sleep(0.05)
    return time.perf_counter() - t0


def database_legs() -> float:
    """Lexical legs that ranked in SQL so far: a row that claims the gateway's path fails on any."""
    from brain.store.lexical_mirror import lexical_answers

    return float(lexical_answers.labels("database")._value.get())


async def warm_up(retriever: Retriever, scope: Scope, queries: list[str]) -> None:
    """Steady state before the clock: the scope's statistics loaded, plans cached, pages in memory."""
    await retriever.warm(scope)
    for q in queries[:10]:
        await retriever.retrieve(q, scope, include_pinned=True)


async def timed(
    retriever: Retriever, scope: Scope, queries: list[str], counts: check.Counts
) -> dict[str, list[float]]:
    """The gateway's path for each question (retrieve, budget, render), its wall ms under `total` and
    each stage's from `RetrievalResult.timings`; every question's outcome counted, so a row whose
    retrievals failed or degraded fails its check instead of timing the fallback."""
    out: dict[str, list[float]] = {"total": []}
    for q in queries:
        t = time.perf_counter()
        try:
            res = await retriever.retrieve(q, scope, include_pinned=True)
        except Exception as e:  # counted: the check fails the run after the table
            counts.add_result(error=e, example=q)
            continue
        render_block(within_budget(res.all_hits, 1500))
        out["total"].append((time.perf_counter() - t) * 1000)
        counts.add_result(res, example=q)
        for stage, sec in res.timings.items():
            if stage != "total":
                out.setdefault(stage, []).append(sec * 1000)
    return out


async def latency(runs: int, sizes: list[int], layouts: list[str], results: dict[str, Any]) -> str:
    ds = load_dataset(json.loads(LOCOMO.read_text()))
    embedder = LocalEmbedder()
    base_vecs = await vectors.vectors(embedder, [embed_text(m.title, m.body) for m in ds.memories])
    queries = [q.query for q in ds.queries[:200]]
    rng = np.random.default_rng(1)
    out = [
        "## Retrieval latency at scale",
        "",
        "LoCoMo turns copied until the store holds N active memories, each copy with its text's own "
        "embedding (hack/bench/vectors.py) jittered so copies differ; the queried scope holds them all "
        "(layouts, each its own database: "
        + "; ".join(f"{k}: {corpus.LAYOUTS[k]}" for k in layouts)
        + "). 200 LoCoMo questions, each embedded for real (no cache), then legs (the lexical one through "
        "the gateway's in-memory copy of the BM25 weights), fusion, fetch, budget and rendering — the "
        "gateway's path. Each question's outcome is counted (hack/bench/check.py); the "
        "run fails when any retrieval was degraded, timed out or failed.",
        "",
        "| memories | layout | HNSW build s | p50 ms | p95 ms | runs | outcomes | load before / after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    profiles: dict[tuple[int, str], dict[str, list[float]]] = {}
    checks: list[tuple[check.Counts, check.Claim]] = []
    with postgres() as pg:
        for size in sizes:
            for layout in layouts:
                load0 = os.getloadavg()
                async with (
                    fresh_database(pg, f"bench_lat_{size}_{layout}") as dsn,
                    open_store(dsn, dim=embedder.dim) as store,
                ):
                    await store.pool_for_tests.execute("DROP INDEX memories_embedding")
                    actor = Actor(name="bench", role="owner", origin="import")
                    n = 0
                    copy = 0
                    while n < size:
                        batch: list[tuple[MemoryIn, np.ndarray]] = []
                        for i, m in enumerate(ds.memories):
                            if n + len(batch) >= size:
                                break
                            v = base_vecs[i] + np.asarray(
                                rng.normal(0, 0.02, base_vecs.shape[1]), dtype=np.float32
                            )
                            batch.append(
                                (
                                    MemoryIn(
                                        body=m.body,
                                        title=m.title,
                                        namespace=corpus.namespace(layout, n + len(batch)),
                                        valid_from=m.valid_from,
                                        episode=f"copy-{copy}@{m.valid_from}",
                                        seq=i,
                                    ),
                                    v / np.linalg.norm(v),
                                )
                            )
                        for j in range(0, len(batch), 1000):
                            await StoreWriter(store).note_many(batch[j : j + 1000], actor=actor)
                        n += len(batch)
                        copy += 1
                    t0 = time.perf_counter()
                    await store.pool_for_tests.execute(
                        "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) "
                        "WITH (m = 16, ef_construction = 64)"
                    )
                    build = time.perf_counter() - t0
                    # Steady state, as autovacuum leaves a live brain: GIN pending lists merged, visibility map
                    # set, statistics current. Measuring right after a bulk load times autovacuum instead.
                    await store.pool_for_tests.execute("VACUUM (ANALYZE) memories, lexeme_stats")
                    await with_mirror(store)
                    in_sql = database_legs()
                    retriever = Retriever(store, embedder)
                    scope = corpus.scope(layout)
                    counts = check.Counts()
                    p50s, p95s = [], []
                    stage_ms: dict[str, list[float]] = {}
                    await warm_up(retriever, scope, queries)
                    for _ in range(runs):
                        got = await timed(retriever, scope, queries, counts)
                        for stage, values in got.items():
                            stage_ms.setdefault(stage, []).extend(values)
                        lat = got["total"]
                        p50s.append(percentile(lat, 0.5) if lat else float("nan"))
                        p95s.append(percentile(lat, 0.95) if lat else float("nan"))
                    load1 = os.getloadavg()
                    if database_legs() != in_sql:
                        raise check.OutcomeMismatch(
                            f"latency, {size:,} {layout}: the row claims the gateway's path, but "
                            f"{database_legs() - in_sql:.0f} lexical legs ranked in SQL, not in the in-memory copy"
                        )
                    out.append(
                        f"| {size:,} | {layout} | {build:.1f} | {statistics.median(p50s):.1f} | "
                        f"{statistics.median(p95s):.1f} | {runs} | {counts.summary()} | {load0[0]:.1f} / {load1[0]:.1f} |"
                    )
                    checks.append(
                        (
                            counts,
                            check.retrieval(f"latency, {size:,} memories, {layout}", runs * len(queries)),
                        )
                    )
                    results.setdefault("latency", []).append(
                        {
                            "memories": size,
                            "layout": layout,
                            "hnsw_build_s": build,
                            "p50_ms": statistics.median(p50s),
                            "p95_ms": statistics.median(p95s),
                            "runs": runs,
                            "outcomes": counts.as_dict(),
                            "load_before": load0,
                            "load_after": load1,
                            "stages": {
                                st: [percentile(v, 0.5), percentile(v, 0.95)] for st, v in stage_ms.items()
                            },
                        }
                    )
                    profiles[size, layout] = stage_ms
    out += [
        "",
        "Per stage, from `RetrievalResult.timings` (the gateway exports the same as "
        "`brain_retrieval_stage_duration_seconds`), all runs pooled. The lexical legs run while the query "
        "is embedded; the vector leg follows the embedding; the rest is sequential.",
        "",
        "| memories | layout | " + " | ".join(f"{st} p50 / p95" for st in STAGES) + " |",
        "|---|---|" + "---|" * len(STAGES),
    ]
    for (size, layout), stage_ms in profiles.items():
        cells = [
            f"{percentile(stage_ms[st], 0.5):.1f} / {percentile(stage_ms[st], 0.95):.1f}"
            if st in stage_ms
            else "–"
            for st in STAGES
        ]
        out.append(f"| {size:,} | {layout} | " + " | ".join(cells) + " |")
    results.setdefault("checks", []).extend(
        {"row": claim.row, "claims": claim.says, "ok": check.mismatch(counts, claim) is None}
        for counts, claim in checks
    )
    results.setdefault("_checks", []).extend(checks)
    return "\n".join(out)


STAGES = ("embed", "lexical", "trigram", "vector", "fuse", "context", "fetch", "expand", "total")
