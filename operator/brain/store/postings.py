"""The lexical leg's BM25 over the postings table (migration 0004), and the query's IDF in the same trip.

Before, each candidate's tsvector was unnested to find the query's terms in it: the cost grew with
the candidates' lengths, and the query's IDF sum (the floor's yardstick) took a second round trip.
Here a candidate's score is read from one posting per (query lexeme, memory), with the term
frequency and memory length stored in it, and the query's IDF rides along as a column.
Same formula as before (BM25, k1 1.2, b 0.3), so the ranking is the same: tests/test_store.py checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.store.store import Scope, Store

# Bounds the candidates when every query word is common (then lexical carries little signal anyway).
CANDIDATE_CAP = 3000


@dataclass
class Lexical:
    """BM25 hits, best first, and the score a memory matching every query term once would get."""

    hits: list[tuple[str, float]]
    query_idf: float


async def bm25(store: Store, query: str, scope: Scope, n: int) -> Lexical:
    """BM25 over postings, candidates from the query's selective lexemes only (as the GIN path did):
    a word that appears everywhere cannot turn the candidate set into a scan.

    `query_idf` counts a term no memory holds at the highest IDF, so "write a haiku" against an
    engineering brain covers almost nothing (docs/memory-core.md, relevance floor).
    """
    stats = await store._refresh_lexical()
    where, args = scope.where(5)
    rows = await store.pool.fetch(
        f"""WITH terms AS (
                SELECT DISTINCT l.lexeme, coalesce(s.df, 0) AS df
                  FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
                  LEFT JOIN lexeme_stats s ON s.lexeme = l.lexeme),
            q AS (SELECT lexeme, df, ln(1 + ($2::float8 - df + 0.5) / (df + 0.5)) AS idf,
                         row_number() OVER (ORDER BY df, lexeme) AS rarity
                    FROM terms WHERE df > 0),
            cand AS (SELECT DISTINCT p.memory_id FROM postings p
                       JOIN q ON q.lexeme = p.lexeme
                            AND (q.df <= greatest(0.05 * $2::float8, 50) OR q.rarity = 1)
                       JOIN memories m ON m.id = p.memory_id
                      WHERE {where} LIMIT {CANDIDATE_CAP}),
            scored AS (
                SELECT p.memory_id AS id,
                       sum(q.idf * (p.tf * 2.2) / (p.tf + 1.2 * (0.7 + 0.3 * p.doc_len / $3::float8))) AS score
                  FROM cand c JOIN postings p ON p.memory_id = c.memory_id
                  JOIN q ON q.lexeme = p.lexeme
                 GROUP BY p.memory_id ORDER BY score DESC, p.memory_id LIMIT $4)
            SELECT id, score, (SELECT sum(ln(1 + ($2::float8 - df + 0.5) / (df + 0.5))) FROM terms) AS qidf
              FROM scored
            UNION ALL
            SELECT NULL, NULL, (SELECT sum(ln(1 + ($2::float8 - df + 0.5) / (df + 0.5))) FROM terms)
            ORDER BY score DESC NULLS LAST, id""",
        query,
        max(stats.docs, 1),
        stats.avg_len,
        n,
        *args,
    )
    qidf = float(rows[-1]["qidf"] or 0.0) if rows else 0.0
    return Lexical([(r["id"], float(r["score"])) for r in rows if r["id"] is not None], qidf)
