"""Sync one source's items with the store: idempotent on item identity, governed like every write.

Identity is `source_key = "<source>:<path>[#symbol]"`. An item whose fingerprint matches the
stored version is skipped without a write; a changed one supersedes (compare-and-set on the
stored hash, history kept); a stored item the source no longer yields is retired with a reason.
Every new or changed item passes the same secret gate and instruction lint as any other write;
a refused item is listed with the reason and its stored version (if any) is left as it was.

Every write goes through the one door (services.memory) as the source's own Actor: `admit`
authorises each new or changed item once (the source's declared namespace, its kind, the authorship of
what it replaces) and screens it, before it is embedded; `note_admitted` then writes new entries in
bulk (`note_many`, one transaction per batch) with vectors embedded here in batches, because the
per-item path of `MemoryService.note` would make a repository import embedding-bound one text at a
time. A source's entries are the active ones under its key prefix *that it wrote*
(`may_replace`): one an owner wrote by hand, or an agent planted, under a source's key is not
the source's, and is never superseded, retired or taken for an unchanged item; the source writes its
own beside it.
"""

from __future__ import annotations

import hashlib
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
from brain.services.memory import Admitted, MemoryService, may_replace
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
    foreign: int = 0  # others' entries under this source's keys, left as they are

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
            "foreign": self.foreign,
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
    author: str = ""
    origin: str = "import"


def source_key(prefix: str, key: str) -> str:
    """`<source>:<key>`, hashed down when a deep path would pass the column's 512 characters."""
    full = prefix + key
    if len(full) <= 512:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:16]
    return full[:480] + "…" + digest


def _why(e: BrainError | ValueError) -> str:
    """A refused item's reason for the summary: the door's code and message, or pydantic's first line."""
    if isinstance(e, BrainError):
        return f"{e.code}: {e.message}"
    return f"invalid: {str(e).splitlines()[0]}"


def as_vector(value: Any) -> np.ndarray | None:
    """pgvector hands back a Vector (or a numpy array, depending on the codec)."""
    if value is None:
        return None
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


async def load_existing(
    store: Store, prefix: str, *, with_vectors: bool, actor: Actor | None = None
) -> tuple[dict[str, Existing], int]:
    """The source's own active entries by source key, and how many others' carry one of its keys
    (left alone: the door lets an import replace only what it wrote)."""
    rows = await source_rows.active_under(store, prefix, with_vectors=with_vectors)
    out = {}
    foreign = 0
    for r in rows:
        if actor is not None and not may_replace(actor, r["author"], r["origin"]):
            foreign += 1
            continue
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
            r["author"],
            r["origin"],
        )
    return out, foreign


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
    service: MemoryService | None = None,
) -> Summary:
    """Make the store hold exactly what `parsed` says for this source (see the module docstring).

    Raises ImportStopped, before any write, when the run would retire more of the source than
    `guard` allows (brain.ingest.retireguard).
    """
    t0 = time.monotonic()
    cfg = grading or GradingConfig()
    gate = gate or SecretGate("refuse")
    door = service or MemoryService(store, embedder, gate=gate)
    summary = Summary(rejects=list(parsed.rejects))
    has_code = any(i.graded for i in parsed.items)
    existing, summary.foreign = await load_existing(
        store, prefix, with_vectors=has_code and (cfg.dedup or cfg.tuning), actor=actor
    )
    if summary.foreign:
        log.warning(
            "%d entries under %s's keys were written by others; left as they are", summary.foreign, prefix
        )
    seen: set[str] = set()
    pending: list[tuple[Item, str, Admitted]] = []  # new or changed, admitted by the door
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
        try:  # the door: the source's namespace, the kind, what it replaces, then the one screening
            mem = _memory_in(item, skey, namespace, {"source": prefix.rstrip(":")})
            if old is None and (vf := _valid_from(item.attrs.get("valid_from"))):
                mem = mem.model_copy(update={"valid_from": vf})
            admitted = door.admit(mem, actor, replaces=old, standing=item.standing, required=item.required)
        except (BrainError, ValueError) as e:  # one refused item must not abort the whole import
            summary.rejects.append(Reject(shown_name(item.key), _why(e)))
            if old is not None:
                lineage[item.key] = old.lineage_id  # the stored version stays, not retired
            continue
        pending.append((item, skey, admitted))
    removed = [k for k in existing if k not in seen]
    if (stop := retire_check(removed, len(existing), guard or RetireGuard())) is not None:
        raise ImportStopped(stop)
    vectors = await embed_all(embedder, [_embed_text(i) for i, _, _ in pending], progress)
    keep = grade([(i, k) for i, k, _ in pending], vectors, existing, cfg, summary.grading)
    summary.grading.kept = sum(1 for (item, _, _), k in zip(pending, keep, strict=True) if item.graded and k)

    adds: list[tuple[Admitted, np.ndarray | None, Item]] = []
    for (item, skey, admitted), vec, k in zip(pending, vectors, keep, strict=True):
        if not k:
            dropped.add(skey)
            continue
        old = existing.get(skey)
        if admitted.replaces is None:
            adds.append((admitted, vec, item))
            continue
        assert old is not None
        try:
            new = await door.supersede_admitted(admitted, vec)
        except BrainError as e:
            summary.rejects.append(Reject(shown_name(item.key), _why(e)))
            lineage[item.key] = old.lineage_id
            continue
        summary.superseded += 1
        lineage[item.key] = new.lineage_id
    for i in range(0, len(adds), WRITE_BATCH):
        batch = adds[i : i + WRITE_BATCH]
        mems = await door.note_admitted([(a, v) for a, v, _ in batch])
        for stored, (_, _, item) in zip(mems, batch, strict=True):
            lineage[item.key] = stored.lineage_id
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
            await door.retire_own(old, reason, actor)
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
