"""Personas and skills, held in memory: a small curated set matched on every request without the database.

The seed matches personas by domain keywords (≥ 2 overlapping, else vector similarity) and gives
skills their own slots so dense code memories cannot crowd them out. Both sets are small (tens to a
few hundred entries), so the gateway loads them every minute and matches them in microseconds with
numpy, keeping the per-request database budget for the memory legs. Untrusted imports and captured
model output never become a persona (an identity prefix) or a skill, and a persona must be curated:
written by an owner or an owner's import, or promoted by an owner. Agent-written personas wait for
that approval. Personas are scoped like any memory (the key's namespaces plus `shared`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np

from brain.core.models import Hit
from brain.store import catalog_rows
from brain.store.store import Scope, Store

_WORD = re.compile(r"[a-z][a-z0-9+#._-]{1,40}")
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "like",
        "make",
        "me",
        "more",
        "most",
        "my",
        "need",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "please",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "use",
        "using",
        "very",
        "want",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    ]
)


def keywords(text: str, limit: int = 64) -> list[str]:
    """Domain-significant words of a query: lowercased, stop words and very short words removed."""
    seen: dict[str, None] = {}
    for m in _WORD.finditer(text.lower()):
        w = m.group(0).strip("._-")
        if len(w) > 2 and w not in STOP_WORDS:
            seen.setdefault(w, None)
    return list(seen)[:limit]


@dataclass
class Entry:
    hit: Hit
    keywords: frozenset[str]
    vector: np.ndarray | None


@dataclass
class Catalog:
    personas: list[Entry] = field(default_factory=list)
    skills: list[Entry] = field(default_factory=list)
    loaded_at: float = 0.0
    persona_min_overlap: int = 2
    persona_min_similarity: float = 0.35
    skill_min_similarity: float = 0.3

    async def refresh(self, store: Store, limit: int = 5000) -> None:
        rows = await catalog_rows.personas_and_skills(store, limit)
        personas: list[Entry] = []
        skills: list[Entry] = []
        for r in rows:
            d = dict(r)
            vec = d.pop("embedding")
            kws = frozenset(k.lower() for k in d.pop("domain_keywords") or [])
            if not kws and d["kind"] == "persona":
                kws = frozenset(keywords(d["title"]))
            if vec is not None and hasattr(vec, "to_numpy"):
                vec = vec.to_numpy()
            v = None if vec is None else np.asarray(vec, dtype=np.float32)
            if v is not None:
                n = float(np.linalg.norm(v))
                v = v / n if n else None
            entry = Entry(Hit.model_validate({**d, "score": 0.0}), kws, v)
            (personas if d["kind"] == "persona" else skills).append(entry)
        self.personas, self.skills, self.loaded_at = personas, skills, time.monotonic()

    @staticmethod
    def _visible(entries: list[Entry], scope: Scope) -> list[Entry]:
        return [e for e in entries if e.hit.namespace in scope.namespaces]

    @staticmethod
    def _unit(vec: np.ndarray | None) -> np.ndarray | None:
        if vec is None:
            return None
        n = float(np.linalg.norm(vec))
        return vec / n if n else None

    def persona(self, query_words: list[str], vec: np.ndarray | None, scope: Scope) -> Hit | None:
        """Keyword overlap ≥ `persona_min_overlap` wins; otherwise the most similar persona above a floor."""
        candidates = self._visible(self.personas, scope)
        if not candidates:
            return None
        words = set(query_words)
        best, best_overlap = None, 0
        for e in candidates:
            overlap = len(words & e.keywords)
            if overlap > best_overlap:
                best, best_overlap = e, overlap
        if best is not None and best_overlap >= self.persona_min_overlap:
            return best.hit.model_copy(update={"score": float(best_overlap), "legs": ["keywords"]})
        q = self._unit(vec)
        if q is None:
            return None
        scored = [(float(e.vector @ q), e) for e in candidates if e.vector is not None]
        if not scored:
            return None
        sim, e = max(scored, key=lambda t: t[0])
        if sim < self.persona_min_similarity:
            return None
        return e.hit.model_copy(update={"score": sim, "legs": ["vector"]})

    def skills_for(self, vec: np.ndarray | None, query_words: list[str], scope: Scope, n: int) -> list[Hit]:
        """Up to `n` skills by similarity (with a floor), or by title-word overlap when there is no vector."""
        if n <= 0:
            return []
        candidates = self._visible(self.skills, scope)
        q = self._unit(vec)
        scored: list[tuple[float, Entry]] = []
        if q is not None:
            scored = [(float(e.vector @ q), e) for e in candidates if e.vector is not None]
            scored = [(s, e) for s, e in scored if s >= self.skill_min_similarity]
        else:
            words = set(query_words)
            scored = [(float(len(words & set(keywords(e.hit.title)))), e) for e in candidates]
            scored = [(s, e) for s, e in scored if s >= 2]
        scored.sort(key=lambda t: -t[0])
        return [e.hit.model_copy(update={"score": s, "legs": ["skill"]}) for s, e in scored[:n]]
