"""Sync one source's items with the store: idempotent on item identity, governed like every write.

Identity is `source_key = "<source>:<path>[#symbol]"`. An item whose fingerprint matches the
stored version is skipped without a write; a changed one supersedes (compare-and-set on the
stored hash, history kept); a stored item the source no longer yields is retired with a reason.
Every new or changed item passes the same secret gate and instruction lint as any other write;
a refused item is listed with the reason and its stored version (if any) is left as it was.

Ingest writes nothing itself: it holds a `Store`, which only reads, and computes a `WritePlan`
(brain.services.plan: adds, supersedes, retires, edges, rejects) that the door applies as the
source's own Actor. `first_pass` asks the door whether it would take each new or changed item
(`admit`, a check: the source's declared namespace, its kind, the authorship of what it replaces,
the screening of every field, `source_key` included) so a refused item is never embedded; vectors
are embedded here in batches, because the per-item path of `MemoryService.note` would make a
repository import embedding-bound one text at a time; `build_plan` is pure; `plan.apply` admits
each entry (reusing the door's own admission from the first pass, recognised by identity) and
writes (new entries in bulk, one transaction per batch). A source's entries are the active ones under its key prefix *that it wrote*
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

from brain.core.contract import EMBED_INPUT_MAX_CHARS, IngestCounts
from brain.core.errors import BrainError
from brain.core.models import FUTURE_SLACK, Actor, MemoryIn, check_valid_from
from brain.core.redact import SecretGate
from brain.embedder.model import Embedder
from brain.ingest import retireguard
from brain.ingest.grading import GradingConfig, score_chunk, tuned_threshold, unit
from brain.ingest.items import Item, Parsed, Reject, shown_name
from brain.ingest.retireguard import ImportStopped, RetireGuard
from brain.services.memory import Admitted, MemoryService, may_replace
from brain.services.plan import Add, Edge, Retire, Supersede, WritePlan, apply, why
from brain.store import source_rows
from brain.store.store import Store, embed_text

log = logging.getLogger("brain.ingest")
EMBED_BATCH = 64
MAX_REJECTS_LISTED = 100
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
        counts = IngestCounts(
            added=self.added,
            superseded=self.superseded,
            skipped=self.skipped,
            retired=self.retired,
            rejected=self.rejected,
        )
        return {
            **counts.model_dump(),
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


def _own_input(item: Item) -> str | None:
    """An item's own embedding text (a code card, a skill's name and description), stored with the
    entry (`Add.embed_input`) so that a model migration embeds the same text; None for the rest."""
    return item.embed_text[:EMBED_INPUT_MAX_CHARS] if item.embed_text else None


def _embed_text(item: Item) -> str:
    return _own_input(item) or embed_text(item.title, item.body)


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


@dataclass
class Pass:
    """The first pass over a source's items, before anything is embedded: what is unchanged, what
    the door would refuse, what grading tier 1 drops, and what is left to embed (new or changed)."""

    seen: set[str] = field(default_factory=set)
    pending: list[tuple[Item, str, Existing | None, Admitted]] = field(default_factory=list)
    known: dict[str, str] = field(default_factory=dict)  # item key → lineage id, left as stored
    dropped: set[str] = field(default_factory=set)  # graded out: a stored previous version is retired


def first_pass(
    door: MemoryService,
    actor: Actor,
    prefix: str,
    namespace: str,
    items: Sequence[Item],
    existing: dict[str, Existing],
    cfg: GradingConfig,
    summary: Summary,
) -> Pass:
    """Skip what is unchanged, grade tier 1, and ask the door (`admit`, a check that writes nothing)
    whether it would take each new or changed item, so a refused one is listed and never embedded.
    The plan carries what the door returned; `plan.apply` writes it as is only because that same
    door issued it (anything else it admits again)."""
    out = Pass()
    for item in items:
        skey = source_key(prefix, item.key)
        if skey in out.seen:
            summary.rejects.append(Reject(item.key, "duplicate item identity in this source"))
            continue
        out.seen.add(skey)
        old = existing.get(skey)
        if old is not None and old.namespace != namespace:
            old = None  # the source moved namespace: the old entry is retired below, this one added
        item.attrs["ingest_hash"] = fp = item.fingerprint()  # before grading adds its score
        if old is not None and old.fingerprint == fp:
            summary.skipped += 1
            out.known[item.key] = old.lineage_id
            continue
        if item.graded:
            summary.grading.chunks += 1
            quality = score_chunk(item.raw or item.body, str(item.attrs.get("symbol", "")))
            item.attrs["quality"] = quality
            floor = cfg.min_score - (0.10 if cfg.tuning else 0.0)
            if quality < floor:
                summary.grading.tier1_dropped += 1
                out.dropped.add(skey)
                continue
        try:  # the door: the source's namespace, the kind, what it replaces, then the one screening
            mem = _memory_in(item, skey, namespace, {"source": prefix.rstrip(":")})
            if old is None and (vf := _valid_from(item.attrs.get("valid_from"))):
                mem = mem.model_copy(update={"valid_from": vf})
            admitted = door.admit(mem, actor, replaces=old, standing=item.standing, required=item.required)
        except (BrainError, ValueError) as e:  # one refused item must not abort the whole import
            summary.rejects.append(Reject(shown_name(item.key), why(e)))
            if old is not None:
                out.known[item.key] = old.lineage_id  # the stored version stays, not retired
            continue
        out.pending.append((item, skey, old, admitted))
    return out


def build_plan(
    prefix: str,
    namespace: str,
    first: Pass,
    keep: Sequence[bool],
    vectors: np.ndarray,
    existing: dict[str, Existing],
    edges: Sequence[Edge],
) -> WritePlan:
    """The writes that make the store hold what the source says (pure: nothing is read or written).

    A stored entry is retired when the source no longer yields it, grading dropped it, or the source
    moved namespace; one left as stored (unchanged, or refused) or about to be superseded stays."""
    adds: list[Add] = []
    supersedes: list[Supersede] = []
    dropped = set(first.dropped)
    for (item, skey, old, a), vec, k in zip(first.pending, vectors, keep, strict=True):
        if not k:
            dropped.add(skey)
        elif old is None:
            adds.append(
                Add(
                    item.key,
                    a.item,
                    vec,
                    item.standing,
                    item.required,
                    admitted=a,
                    embed_input=_own_input(item),
                )
            )
        else:
            supersedes.append(
                Supersede(
                    item.key,
                    a.item,
                    vec,
                    replaces=old,
                    standing=item.standing,
                    required=item.required,
                    admitted=a,
                    embed_input=_own_input(item),
                )
            )
    staying = {source_key(prefix, k) for k in first.known} | {source_key(prefix, s.key) for s in supersedes}
    retires = []
    for skey, old in existing.items():
        if skey in staying and old.namespace == namespace:
            continue
        reason = f"removed upstream from source {prefix.rstrip(':')}"
        if skey in dropped:
            reason = f"dropped by chunk quality grading in source {prefix.rstrip(':')}"
        retires.append(Retire(old, reason))
    return WritePlan(
        adds=tuple(adds),
        supersedes=tuple(supersedes),
        retires=tuple(retires),
        edges=tuple(edges),
        known=dict(first.known),
    )


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
    first = first_pass(door, actor, prefix, namespace, parsed.items, existing, cfg, summary)
    removed = [k for k in existing if k not in first.seen]
    if (stop := retireguard.check(removed, len(existing), guard or RetireGuard())) is not None:
        raise ImportStopped(stop)
    vectors = await embed_all(embedder, [_embed_text(i) for i, _, _, _ in first.pending], progress)
    keep = grade([(i, k) for i, k, _, _ in first.pending], vectors, existing, cfg, summary.grading)
    summary.grading.kept = sum(
        1 for (item, _, _, _), k in zip(first.pending, keep, strict=True) if item.graded and k
    )
    plan = build_plan(prefix, namespace, first, keep, vectors, existing, parsed.edges)
    applied = await apply(door, plan, actor, progress=progress)
    summary.rejects.extend(Reject(shown_name(key), reason) for key, reason in applied.rejects)
    for memory_id, reason in applied.unretired:  # another writer's entry by now: logged, as before
        log.warning("could not retire %s: %s", memory_id, reason)
    summary.added, summary.superseded, summary.retired = applied.added, applied.superseded, applied.retired
    summary.edges = applied.edges
    summary.rejected = len(summary.rejects)
    summary.seconds = time.monotonic() - t0
    return summary
