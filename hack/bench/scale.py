"""How retrieval cost grows: p50/p95 at 1M memories against 100k, in one run (issue 16).

    .venv/bin/python -m hack.bench.scale [--sizes 10000,100000,1000000] [--queries 200] [--layouts shared,split]
                                         [--texts copied|renamed]

Embedding a million texts takes hours on two cores, so the corpus is the `make bench` one built
faster: LoCoMo's 5,882 turns copied until the store holds N, each copy with its text's real
embedding (the model's, embedded once and cached by hack/bench/vectors.py) jittered (N(0, 0.02) per
dimension, renormalised: copies differ, neighbourhoods stay those of real text). The queried scope
holds the whole corpus (hack/bench/corpus.py, #33): layout `shared` puts every copy in the team's
`shared`, layout `split` spreads them over `shared` + three repos and asks for all four; each its
own database. `--texts copied` (the default) repeats each turn's text, so at 1M every turn is there
171 times; the write path would keep one (`Writer.note` keeps one active body a namespace), so
`--texts renamed` gives each copy after the first other speakers' names (hack/bench/corpus.py): no
copy repeats another's bodies, the questions' subjects are only in copy 0, and the words around
them repeat as before. Memories are written with COPY into a table without its search indexes and
triggers, then the lexeme statistics computed in one statement and each index built once and timed (the HNSW build at 1M is itself a
figure for docs/scaling.md). Then VACUUM ANALYZE, as autovacuum leaves a live brain, and the
gateway's path: 200 LoCoMo questions over the whole corpus, each embedded for real by the
gateway's one-thread query model, each one's outcome counted (hack/bench/check.py): the run fails
when any retrieval was degraded, timed out or failed. The lexical leg's BM25 weights (migration 0004) are computed
once after the COPY, at the copied corpus's mean length, as `Store.settle_weights` leaves a live
brain.

Not part of `make bench` (run by hand: not in PARTS); it prints a Markdown section for
docs/benchmarks.md and records its figures (hack/bench/results.py; `--json` also writes them). Cost, estimated from the small run of
#33 and the 100k/1M run of 2026-12-01 (COPY 168 s, indexes ~520 s at 1M): with
`--sizes 10000,100000,1000000` and both layouts, ~40–50 min on two quiet cores and ~16 GB of disk
(two 1M databases of ~5 GB each, plus WAL); `--layouts shared` halves the builds. The LoCoMo vectors
are embedded once (~2 min) and then come from the cache.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from hack.bench import LOCOMO, check, corpus, latency, parser, results, vectors
from tests.kit.database import postgres

from brain.local.stats import percentile

# Built after the COPY, each timed. The names and definitions are migration 0001/0002's.
INDEXES = {
    "tsv GIN": "CREATE INDEX memories_tsv ON memories USING gin (tsv)",
    "trigram GIN": "CREATE INDEX memories_trgm ON memories USING gin (body gin_trgm_ops)",
    "HNSW": "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) "
    "WITH (m = 16, ef_construction = 64)",
}


async def build(
    dsn: str,
    size: int,
    ds: Any,
    base: np.ndarray,
    model: str,
    layout: str,
    indexes: tuple[str, ...] = tuple(INDEXES),
    texts: str = "copied",
) -> dict[str, float]:
    """COPY `size` memories into a fresh store, then statistics and the `indexes` (names of INDEXES;
    a study of one leg builds only its own); returns seconds per step and the bytes of each."""
    import asyncpg
    from pgvector.asyncpg import register_vector

    from brain.store import Store
    from brain.store.store import content_hash, new_id

    store = await Store.open(dsn, dim=base.shape[1])
    await store.close()
    conn = await asyncpg.connect(dsn)
    await register_vector(conn)
    times: dict[str, float] = {}
    try:
        for name in ("memories_tsv", "memories_trgm", "memories_embedding"):
            await conn.execute(f"DROP INDEX IF EXISTS {name}")
        await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_lexeme_df")
        await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_vector_model")
        await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_bm25")
        await conn.execute("UPDATE brain_meta SET value = $1 WHERE key = 'embedding_model'", model)
        rng = np.random.default_rng(1)
        t0 = time.perf_counter()
        n = copy = 0
        cols = [
            "id", "lineage_id", "kind", "namespace", "origin", "author", "title", "body",
            "content_hash", "valid_from", "episode", "seq", "embedding", "embedding_model",
        ]  # fmt: skip
        if texts not in corpus.TEXTS:
            raise ValueError(f"unknown texts {texts!r}: one of {', '.join(corpus.TEXTS)}")
        original = corpus.renamed(ds.memories, 0)
        original_hashes = [content_hash(body) for _, body in original]
        while n < size:
            take = min(len(ds.memories), size - n)
            written, hashes = original, original_hashes
            if texts == "renamed" and copy > 0:
                written = corpus.renamed(ds.memories, copy)
                hashes = [content_hash(body) for _, body in written]
            noise = rng.normal(0, 0.02, (take, base.shape[1])).astype(np.float32)
            vecs = base[:take] + noise
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            rows = []
            for i, m in enumerate(ds.memories[:take]):
                mid = new_id()
                title, body = written[i]
                rows.append(
                    (mid, mid, "note", corpus.namespace(layout, n + i), "import", "bench", title,
                     body, hashes[i], m.valid_from, f"copy-{copy}@{m.valid_from}", i, vecs[i], model)
                )  # fmt: skip
            await conn.copy_records_to_table("memories", records=rows, columns=cols)
            n += take
            copy += 1
        times["COPY"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await conn.execute(corpus.LEXEME_STATS_SQL)
        times["lexeme statistics"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await conn.execute(
            """INSERT INTO brain_meta (key, value)
               SELECT 'bm25_avgdl', avg(length(tsv))::text FROM memories WHERE status = 'active'
               ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"""
        )
        await conn.execute(
            "UPDATE memories SET bm25 = brain_bm25_doc(tsv, (SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl'))"
        )
        times["BM25 weights"] = time.perf_counter() - t0
        await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_lexeme_df")
        await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_vector_model")
        await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_bm25")
        await conn.execute("SET maintenance_work_mem = '4GB'")
        await conn.execute("SET max_parallel_maintenance_workers = 1")  # two processes on two cores
        for name in indexes:
            sql = INDEXES[name]
            t0 = time.perf_counter()
            await conn.execute(sql)
            times[name] = time.perf_counter() - t0
            print(f"  {size:,}: {name} {times[name]:.0f} s", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        await conn.execute("VACUUM (ANALYZE) memories, lexeme_stats")
        times["VACUUM ANALYZE"] = time.perf_counter() - t0
        sizes = await conn.fetchrow(
            """SELECT coalesce(pg_relation_size(to_regclass('memories_embedding')), 0) AS hnsw,
                      coalesce(pg_relation_size(to_regclass('memories_tsv')), 0) AS tsv,
                      coalesce(pg_relation_size(to_regclass('memories_trgm')), 0) AS trgm,
                      pg_total_relation_size('memories') AS total,
                      (SELECT sum(pg_column_size(bm25)) FROM memories) AS weights"""
        )
        times |= {f"bytes {k}": float(v) for k, v in sizes.items()}
    finally:
        await conn.close()
    return times


async def measure(
    dsn: str, embedder: Any, queries: list[str], layout: str, counts: check.Counts, mirror: bool
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """The pipeline's stage timings, and with `mirror` the gateway's in-memory lexical copy
    (brain/store/lexical_mirror.py): its load time and bytes, and how many legs it answered; the
    caller's check fails the case when another path answered any of them."""
    from brain.retrieval import Retriever
    from brain.store import Store
    from brain.store.lexical_mirror import lexical_answers

    store = await Store.open(dsn, dim=embedder.dim)
    facts: dict[str, float] = {}
    try:
        if mirror:
            facts["mirror load s"] = await latency.with_mirror(store)
            assert store.mirror is not None and store.mirror.postings is not None
            facts["mirror bytes"] = float(store.mirror.postings.nbytes())
        retriever = Retriever(store, embedder)
        scope = corpus.scope(layout)
        await latency.warm_up(retriever, scope, queries)
        before = {p: lexical_answers.labels(p)._value.get() for p in ("mirror", "database")}
        timed = await latency.timed(retriever, scope, queries, counts)
        for p, v in before.items():
            facts[f"lexical legs {p}"] = lexical_answers.labels(p)._value.get() - v
        return timed, facts
    finally:
        await store.close()


