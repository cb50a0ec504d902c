"""Sync one source's items with the store: idempotent on item identity, governed like every write.

Identity is `source_key = "<source>:<path>[#symbol]"`. An item whose fingerprint matches the
stored version is skipped without a write; a changed one supersedes (compare-and-set on the
stored hash, history kept); a stored item the source no longer yields is retired with a reason.
Every new or changed item passes the same secret gate and instruction lint as any other write;
a refused item is listed with the reason and its stored version (if any) is left as it was.

Writes go to the store in bulk (`note_many`) with vectors embedded here in batches, because the
per-item path of `MemoryService.note` would make a repository import embedding-bound one text at a
time. The rules are the service's: `tier_for(actor)`, the gate, the lint, untrusted never standing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from brain.core.errors import BrainError
from brain.core.models import FUTURE_SLACK, Actor, MemoryIn, check_valid_from
from brain.core.redact import SecretGate
from brain.embedder.model import Embedder
from brain.ingest.grading import GradingConfig, score_chunk, tuned_threshold, unit
from brain.ingest.items import Edge, Item, Parsed, Reject, shown_name
from brain.ingest.retireguard import ImportStopped, RetireGuard
from brain.ingest.retireguard import check as retire_check
from brain.services.memory import pin, tier_for
from brain.services.memory import screen as service_screen
from brain.store import sources as source_rows
from brain.store.store import Store

log = logging.getLogger("brain.ingest")
EMBED_BATCH = 64
WRITE_BATCH = 500
MAX_REJECTS_LISTED = 100
RELATIONS = ("contains", "calls", "imports", "rationale_for")
Progress = Callable[[str, int, int], None]


@dataclass
class Grading:
    chunks: int = 0
    kept: int = 0
    tier1_dropped: int = 0
    tier2_dropped: int = 0
    tier3_raised: int = 0
    tier3_lowered: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Summary:
    added: int = 0
    superseded: int = 0
    skipped: int = 0
    retired: int = 0
    rejected: int = 0
    rejects: list[Reject] = field(default_factory=list)
    grading: Grading = field(default_factory=Grading)
    edges: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "superseded": self.superseded,
            "skipped": self.skipped,
            "retired": self.retired,
            "rejected": self.rejected,
            "rejects": [{"item": r.item, "reason": r.reason} for r in self.rejects[:MAX_REJECTS_LISTED]],
            "grading": self.grading.as_dict(),
            "edges": self.edges,
            "seconds": round(self.seconds, 2),
        }


@dataclass
class Existing:
    id: str
    lineage_id: str
    content_hash: str
    fingerprint: str | None
    namespace: str
    kind: str
    access_count: int
    embedding: np.ndarray | None


def source_key(prefix: str, key: str) -> str:
    """`<source>:<key>`, hashed down when a deep path would pass the column's 512 characters."""
    full = prefix + key
    if len(full) <= 512:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:16]
    return full[:480] + "…" + digest


def screen(item: Item, gate: SecretGate, origin: str = "import") -> str | None:
    """Why the item may not be stored (the service's one screening: gate, then lint), or None."""
    try:
        mem = MemoryIn(
            body=item.body,
            title=item.title,
            kind=item.kind,
            tags=item.tags,
            domain_keywords=item.domain_keywords,
            attrs=item.attrs,
        )
        service_screen(mem, gate, origin=origin)
    except BrainError as e:
        return f"{e.code}: {e.message}"
    except ValueError as e:  # pydantic: the field and the constraint
        return f"invalid: {str(e).splitlines()[0]}"
    return None


def as_vector(value: Any) -> np.ndarray | None:
    """pgvector hands back a Vector (or a numpy array, depending on the codec)."""
    if value is None:
        return None
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


async def load_existing(store: Store, prefix: str, *, with_vectors: bool) -> dict[str, Existing]:
    rows = await source_rows.active_under(store, prefix, with_vectors=with_vectors)
    out = {}
    for r in rows:
        emb = r["embedding"] if with_vectors else None
        out[r["source_key"]] = Existing(
            r["id"],
            r["lineage_id"],
            r["content_hash"],
            r["fp"],
            r["namespace"],
            r["kind"],
            r["access_count"],
            as_vector(emb),
        )
    return out


async def embed_all(embedder: Embedder, texts: list[str], progress: Progress | None) -> np.ndarray:
    out: list[np.ndarray] = []
    for i in range(0, len(texts), EMBED_BATCH):
        out.append(await embedder.embed(texts[i : i + EMBED_BATCH]))
        if progress:
            progress("embedding", min(i + EMBED_BATCH, len(texts)), len(texts))
    return np.concatenate(out) if out else np.zeros((0, 1), dtype=np.float32)


