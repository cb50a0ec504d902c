"""The lexical leg as it was before issue 16: BM25 in one statement, the query's IDF sum in a second.

Retired from the store (`brain.store.lexical.bm25` scores with stored sparsevec weights and returns
both in one round trip), kept here as the plain reference the shipped statement must agree with:
BM25 computed from each candidate's tsvector at the live mean length. tests/test_lexical.py checks
the ranking, scores and IDF are the same, and hack/bench_lexical.py times the two against each
other. SQL only; it reads the store's pool and corpus numbers like the shipped leg does. `k1` and
`b` are parameters so a test can check what a stale reference length is equivalent to.
"""

from __future__ import annotations

from brain.store import Scope, Store

CANDIDATE_CAP = 3000

BM25_SQL = """WITH q AS (
        SELECT l.lexeme, s.df,
               ln(1 + ($2::float8 - s.df + 0.5) / (s.df + 0.5)) AS idf,
               row_number() OVER (ORDER BY s.df, l.lexeme) AS rarity
          FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
          JOIN lexeme_stats s ON s.lexeme = l.lexeme AND s.df > 0),
    sel AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM q
             WHERE df <= greatest(0.05 * $2::float8, 50) OR rarity = 1),
    cand AS (SELECT m.id, m.tsv FROM memories m, sel WHERE m.tsv @@ sel.tsq AND {where}
              LIMIT {cap})
    SELECT c.id, sum(q.idf * (tf * ({k1} + 1)) / (tf + {k1} * (1 - {b} + {b} * length(c.tsv) / $3::float8)))
             AS score
      FROM cand c
     CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
                           FROM unnest(c.tsv) u) t
      JOIN q ON q.lexeme = t.lexeme
     GROUP BY c.id ORDER BY score DESC, c.id LIMIT $4"""

QUERY_IDF_SQL = """SELECT coalesce(sum(ln(1 + ($2::float8 - coalesce(s.df, 0) + 0.5) / (coalesce(s.df, 0) + 0.5))), 0)
     FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
     LEFT JOIN lexeme_stats s ON s.lexeme = l.lexeme"""


async def lexical_leg(
    store: Store, query: str, scope: Scope, n: int, *, k1: float = 1.2, b: float = 0.3
) -> list[tuple[str, float]]:
    """BM25 (k1 1.2, b 0.3 unless given), candidates from the GIN index by the query's rarer lexemes."""
    stats = await store.corpus_stats()
    where, args = scope.where(5)
    sql = BM25_SQL.format(where=where, cap=CANDIDATE_CAP, k1=float(k1), b=float(b))
    rows = await store.pool.fetch(sql, query, max(stats.docs, 1), stats.avg_len, n, *args)
    return [(r["id"], float(r["score"])) for r in rows]


async def query_idf(store: Store, query: str) -> float:
    """The score a memory matching every query term once, at average length, would get."""
    stats = await store.corpus_stats()
    value = await store.pool.fetchval(QUERY_IDF_SQL, query, max(stats.docs, 1))
    return float(value or 0.0)