async def lexical_pair(
    dsn: str, queries: list[str], layout: str, ds: Any, texts: str = "copied"
) -> dict[str, float]:
    """The lexical leg's two paths against exhaustive BM25 over the same weights (every memory holding
    a query term scored, tests/kit/lexical_reference.exhaustive), query by query in one loop: in SQL
    (MaxScore over the stored weights) and through the in-memory mirror (brain/store/lexical_mirror.py,
    what the gateway runs), the two in alternating order. Counted: the same top 10, how often the
    SQL leg's bound (not a cost limit) ended its scan, and each one's recall of the questions' evidence
    turns (`seq` is the turn a copy was made of). Runs after the pipeline's timings, on the same
    database."""
    from tests.kit import lexical_reference as reference

    from brain.store import Store
    from brain.store.lexical import bm25

    store = await Store.open(dsn, dim=384)
    try:
        await latency.with_mirror(store)
        mirror = store.mirror
        scope = corpus.scope(layout)
        arms = ("exhaustive", "maxscore", "mirror")
        lat: dict[str, list[float]] = {a: [] for a in arms}
        same = {a: 0 for a in arms[1:]}
        answered = exact = scanned = terms = 0
        tops: dict[str, dict[str, list[str]]] = {a: {} for a in arms}
        for i, q in enumerate([*queries[:10], *queries]):
            t = time.perf_counter()
            full = [d for d, _ in (await reference.exhaustive(store, q, scope, 80)).hits[:10]]
            took = {"exhaustive": time.perf_counter() - t}
            got = {}
            for arm in arms[1:] if i % 2 else arms[:0:-1]:
                store.mirror = mirror if arm == "mirror" else None
                t = time.perf_counter()
                got[arm] = await bm25(store, q, scope, 80)
                took[arm] = time.perf_counter() - t
            store.mirror = mirror
            if i < 10:  # warm-up
                continue
            for arm in arms:
                lat[arm].append(took[arm] * 1000)
            exact += got["maxscore"].exact
            scanned += got["maxscore"].scanned
            terms += got["maxscore"].terms
            tops["exhaustive"][q] = full
            for arm in arms[1:]:
                tops[arm][q] = [d for d, _ in got[arm].hits[:10]]
                same[arm] += bool(full) and full == tops[arm][q]
            answered += bool(full)
        gold = await corpus.gold_recalls(store, tops, ds, texts)
        out: dict[str, float] = {
            "same top-10": float(same["maxscore"]), "mirror same top-10": float(same["mirror"]),
            "answered": float(answered), "exact": float(exact), "terms scanned": scanned / max(terms, 1),
            "exhaustive gold recall@10": gold["exhaustive"], "maxscore gold recall@10": gold["maxscore"],
            "mirror gold recall@10": gold["mirror"],
        }  # fmt: skip
        for name, values in lat.items():
            out[f"{name} p50"], out[f"{name} p95"] = percentile(values, 0.5), percentile(values, 0.95)
        return out
    finally:
        await store.close()


