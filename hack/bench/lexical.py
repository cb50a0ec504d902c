"""Lexical leg: BM25 as a sparsevec inner product against the tsvector SQL it replaced.

Prints Markdown for docs/benchmarks.md (`python -m hack.bench --only lexical`, or alone with sizes
as arguments: `python -m hack.bench.lexical 10000 100000`). LoCoMo turns are copied into namespaces
until the store holds N memories (no embeddings: only the lexical leg is timed), written through
the store (so the weights come from the write trigger), then the weights settled at the live mean
(the rewrite is timed: what a reference move costs at that size); 200 LoCoMo questions over the
whole corpus (#33, hack/bench/corpus.py): all of it in `shared`, and split over four namespaces with
all four read, each its own database. "before" is the statement retrieval shipped until then, BM25 from each
candidate's unnested tsvector (tests/kit/lexical_reference.py); "after" is `brain.store.lexical.bm25`,
the same GIN candidates scored by `bm25 <#> query`. Both are interleaved query by query, rankings
compared on the same run.

Also measured, per size: the column's bytes a memory, how many lexemes share a dimension, and a
sparsevec HNSW index (`sparsevec_ip_ops`) as the candidate step instead of the GIN index (its
recall of the exact top 10); at sizes up to 20k, what a stale reference length does to the top 10.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.local.devdb import EmbeddedPostgres

from hack.bench import LOCOMO, check, corpus, parser, results

from brain.local.stats import percentile

STALE = (0.5, 0.8, 1.25, 2.0)  # live mean / reference

# The HNSW variant: candidates straight from the index by inner product, scope filtered during the
# scan (the pool runs hnsw.iterative_scan = relaxed_order, ef_search 100), rescored exactly.
HNSW_SQL = """WITH q AS (
        SELECT l.lexeme, s.df, ln(1 + ($2::float8 - s.df + 0.5) / (s.df + 0.5)) AS idf
          FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
          JOIN lexeme_stats s ON s.lexeme = l.lexeme AND s.df > 0),
    qv AS (SELECT format('{{%s}}/{dims}', string_agg(dim || ':' || idf, ','))::sparsevec AS v
             FROM (SELECT brain_lexeme_dim(lexeme) AS dim, sum(idf) AS idf FROM q GROUP BY 1) d)
    SELECT m.id, -(m.bm25 <#> qv.v) AS score FROM memories m, qv
     WHERE {where} ORDER BY m.bm25 <#> qv.v LIMIT $3"""


async def interleaved(
    fns: dict[str, Callable[[str], Awaitable[list[str]]]], queries: list[str], runs: int
) -> dict[str, tuple[float, float]]:
    """p50 / p95 ms per function, medians over runs, query by query in turn so load hits all alike."""
    p50s: dict[str, list[float]] = {k: [] for k in fns}
    p95s: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(runs):
        lat: dict[str, list[float]] = {k: [] for k in fns}
        for q in queries:
            for label, fn in fns.items():
                t = time.perf_counter()
                await fn(q)
                lat[label].append((time.perf_counter() - t) * 1000)
        for label, values in lat.items():
            p50s[label].append(percentile(values, 0.5))
            p95s[label].append(percentile(values, 0.95))
    return {k: (statistics.median(p50s[k]), statistics.median(p95s[k])) for k in fns}


def as_turns(tops: dict[str, list[str]], turn: dict[str, str]) -> dict[str, list[str]]:
    """Each question's top 10 as the LoCoMo turns its memories copy."""
    return {q: [turn[m] for m in ids[:10]] for q, ids in tops.items()}


async def write_cost(pg: EmbeddedPostgres, notes: int = 1024, batch: int = 128) -> str:
    """What the weights add to a write: the store alone (LoCoMo turns, random unit vectors, batches
    of 128), with the BM25 trigger on and off in alternating batches of the same run."""
    import numpy as np
    from tests.kit.database import fresh_database, open_store

    from brain.core.models import Actor, MemoryIn
    from brain.local.eval import load_dataset
    from brain.store.writer import StoreWriter

    ds = load_dataset(json.loads(LOCOMO.read_text()))
    actor = Actor(name="bench", role="owner", origin="import")
    rng = np.random.default_rng(3)
    spent = {"on": 0.0, "off": 0.0}
    async with fresh_database(pg, "bench_lex_writes") as dsn, open_store(dsn) as store:
        for i in range(0, 2 * notes, batch):
            side = "on" if (i // batch) % 2 == 0 else "off"
            await store.pool_for_tests.execute(
                f"ALTER TABLE memories {'ENABLE' if side == 'on' else 'DISABLE'} TRIGGER memories_bm25"
            )
            vecs = rng.normal(size=(batch, 384)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            items = [
                (MemoryIn(body=m.body, title=m.title, namespace="w"), vecs[j])
                for j, m in enumerate(ds.memories[i : i + batch])
            ]
            t = time.perf_counter()
            await StoreWriter(store).note_many(items, actor=actor)
            spent[side] += time.perf_counter() - t
    on, off = notes / spent["on"], notes / spent["off"]
    return (
        f"Write cost (the store alone, {notes:,} LoCoMo turns a side with random vectors, batches of {batch}, "
        f"trigger on and off alternating): {on:.0f} notes/s with the BM25 weights, {off:.0f} without "
        f"({on / off:.2f}×; {1000 / on - 1000 / off:+.2f} ms a note)."
    )


async def main(
    sizes: list[int], runs: int = 3, layouts: tuple[str, ...] = tuple(corpus.LAYOUTS)
) -> tuple[str, list[tuple[check.Counts, check.Claim]]]:
    from tests.kit import lexical_reference as reference
    from tests.kit.database import fresh_database, open_store, postgres

    from brain.core.models import Actor, MemoryIn
    from brain.local.eval import load_dataset
    from brain.store import Scope, Store
    from brain.store.lexical import DIMENSIONS, bm25
    from brain.store.store import AbandoningPool
    from brain.store.writer import StoreWriter

    AbandoningPool.release_timeout = 30.0  # a shared, loaded machine: do not count slow resets as hangs
    ds = load_dataset(json.loads(LOCOMO.read_text()))
    queries = [q.query for q in ds.queries[:200]]
    relevant = {q.query: set(q.relevant) for q in ds.queries[:200]}
    load0 = os.getloadavg()[0]
    rows: list[str] = []
    checks: list[tuple[check.Counts, check.Claim]] = []
    extra: list[str] = []
    stale_rows: list[str] = []
    with postgres() as pg:
        writes = await write_cost(pg)
        print(writes, file=sys.stderr, flush=True)
        for size in sizes:
            for layout in layouts:
                async with fresh_database(pg, f"bench_lex_{size}_{layout}") as dsn, open_store(dsn) as store:
                    actor = Actor(name="bench", role="owner", origin="import")
                    n, copy = 0, 0
                    turn: dict[str, str] = {}  # memory id → the LoCoMo turn it copies (recall of gold turns)
                    t0 = time.perf_counter()
                    while n < size:
                        batch = [
                            (
                                MemoryIn(
                                    body=m.body,
                                    title=m.title,
                                    namespace=corpus.namespace(layout, n + i),
                                    valid_from=m.valid_from,
                                ),
                                None,
                            )
                            for i, m in enumerate(ds.memories[: size - n])
                        ]
                        for j in range(0, len(batch), 1000):
                            written = await StoreWriter(store).note_many(batch[j : j + 1000], actor=actor)
                            turn.update((w.id, ds.memories[j + k].id) for k, w in enumerate(written))
                        n += len(batch)
                        copy += 1
                    load_s = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    mean = await store.settle_weights()
                    rewrite_s = time.perf_counter() - t0
                    await store.pool_for_tests.execute("VACUUM (ANALYZE) memories, lexeme_stats")
                    await store.corpus_stats(max_age=0)
                    space = await store.pool_for_tests.fetchrow(
                        """SELECT pg_relation_size('memories_tsv') AS gin, avg(pg_column_size(bm25)) AS col,
                                  avg(length(bm25::text) - length(replace(bm25::text, ':', ''))) AS nnz,
                                  count(*) FILTER (WHERE length(bm25::text) - length(replace(bm25::text, ':', ''))
                                                   <> length(tsv)) AS collided
                             FROM memories"""
                    )
                    vocab = await store.pool_for_tests.fetchrow(
                        "SELECT count(*) AS lexemes, count(DISTINCT brain_lexeme_dim(lexeme)) AS dims FROM lexeme_stats"
                    )
                    scope = corpus.scope(layout)
                    where, args = scope.where(4)

                    async def before(q: str, store: Store = store, scope: Scope = scope) -> list[str]:
                        return [d for d, _ in (await reference.bm25(store, q, scope, 80)).hits]

                    async def after(q: str, store: Store = store, scope: Scope = scope) -> list[str]:
                        return [d for d, _ in (await bm25(store, q, scope, 80)).hits]

                    for q in queries[:20]:  # warm-up: plans cached, pages in memory
                        await before(q)
                        await after(q)
                    exact = {q: await before(q) for q in queries}
                    tops = {q: await after(q) for q in queries}
                    counts = check.Counts()
                    for q in queries:  # the leg raised nothing; a question without a lexical match is none
                        counts.add("injected" if tops[q] else "none")
                    checks.append(
                        (counts, check.retrieval(f"lexical, {size:,} memories, {layout}", len(queries)))
                    )
                    same = sum(exact[q][:10] == tops[q][:10] for q in queries if exact[q])
                    answered = sum(bool(exact[q]) for q in queries)
                    # where the rankings differ, which finds more of the questions' evidence
                    gold = {
                        k: corpus.gold_recall(as_turns(v, turn), relevant)
                        for k, v in (("before", exact), ("after", tops))
                    }
                    lat = await interleaved({"before": before, "after": after}, queries, runs)
                    rows.append(
                        f"| {size:,} | {layout} | {lat['before'][0]:.1f} / {lat['before'][1]:.1f} | "
                        f"{lat['after'][0]:.1f} / {lat['after'][1]:.1f} | "
                        f"{lat['after'][1] / lat['before'][1]:.2f}× | {same}/{answered} | "
                        f"{gold['before']:.4f} / {gold['after']:.4f} | "
                        f"{float(space['col']):.0f} B ({float(space['nnz']):.1f} lexemes) | {space['gin'] / size:.0f} B | "
                        f"{load_s:.0f} s | {rewrite_s:.1f} s | {counts.summary()} |"
                    )
                    print(
                        rows[-1], file=sys.stderr, flush=True
                    )  # progress: a long run keeps what it measured
                    extra.append(
                        f"- {size:,} memories, {layout}: {vocab['lexemes']:,} distinct lexemes on {vocab['dims']:,} dimensions "
                        f"({vocab['lexemes'] - vocab['dims']} shared); {space['collided']} memories hold two lexemes "
                        "on one dimension."
                    )

                    if size <= 20_000:
                        for ratio in STALE:
                            await store.pool_for_tests.execute(
                                "UPDATE memories SET bm25 = brain_bm25_doc(tsv, $1)", mean / ratio
                            )
                            store.lexical.reference = mean / ratio
                            tops = {q: await after(q) for q in queries}
                            same_top = sum(tops[q][:10] == exact[q][:10] for q in queries if exact[q])
                            overlap = statistics.mean(
                                len(set(tops[q][:10]) & set(exact[q][:10])) / len(exact[q][:10])
                                for q in queries
                                if exact[q]
                            )
                            stale_rows.append(
                                f"| {size:,} | {layout} | {ratio} | {same_top}/{answered} | {overlap:.3f} | "
                                f"{corpus.gold_recall(as_turns(tops, turn), relevant):.4f} |"
                            )
                            print(stale_rows[-1], file=sys.stderr, flush=True)
                        await store.settle_weights()
                        await store.corpus_stats(max_age=0)

                    t0 = time.perf_counter()
                    await store.pool_for_tests.execute("SET maintenance_work_mem = '1GB'")
                    await store.pool_for_tests.execute(
                        "CREATE INDEX memories_bm25_hnsw ON memories USING hnsw (bm25 sparsevec_ip_ops)"
                    )
                    build_s = time.perf_counter() - t0
                    hnsw_bytes = await store.pool_for_tests.fetchval(
                        "SELECT pg_relation_size('memories_bm25_hnsw')"
                    )
                    sql = HNSW_SQL.format(dims=DIMENSIONS, where=where)

                    async def hnsw(
                        q: str, store: Store = store, sql: str = sql, args: list = args
                    ) -> list[str]:
                        docs = max(store.lexical.docs, 1)
                        return [r["id"] for r in await store.pool_for_tests.fetch(sql, q, docs, 80, *args)]

                    for q in queries[:20]:
                        await hnsw(q)
                    found = {q: await hnsw(q) for q in queries}
                    recall = statistics.mean(
                        len(set(found[q][:10]) & set(exact[q][:10])) / len(exact[q][:10])
                        for q in queries
                        if exact[q]
                    )
                    hlat = await interleaved({"after": after, "hnsw": hnsw}, queries, 1)
                    extra.append(
                        f"- {size:,} memories, {layout}, sparsevec HNSW as the candidate step: build {build_s:.0f} s, "
                        f"{hnsw_bytes / size:.0f} B a memory, p50 / p95 {hlat['hnsw'][0]:.1f} / {hlat['hnsw'][1]:.1f} ms "
                        f"against the GIN step's {hlat['after'][0]:.1f} / {hlat['after'][1]:.1f} ms, recall of the "
                        f"exact top 10: {recall:.3f}."
                    )
                    print(extra[-1], file=sys.stderr, flush=True)
    load1 = os.getloadavg()[0]
    out = [
        "## Lexical leg: sparsevec weights",
        "",
        "`hack/bench/lexical.py`: LoCoMo turns copied to N memories, 200 LoCoMo questions over the whole "
        "corpus (layouts, each its own database: "
        + "; ".join(f"{k}: {corpus.LAYOUTS[k]}" for k in layouts)
        + "), interleaved query by query. before = BM25 unnesting each candidate's tsvector (the "
        "statement shipped until the sparsevec weights); after = the same GIN candidates scored by the "
        f"stored weights' inner product with the query's IDF. Medians of {runs} runs. Load average "
        f"{load0:.1f} at the start, {load1:.1f} at the end ({os.cpu_count()} CPUs).",
        "",
        "| memories | layout | before p50 / p95 ms | after p50 / p95 ms | after / before p95 | same top-10 (of questions "
        "with hits) | gold recall@10 before / after | weights / memory | full-text GIN / memory | load s | rewrite s "
        "| outcomes (after) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *extra,
        "",
        writes,
    ]
    if stale_rows:
        out += [
            "",
            "A stale reference length (weights at live mean / ratio), against the exact top 10:",
            "",
            "| memories | layout | live mean / reference | same top-10 | mean overlap@10 | gold recall@10 |",
            "|---|---|---|---|---|---|",
            *stale_rows,
        ]
    return "\n".join(out), checks


if __name__ == "__main__":
    ap = parser(
        __spec__.name,
        __doc__,
        epilog="Prints Markdown for docs/benchmarks.md, and records the figures (hack/bench/results.py).",
    )
    ap.add_argument("sizes", nargs="*", type=int, help="corpus sizes in memories (default: 10000 100000)")
    ap.add_argument(
        "--writes", action="store_true", help="with no sizes, time only the write cost (every run times it)"
    )
    args = ap.parse_args()
    sizes = args.sizes or ([] if args.writes else [10_000, 100_000])
    text, checks = asyncio.run(main(sizes))
    print(text)
    results.emit(
        "lexical",
        {"table": text.splitlines(), "checks": [{"row": c.row, "outcomes": n.as_dict()} for n, c in checks]},
        markdown=text,
        checks=checks,
    )
    check.expect_all(checks)  # after the table: a mismatch exits non-zero, naming the row
