"""Rank fusion and re-ranking: pure functions over (id, score) lists."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from brain.models import Hit

RRF_K = 60


def rrf(
    legs: Mapping[str, Sequence[str]], *, k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float, list[str]]]:
    """Reciprocal rank fusion: Σ w/(k + rank). Returns (id, score, legs that found it), best first."""
    scores: dict[str, float] = {}
    found: dict[str, list[str]] = {}
    for leg, ids in legs.items():
        w = (weights or {}).get(leg, 1.0)
        for rank, doc in enumerate(ids, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
            found.setdefault(doc, []).append(leg)
    return sorted(((d, s, found[d]) for d, s in scores.items()), key=lambda t: (-t[1], t[0]))


def boost(
    hit: Hit, *, now: datetime, importance_weight: float, recency_weight: float, half_life_days: float
) -> float:
    """Importance and recency nudge the fused score; they never outrank relevance by much."""
    age_days = max((now - hit.valid_from).total_seconds() / 86400.0, 0.0)
    recency = math.exp(-age_days * math.log(2) / half_life_days) if half_life_days > 0 else 0.0
    return hit.score * (1 + importance_weight * (hit.importance - 0.5)) * (1 + recency_weight * recency)


_WORD = re.compile(r"\w+")


def _shingles(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def diversify(hits: Sequence[Hit], *, limit: int, max_similarity: float = 0.85) -> list[Hit]:
    """Drop near-duplicates (same body, or word-overlap Jaccard above `max_similarity`) keeping the best."""
    chosen: list[Hit] = []
    seen_hashes: set[str] = set()
    shingles: list[set[str]] = []
    for hit in hits:
        if hit.content_hash and hit.content_hash in seen_hashes:
            continue
        words = _shingles(hit.body)
        if any(words and len(words & s) / len(words | s) > max_similarity for s in shingles):
            continue
        chosen.append(hit)
        seen_hashes.add(hit.content_hash)
        shingles.append(words)
        if len(chosen) >= limit:
            break
    return chosen
