"""The retrieval legs' statements: vector (by model), the corpus numbers BM25 needs, trigram identifiers.

The lexical leg itself is `brain.store.lexical.bm25` (BM25 and the query's IDF in one statement).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence

import asyncpg
import numpy as np

from brain.store import lexical_weights
from brain.store.base import (
    LexicalStats,
    Scope,
    StoreBase,
)
from brain.store.reindex import is_dimension_error

log = logging.getLogger(__name__)

# A word's lexemes as one tsquery (a name's: its whole compound and its parts), NULL for a stop word,
# whose lookup then matches nothing and leaves the answer to the trigram lookup.
_LEXEMES = """(SELECT string_agg(quote_literal(l), ' & ')::tsquery
                FROM unnest(tsvector_to_array(to_tsvector('english', {}))) AS l)"""
# Up to 64 live memories holding those lexemes, read through the tsvector index alone: the subquery's
# LIMIT keeps the pattern's recheck out of the scan, where the planner ANDed the trigram index's bitmap
# back in, and bounds what a word held mostly inside other words costs ("self" of "self-signed": the
# trigram lookup decides after 64 rows). At 1M memories the plan is still the tsvector index's.
_LIVE = "m.status <> 'forgotten'"  # what the check counts: every memory but a forgotten one
_HOLDING = f"SELECT m.body FROM memories m WHERE {_LIVE} AND m.tsv @@ {{}} LIMIT 64"


class RetrievalLegs(StoreBase):
    """Candidate lists (id, score) for the pipeline to fuse; every one applies the scope predicate."""

    async def vector_leg(self, embedding: np.ndarray, scope: Scope, n: int) -> list[tuple[str, float]]:
        """Nearest entries by this store's model; none while another model's index is live (a query
        is only ever compared with vectors of the model that embedded it)."""
        live, _ = await self.live.get(self._pool)
        if live != self.embedding_model:
            return []
        where, args = scope.where(4)
        try:
            rows = await self._pool.fetch(
                f"""SELECT m.id, 1 - (m.embedding <=> $1) AS sim FROM memories m
                     WHERE m.embedding IS NOT NULL AND m.embedding_model = $3 AND {where}
                     ORDER BY m.embedding <=> $1 LIMIT $2""",
                embedding,
                n,
                self.embedding_model,
                *args,
            )
        except asyncpg.PostgresError as e:
            if not is_dimension_error(e):
                raise
            self.live.stale()  # the index was swapped to another model's dimension a moment ago
            return []
        return [(r["id"], float(r["sim"])) for r in rows]

    async def corpus_stats(self, max_age: float = 30.0) -> LexicalStats:
        """Active memories, their mean tsvector length and the BM25 weights' reference length; a
        refresh also keeps the reference near the mean (`_keep_weights`).

        Read now when never read (or reset, after a weight rewrite) or when `max_age` is 0; otherwise
        an answer older than `max_age` seconds is returned at once while one refresh runs in the
        background. The read scans every active memory (70–130 ms at 100k memories, 0.6–1.5 s at 1M):
        in the question's path it made one question every 30 s wait for it, at 1M past the gateway's
        500 ms retrieval budget (#33, session 29)."""
        st = self.lexical
        if time.monotonic() - st.refreshed <= max_age:
            return st
        if st.refreshed == 0.0 or max_age == 0:
            await self._read_stats()
        elif self.stats_task is None or self.stats_task.done():
            self.stats_task = asyncio.create_task(self._refresh_stats(), name="corpus-stats")
        return st

    async def _refresh_stats(self) -> None:
        try:
            await self._read_stats()
        except Exception as e:  # the next question past max_age tries again
            log.warning("corpus statistics refresh failed (%s); the lexical leg uses the last ones", e)

    async def _read_stats(self) -> None:
        st = self.lexical
        row = await self._pool.fetchrow(
            """SELECT count(*) AS n, coalesce(avg(length(tsv)), 1) AS avg,
                      (SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl') AS ref,
                      EXISTS (SELECT 1 FROM brain_meta WHERE key = 'bm25_rewrite_after') AS pending
                 FROM memories WHERE status = 'active'"""
        )
        docs, mean, ref = int(row["n"]), float(row["avg"]) or 1.0, row["ref"]
        await self._keep_weights(mean, docs, ref, bool(row["pending"]))
        if lexical_weights.drifted(mean, ref):
            ref = await lexical_weights.reference(self._pool)
        st.docs, st.avg_len, st.reference, st.refreshed = docs, mean, ref, time.monotonic()

    async def unknown_names(self, names: Sequence[str]) -> list[str]:
        """Those of a question's hyphenated names (`query.compound_names`) that name an unknown
        member of a kind the brain knows: no memory holds the name, some memory holds another name
        of its kind (its last part: `nidlum-worker` for `korfay-worker`), and no memory uses its
        first part as a word of its own ("korfay"; "faydra", held only inside `faydra-relay`, is not
        used alone). "one-way", "mid-august" (August is a word of its own in a brain that has
        "mid-july") and "infrastructure-as-code" (no `*-code` name) are not.

        Over the whole brain, not the question's scope: a team's naming is the brain's, and a name
        held in another namespace is not unknown (so the answer can only be emptier for what other
        namespaces hold, never show any of it). Three lookups a name on the trigram index; names
        are letters, digits and hyphens only, so they are literal in the patterns.

        A name or head the brain holds as a word is found first through its lexemes on the tsvector
        index, with the same pattern rechecked, so the answer is the trigram lookup's: a trigram
        bitmap reads every memory holding the pattern's trigrams before the first match can end it,
        and common words' trigrams ("self-care", "hand-painted") made the check grow with the brain
        (p95 75 ms at 1M memories, #33). Only a name no memory holds as a word pays for that."""
        names = [n for n in names if re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)+", n)]
        if not names:
            return []
        live = _LIVE
        name_like = "m.body ILIKE '%' || p.name || '%'"
        head_word = "m.body ~* ('(^|[^[:alnum:]-])' || p.head || '($|[^[:alnum:]-])')"
        rows = await self._pool.fetch(
            f"""SELECT p.name FROM unnest($1::text[], $2::text[], $3::text[]) AS p(name, head, kind)
                 CROSS JOIN LATERAL (SELECT {_LEXEMES.format("p.name")} AS name_q,
                                            {_LEXEMES.format("p.head")} AS head_q) w
                 WHERE NOT EXISTS (SELECT 1 FROM ({_HOLDING.format("w.name_q")}) m WHERE {name_like})
                   AND NOT EXISTS (SELECT 1 FROM memories m WHERE {live} AND {name_like})
                   AND EXISTS (SELECT 1 FROM memories m WHERE {live}
                               AND m.body ~* ('[[:alnum:]]-' || p.kind || '($|[^[:alnum:]-])'))
                   AND NOT EXISTS (SELECT 1 FROM ({_HOLDING.format("w.head_q")}) m WHERE {head_word})
                   AND NOT EXISTS (SELECT 1 FROM memories m WHERE {live} AND {head_word})""",
            names,
            [n.split("-")[0] for n in names],
            [n.rsplit("-", 1)[1] for n in names],
        )
        return [r["name"] for r in rows]

    async def trigram_leg(self, tokens: Sequence[str], scope: Scope, n: int) -> list[tuple[str, float]]:
        """Exact identifier lookups (ports, flags, host names, env vars, error codes) via the trigram index."""
        if not tokens:
            return []
        where, args = scope.where(3)
        patterns = ["%" + re.sub(r"([%_\\])", r"\\\1", t) + "%" for t in tokens]
        rows = await self._pool.fetch(
            f"""SELECT m.id, count(*)::float8 AS score FROM memories m
                  JOIN unnest($1::text[]) AS p(pattern) ON m.body ILIKE p.pattern
                 WHERE {where} GROUP BY m.id ORDER BY score DESC, max(m.created_at) DESC LIMIT $2""",
            patterns,
            n,
            *args,
        )
        return [(r["id"], float(r["score"])) for r in rows]
