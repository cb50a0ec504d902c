"""Edges between lineages and episodes: what retrieval expands a hit with."""

from __future__ import annotations

from collections.abc import Sequence

from brain.core.models import Hit
from brain.store.base import (
    _HIT_COLUMNS,
    Scope,
    StoreBase,
    _record_to_hit,
)


class Lineage(StoreBase):
    """Edges join lineages (they survive a supersede); episodes group what was recorded together."""

    async def neighbours(self, lineage_ids: Sequence[str], scope: Scope, limit: int) -> list[tuple[str, Hit]]:
        """Entries one edge away (either direction) from the given lineages: (from lineage, neighbour)."""
        if not lineage_ids:
            return []
        where, args = scope.where(3)
        rows = await self._pool.fetch(
            f"""SELECT e.origin_lineage, {", ".join("m." + c.strip() for c in _HIT_COLUMNS.split(","))}
                  FROM (SELECT source_id AS origin_lineage, target_id AS other, confidence FROM edges
                         WHERE source_id = ANY($1::text[])
                        UNION ALL
                        SELECT target_id, source_id, confidence FROM edges WHERE target_id = ANY($1::text[])) e
                  JOIN memories m ON m.lineage_id = e.other
                 WHERE {where} ORDER BY e.confidence DESC LIMIT $2""",
            list(lineage_ids),
            limit,
            *args,
        )
        return [(r["origin_lineage"], _record_to_hit(r)) for r in rows]

    async def hits_with_neighbours(
        self, ids: Sequence[str], scope: Scope, per_lineage: int
    ) -> tuple[dict[str, Hit], list[tuple[str, float, Hit]]]:
        """The entries `ids` and, in the same round trip, each one's best `per_lineage` in-scope
        neighbours one edge away: (hits by id, [(from lineage, confidence, neighbour)]).

        Retrieval fetches its head of candidates and then expanded the final top three with a second
        statement (`neighbours`); which three is only known after boosts and diversity, but they are
        always among these `ids`, so their neighbours come along here and the pick happens in Python.
        Up to `per_lineage` per lineage is enough: the old statement's top `limit` by confidence over
        three lineages never needs more than `limit` from any one of them.
        """
        if not ids:
            return {}, []
        where, args = scope.where(3)
        cols = ", ".join("m." + c.strip() for c in _HIT_COLUMNS.split(","))
        rows = await self._pool.fetch(
            f"""WITH h AS (SELECT {_HIT_COLUMNS} FROM memories WHERE id = ANY($1::text[]))
                SELECT NULL::text AS origin_lineage, NULL::real AS confidence, h.* FROM h
                UNION ALL
                SELECT o.lineage_id, x.* FROM (SELECT DISTINCT lineage_id FROM h) o
                 CROSS JOIN LATERAL (
                       SELECT e.confidence, {cols}
                         FROM (SELECT target_id AS other, confidence FROM edges WHERE source_id = o.lineage_id
                               UNION ALL
                               SELECT source_id, confidence FROM edges WHERE target_id = o.lineage_id) e
                         JOIN memories m ON m.lineage_id = e.other
                        WHERE {where} ORDER BY e.confidence DESC LIMIT $2) x""",
            list(ids),
            per_lineage,
            *args,
        )
        hits: dict[str, Hit] = {}
        near: list[tuple[str, float, Hit]] = []
        for r in rows:
            origin, confidence = r["origin_lineage"], r["confidence"]
            hit = _record_to_hit({k: v for k, v in r.items() if k not in ("origin_lineage", "confidence")})
            if origin is None:
                hits[hit.id] = hit
            else:
                near.append((origin, float(confidence), hit))
        return hits, near

    async def episode_context(
        self, ids: Sequence[str], scope: Scope, window: int
    ) -> dict[str, tuple[str, int]]:
        """(episode, seq) of the given entries and of their in-scope episode neighbours within `window`.

        An episode lives in one namespace: the same episode name in two namespaces is two episodes
        (the returned key is "<namespace> <episode>"; namespaces hold no spaces).
        """
        if not ids:
            return {}
        where, args = scope.where(3)
        rows = await self._pool.fetch(
            # LIMIT keeps the subquery from being flattened, so each candidate gets one (episode, seq) range scan.
            f"""SELECT DISTINCT m.id, m.namespace || ' ' || m.episode AS episode, m.seq
                  FROM (SELECT namespace, episode, seq FROM memories
                         WHERE id = ANY($1::text[]) AND episode IS NOT NULL) c
                 CROSS JOIN LATERAL (
                       SELECT m.id, m.namespace, m.episode, m.seq FROM memories m
                        WHERE m.episode = c.episode AND m.namespace = c.namespace
                          AND m.seq BETWEEN c.seq - $2 AND c.seq + $2 AND {where}
                        LIMIT 4 * $2 + 2) m""",
            list(ids),
            window,
            *args,
        )
        return {r["id"]: (r["episode"], r["seq"]) for r in rows}
