"""The lexical leg as it shipped before the sparsevec weights: BM25 from each candidate's tsvector.

Retired from the store (`brain.store.lexical.bm25` scores with stored sparsevec weights), kept here
as the plain reference the shipped statement must agree with: BM25 (k1 1.2, b 0.3) computed at
query time by unnesting each candidate's tsvector and joining it to the query's lexemes, at the
live mean length, with the query's IDF sum in the same statement. tests/store/test_lexical.py checks the
ranking, scores and IDF are the same, and hack/bench/lexical.py times the two against each other.
SQL only; it reads the store's pool and corpus numbers like the shipped leg does. `k1` and `b` are
parameters so a test can check what a stale reference length is equivalent to.

It scores every memory holding any query term, with no cut: the shipped leg's MaxScore bound and its
two cost limits (brain.store.lexical) are what it is checked against. `exhaustive` is the same
exhaustive ranking over the stored weights, fast enough for the 1M bench.
"""

from __future__ import annotations

from brain.store import Scope, Store, lexical
from brain.store.lexical import Lexical

UNNEST_SQL = """WITH terms AS (
        SELECT l.lexeme, coalesce(s.df, 0) AS df
          FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
          LEFT JOIN lexeme_stats s ON s.lexeme = l.lexeme),
    q AS (SELECT lexeme, df, ln(1 + ($2::float8 - df + 0.5) / (df + 0.5)) AS idf
            FROM terms WHERE df > 0),
    sel AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM q),
    cand AS (SELECT m.id, m.tsv FROM memories m, sel WHERE m.tsv @@ sel.tsq AND {where}),
    scored AS (
        SELECT c.id, sum(q.idf * (tf * ({k1} + 1)) / (tf + {k1} * (1 - {b} + {b} * length(c.tsv) / $3::float8)))
                 AS score
          FROM cand c
         CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
                               FROM unnest(c.tsv) u) t
          JOIN q ON q.lexeme = t.lexeme
         GROUP BY c.id ORDER BY score DESC, c.id LIMIT $4)
    SELECT id, score FROM scored
    UNION ALL
    SELECT NULL, (SELECT coalesce(sum(ln(1 + ($2::float8 - df + 0.5) / (df + 0.5))), 0) FROM terms)
    ORDER BY 1 NULLS LAST"""


async def bm25(store: Store, query: str, scope: Scope, n: int, *, k1: float = 1.2, b: float = 0.3) -> Lexical:
    """BM25 (k1 1.2, b 0.3 unless given) at the live mean length over every memory of the scope
    holding a query term, and the query's IDF sum (a term no memory holds at the highest IDF)."""
    stats = await store.corpus_stats()
    where, args = scope.where(5)
    sql = UNNEST_SQL.format(where=where, k1=float(k1), b=float(b))
    rows = await store.pool_for_tests.fetch(sql, query, max(stats.docs, 1), stats.avg_len, n, *args)
    hits = sorted(
        ((r["id"], float(r["score"])) for r in rows if r["id"] is not None), key=lambda t: (-t[1], t[0])
    )
    return Lexical(hits, next((float(r["score"]) for r in rows if r["id"] is None), 0.0))


EXHAUSTIVE_SQL = """SELECT m.id, -(coalesce(m.bm25, brain_bm25_doc(m.tsv, $3::float8)) <#> $2::text::sparsevec) AS score
                      FROM memories m
                     WHERE m.tsv @@ (SELECT string_agg(quote_literal(x), ' | ')::tsquery FROM unnest($1::text[]) x)
                       AND {where}
                     ORDER BY score DESC, m.id LIMIT $4"""


async def exhaustive(store: Store, query: str, scope: Scope, n: int) -> Lexical:
    """The stored weights' BM25 over every memory of the scope holding a query term: the ranking the
    shipped leg's bound must reproduce, without its pruning."""
    stats = await store.corpus_stats()
    docs = max(stats.docs, 1)
    rows = await store.pool_for_tests.fetch(lexical.TERMS_SQL, query)
    terms, query_idf = lexical.plan_terms(rows, docs)
    if not terms:
        return Lexical([], query_idf)
    where, args = scope.where(5)
    found = await store.pool_for_tests.fetch(
        EXHAUSTIVE_SQL.format(where=where),
        [t.lexeme for t in terms],
        lexical.query_vector(terms),
        stats.reference or stats.avg_len,
        n,
        *args,
    )
    return Lexical([(r["id"], float(r["score"])) for r in found], query_idf)
