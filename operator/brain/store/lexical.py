"""The lexical leg: BM25 as one inner product per candidate, candidates cut by an upper bound (MaxScore).

Each memory stores its BM25 document-side weights as a `sparsevec` (migration 0004, k1 1.2, b 0.3,
at a reference length kept near the live mean by brain/store/lexical_weights.py), one dimension per
lexeme (a hash of it). The query side is a sparsevec of its terms' IDF (from `lexeme_stats`) at the
same dimensions, so a candidate's BM25 is `-(bm25 <#> query)`, computed by pgvector in C.

Which memories are scored is MaxScore's rule (Turtle & Flood, 1995), applied a pass at a time: a
memory matching none of the terms scanned so far scores at most Σ IDF × (the term's highest weight)
over the terms not yet scanned. A term's weight is below tf·2.2 / (tf + 0.84) at any length and
reference length, so the highest term frequency any memory has for it (`lexeme_stats.max_tf`,
migration 0006) bounds it: 1.2 for a term no memory repeats, where every term was bounded at
k1 + 1 = 2.2 before (as a term without the count still is). Lexemes sharing a dimension have their
weights summed, so a term's bound is the sum over every lexeme on its dimension (one, nearly
always). Terms are scanned rarest first; once the n-th best score found is at or above that bound,
no unscanned memory can enter the top n and the leg stops. So the work follows the rare terms'
postings, not the scope's size: until #33 the leg took the first 3,000 memories the GIN index matched by every selective term,
in no order, which grew with the scope and cut the ranking at an arbitrary place.

Two bounds keep a query of common words cheap, and are the only places the ranking can differ from
exhaustive BM25 (`tests/kit/lexical_reference.exhaustive`, checked in `hack/bench/scale.py`): a term in
more than 5 % of the brain (and more than COMMON_FLOOR memories) is never scanned unless it is the
query's rarest, and a pass stops adding terms past SCAN_BUDGET postings. Below 40k memories the floor
is what counts, so a small brain's ranking is exhaustive BM25's: at 10k the 5 % rule alone (500
memories) cut 164 of 200 LoCoMo questions' scans short and 11 of their top 10s differed (#33), where
2,000 rows of postings cost a few ms.

The floor needs the query's own IDF sum (what a memory matching every term once would score) beside
the scores; it is computed from the same lexeme statistics.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brain.store.lexical_mirror import lexical_answers

if TYPE_CHECKING:
    from brain.store import Scope, Store

log = logging.getLogger(__name__)

# brain_lexeme_dim's range (migration 0004): the largest prime below pgvector's 10^9 dimensions.
DIMENSIONS = 999_999_937
# A document-side BM25 weight, tf·(k1+1)/(tf + k1·(1−b+b·len/ref)), stays below k1 + 1 (migration 0004)
# and below tf·(k1+1)/(tf + k1·(1−b)) at a term frequency tf: k1 1.2, b 0.3.
WEIGHT_BOUND = 2.2
_MIN_NORM = 1.2 * 0.7  # k1·(1−b): the denominator's length term at its least
# The most postings (summed document frequencies) the leg scans for one query after its rarest term.
SCAN_BUDGET = 20_000
# A term is common (not scanned after the rarest) past 5 % of the brain, but never below this many
# memories: from 40k up the 5 % decides; below, the scan reads a term's postings up to this size.
COMMON_FLOOR = 2_000

# `dim_max_tf`: the highest term frequency of every lexeme on the term's dimension (usually itself
# alone), since a memory holding two of them has their weights summed there (migration 0006's index).
TERMS_SQL = """SELECT l.lexeme, brain_lexeme_dim(l.lexeme) AS dim, coalesce(s.df, 0) AS df,
                      ARRAY(SELECT o.max_tf FROM lexeme_stats o
                             WHERE brain_lexeme_dim(o.lexeme) = brain_lexeme_dim(l.lexeme)) AS dim_max_tf
                 FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme)
                 LEFT JOIN lexeme_stats s ON s.lexeme = l.lexeme"""

PASS_SQL = """SELECT m.id, -(coalesce(m.bm25, brain_bm25_doc(m.tsv, $3::float8)) <#> $2::text::sparsevec) AS score
                FROM memories m
               WHERE m.tsv @@ (SELECT string_agg(quote_literal(x), ' | ')::tsquery FROM unnest($1::text[]) x)
                 AND {where}
               ORDER BY score DESC, m.id LIMIT $4"""


# The mirror's candidates (brain/store/lexical_mirror.py), scored and filtered here: the same score
# as PASS_SQL's, by primary key, so the scope is the database's whatever the mirror holds.
# The text match too, as PASS_SQL's: two lexemes can share a dimension (a hash), and a memory holding
# only the other one is no keyword hit. As a function call, which no index serves, so the keys alone
# find the rows: as `@@` the planner ANDed in the tsvector index's bitmap of every memory holding a
# query term, which grows with the brain (6,140 rows for one question at 100k memories, #33).
RESCORE_SQL = """SELECT m.id, -(coalesce(m.bm25, brain_bm25_doc(m.tsv, $3::float8)) <#> $2::text::sparsevec) AS score
                   FROM memories m
                  WHERE m.id = ANY($1::text[])
                    AND ts_match_vq(m.tsv, (SELECT string_agg(quote_literal(x), ' | ')::tsquery FROM unnest($5::text[]) x))
                    AND {where}
                  ORDER BY score DESC, m.id LIMIT $4"""


@dataclass
class Lexical:
    """BM25 hits, best first, and the score a memory matching every query term once would get.

    `exact` is False when a cost limit (a common term, the scan budget) stopped the scan before the
    bound did: then a memory holding only unscanned terms could have ranked. `scanned` of `terms`
    query terms had their postings read (the rest were cut by the bound or a limit)."""

    hits: list[tuple[str, float]]
    query_idf: float
    exact: bool = True
    scanned: int = 0
    terms: int = 0


@dataclass(frozen=True)
class Term:
    lexeme: str
    dim: int
    df: int
    idf: float
    # The highest term frequency any memory has for each lexeme on this term's dimension (None: not
    # known); empty when none was read, which bounds the term at k1 + 1 as before migration 0006.
    dim_max_tf: tuple[int | None, ...] = ()

    @property
    def weight_bound(self) -> float:
        """The most a memory's weight on this term's dimension can be, whatever its length: the sum
        over the lexemes sharing it, each below tf·2.2 / (tf + 0.84) at its highest tf."""
        if not self.dim_max_tf:
            return WEIGHT_BOUND
        return sum(
            WEIGHT_BOUND if tf is None else tf * WEIGHT_BOUND / (tf + _MIN_NORM) for tf in self.dim_max_tf
        )


def idf(df: int, docs: int) -> float:
    """BM25's IDF; a term no memory holds (df 0) counts at the highest, so the floor sees it."""
    return math.log(1 + (docs - df + 0.5) / (df + 0.5))


def plan_terms(rows: Sequence[Mapping[str, Any]], docs: int) -> tuple[list[Term], float]:
    """The query's terms that some memory holds, rarest first, and the query's IDF sum, from
    TERMS_SQL's rows."""
    terms = [Term(r["lexeme"], r["dim"], r["df"], idf(r["df"], docs), tuple(r["dim_max_tf"])) for r in rows]
    present = sorted((t for t in terms if t.df > 0), key=lambda t: (t.df, t.lexeme))
    return present, sum(t.idf for t in terms)


def query_vector(terms: list[Term]) -> str:
    """The query's IDF as sparsevec text; lexemes sharing a dimension are summed, as documents' are."""
    dims = _dims(terms)
    return "{" + ",".join(f"{d}:{v!r}" for d, v in sorted(dims.items())) + f"}}/{DIMENSIONS}"


def unscanned_bound(terms: list[Term], start: int) -> float:
    """The most a memory matching only `terms[start:]` can score."""
    return sum(t.idf * t.weight_bound for t in terms[start:])


def next_pass(terms: list[Term], scanned: int, theta: float | None, docs: int) -> int:
    """How far into `terms` (rarest first) the scan must reach after this pass; `scanned` are done.

    `theta` is the n-th best score found so far (None: fewer than n found, so any memory could still
    enter). Returns `scanned` when the unscanned terms' bound is at or below `theta` (no memory
    matching only those can enter the top n) or when the next term is common or over the budget.
    """
    if scanned == 0:
        return 1  # the rarest term first, however common: its postings are the shortest
    common = max(0.05 * docs, COMMON_FLOOR)
    budget = SCAN_BUDGET - sum(t.df for t in terms[1:scanned])
    end = scanned
    while end < len(terms):
        if theta is not None and unscanned_bound(terms, end) <= theta:
            break
        if terms[end].df > common or terms[end].df > budget:
            break  # and so is every later term: they are sorted by document frequency
        budget -= terms[end].df
        end += 1
    return end


async def bm25(store: Store, query: str, scope: Scope, n: int) -> Lexical:
    """BM25 top `n` over the scope, and the query's IDF sum: one statement for the terms, then
    one per pass of rarer-first terms until the bound says no other memory can enter the top `n`.

    A row without stored weights (written before migration 0004, until the backfill reaches it) has
    them computed here from its tsvector at the same reference length, so it ranks the same.
    """
    stats = await store.corpus_stats()
    docs = max(stats.docs, 1)
    mirror = store.mirror
    looked: asyncio.Task[int | None] | None = None
    if mirror is not None and mirror.ready and scope.as_of is None and n > 0:
        looked = asyncio.create_task(mirror.current())  # beside the terms' statement, not after it
    try:
        rows = await store._pool.fetch(TERMS_SQL, query)
    except BaseException:
        if looked is not None:
            looked.cancel()
        raise
    terms, query_idf = plan_terms(rows, docs)
    if not terms or n <= 0:
        await _looked(looked)
        return Lexical([], query_idf)
    qv = query_vector(terms)
    ref = stats.reference or stats.avg_len
    generation = await _looked(looked)
    if generation is not None and mirror is not None:
        ids = await mirror.candidates(
            _dims(terms),
            n,
            generation,
            namespaces=scope.namespaces,
            kinds=scope.kinds,
            exclude_kinds=scope.exclude_kinds,
        )
        if ids is not None:
            lexical_answers.labels("mirror").inc()
            where, args = scope.where(6)
            found = await store._pool.fetch(
                RESCORE_SQL.format(where=where), ids, qv, ref, n, [t.lexeme for t in terms], *args
            )
            hits = [(r["id"], float(r["score"])) for r in found]
            return Lexical(hits, query_idf, True, len(terms), len(terms))
    lexical_answers.labels("database").inc()
    where, args = scope.where(5)
    sql = PASS_SQL.format(where=where)
    best: dict[str, float] = {}
    scanned = 0
    theta: float | None = None
    while True:
        end = next_pass(terms, scanned, theta, docs)
        if end == scanned:
            break
        found = await store._pool.fetch(sql, [t.lexeme for t in terms[scanned:end]], qv, ref, n, *args)
        for r in found:
            best[r["id"]] = float(r["score"])
        scanned = end
        ranked = _top(best, n)
        best = dict(ranked)
        theta = ranked[-1][1] if len(ranked) >= n else None
    exact = scanned == len(terms) or (theta is not None and unscanned_bound(terms, scanned) <= theta)
    return Lexical(_top(best, n), query_idf, exact, scanned, len(terms))


async def _looked(look: asyncio.Task[int | None] | None) -> int | None:
    """The mirror's generation once its look is done, or None: no look, or it could not answer. A
    look that failed (a statement timeout, a dropped connection) leaves the leg to SQL, which fails
    on its own if the database is gone."""
    if look is None:
        return None
    try:
        return await look
    except Exception:
        log.warning("the lexical mirror's look failed; this leg ranks in SQL", exc_info=True)
        return None


def _dims(terms: list[Term]) -> dict[int, float]:
    """The query's IDF by dimension (lexemes sharing one summed), as `query_vector` writes it."""
    dims: dict[int, float] = {}
    for t in terms:
        dims[t.dim] = dims.get(t.dim, 0.0) + t.idf
    return dims


def _top(scores: dict[str, float], n: int) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda t: (-t[1], t[0]))[:n]
