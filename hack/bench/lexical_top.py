"""Study (#33): each common term's top-K postings (champion lists) in place of all of them.

    nice -n 5 .venv/bin/python -m hack.bench.lexical_top --sizes 100000,1000000 --texts renamed,copied

Not shipped (docs/performance.md, "Champion lists for the common terms, measured and not shipped"
says why); run by hand. The shipped store code, migrations and tests are untouched.

The shipped leg (brain/store/lexical.py) reads every posting of the terms it scans, so its cost grows
with the scope wherever the bound cannot stop it early. This study bounds the reads: the rarest terms
are read whole while their document frequencies add up to at most B, and every other term only
through its K highest-weight postings, kept in a table `lexeme_top` (dim, weight, memory, rank) built
from the stored tsvectors at the reference length, for the lexemes in more than 200 memories. The
union is scored exactly with the stored weights, as the shipped leg scores. A memory outside the
union holds only list terms, each below that term's (K+1)-th weight (or, for a term too rare for a
list that the budget left unread, below its own bound), so the top n is exact when the n-th score is
at or above Σ IDF × those weights; where it is not, the ranking is an approximation. The results file
of docs/performance.md was written before the unread rare terms were bounded; an outside review
found that no question of the measured configs had one.

Per size and text kind (hack/bench/scale.py's `build` and `--texts`, layout `shared`, tsv GIN only)
it times 200 LoCoMo questions, interleaved question by question: the exhaustive reference
(tests/kit/lexical_reference.exhaustive), the shipped leg, and each `--configs` B:K, top 80, with the
same top 10 as the reference, how many were exact by the bound, postings read at most (p95) and gold recall@10
of the questions' evidence turns (hack/bench/corpus.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

from hack.bench import corpus, parser, results, scale
from tests.kit import lexical_reference as reference
from tests.kit.database import postgres

from brain.local.stats import percentile

# Lexemes in more than this many memories get a list; rarer ones are always read whole.
LISTED_DF = 200
KMAX = 2000  # the longest list a config may read

TOP_SQL = f"""CREATE TABLE lexeme_top AS
SELECT dim, w, id, rn FROM (
  SELECT brain_lexeme_dim(u.lexeme) AS dim, x.w, m.id,
         row_number() OVER (PARTITION BY u.lexeme ORDER BY x.w DESC, m.id) AS rn
    FROM memories m CROSS JOIN LATERAL unnest(m.tsv) u
    JOIN lexeme_stats s ON s.lexeme = u.lexeme AND s.df > {LISTED_DF}
    CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) t
    CROSS JOIN LATERAL (SELECT t.tf * 2.2 / (t.tf + 1.2 * (0.7 + 0.3 * length(m.tsv) / $1::float8)) AS w) x
   WHERE m.status = 'active') y
 WHERE rn <= {KMAX + 1}"""

CANDIDATES_SQL = """WITH c AS (
    SELECT m.id FROM memories m
     WHERE cardinality($3::text[]) > 0
       AND m.tsv @@ (SELECT string_agg(quote_literal(x), ' | ')::tsquery FROM unnest($3::text[]) x)
    UNION
    SELECT id FROM lexeme_top WHERE dim = ANY($4::int[]) AND rn <= $5)
  SELECT m.id, -(m.bm25 <#> $1::text::sparsevec) AS score
    FROM memories m WHERE m.id IN (SELECT id FROM c) AND {where}
   ORDER BY score DESC, m.id LIMIT $2"""
FLOOR_SQL = "SELECT dim, w FROM lexeme_top WHERE dim = ANY($1::int[]) AND rn = $2 + 1"


async def champions(
    store: Any, query: str, scope: Any, n: int, whole: int, k: int
) -> tuple[list[str], bool, int]:
    """Top `n` ids, whether the bound proved them exact, and the postings read at most (K a listed
    term, complete lists counted at K too).

    A tie with an unread memory counts as exact, as in the shipped leg. Lexemes sharing a sparsevec
    dimension (one in ~10⁹) are not handled: each dimension's list is its first lexeme's, where the
    shipped leg sums their bounds (`Term.weight_bound`)."""
    from brain.store import lexical

    stats = await store.corpus_stats()
    terms, _ = lexical.plan_terms(
        await store.pool_for_tests.fetch(lexical.TERMS_SQL, query), max(stats.docs, 1)
    )
    if not terms:
        return [], True, 0
    read, cum = [], 0
    for t in terms:  # rarest first
        if cum + t.df > whole and (read or t.df > whole):
            break
        read.append(t)
        cum += t.df
    listed = terms[len(read) :]
    if k > KMAX:
        raise ValueError(f"K {k} is past the lists' {KMAX} postings: a config's K must be at most {KMAX}")
    where, args = scope.where(6)
    found = await store.pool_for_tests.fetch(
        CANDIDATES_SQL.format(where=where),
        lexical.query_vector(terms),
        n,
        [t.lexeme for t in read],
        [t.dim for t in listed],
        k,
        *args,
    )
    floors = dict(await store.pool_for_tests.fetch(FLOOR_SQL, [t.dim for t in listed], k)) if listed else {}
    # A listed term's unread postings are below its (K+1)-th weight (none: its list is whole); a term
    # past B too rare for a list (df ≤ LISTED_DF) was not read at all, so only its own bound holds.
    bound = sum(t.idf * (floors.get(t.dim, 0.0) if t.df > LISTED_DF else t.weight_bound) for t in listed)
    exact = bound == 0 or (len(found) >= n and float(found[-1]["score"]) >= bound)
    return [r["id"] for r in found], exact, cum + k * len(listed)


async def study(
    dsn: str, queries: list[str], ds: Any, texts: str, configs: list[tuple[int, int]]
) -> dict[str, Any]:
    from brain.store import Store
    from brain.store.lexical import bm25

    store = await Store.open(dsn, dim=384)
    try:
        stats = await store.corpus_stats()
        t0 = time.perf_counter()
        await store.pool_for_tests.execute(TOP_SQL, stats.reference or stats.avg_len)
        await store.pool_for_tests.execute("CREATE INDEX ON lexeme_top (dim, rn) INCLUDE (id)")
        await store.pool_for_tests.execute("VACUUM ANALYZE lexeme_top")
        built = time.perf_counter() - t0
        rows = await store.pool_for_tests.fetchval("SELECT count(*) FROM lexeme_top")
        size = await store.pool_for_tests.fetchval("SELECT pg_total_relation_size('lexeme_top')")
        scope = corpus.scope("shared")
        arms = ["exhaustive", "shipped", *(f"{b}:{k}" for b, k in configs)]
        ms: dict[str, list[float]] = {a: [] for a in arms}
        tops: dict[str, dict[str, list[str]]] = {a: {} for a in arms}
        exact: dict[str, int] = {a: 0 for a in arms[2:]}
        reads: dict[str, list[float]] = {a: [] for a in arms[2:]}
        for i, q in enumerate([*queries[:10], *queries]):
            got: dict[str, tuple[list[str], float]] = {}
            t = time.perf_counter()
            ids = [d for d, _ in (await reference.exhaustive(store, q, scope, 80)).hits]
            got["exhaustive"] = ids, time.perf_counter() - t
            t = time.perf_counter()
            ids = [d for d, _ in (await bm25(store, q, scope, 80)).hits]
            got["shipped"] = ids, time.perf_counter() - t
            for (b, k), arm in zip(configs, arms[2:], strict=True):
                t = time.perf_counter()
                ids, ok, r = await champions(store, q, scope, 80, b, k)
                got[arm] = ids, time.perf_counter() - t
                if i >= 10:
                    exact[arm] += ok
                    reads[arm].append(r)
            if i < 10:  # warm-up
                continue
            for arm, (ids, s) in got.items():
                ms[arm].append(s * 1000)
                tops[arm][q] = ids[:10]
        gold = await corpus.gold_recalls(store, tops, ds, texts)
        out: dict[str, Any] = {"list rows": rows, "list bytes": size, "list build s": built}
        for arm in arms:
            out[arm] = {
                "p50": percentile(ms[arm], 0.5),
                "p95": percentile(ms[arm], 0.95),
                "same top-10": sum(tops[arm][q] == tops["exhaustive"][q] for q in tops[arm]),
                "gold recall@10": gold[arm],
            }
            if arm in exact:
                out[arm] |= {
                    "exact by the bound": exact[arm],
                    "postings read p95": percentile(reads[arm], 0.95),
                }
        return out
    finally:
        await store.close()


async def main(a: argparse.Namespace) -> None:
    ds, embedder, base = await scale.locomo()
    queries = [q.query for q in ds.queries[: a.queries]]
    configs = [(int(b), int(k)) for b, k in (c.split(":") for c in a.configs.split(","))]
    figures: dict[str, Any] = {"queries": len(queries), "listed df": LISTED_DF}
    with postgres() as pg:
        for texts in a.texts.split(","):
            for size in (int(s) for s in a.sizes.split(",")):
                dsn = await pg.create_database(f"bench_top_{size}_{texts}")
                await scale.build(
                    dsn, size, ds, base, embedder.model, "shared", indexes=("tsv GIN",), texts=texts
                )
                figures[f"{size} {texts}"] = res = await study(dsn, queries, ds, texts, configs)
                print(f"{size:,} {texts}: {json.dumps(res, default=str)}", file=sys.stderr, flush=True)
                await pg.drop_database(f"bench_top_{size}_{texts}")
                results.emit("lexical_top", figures)


if __name__ == "__main__":
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--texts", default="renamed,copied", help="comma-separated: " + ", ".join(corpus.TEXTS))
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--configs", default="1000:250,3000:500,1000:1000", help="B:K pairs, comma-separated")

    def _interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # so `finally` stops the Postgres this script started

    signal.signal(signal.SIGTERM, _interrupt)
    asyncio.run(main(ap.parse_args()))