def _embed_text(item: Item) -> str:
    text = item.embed_text or (f"{item.title}\n{item.body}" if item.title else item.body)
    return text[:2000]


def _valid_from(value: Any) -> datetime | None:
    """A front-matter date says when the memory became true; a time in the future is not accepted."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    try:
        return check_valid_from(
            when if when.tzinfo else when.replace(tzinfo=UTC), now=datetime.now(UTC) - FUTURE_SLACK
        )
    except ValueError:
        return None


def _memory_in(item: Item, skey: str, namespace: str, extra: dict[str, Any]) -> MemoryIn:
    return MemoryIn(
        body=item.body,
        title=item.title,
        kind=item.kind,
        namespace=namespace,
        tags=item.tags,
        importance=item.importance,
        attrs={**item.attrs, **extra},
        source_key=skey,
        domain_keywords=item.domain_keywords,
    )


def grade(
    pending: list[tuple[Item, str]],
    vectors: np.ndarray,
    existing: dict[str, Existing],
    cfg: GradingConfig,
    stats: Grading,
) -> list[bool]:
    """Tiers 2 and 3 for graded items, after embedding: which pending items to keep.

    Near-duplicates are looked for among this source's stored chunks (never the item's own
    previous version, which a small edit leaves ≥ 0.95 similar) and earlier chunks of this run.
    """
    keep = [True] * len(pending)
    graded = [i for i, (item, _) in enumerate(pending) if item.graded]
    if not graded:
        return keep
    ex_keys = [k for k, e in existing.items() if e.kind == "code" and e.embedding is not None]
    ex_mat = unit(np.stack([existing[k].embedding for k in ex_keys])) if ex_keys else None  # type: ignore[misc]
    ex_col = {k: j for j, k in enumerate(ex_keys)}
    kept_rows: list[np.ndarray] = []
    for i in graded:
        item, skey = pending[i]
        v = unit(vectors[i : i + 1])[0]
        best_sim, best_access = None, None
        if ex_mat is not None:
            sims = ex_mat @ v
            own = ex_col.get(skey)
            if own is not None:
                sims[own] = -1.0
            j = int(np.argmax(sims))
            best_sim, best_access = float(sims[j]), existing[ex_keys[j]].access_count
        if cfg.dedup:
            dup = best_sim is not None and best_sim >= cfg.dedup_threshold
            if not dup and kept_rows:
                dup = bool(float(np.max(np.stack(kept_rows) @ v)) >= cfg.dedup_threshold)
            if dup:
                keep[i] = False
                stats.tier2_dropped += 1
                continue
        threshold = tuned_threshold(cfg, best_sim, best_access)
        if threshold > cfg.min_score:
            stats.tier3_raised += 1
        elif threshold < cfg.min_score:
            stats.tier3_lowered += 1
        # With tuning on, tier 1 let chunks down to min_score - 0.10 through so tier 3 could lower the
        # bar for them; every one of them must still clear the bar tier 3 settled on (the plain
        # min_score when no proven neighbour vouches for it).
        if cfg.tuning and float(item.attrs.get("quality", 1.0)) < threshold:
            keep[i] = False
            stats.tier1_dropped += 1
            continue
        kept_rows.append(v)
    return keep


async def sync(
    store: Store,
    embedder: Embedder,
    prefix: str,
    namespace: str,
    parsed: Parsed,
    actor: Actor,
    *,
    grading: GradingConfig | None = None,
    gate: SecretGate | None = None,
    progress: Progress | None = None,
    guard: RetireGuard | None = None,
) -> Summary:
    """Make the store hold exactly what `parsed` says for this source (see the module docstring).

    Raises ImportStopped, before any write, when the run would retire more of the source than
    `guard` allows (brain.ingest.retireguard).
    """
    t0 = time.monotonic()
    cfg = grading or GradingConfig()
    gate = gate or SecretGate("refuse")
    summary = Summary(rejects=list(parsed.rejects))
    has_code = any(i.graded for i in parsed.items)
    existing = await load_existing(store, prefix, with_vectors=has_code and (cfg.dedup or cfg.tuning))
    seen: set[str] = set()
    pending: list[tuple[Item, str]] = []  # new or changed, screened
    lineage: dict[str, str] = {}  # item key → lineage id (for edges)
    dropped: set[str] = set()  # graded out: a stored previous version is retired
    for item in parsed.items:
        skey = source_key(prefix, item.key)
        if skey in seen:
            summary.rejects.append(Reject(item.key, "duplicate item identity in this source"))
            continue
        seen.add(skey)
        old = existing.get(skey)
        if old is not None and old.namespace != namespace:
            old = None  # the source moved namespace: the old entry is retired below, this one added
        item.attrs["ingest_hash"] = fp = item.fingerprint()  # before grading adds its score
        if old is not None and old.fingerprint == fp:
            summary.skipped += 1
            lineage[item.key] = old.lineage_id
            continue
        if item.graded:
            summary.grading.chunks += 1
            quality = score_chunk(item.raw or item.body, str(item.attrs.get("symbol", "")))
            item.attrs["quality"] = quality
            floor = cfg.min_score - (0.10 if cfg.tuning else 0.0)
            if quality < floor:
                summary.grading.tier1_dropped += 1
                dropped.add(skey)
                continue
        reason = screen(item, gate, actor.origin)
        if reason is not None:
            summary.rejects.append(Reject(item.key, reason))
            if old is not None:
                lineage[item.key] = old.lineage_id  # the stored version stays, not retired
            continue
        pending.append((item, skey))
    removed = [k for k in existing if k not in seen]
    if (stop := retire_check(removed, len(existing), guard or RetireGuard())) is not None:
        raise ImportStopped(stop)
    vectors = await embed_all(embedder, [_embed_text(i) for i, _ in pending], progress)
    keep = grade(pending, vectors, existing, cfg, summary.grading)
    summary.grading.kept = sum(1 for (item, _), k in zip(pending, keep, strict=True) if item.graded and k)

    tier = tier_for(actor)
    adds: list[tuple[MemoryIn, np.ndarray | None, Item]] = []
    for (item, skey), vec, k in zip(pending, vectors, keep, strict=True):
        if not k:
            dropped.add(skey)
            continue
        extra = {"source": prefix.rstrip(":")}
        old = existing.get(skey)
        try:
            mem = _memory_in(item, skey, namespace, extra)
        except ValueError as e:  # one item the store would refuse must not abort the whole import
            summary.rejects.append(Reject(shown_name(item.key), f"invalid: {str(e).splitlines()[0]}"))
            if old is not None:
                lineage[item.key] = old.lineage_id
            continue
        if old is not None and old.namespace == namespace:
            try:
                new = await store.supersede(
                    old.id, mem, expected_hash=old.content_hash, actor=actor, tier=tier, embedding=vec
                )
            except BrainError as e:
                summary.rejects.append(Reject(item.key, f"{e.code}: {e.message}"))
                lineage[item.key] = old.lineage_id
                continue
            summary.superseded += 1
            lineage[item.key] = new.lineage_id
            await pin(store, new.id, actor, standing=item.standing, required=item.required)
        else:
            if vf := _valid_from(item.attrs.get("valid_from")):
                mem = mem.model_copy(update={"valid_from": vf})
            adds.append((mem, vec, item))
    for i in range(0, len(adds), WRITE_BATCH):
        batch = adds[i : i + WRITE_BATCH]
        mems = await store.note_many([(m, v) for m, v, _ in batch], actor=actor, tier=tier)
        for stored, (_, _, item) in zip(mems, batch, strict=True):
            lineage[item.key] = stored.lineage_id
            await pin(store, stored.id, actor, standing=item.standing, required=item.required)
        summary.added += len(batch)
        if progress:
            progress("writing", min(i + WRITE_BATCH, len(adds)), len(adds))

    kept_keys = {source_key(prefix, k) for k in lineage}
    for skey, old in existing.items():
        if skey in kept_keys and old.namespace == namespace:
            continue
        reason = f"removed upstream from source {prefix.rstrip(':')}"
        if skey in dropped:
            reason = f"dropped by chunk quality grading in source {prefix.rstrip(':')}"
        try:
            await store.set_status(old.id, "retired", reason, actor=actor)
            summary.retired += 1
        except BrainError as e:
            log.warning("could not retire %s: %s", old.id, e.message)
    summary.edges = await write_edges(store, parsed.edges, lineage)
    summary.rejected = len(summary.rejects)
    summary.seconds = time.monotonic() - t0
    return summary


async def write_edges(store: Store, edges: Sequence[Edge], lineage: dict[str, str]) -> int:
    """Replace this source's derived edges with the current set (edges join lineages)."""
    rows = {}
    for e in edges:
        s, t = lineage.get(e.source), lineage.get(e.target)
        if s and t and s != t:
            rows[(s, t, e.relation)] = e.confidence
    sources = sorted(set(lineage.values()))
    await source_rows.replace_edges(store, sources, RELATIONS, rows)
    return len(rows)


def summary_line(summary: Summary, **extra: Any) -> str:
    return json.dumps({**summary.as_dict(), **extra}, default=str)