async def locomo() -> tuple[Any, Any, np.ndarray]:
    """LoCoMo's retrieval set, the gateway's query model (one thread, brain/embedder/model.py) and the
    turns' vectors, which `build` copies: embedded with that model once and cached (the vectors are
    the same as with more threads)."""
    from brain.embedder import LocalEmbedder
    from brain.embedder.model import QUERY_THREADS
    from brain.local.eval import load_dataset
    from brain.store.store import embed_text

    ds = load_dataset(json.loads(LOCOMO.read_text()))
    embedder = LocalEmbedder(threads=QUERY_THREADS)
    return ds, embedder, await vectors.vectors(embedder, [embed_text(m.title, m.body) for m in ds.memories])


async def main(a: argparse.Namespace) -> None:
    ds, embedder, base = await locomo()
    queries = [q.query for q in ds.queries[: a.queries]]
    sizes = [int(s) for s in a.sizes.split(",")]
    layouts = a.layouts.split(",")
    cases = [(size, layout) for size in sizes for layout in layouts]
    load0 = os.getloadavg()
    with postgres(Path(a.data) if a.data else None) as pg:
        built: dict[Case, dict[str, float]] = {}
        dsns: dict[Case, str] = {}
        loads: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        counts = {c: check.Counts() for c in cases}
        for size, layout in cases:
            l0 = os.getloadavg()
            dsns[size, layout] = await pg.create_database(f"bench_scale_{size}_{layout}")
            built[size, layout] = await build(
                dsns[size, layout], size, ds, base, embedder.model, layout, texts=a.texts
            )
            loads[f"build {size} {layout}"] = (l0, os.getloadavg())
            print(f"built {size:,} {layout}: {built[size, layout]}", file=sys.stderr, flush=True)
        # Cases alternate run by run (use --runs ≥ 2), so all see the same drift in the machine's load.
        timings: dict[Case, dict[str, list[float]]] = {c: {} for c in cases}
        l0 = os.getloadavg()
        mirror = a.lexical == "mirror"
        legs: dict[Case, dict[str, float]] = {c: {} for c in cases}
        for _ in range(a.runs):
            for c in cases:
                stages, facts = await measure(dsns[c], embedder, queries, c[1], counts[c], mirror)
                for stage, values in stages.items():
                    timings[c].setdefault(stage, []).extend(values)
                for k, v in facts.items():
                    legs[c][k] = legs[c].get(k, 0.0) + v if k.startswith("lexical legs") else v
        loads["measure"] = (l0, os.getloadavg())
        load1 = loads["measure"][1]
        l0 = os.getloadavg()
        pairs = {c: await lexical_pair(dsns[c], queries, c[1], ds, a.texts) for c in cases}
        loads["lexical pair"] = (l0, os.getloadavg())
        print(f"lexical pair: {pairs}", file=sys.stderr, flush=True)
    lines = [
        f"## Retrieval at {' and '.join(f'{s:,}' for s in sizes)} memories, the whole corpus in the scope",
        "",
        f"`hack/bench/scale.py --texts {a.texts}`: LoCoMo turns copied ({corpus.TEXTS[a.texts]}) with their "
        "texts' embeddings jittered, COPY-loaded, indexes built after; the queried scope holds every memory (layouts: "
        + "; ".join(f"{k}: {corpus.LAYOUTS[k]}" for k in layouts)
        + f", each its own database); {len(queries)} LoCoMo questions × {a.runs} runs per case, cases "
        f"alternating run by run. {os.cpu_count()} CPUs; load average {load0[0]:.1f} at the start, "
        f"{load1[0]:.1f} at the end of the timings. Outcomes counted per question (hack/bench/check.py): the "
        "run fails when any retrieval was degraded, timed out or failed.",
        "",
        "| memories | layout | COPY s | lexeme stats s | BM25 weights s | tsv GIN s | trigram GIN s | HNSW build s | "
        "HNSW MB | BM25 weights B / memory | table + indexes MB | p50 ms | p95 ms | outcomes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        size, layout = c
        b, t = built[c], timings[c].get("total", [])
        lines.append(
            f"| {size:,} | {layout} | {b['COPY']:.0f} | {b['lexeme statistics']:.0f} | {b['BM25 weights']:.0f} | "
            f"{b['tsv GIN']:.0f} | {b['trigram GIN']:.0f} | {b['HNSW']:.0f} | {b['bytes hnsw'] / 2**20:.0f} | "
            f"{b['bytes weights'] / size:.0f} | {b['bytes total'] / 2**20:.0f} | {percentile(t, 0.5):.1f} | "
            f"{percentile(t, 0.95):.1f} | {counts[c].summary()} |"
        )
    if len(sizes) >= 2:
        lines.append("")
        for layout in layouts:
            for lo, hi in itertools.pairwise(sizes):
                ratio = percentile(timings[hi, layout]["total"], 0.95) / percentile(
                    timings[lo, layout]["total"], 0.95
                )
                lines.append(f"- {layout}: p95 at {hi:,} / at {lo:,}: **{ratio:.2f}×**.")
    lines += [""] + [
        f"- Lexical leg p95 / embedding p95 at {size:,}, {layout}: {percentile(timings[size, layout]['lexical'], 0.95):.1f} / "
        f"{percentile(timings[size, layout]['embed'], 0.95):.1f} ms = **"
        f"{percentile(timings[size, layout]['lexical'], 0.95) / percentile(timings[size, layout]['embed'], 0.95):.2f}×** "
        "(goal ≤ 0.5× at 100k)."
        for size, layout in cases
        if "lexical" in timings[size, layout] and "embed" in timings[size, layout]
    ]
    stages = sorted({st for c in cases for st in timings[c] if st != "total"})
    lines += [
        "",
        "| memories | layout | " + " | ".join(f"{st} p50 / p95" for st in stages) + " |",
        "|---|---|" + "---|" * len(stages),
    ]
    for c in cases:
        cells = [
            f"{percentile(timings[c][st], 0.5):.1f} / {percentile(timings[c][st], 0.95):.1f}"
            if st in timings[c]
            else "–"
            for st in stages
        ]
        lines.append(f"| {c[0]:,} | {c[1]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Lexical legs: {'; '.join(f'{c[0]:,} {c[1]}: ' + ', '.join(f'{k[13:]} {v:.0f}' for k, v in legs[c].items() if k.startswith('lexical legs')) for c in cases)}"
        + (
            "; the in-memory copy's load (seconds, arrays MB): "
            + "; ".join(
                f"{c[0]:,} {c[1]}: {legs[c]['mirror load s']:.1f} s, {legs[c]['mirror bytes'] / 1e6:.0f} MB"
                for c in cases
            )
            if mirror
            else ""
        )
        + ".",
        "",
        "The lexical leg alone, interleaved query by query after the timings above: exhaustive BM25 "
        "over the stored weights (every memory holding a query term scored) against the leg in SQL "
        "(MaxScore: rarest terms first, stopped by the bound; brain/store/lexical.py) and through the "
        "gateway's in-memory copy (brain/store/lexical_mirror.py, re-scored by key in SQL), top 80:",
        "",
        "| memories | layout | exhaustive p50 / p95 ms | SQL p50 / p95 ms | in-memory p50 / p95 ms | same top-10 SQL / "
        "in-memory | SQL stopped by the bound | gold recall@10 exhaustive / SQL / in-memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        v = pairs[c]
        lines.append(
            f"| {c[0]:,} | {c[1]} | {v['exhaustive p50']:.1f} / {v['exhaustive p95']:.1f} | {v['maxscore p50']:.1f} / "
            f"{v['maxscore p95']:.1f} | {v['mirror p50']:.1f} / {v['mirror p95']:.1f} | "
            f"{v['same top-10']:.0f} / {v['mirror same top-10']:.0f} of {v['answered']:.0f} | "
            f"{v['exact']:.0f}/{len(queries)} | {v['exhaustive gold recall@10']:.4f} / "
            f"{v['maxscore gold recall@10']:.4f} / {v['mirror gold recall@10']:.4f} |"
        )
    print("\n".join(lines))
    figures = {
        "queries": len(queries),
        "runs": a.runs,
        "texts": a.texts,
        "load": loads,
        "cases": [
            {
                "memories": c[0],
                "layout": c[1],
                "built": built[c],
                "p50_ms": percentile(timings[c].get("total", []), 0.5),
                "p95_ms": percentile(timings[c].get("total", []), 0.95),
                "stages": {st: [percentile(v, 0.5), percentile(v, 0.95)] for st, v in timings[c].items()},
                "lexical_pair": pairs[c],
                "lexical_path": legs[c],
                "outcomes": counts[c].as_dict(),
            }
            for c in cases
        ],
    }
    checks = [
        (counts[c], check.retrieval(f"{c[0]:,} memories, {c[1]}", len(queries) * a.runs)) for c in cases
    ]
    results.emit("scale", figures, markdown="\n".join(lines), checks=checks, also=a.json)
    check.expect_all(checks)
    wrong = [c for c in cases if legs[c].get("lexical legs database" if mirror else "lexical legs mirror")]
    if wrong or (mirror and not all(legs[c].get("lexical legs mirror") for c in cases)):
        raise check.OutcomeMismatch(
            f"the rows claim the lexical leg ran {'in memory' if mirror else 'in SQL'} for every question: {legs}"
        )


Case = tuple[int, str]  # (memories, layout)


if __name__ == "__main__":
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--data", help="Postgres data directory (default: a temporary one)")
    ap.add_argument("--layouts", default="shared,split", help="comma-separated: " + ", ".join(corpus.LAYOUTS))
    ap.add_argument(
        "--texts",
        default="copied",
        choices=sorted(corpus.TEXTS),
        help="; ".join(f"{k}: {v}" for k, v in corpus.TEXTS.items()),
    )
    ap.add_argument(
        "--lexical",
        default="mirror",
        choices=("mirror", "database"),
        help="where the pipeline's lexical leg ranks: the gateway's in-memory copy (its default) or SQL",
    )
    ap.add_argument("--json", help="also write the figures as JSON")

    def _interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # so `finally` stops the Postgres this script started

    signal.signal(signal.SIGTERM, _interrupt)
    asyncio.run(main(ap.parse_args()))
