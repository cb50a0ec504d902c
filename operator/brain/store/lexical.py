"""The lexical leg: BM25 as one inner product per candidate, and the query's IDF sum, in one statement.

Each memory stores its BM25 document-side weights as a `sparsevec` (migration 0004, k1 1.2, b 0.3,
at a reference length kept near the live mean by brain/store/lexical_weights.py), one dimension per
lexeme (a hash of it). The query side is a sparsevec of its terms' IDF (from `lexeme_stats`) at the
same dimensions, so a candidate's BM25 is `-(bm25 <#> query)`, computed by pgvector in C, where the
statement before it unnested every candidate's tsvector and joined it to the query's lexemes (~9 of
~12 ms at 100k). The candidate step is unchanged: the GIN index answers the query's selective
lexemes and the scope together. tests/lexical_reference.py keeps the unnesting statement as the
reference, and tests/test_lexical.py checks the ranking agrees with it.

The floor needs the query's own IDF sum (what a memory matching every term once would score) next
to the BM25 scores; it rides along as a column of the same statement.

Measured and not shipped (docs/performance.md, "Lexical leg"): a postings table (3.6× slower at
100k, 2.8 KB a memory), candidates per scope namespace through a (namespace, tsv) GIN index
(slower at 100k and 1M), and a sparsevec HNSW index as the candidate step (approximate: misses
exact BM25 hits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.store import Scope, Store

# Bounds the candidates when every query word is common (then lexical carries little signal anyway).
CANDIDATE_CAP = 3000
# brain_lexeme_dim's range (migration 0004): the largest prime below pgvector's 10^9 dimensions.
DIMENSIONS = 999_999_937


@dataclass
class Lexical:
    """BM25 hits, best first, and the score a memory matching every query term once would get."""

    hits: list[tuple[str, float]]
    query_idf: float


async def bm25(store: Store, query: str, scope: Scope, n: int) -> Lexical:
    """BM25 over the full-text index's candidates, plus the query's IDF sum, in one round trip.

    `query_idf` counts a term no memory holds at the highest IDF, so "write a haiku" against an
    engineering brain covers almost nothing (docs/memory-core.md, relevance floor). A row without
    stored weights (written before migration 0004, until the backfill reaches it) has them computed
    here from its tsvector at the same reference length, so it ranks the same.
    """
    stats = await store.corpus_stats()
    where, args = scope.where(5)
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
            qv AS (SELECT format('{{%s}}/{DIMENSIONS}', string_agg(dim || ':' || idf, ','))::sparsevec AS v
                     FROM (SELECT brain_lexeme_dim(lexeme) AS dim, sum(idf) AS idf FROM q GROUP BY 1) d),
            cand AS (SELECT m.id, coalesce(m.bm25, brain_bm25_doc(m.tsv, $3::float8)) <#> qv.v AS neg
                       FROM memories m, sel, qv WHERE m.tsv @@ sel.tsq AND {where}
                      LIMIT {CANDIDATE_CAP}),
            scored AS (SELECT id, -neg AS score FROM cand ORDER BY neg, id LIMIT $4)
            SELECT id, score FROM scored
            UNION ALL
            SELECT NULL, (SELECT coalesce(sum(ln(1 + ($2::float8 - df + 0.5) / (df + 0.5))), 0) FROM terms)
            ORDER BY 1 NULLS LAST""",
        query,
        max(stats.docs, 1),
        stats.reference or stats.avg_len,
        n,
        *args,
    )
    hits = sorted(
        ((r["id"], float(r["score"])) for r in rows if r["id"] is not None), key=lambda t: (-t[1], t[0])
    )
    qidf = next((float(r["score"]) for r in rows if r["id"] is None), 0.0)
    return Lexical(hits, qidf)
