"""The lexical leg's BM25 and the query's IDF sum in one statement.

The floor needs the query's own IDF sum (what a memory matching every term once would score) next
to the BM25 scores; it used to be `Store.query_idf`, a second round trip per question. Here it
rides along as a column of the same statement. Same BM25 as the retired `Store.lexical_leg`
(tests/lexical_reference.py keeps it as the reference; k1 1.2, b 0.3, IDF
from `lexeme_stats`, GIN candidates from the query's selective lexemes, term frequency from the
tsvector's positions), so the ranking is the same: tests/test_lexical.py checks.

A postings table (lexeme, memory, tf, length) instead of unnesting each candidate's tsvector was
built and measured (docs/performance.md, "Lexical leg"): 0.68× at 10k memories but 3.6× slower at
100k and 2.8 KB a memory, so it is not shipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.store import Scope, Store

# Bounds the candidates when every query word is common (then lexical carries little signal anyway).
CANDIDATE_CAP = 3000


@dataclass
class Lexical:
    """BM25 hits, best first, and the score a memory matching every query term once would get."""

    hits: list[tuple[str, float]]
    query_idf: float


def _candidates(where: str, by_namespace: bool) -> str:
    """The candidate step: memories in scope holding one of the query's selective lexemes.

    `by_namespace` looks them up one scope namespace at a time, `namespace = ns AND tsv @@ q`, which a
    (namespace, tsv) GIN index (btree_gin) answers inside the index; the plain form scans every
    namespace's matches and intersects them with the scope afterwards, which grows with the whole
    Brain rather than with the namespaces asked. Same rows either way (the scope predicate stays).
    Measured in hack/benchscale.py; not shipped until that index is (docs/performance.md).
    """
    if not by_namespace:
        return f"""SELECT m.id, m.tsv FROM memories m, sel WHERE m.tsv @@ sel.tsq AND {where}
                    LIMIT {CANDIDATE_CAP}"""
    return f"""SELECT m.id, m.tsv FROM unnest($5::text[]) AS s(ns), sel
                 CROSS JOIN LATERAL (SELECT m.id, m.tsv FROM memories m
                                      WHERE m.namespace = s.ns AND m.tsv @@ sel.tsq AND {where}) m
                 LIMIT {CANDIDATE_CAP}"""


async def bm25(store: Store, query: str, scope: Scope, n: int, *, by_namespace: bool = False) -> Lexical:
    """BM25 over the full-text index, plus the query's IDF sum, in one round trip.

    `query_idf` counts a term no memory holds at the highest IDF, so "write a haiku" against an
    engineering brain covers almost nothing (docs/memory-core.md, relevance floor).
    """
    stats = await store.corpus_stats()
    where, args = scope.where(5)  # $5 is the scope's namespaces (Scope.where), which by_namespace unnests
    rows = await store.pool.fetch(
        f"""WITH terms AS (
                SELECT l.lexeme, coalesce(s.df, 0) AS df
                  FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
                  LEFT JOIN lexeme_stats s ON s.lexeme = l.lexeme),
            q AS (SELECT lexeme, df, ln(1 + ($2::float8 - df + 0.5) / (df + 0.5)) AS idf,
                         row_number() OVER (ORDER BY df, lexeme) AS rarity
                    FROM terms WHERE df > 0),
            sel AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM q
                     WHERE df <= greatest(0.05 * $2::float8, 50) OR rarity = 1),
            cand AS ({_candidates(where, by_namespace)}),
            scored AS (
                SELECT c.id, sum(q.idf * (tf * 2.2) / (tf + 1.2 * (0.7 + 0.3 * length(c.tsv) / $3::float8)))
                         AS score
                  FROM cand c
                 CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
                                       FROM unnest(c.tsv) u) t
                  JOIN q ON q.lexeme = t.lexeme
                 GROUP BY c.id ORDER BY score DESC, c.id LIMIT $4)
            SELECT id, score FROM scored
            UNION ALL
            SELECT NULL, (SELECT coalesce(sum(ln(1 + ($2::float8 - df + 0.5) / (df + 0.5))), 0) FROM terms)
            ORDER BY 1 NULLS LAST""",
        query,
        max(stats.docs, 1),
        stats.avg_len,
        n,
        *args,
    )
    hits = sorted(
        ((r["id"], float(r["score"])) for r in rows if r["id"] is not None), key=lambda t: (-t[1], t[0])
    )
    qidf = next((float(r["score"]) for r in rows if r["id"] is None), 0.0)
    return Lexical(hits, qidf)
