"""Three-tier chunk quality grading (the seed's ingestion filter), as pure functions.

Tier 1 scores a chunk from its text alone before any embedding is paid for; tier 2 drops a chunk
whose nearest existing neighbour (or an earlier chunk of the same run) is ≥ 0.95 cosine-similar;
tier 3 (opt-in) moves the tier-1 bar using how often that neighbour was actually retrieved.
Dropped chunks are counted per tier; they are not rejects (nothing was wrong with them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

_IMPORT = re.compile(
    r"^\s*(import\s|from\s+\S+\s+import\s|#include\s|using\s|use\s|require\(|const\s+\w+\s*=\s*require\()"
)
_COMMENT = re.compile(r"^\s*(#|//|/\*|\*|\*/|--|\"\"\"|''')")
_ALGO = re.compile(r"\b(for|while|if|return|yield|map|filter|match|switch|case|reduce)\b")
_ERRORS = re.compile(
    r"\b(try|catch|except|raise|throw|throws|panic!?|Result<|Err\(|errors?\.New|recover|finally)\b"
)
_TRIVIAL_NAME = re.compile(r"(?:^|[.])(?:get|set|is|has)(?:[A-Z_]|$)")


@dataclass(frozen=True)
class GradingConfig:
    min_score: float = 0.3
    dedup: bool = True
    dedup_threshold: float = 0.95
    tuning: bool = False
    tuning_min_access: int = 3
    tuning_min_similarity: float = 0.70

    @staticmethod
    def from_env(env: Mapping[str, str]) -> GradingConfig:
        """From the job's environment (brain.jobs.settings reads it)."""
        return GradingConfig(
            min_score=float(env.get("BRAIN_CHUNK_MIN_SCORE", "0.3")),
            dedup=env.get("BRAIN_CHUNK_DEDUP_ENABLED", "true").lower() not in ("0", "false", "no"),
            dedup_threshold=float(env.get("BRAIN_CHUNK_DEDUP_THRESHOLD", "0.95")),
            tuning=env.get("BRAIN_CHUNK_QUALITY_TUNING", "false").lower() in ("1", "true", "yes"),
            tuning_min_access=int(env.get("BRAIN_CHUNK_QUALITY_MIN_ACCESS", "3")),
        )


def score_chunk(text: str, symbol: str = "") -> float:
    """0.0-1.0 from the seed's table: start at 0.5, penalties for noise, bonuses for substance."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    n = len(lines)
    if n == 0:
        return 0.0
    score = 0.5
    if sum(1 for ln in lines if _IMPORT.match(ln)) / n > 0.7:
        score -= 0.4
    name = symbol.rsplit("~", 1)[0]
    if _TRIVIAL_NAME.search(name) and n <= 4:  # signature + body of ≤ 3 lines
        score -= 0.3
    if sum(1 for ln in lines if _COMMENT.match(ln)) / n > 0.5:
        score -= 0.3
    if n < 5 or n > 500:
        score -= 0.2
    if sum(1 for ln in lines if _ALGO.search(ln)) >= 3:
        score += 0.15
    if _ERRORS.search(text):
        score += 0.1
    if name and not _TRIVIAL_NAME.search(name):
        score += 0.1
    if 10 <= n <= 200:
        score += 0.1
    return round(min(max(score, 0.0), 1.0), 3)


def tuned_threshold(
    cfg: GradingConfig, neighbour_similarity: float | None, neighbour_access: int | None
) -> float:
    """Tier 3: proven-useful neighbours lower the bar by 0.10, never-retrieved ones raise it by 0.08."""
    if not cfg.tuning or neighbour_similarity is None or neighbour_access is None:
        return cfg.min_score
    if neighbour_similarity < cfg.tuning_min_similarity:
        return cfg.min_score
    if neighbour_access >= cfg.tuning_min_access:
        return cfg.min_score - 0.10
    if neighbour_access == 0:
        return cfg.min_score + 0.08
    return cfg.min_score


def unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(vectors / norms, dtype=np.float32)


def batch_duplicates(vectors: np.ndarray, threshold: float) -> list[int | None]:
    """For each row, the index of an earlier row it near-duplicates (cosine ≥ threshold), else None."""
    if len(vectors) == 0:
        return []
    u = unit(vectors)
    sims = u @ u.T
    out: list[int | None] = []
    kept: list[int] = []
    for i in range(len(u)):
        dup = next((j for j in kept if sims[i, j] >= threshold), None)
        out.append(dup)
        if dup is None:
            kept.append(i)
    return out
