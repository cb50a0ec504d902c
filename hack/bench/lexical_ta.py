"""Prototype (#33): impact-ordered postings + Threshold-Algorithm top-k for the lexical leg.

    nice -n 5 .venv/bin/python -m hack.bench.lexical_ta --sizes 10000,100000 --queries 200

Not shipped (docs/performance.md, "Lexical leg: an impact-ordered candidate step" says why); run by hand. The shipped store code, migrations and tests are untouched. Per size it builds a fresh
database the way hack/bench/scale.py does (LoCoMo's 5,882 turns copied to N memories, all in
`shared`, COPY with triggers off, lexeme statistics, BM25 weights at the copied mean, the tsv GIN
index; no trigram/HNSW index: only the lexical leg is timed, embeddings are random unit vectors),
then creates `lexical_postings` (one row per memory × non-zero bm25 dimension, weight negated so a
forward btree scan is impact order) from the stored sparsevec, timed, with its size.

The TA leg: each query term's postings are read in descending weight, a block at a time, keyset
on (neg_weight, memory_id) (index (dim, namespace, neg_weight, memory_id), index-only), one
statement per round for all terms (LATERAL), which also scores the new candidates exactly with
`bm25 <#> query` as the shipped leg does. It stops when the bound on any unseen memory,
sum_t idf_t × (last weight read of t), is below the n-th best score (strictly, with a float
margin: copies tie). Blocks start at n and double per round for every term still open.

Then 200 LoCoMo questions, interleaved question by question: the exhaustive reference
(tests/kit/lexical_reference.exhaustive), the shipped brain.store.lexical.bm25, and the TA leg,
n = 80 (the retriever's `max(cfg.candidates, limit)`, as hack/bench/scale.py uses); top-10 equality
against the reference, p50/p95, and postings rows read per query (shipped: the summed df of the
terms it scanned, what its GIN scans visit; TA: rows its block reads returned).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import numpy as np
from hack.bench import LOCOMO, corpus, parser, results, scale
from tests.kit.database import postgres

from brain.local.stats import percentile

N = 80
SAFETY = 1e-6  # relative float margin: scores are float4 sums in pgvector, the bound is float8 here

POSTINGS_DDL = [
    "DROP TABLE IF EXISTS lexical_postings",
    """CREATE TABLE lexical_postings (dim integer NOT NULL, neg_weight real NOT NULL,
           memory_id text NOT NULL, namespace text NOT NULL)""",
    # active rows only; parse the stored sparsevec text '{d:w,...}/N'
    """INSERT INTO lexical_postings (dim, neg_weight, memory_id, namespace)
       SELECT split_part(e, ':', 1)::int, -split_part(e, ':', 2)::real, m.id, m.namespace
         FROM memories m,
              unnest(string_to_array(btrim(split_part(m.bm25::text, '/', 1), '{}'), ',')) AS e
        WHERE m.status = 'active' AND m.bm25 IS NOT NULL""",
    "CREATE INDEX lexical_postings_impact ON lexical_postings (dim, namespace, neg_weight, memory_id)",
    "VACUUM (ANALYZE) lexical_postings",
]

ROUND_SQL = """WITH t AS (SELECT * FROM unnest($1::int[], $2::real[], $3::text[], $4::int[]) AS t(dim, nw, id, lim)),
    p AS (SELECT t.dim, q.memory_id, q.neg_weight FROM t CROSS JOIN LATERAL (
            SELECT memory_id, neg_weight FROM lexical_postings l
             WHERE l.dim = t.dim AND l.namespace = $5 AND (l.neg_weight, l.memory_id) > (t.nw, t.id)
             ORDER BY l.neg_weight, l.memory_id LIMIT t.lim) q),
    c AS (SELECT DISTINCT memory_id FROM p WHERE NOT (memory_id = ANY($7::text[])))
    SELECT p.dim, p.memory_id, p.neg_weight, NULL::float8 AS score FROM p
    UNION ALL
    SELECT NULL, m.id, NULL, -(m.bm25 <#> $6::text::sparsevec) FROM memories m JOIN c ON m.id = c.memory_id
     WHERE m.status = 'active' AND m.namespace = $5"""


async def _plan(store, query: str) -> tuple[str, dict[int, float]] | None:
    """The query's sparse vector and each dimension's summed IDF, as the shipped leg plans them; None
    when no term is in the brain."""
    from brain.store import lexical

    stats = await store.corpus_stats()
    rows = await store._pool.fetch(lexical.TERMS_SQL, query)
    terms, _ = lexical.plan_terms(rows, max(stats.docs, 1))
    if not terms:
        return None
    idf: dict[int, float] = {}
    for t in terms:
        idf[t.dim] = idf.get(t.dim, 0.0) + t.idf
    return lexical.query_vector(terms), idf


def _cursors(dims: list[int], n: int) -> tuple[dict[int, list], dict[int, float]]:
    """Per dimension: keyset cursor [neg weight, id, block size, open], and the bound on its unread
    weights."""
    from brain.store import lexical

    return {d: [float("-inf"), "", n, True] for d in dims}, {d: lexical.WEIGHT_BOUND for d in dims}


def _advance(
    cur: dict[int, list], last_w: dict[int, float], got: dict[int, int], open_dims: list[int]
) -> None:
    """After a round: a dimension that returned less than its block is exhausted (bound 0); an open
    one's bound is the last weight read, and its next block twice the size (at most 8,192)."""
    for d in open_dims:
        c = cur[d]
        if got[d] < c[2]:
            c[3], last_w[d] = False, 0.0
        else:
            last_w[d] = -c[0]
            c[2] = min(c[2] * 2, 8192)


async def ta(store, query: str, namespace: str, n: int) -> tuple[list[tuple[str, float]], int, int, bool]:
    """TA top n: (hits, postings rows read, rounds, stopped by the bound)."""
    plan = await _plan(store, query)
    if plan is None:
        return [], 0, 0, True
    qv, idf = plan
    cur, last_w = _cursors(list(idf), n)
    best: dict[str, float] = {}
    read = rounds = 0
    while True:
        open_dims = [d for d in idf if cur[d][3]]
        if not open_dims:
            break
        rounds += 1
        out = await store._pool.fetch(
            ROUND_SQL,
            open_dims,
            [cur[d][0] for d in open_dims],
            [cur[d][1] for d in open_dims],
            [cur[d][2] for d in open_dims],
            namespace,
            qv,
            list(best),
        )
        got: dict[int, int] = {d: 0 for d in open_dims}
        for r in out:
            if r["dim"] is None:
                best[r["memory_id"]] = float(r["score"])
            else:
                d = r["dim"]
                got[d] += 1
                read += 1
                c = cur[d]
                key = (r["neg_weight"], r["memory_id"])
                if key > (c[0], c[1]):
                    c[0], c[1] = key
        _advance(cur, last_w, got, open_dims)
        ranked = sorted(best.items(), key=lambda t: (-t[1], t[0]))[:n]
        best = dict(ranked)  # a dropped memory can never re-enter: scores are exact
        if len(ranked) >= n:
            theta = ranked[-1][1]
            bound = sum(idf[d] * last_w[d] for d in idf)
            if bound < theta - SAFETY * abs(theta) - 1e-6:
                return ranked, read, rounds, True
    return sorted(best.items(), key=lambda t: (-t[1], t[0]))[:n], read, rounds, True


POSTINGS_SQL = """WITH t AS (SELECT * FROM unnest($1::int[], $2::real[], $3::text[], $4::int[]) AS t(dim, nw, id, lim))
    SELECT t.dim, q.memory_id, q.neg_weight FROM t CROSS JOIN LATERAL (
            SELECT memory_id, neg_weight FROM lexical_postings l
             WHERE l.dim = t.dim AND l.namespace = $5 AND (l.neg_weight, l.memory_id) > (t.nw, t.id)
             ORDER BY l.neg_weight, l.memory_id LIMIT t.lim) q"""

SCORE_SQL = """SELECT m.id, -(m.bm25 <#> $2::text::sparsevec) AS score FROM memories m
                WHERE m.id = ANY($1::text[]) AND m.status = 'active' AND m.namespace = $3"""


async def nra(store, query: str, namespace: str, n: int) -> tuple[list[tuple[str, float]], int, int, bool]:
    """TA without random access while reading (NRA): postings give partial scores (the posting holds
    the weight), one index-only statement per round; reading stops when an unseen memory's bound is
    below the n-th best partial score; then only candidates whose upper bound reaches it are scored
    exactly with `bm25 <#> query` (one statement). Returns (hits, postings read, rounds, True)."""
    plan = await _plan(store, query)
    if plan is None:
        return [], 0, 0, True
    qv, idf = plan
    dims = list(idf)
    bit = {d: 1 << i for i, d in enumerate(dims)}
    cur, last_w = _cursors(dims, n)
    partial: dict[str, float] = {}
    mask: dict[str, int] = {}
    read = rounds = 0
    while True:
        open_dims = [d for d in dims if cur[d][3]]
        if not open_dims:
            break
        rounds += 1
        out = await store._pool.fetch(
            POSTINGS_SQL,
            open_dims,
            [cur[d][0] for d in open_dims],
            [cur[d][1] for d in open_dims],
            [cur[d][2] for d in open_dims],
            namespace,
        )
        got = {d: 0 for d in open_dims}
        for r in out:
            d, mid, nw = r["dim"], r["memory_id"], r["neg_weight"]
            got[d] += 1
            read += 1
            partial[mid] = partial.get(mid, 0.0) + idf[d] * -nw
            mask[mid] = mask.get(mid, 0) | bit[d]
            c = cur[d]
            if (nw, mid) > (c[0], c[1]):
                c[0], c[1] = nw, mid
        _advance(cur, last_w, got, open_dims)
        if len(partial) >= n:
            theta = sorted(partial.values(), reverse=True)[n - 1]
            if sum(idf[d] * last_w[d] for d in dims) < theta - 1e-5 * abs(theta) - 1e-6:
                break
    if not partial:
        return [], read, rounds, True
    theta = sorted(partial.values(), reverse=True)[min(n, len(partial)) - 1] if len(partial) >= n else 0.0
    rest = {m: sum(idf[d] * last_w[d] for d in dims if not m & bit[d]) for m in set(mask.values())}
    cand = [m for m, p in partial.items() if p + rest[mask[m]] >= theta - 1e-5 * abs(theta) - 1e-6]
    scored = await store._pool.fetch(SCORE_SQL, cand, qv, namespace)
    hits = sorted(((r["id"], float(r["score"])) for r in scored), key=lambda t: (-t[1], t[0]))[:n]
    return hits, read, rounds, True


async def build(dsn: str, size: int, ds, dim: int = 384) -> dict[str, float]:
    """scale.py's build with the full-text index alone (random unit vectors: the lexical leg never
    reads them); then the postings, timed."""
    import asyncpg

    from brain.embedder.model import DEFAULT_MODEL

    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, (len(ds.memories), dim)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    times = await scale.build(dsn, size, ds, base, DEFAULT_MODEL, "shared", indexes=("tsv GIN",))
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        await conn.execute(POSTINGS_DDL[0])
        await conn.execute(POSTINGS_DDL[1])
        await conn.execute(POSTINGS_DDL[2])
        times["postings insert s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await conn.execute(POSTINGS_DDL[3])
        times["postings index s"] = time.perf_counter() - t0
        await conn.execute(POSTINGS_DDL[4])
        r = await conn.fetchrow(
            """SELECT (SELECT count(*) FROM lexical_postings) AS rows,
                      pg_relation_size('lexical_postings') AS heap,
                      pg_relation_size('lexical_postings_impact') AS idx,
                      pg_relation_size('memories_tsv') AS gin,
                      (SELECT sum(pg_column_size(bm25)) FROM memories) AS weights"""
        )
        times |= {
            "postings rows / memory": r["rows"] / size,
            "postings heap B / memory": r["heap"] / size,
            "postings index B / memory": r["idx"] / size,
            "tsv GIN B / memory": r["gin"] / size,
            "bm25 column B / memory": float(r["weights"]) / size,
        }
    finally:
        await conn.close()
    return times


async def compare(dsn: str, queries: list[str]) -> dict[str, float]:
    from tests.kit import lexical_reference as reference

    from brain.store import Store
    from brain.store.lexical import bm25

    store = await Store.open(dsn, dim=384)
    try:
        scope = corpus.scope("shared")
        ns = scope.namespaces[0]
        assert len(scope.namespaces) == 1, scope.namespaces
        lat: dict[str, list[float]] = {"exhaustive": [], "shipped": [], "ta": [], "nra": []}
        same = {"shipped": 0, "ta": 0, "nra": 0}
        same80 = {"shipped": 0, "ta": 0, "nra": 0}
        answered = 0
        rows_shipped: list[int] = []
        rows_ta: list[int] = []
        rows_nra: list[int] = []
        rounds: list[int] = []
        for i, q in enumerate([*queries[:10], *queries]):
            t0 = time.perf_counter()
            full = (await reference.exhaustive(store, q, scope, N)).hits
            t1 = time.perf_counter()
            got = await bm25(store, q, scope, N)
            t2 = time.perf_counter()
            hits, read, rr, _ = await ta(store, q, ns, N)
            t3 = time.perf_counter()
            nhits, nread, _, _ = await nra(store, q, ns, N)
            t4 = time.perf_counter()
            if i < 10:
                continue
            lat["exhaustive"].append((t1 - t0) * 1000)
            lat["shipped"].append((t2 - t1) * 1000)
            lat["ta"].append((t3 - t2) * 1000)
            lat["nra"].append((t4 - t3) * 1000)
            rows_nra.append(nread)
            # shipped postings: summed df of the terms it scanned (rarest first)
            from brain.store import lexical

            stats = await store.corpus_stats()
            trows = await store._pool.fetch(lexical.TERMS_SQL, q)
            terms, _ = lexical.plan_terms(trows, max(stats.docs, 1))
            rows_shipped.append(sum(t.df for t in terms[: got.scanned]))
            rows_ta.append(read)
            rounds.append(rr)
            if full:
                answered += 1
                f10 = [d for d, _ in full[:10]]
                same["shipped"] += f10 == [d for d, _ in got.hits[:10]]
                same["ta"] += f10 == [d for d, _ in hits[:10]]
                same80["shipped"] += [d for d, _ in full] == [d for d, _ in got.hits]
                same80["ta"] += [d for d, _ in full] == [d for d, _ in hits]
                same["nra"] += f10 == [d for d, _ in nhits[:10]]
                same80["nra"] += [d for d, _ in full] == [d for d, _ in nhits]
        out: dict[str, float] = {"answered": answered}
        for k in same:
            out[f"{k} same top-10"] = same[k]
            out[f"{k} same top-80"] = same80[k]
        for k, v in lat.items():
            out[f"{k} p50 ms"], out[f"{k} p95 ms"] = percentile(v, 0.5), percentile(v, 0.95)
        for k, v in (("shipped", rows_shipped), ("ta", rows_ta), ("nra", rows_nra)):
            out[f"{k} postings p50"], out[f"{k} postings p95"] = percentile(v, 0.5), percentile(v, 0.95)
            out[f"{k} postings mean"] = sum(v) / len(v)
        out["ta rounds p50"], out["ta rounds p95"] = percentile(rounds, 0.5), percentile(rounds, 0.95)
        return out
    finally:
        await store.close()


async def reference_move(dsn: str, factor: float) -> dict[str, float]:
    """What a reference move costs the postings: rewrite the bm25 column at ref × factor (as
    brain_bm25_rewrite does), then rebuild the postings from it; both timed."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "UPDATE brain_meta SET value = (value::float8 * $1)::text WHERE key = 'bm25_avgdl'", factor
        )
        t0 = time.perf_counter()
        await conn.execute("ALTER TABLE memories DISABLE TRIGGER memories_bm25")
        await conn.execute(
            "UPDATE memories SET bm25 = brain_bm25_doc(tsv, (SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl'))"
        )
        await conn.execute("ALTER TABLE memories ENABLE TRIGGER memories_bm25")
        t1 = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '1GB'")
        for sql in POSTINGS_DDL:
            await conn.execute(sql)
        t2 = time.perf_counter()
        return {"bm25 column rewrite s": t1 - t0, "postings rebuild s": t2 - t1}
    finally:
        await conn.close()


async def main(a: argparse.Namespace) -> None:
    from brain.local.eval import load_dataset

    ds = load_dataset(json.loads(LOCOMO.read_text()))
    queries = [q.query for q in ds.queries[: a.queries]]
    res: dict[int, dict[str, object]] = {}
    with postgres() as pg:
        for size in [int(s) for s in a.sizes.split(",")]:
            r: dict[str, object] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            l0 = os.getloadavg()
            dsn = await pg.create_database(f"lexta_{size}")
            r["build"] = await build(dsn, size, ds)
            r["load build"] = (l0, os.getloadavg())
            print(f"{size}: {r['build']}", file=sys.stderr, flush=True)
            l0 = os.getloadavg()
            r["compare"] = await compare(dsn, queries)
            r["load compare"] = (l0, os.getloadavg())
            r["date end"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            print(f"{size}: {r['compare']}", file=sys.stderr, flush=True)
            if a.move:
                r["move"] = await reference_move(dsn, 1.3)
                print(f"{size}: {r['move']}", file=sys.stderr, flush=True)
            res[size] = r
            await pg.drop_database(f"lexta_{size}")
            results.emit("lexical_ta", {str(k): v for k, v in res.items()})
    print(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--move", action="store_true", help="also time a reference move's rewrite")
    asyncio.run(main(ap.parse_args()))
