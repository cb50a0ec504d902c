"""`brainctl eval`: load a dataset into a fresh database and measure the real retrieval pipeline.

Dataset format: `shared/data/README.md`. Namespace scope, supersede and `as_of` are honoured by the
same SQL the gateway uses, so the numbers describe the product, not a model of it.
"""

from __future__ import annotations

import hashlib
import logging
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from brain.core.errors import InvalidInput
from brain.core.models import KINDS, Actor, MemoryIn, check_namespace
from brain.core.redact import SecretGate
from brain.embedder.model import Embedder
from brain.local.settings import load_local_settings
from brain.local.splits import SPLITS, SplitRule, assign, rule_for
from brain.local.stats import percentile
from brain.retrieval.catalog import Catalog
from brain.retrieval.compose import ComposeConfig, compose
from brain.retrieval.pipeline import RetrievalConfig, Retriever
from brain.retrieval.render import estimate_tokens, render_block
from brain.services.memory import MemoryService
from brain.services.plan import Add, Supersede, WritePlan, apply
from brain.store.store import Scope, Store, embed_text

log = logging.getLogger("brain.local.eval")

MODES: dict[str, tuple[str, ...]] = {
    "hybrid": ("vector", "lexical", "trigram"),
    "lexical": ("lexical", "trigram"),
    "vector": ("vector",),
}
# Not a leg set: the hybrid retrieval *composed* the way the gateway injects it (retrieval/compose:
# top_k, pinned entries, persona and skill slots, the token budget). Its recall counts what an agent
# is actually shown, so recall@k beyond what fits in the budget stops growing. Not part of "all",
# whose figures are the published ones.
GATEWAY = "gateway"


class EvalMemory(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    namespace: str
    kind: str = "note"
    title: str = ""
    body: str = Field(min_length=1)
    valid_from: datetime | None = None
    tags: list[str] = Field(default_factory=list)
    supersedes: str | None = None
    episode: str | None = Field(default=None, min_length=1, max_length=200)
    seq: int | None = Field(default=None, ge=0)

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return check_namespace(v)

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in KINDS:
            raise ValueError(f"unknown kind {v!r}; expected one of {', '.join(KINDS)}")
        return v


class EvalQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    namespace: str
    query: str = Field(min_length=1)
    relevant: list[str] = Field(
        description="Memory ids that answer the query; empty means nothing should be injected for it."
    )
    category: str = "all"
    as_of: datetime | None = None
    # The split unit when the dataset is split by group (a generated set's template family).
    group: str | None = Field(default=None, min_length=1)


class Dataset(BaseModel):
    name: str = "dataset"
    source: str = ""
    memories: list[EvalMemory]
    queries: list[EvalQuery]
    split: SplitRule | None = None  # how dev and test are told apart (brain/local/splits.py)

    def splits(self) -> dict[str, str]:
        """Query id → "dev" or "test", fixed by the dataset's rule and seed."""
        rule = rule_for(self.name, self.split)
        return assign(((q.id, q.namespace, q.group) for q in self.queries), rule)


def _first_error(section: str, index: int, record: Any, e: ValidationError) -> InvalidInput:
    err = e.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    rid = record.get("id") if isinstance(record, dict) else None
    return InvalidInput(f"{section}[{index}] (id {rid!r}): field {field!r}: {err['msg']}", field=field)


def load_dataset(data: Any) -> Dataset:
    """Validate record by record so the error names the record and the field."""
    if not isinstance(data, dict):
        raise InvalidInput("dataset must be a JSON object with 'memories' and 'queries' arrays")
    for section in ("memories", "queries"):
        if not isinstance(data.get(section), list):
            raise InvalidInput(f"dataset field {section!r} must be an array", field=section)
    memories, queries = [], []
    for i, rec in enumerate(data["memories"]):
        try:
            memories.append(EvalMemory.model_validate(rec))
        except ValidationError as e:
            raise _first_error("memories", i, rec, e) from None
    for i, rec in enumerate(data["queries"]):
        try:
            queries.append(EvalQuery.model_validate(rec))
        except ValidationError as e:
            raise _first_error("queries", i, rec, e) from None
    ids: set[str] = set()
    for i, m in enumerate(memories):
        if m.id in ids:
            raise InvalidInput(f"memories[{i}] (id {m.id!r}): duplicate id", field="id")
        ids.add(m.id)
    for i, m in enumerate(memories):
        if m.supersedes and m.supersedes not in ids:
            raise InvalidInput(
                f"memories[{i}] (id {m.id!r}): field 'supersedes' names unknown memory {m.supersedes!r}",
                field="supersedes",
            )
    for i, q in enumerate(queries):
        missing = [r for r in q.relevant if r not in ids]
        if missing:
            raise InvalidInput(
                f"queries[{i}] (id {q.id!r}): field 'relevant' names unknown memories {missing[:3]}",
                field="relevant",
            )
    try:
        split = SplitRule.model_validate(data["split"]) if data.get("split") is not None else None
    except ValidationError as e:
        err = e.errors()[0]
        raise InvalidInput(f"dataset field 'split': {err['msg']}", field="split") from None
    ds = Dataset(
        name=data.get("name", "dataset"),
        source=data.get("source", ""),
        memories=memories,
        queries=queries,
        split=split,
    )
    try:
        ds.splits()
    except ValueError as e:
        raise InvalidInput(str(e), field="group") from None
    return ds


def _cache_path(embedder: Embedder, texts: list[str], cache: Path) -> Path:
    digest = hashlib.sha256("\x1e".join([embedder.model, *texts]).encode()).hexdigest()[:20]
    return cache / "eval-embeddings" / f"{digest}.npy"


async def embed_corpus(
    embedder: Embedder, texts: list[str], *, batch: int = 256, progress: Any = None, cache: Path | None = None
) -> np.ndarray:
    """Embeddings of a dataset's memories, cached on disk by model and text: reruns skip the slow part.
    They are kept under `cache` ($BRAIN_CACHE; None: brain.local.settings reads it)."""
    path = _cache_path(embedder, texts, cache if cache is not None else load_local_settings().cache)
    if path.exists():
        cached = np.load(path)
        if cached.shape == (len(texts), embedder.dim):
            return cached
    parts = []
    for i in range(0, len(texts), batch):
        parts.append(await embedder.embed(texts[i : i + batch]))
        if progress:
            progress(min(i + batch, len(texts)), len(texts))
    vectors = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


async def load_into(
    store: Store,
    embedder: Embedder,
    ds: Dataset,
    *,
    episodes: Literal["field", "valid_from"] = "field",
    progress: Any = None,
) -> dict[str, str]:
    """Insert every memory (supersedes applied in time order); returns dataset id → store id.

    Episodes come from the records' `episode` field. With `episodes="valid_from"` a record without
    one joins the episode of its namespace and `valid_from`: in a dialogue dataset such as LoCoMo,
    the turns of one session. Within an episode, records keep their order in the file.
    """
    actor = Actor(name="eval", role="owner", origin="import")
    position = {m.id: i for i, m in enumerate(ds.memories)}
    plain = [m for m in ds.memories if not m.supersedes]
    chained = sorted((m for m in ds.memories if m.supersedes), key=lambda m: m.valid_from or datetime.min)

    def episode_of(m: EvalMemory) -> str | None:
        if m.episode or episodes == "field" or m.valid_from is None:
            return m.episode
        return f"{m.namespace}@{m.valid_from.isoformat()}"

    def to_in(m: EvalMemory) -> MemoryIn:
        return MemoryIn(
            body=m.body,
            title=m.title,
            kind=m.kind,
            namespace=m.namespace,
            tags=m.tags,
            valid_from=m.valid_from,
            episode=episode_of(m),
            seq=m.seq if m.seq is not None else position[m.id],
        )

    ordered = plain + chained
    vectors = await embed_corpus(embedder, [embed_text(m.title, m.body) for m in ordered], progress=progress)
    # eval writes nothing itself: it plans the corpus and the door writes it, as it writes an import
    # (the same checks and screening; episodic, as the corpus was always stored, so the figures hold)
    plan = WritePlan(
        adds=tuple(Add(m.id, to_in(m), vectors[i]) for i, m in enumerate(plain)),
        supersedes=tuple(
            Supersede(m.id, to_in(m), vectors[len(plain) + j], after=m.supersedes or "")
            for j, m in enumerate(chained)
        ),
        episodic=True,
    )
    applied = await apply(MemoryService(store, embedder), plan, actor)
    # A record the door refuses (LoCoMo holds three: an instruction to an agent, two credentials)
    # is one no brain would hold: it is left out and named, and a query it answers misses it, so
    # the figures are those of what a brain admits. The report lists them (`refused`).
    for key, reason in applied.rejects:
        log.warning("eval: the door refused %s (%s); it is not stored", key, reason)
    mapping: dict[str, str] = applied.ids
    # Planner statistics, as autovacuum would gather them on a live brain; fresh tables plan badly.
    await store.analyze()
    return mapping


async def evaluate(
    store: Store,
    embedder: Embedder,
    ds: Dataset,
    mapping: dict[str, str],
    *,
    modes: Sequence[str],
    ks: Sequence[int],
    config: RetrievalConfig | None = None,
    composing: ComposeConfig | None = None,
) -> dict[str, Any]:
    reverse = {v: k for k, v in mapping.items()}
    base = config or RetrievalConfig(embed_timeout_s=30.0)  # quality, not latency (see cmd_eval)
    depth = max(ks)
    report: dict[str, Any] = {
        "modes": {},
        "memories": len(ds.memories),
        "queries": len(ds.queries),
        # what the door refused to store (load_into), by dataset id
        "refused": sorted(m.id for m in ds.memories if m.id not in mapping),
    }
    catalog: Catalog | None = None
    if GATEWAY in modes:
        catalog = Catalog()
        await catalog.refresh(store)
    composing = composing or ComposeConfig(top_k=base.top_k)  # the gateway's defaults
    gate = SecretGate("redact")
    split_of = ds.splits()
    report["split_queries"] = {s: sum(1 for v in split_of.values() if v == s) for s in SPLITS}
    for mode in modes:
        legs = MODES["hybrid"] if mode == GATEWAY else MODES[mode]
        retriever = Retriever(store, embedder, base.model_copy(update={"legs": legs}))
        per_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
        latencies: list[float] = []
        abstained: list[bool] = []
        abstained_split: list[str] = []
        per_cat_split: dict[str, list[str]] = defaultdict(list)
        tokens: list[int] = []
        injected: list[int] = []  # memories injected per question (what the gateway's top_k would show)
        injected_split: list[str] = []
        degraded = 0
        for scope in dict.fromkeys(Scope.of([q.namespace]) for q in ds.queries):
            await retriever.warm(scope)  # the floor's calibration, as a running gateway has it
        for q in ds.queries:
            t0 = time.perf_counter()
            scope = Scope.of([q.namespace], as_of=q.as_of)
            if catalog is not None and mode == GATEWAY:
                injection = await compose(retriever, catalog, scope, q.query, composing, gate)
                latencies.append((time.perf_counter() - t0) * 1000)
                degraded += bool(injection.degraded)
                tokens.append(injection.tokens)
                ranked_ids = injection.ids
                injected.append(len(ranked_ids))
            else:
                res = await retriever.retrieve(q.query, scope, limit=depth)
                ranked = res.hits + res.expanded
                block = render_block(ranked[: base.top_k])
                latencies.append((time.perf_counter() - t0) * 1000)
                degraded += bool(res.degraded)
                tokens.append(estimate_tokens(block) if block else 0)
                ranked_ids = [h.id for h in ranked]
                injected.append(len(ranked[: base.top_k]))
            injected_split.append(split_of[q.id])
            if not q.relevant:  # nothing bears on it: the right answer is to inject nothing
                abstained.append(not ranked_ids)
                abstained_split.append(split_of[q.id])
                continue
            got = [reverse.get(i, i) for i in ranked_ids]
            relevant = set(q.relevant)
            row = {f"recall@{k}": len(relevant & set(got[:k])) / len(relevant) for k in ks}
            first = next((i for i, g in enumerate(got, start=1) if g in relevant), None)
            row["mrr"] = 1.0 / first if first else 0.0
            per_cat[q.category].append(row)
            per_cat_split[q.category].append(split_of[q.id])
        report["modes"][mode] = {
            **summarize(per_cat, abstained, ks),
            "injected_tokens_mean": round(statistics.fmean(tokens), 1) if tokens else 0.0,
            "injected_mean": round(statistics.fmean(injected), 2) if injected else 0.0,
            # Queries answered with a leg missing (embedder slow or down, a leg failing): not the ranking.
            "degraded": degraded,
            "latency_ms": {
                q: round(percentile(latencies, v), 2) if latencies else 0.0
                for q, v in (("p50", 0.5), ("p95", 0.95))
            },
            # The same figures on each split: constants are chosen on dev, test is only reported.
            "splits": {
                s: summarize(
                    {
                        c: [r for r, qs in zip(rs, per_cat_split[c], strict=True) if qs == s]
                        for c, rs in per_cat.items()
                    },
                    [a for a, qs in zip(abstained, abstained_split, strict=True) if qs == s],
                    ks,
                )
                | {"injected_mean": _mean_of(injected, injected_split, s)}
                for s in SPLITS
            },
        }
    return report


def _mean_of(values: Sequence[int], splits: Sequence[str], split: str) -> float:
    picked = [v for v, s in zip(values, splits, strict=True) if s == split]
    return round(statistics.fmean(picked), 2) if picked else 0.0


def summarize(
    per_cat: dict[str, list[dict[str, float]]], abstained: list[bool], ks: Sequence[int]
) -> dict[str, Any]:
    """Recall@k and MRR over all answerable queries and per category, and the abstain share of the
    queries with nothing relevant (None: the set has none). Pure: the same rows give the same figures."""
    keys = [f"recall@{k}" for k in ks] + ["mrr"]
    rows = [r for rs in per_cat.values() for r in rs]

    def mean(rs: list[dict[str, float]], key: str) -> float:
        return round(statistics.fmean(r[key] for r in rs), 4) if rs else 0.0

    return {
        **{key: mean(rows, key) for key in keys},
        "queries": len(rows),
        "abstain": round(statistics.fmean(abstained), 4) if abstained else None,
        "abstain_queries": len(abstained),
        "by_category": {
            cat: {**{key: mean(rs, key) for key in keys}, "queries": len(rs)}
            for cat, rs in sorted(per_cat.items())
            if rs
        },
    }


def format_report(report: dict[str, Any], ks: Sequence[int]) -> str:
    """The table `brainctl eval` prints: per mode, all queries, then dev and test (each with its
    categories), so a figure is never read without the split it was measured on."""
    keys = [f"recall@{k}" for k in ks] + ["mrr"]
    head = (
        f"{'mode':<10} {'split':<5} {'category':<14} "
        + " ".join(f"{k:>10}" for k in keys)
        + f" {'abstain':>8} {'tokens':>7} {'p50 ms':>8} {'p95 ms':>8}"
    )
    sizes = report.get("split_queries", {})
    lines = [
        f"{report['memories']} memories"
        + (f" ({len(report['refused'])} refused by the door)" if report.get("refused") else "")
        + f", {report['queries']} queries"
        + "".join(f", {s} {n}" for s, n in sizes.items()),
        head,
        "-" * len(head),
    ]

    def abstain(m: dict[str, Any]) -> str:
        return "-" if m["abstain"] is None else f"{m['abstain']:.4f}"

    for mode, m in report["modes"].items():
        lat = m["latency_ms"]
        lines.append(
            f"{mode:<10} {'all':<5} {'all':<14} "
            + " ".join(f"{m[k]:>10.4f}" for k in keys)
            + f" {abstain(m):>8} {m['injected_tokens_mean']:>7} {lat['p50']:>8} {lat['p95']:>8}"
        )
        for split, s in m.get("splits", {}).items():
            lines.append(
                f"{'':<10} {split:<5} {'all':<14} "
                + " ".join(f"{s[k]:>10.4f}" for k in keys)
                + f" {abstain(s):>8}"
            )
            for cat, c in s["by_category"].items():
                lines.append(
                    f"{'':<10} {split:<5} {cat[:14]:<14} " + " ".join(f"{c[k]:>10.4f}" for k in keys)
                )
    return "\n".join(lines)
