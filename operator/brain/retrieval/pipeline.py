"""The retrieval pipeline: embed → parallel legs → fusion → episode context → boosts → leg leads → diversity → edges.

Every stage is timed; every lost part (embedder down or slow, a leg failing) is counted and the
rest answers alone. Namespace, status and time filters run inside the legs' SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from brain.core import tracing
from brain.core.contract import RetrievalFloor
from brain.core.models import Hit
from brain.embedder.client import EmbedderUnavailable
from brain.embedder.model import Embedder
from brain.retrieval import telemetry, timeframe
from brain.retrieval.calibration import Calibrator, calibrated_floor
from brain.retrieval.fusion import (
    above_floor,
    boost,
    diversify,
    episode_context,
    evidence,
    gate_open,
    keep_leg_leads,
    leg_weights,
    leg_zscores,
    rrf,
    selective,
    zscore_fusion,
)
from brain.retrieval.query import compound_names, identifier_tokens
from brain.retrieval.timeframe import TimeFrame
from brain.store.lexical import bm25
from brain.store.store import Scope, Store
from brain.store.timeline import first_mention

T = TypeVar("T")
# What the fetch returns: hits by id, and (from lineage, confidence, neighbour) for expansion.
Fetched = tuple[dict[str, Hit], list[tuple[str, float, Hit]]]

# Episode context is looked up for the head of the fused list. Since groups are fused per leg (an
# episode counts each leg's best z among its entries), deeper candidates add evidence to their
# episodes: LoCoMo recall@10 0.7495 at 50, 0.7502 at 80, 0.7512 at 100 and with every candidate (the
# fused list holds a median of 100). 100 bounds the lookups when `candidates` is raised; it cost
# +1.6 ms p50 over 50 at load 10 (docs/performance.md).
CONTEXT_DEPTH = 100
# The stages with a span of their own (brain.core.tracing), and what each says it is: the embedding
# and the legs. The other stages (names, context, fetch, expand) are timed in the stage histogram
# only; a span costs ~80 µs here, created and sent (docs/tracing.md, "Cost").
STAGE_ATTRS: dict[str, dict[str, str]] = {
    "embed": {tracing.OPERATION: "embeddings"},
    **{leg: {"brain.retrieval.leg": leg} for leg in ("vector", "lexical", "trigram")},
}


async def _given(vector: Any) -> Any:
    return vector


class RetrievalConfig(BaseModel):
    """Knobs of Brain.spec.gateway.retrieval. Seeds' defaults (80 candidates a leg, RRF k=60 available as
    `fusion: rrf`); z-score fusion is the default because it measured better (docs/benchmarks.md)."""

    top_k: int = Field(default=6, ge=1, le=50)
    legs: tuple[str, ...] = ("vector", "lexical", "trigram")
    candidates: int = Field(default=80, ge=5, le=500)
    fusion: Literal["zscore", "rrf"] = "zscore"
    rrf_k: int = Field(default=60, ge=1)
    weights: dict[str, float] = Field(default_factory=lambda: {"vector": 1.0, "lexical": 1.0, "trigram": 0.6})
    # Scale each leg's weight by how clearly its best candidate stands out for this query
    # (fusion.leg_weights). Off by default: on LoCoMo it cost 0.012 recall@10 and on the team set it
    # changed nothing (docs/memory-core.md), so the fixed `weights` stand until a set shows a gain.
    adaptive_weights: bool = False
    importance_weight: float = 0.2
    recency_weight: float = 0.05
    recency_half_life_days: float = 90.0
    max_similarity: float = 0.85
    episode_weight: float = Field(default=0.5, ge=0)
    adjacent_weight: float = Field(default=0.3, ge=0)
    adjacent_window: int = Field(default=2, ge=0, le=10)
    expand_edges: int = Field(default=2, ge=0)
    embed_timeout_s: float = 0.3
    # A memory inside the question's time window ("last week", "in May", "before Linear") gains this
    # share of its score; 0 ignores time in the question (timeframe.py, docs/memory-core.md).
    time_weight: float = Field(default=0.5, ge=0)
    # Inject only the best memory when it answers on one leg alone and no other scores above this
    # share of its score (plus those naming what it names and the question does not: a second hop);
    # 0 injects up to top_k. fusion.selective; 0.55 chosen on dev (docs/performance.md).
    standout_ratio: float = Field(default=0.55, ge=0, le=1)
    floor: RetrievalFloor = Field(default_factory=RetrievalFloor)
    # When the question has no embedding (the embedder is down or not loaded, its breaker open, or
    # the answer late), the keyword legs answer alone and the lexical floor is scaled by this. At the
    # full floor they turned away the words a user puts around a question: "Hey, quick question:
    # which port does the staging database use?" covers 0.33 of its IDF in a small brain (words no
    # memory holds count at the highest IDF). 0.4 is the lowest scale tried that kept the keyword
    # legs' abstention on dev: recall@5 team 0.474 → 0.789, generated 0.380 → 0.772, LoCoMo
    # recall@10 0.543 → 0.697; 0.3 let an unrelated question through (docs/performance.md, "Keyword
    # legs alone"). `--mode lexical` (the leg's own baseline, no vector leg at all) keeps the full
    # floor.
    keywords_alone: float = Field(default=0.4, gt=0, le=1)


@dataclass
class RetrievalResult:
    hits: list[Hit]
    pinned: list[Hit] = field(default_factory=list)
    expanded: list[Hit] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    query_vector: Any = None  # reused by callers (persona, skill slots) instead of embedding again
    below_floor: int = 0  # candidates the legs found that had too little evidence to be injected
    narrowed: int = 0  # hits left out because the best one stood out alone (fusion.selective)
    timeframe: TimeFrame | None = None  # the question's time window, when it named one
    # each candidate's absolute evidence per leg (fusion.evidence) and the floors it was held to
    evidence: dict[str, dict[str, float]] = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)
    unknown_names: list[str] = field(default_factory=list)  # what closed the gate (Store.unknown_names)

    @property
    def all_hits(self) -> list[Hit]:
        seen: set[str] = set()
        out = []
        for h in [*self.pinned, *self.hits, *self.expanded]:
            if h.id not in seen:
                seen.add(h.id)
                out.append(h)
        return out


class Retriever:
    def __init__(
        self, store: Store, embedder: Embedder | None, config: RetrievalConfig | None = None
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config or RetrievalConfig()
        self.calibrator = Calibrator(store, embedder) if embedder is not None else None

    async def warm(self, scope: Scope) -> None:
        """Take the scope's floor calibration now instead of alongside its first question."""
        if self.calibrator is not None and self.config.floor.calibration and "vector" in self.config.legs:
            await self.calibrator.warm(scope)

    def _floors(self, scope: Scope) -> dict[str, float]:
        floors = self.config.floor.legs()
        q = self.config.floor.calibration
        if self.calibrator is not None and q and "vector" in self.config.legs:
            best = self.calibrator.sample(scope)
            if best is not None:
                floors["vector"] = calibrated_floor(best, q, floors["vector"])
        return floors

    async def _timed(self, result: RetrievalResult, stage: str, aw: Awaitable[T]) -> T:
        t0 = time.perf_counter()
        attrs = STAGE_ATTRS.get(stage)
        # the embedding's span is current: the embedder's client span is its child
        opened = (
            (tracing.span if stage == "embed" else tracing.leaf)(f"retrieve.{stage}", attrs)
            if attrs is not None
            else contextlib.nullcontext(tracing.INVALID_SPAN)
        )
        with opened as span:
            try:
                out = await aw
                if isinstance(out, list):
                    tracing.set_attrs(span, {"brain.retrieval.candidates": len(out)})
                return out
            finally:
                dt = time.perf_counter() - t0
                result.timings[stage] = dt
                telemetry.retrieval_stage_seconds.labels(stage).observe(dt)

    async def _fetch(self, ids: list[str], scope: Scope) -> Fetched:
        """The memories `ids` and, when edges are expanded, their neighbours (the final top three are
        always among the fetched head, so their edges come in the same round trip)."""
        if self.config.expand_edges:
            return await self.store.hits_with_neighbours(ids, scope, self.config.expand_edges * 3)
        return await self.store.hits(ids), []

    async def _embed(self, query: str, result: RetrievalResult) -> Any:
        """The question's vector, or None with the cause in `result.degraded` and the counter."""
        if self.embedder is None:  # the gateway's in-process model still loading, or failed to load
            cause = "embedder_down"
        else:
            try:
                vecs = await self._timed(
                    result,
                    "embed",
                    asyncio.wait_for(self.embedder.embed([query]), self.config.embed_timeout_s),
                )
                return vecs[0]
            except TimeoutError:
                cause = "timeout"
            except EmbedderUnavailable as e:
                cause = e.cause
            except Exception:
                cause = "embedder_down"
        result.degraded.append(cause)
        telemetry.retrieval_degraded.labels(cause).inc()
        return None

    async def _resolve_time(self, query: str, scope: Scope, now: datetime) -> TimeFrame | None:
        """The question's time window; a named event ("before Linear") is placed at its first mention."""
        frame = timeframe.parse(query, now)
        if frame is None or frame.anchor is None:
            return frame
        if frame.relation == "after":
            # A first mention bounds "before it" (nothing earlier was about it) but not "after it": a
            # trip is talked about before it happens. On LoCoMo applying it changed nothing (0.7410).
            return None
        when = await first_mention(self.store, frame.anchor, scope)
        return None if when is None else dataclasses.replace(frame, end=when)

    async def retrieve(
        self,
        query: str,
        scope: Scope,
        *,
        limit: int | None = None,
        include_pinned: bool = False,
        use_time: bool = True,
        select: bool = True,
        embedded: tuple[Any] | None = None,
    ) -> RetrievalResult:
        """`embedded`: the query's embedding when the caller already asked for it, `(None,)` when that
        failed (the caller's result says why): it is not asked for again, so a question about the
        past waits for a hung embedder once, and its outage is counted once."""
        cfg = self.config
        limit = limit or cfg.top_k
        result = RetrievalResult(hits=[])
        t_start = time.perf_counter()
        n = max(cfg.candidates, limit)
        tokens = identifier_tokens(query)
        now = scope.as_of or datetime.now(UTC)
        time_task = (
            asyncio.create_task(self._resolve_time(query, scope, now))
            if use_time and cfg.time_weight
            else None
        )

        asked: Coroutine[Any, Any, Any]
        if embedded is not None:
            asked = _given(embedded[0])
        elif "vector" in cfg.legs:
            asked = self._embed(query, result)
        else:
            asked = _given(None)
        vec_task = asyncio.create_task(asked)
        use = set(cfg.legs)
        # Tasks, not bare coroutines: the lexical legs must run while the query is being embedded.
        legs: dict[str, Awaitable[list[tuple[str, float]]]] = {}
        idf: list[float] = []  # the lexical leg's second answer: the query's own IDF sum

        async def lexical() -> list[tuple[str, float]]:
            out = await bm25(self.store, query, scope, n)
            idf.append(out.query_idf)
            return out.hits

        if "lexical" in use:
            legs["lexical"] = asyncio.create_task(self._timed(result, "lexical", lexical()))
        if tokens and "trigram" in use:
            legs["trigram"] = asyncio.create_task(
                self._timed(result, "trigram", self.store.trigram_leg(tokens, scope, n))
            )
        pinned_task = asyncio.create_task(self.store.standing(scope)) if include_pinned else None
        compounds = compound_names(query) if cfg.floor.gate else []
        unknown_task = (
            asyncio.create_task(self._timed(result, "names", self.store.unknown_names(compounds)))
            if compounds
            else None
        )
        vec = result.query_vector = await vec_task
        if vec is not None:
            legs["vector"] = self._timed(result, "vector", self.store.vector_leg(vec, scope, n))
        names = list(legs)
        outcomes = await asyncio.gather(*legs.values(), return_exceptions=True)
        scored: dict[str, list[tuple[str, float]]] = {}
        for name, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                result.degraded.append(f"{name}_failed")
                telemetry.retrieval_degraded.labels("error").inc()
                continue
            scored[name] = outcome
        if not scored and outcomes and isinstance(outcomes[0], BaseException):
            if unknown_task is not None:
                unknown_task.cancel()
            raise outcomes[0]
        proof = evidence(scored, query_idf=idf[0] if idf else 0.0, identifiers=len(tokens))
        floors = result.floors = self._floors(scope)
        if "vector" in cfg.legs and not scored.get("vector"):
            # Keywords alone: no embedding, the vector leg failed (result.degraded says why), or it had
            # nothing to compare with (no vector in the scope yet, another model's index live); with
            # any vector in the scope it returns its nearest whatever their distance.
            floors["lexical"] *= cfg.keywords_alone
        result.evidence = proof
        passing = above_floor(proof, floors)
        if cfg.floor.gate and not gate_open(proof, floors):
            passing = set()  # nothing bears on it: no memory has an answer's evidence (fusion.gate_open)
        if unknown_task is not None:
            try:
                unknown = await unknown_task
            except Exception:  # a failed check admits what the legs found, as a failed leg does
                unknown = []
                result.degraded.append("names_failed")
            if unknown:
                # It asks about a thing the brain does not hold, of a kind it does ("who owns
                # korfay-worker?" beside nidlum-worker's note): nothing is about it, however close
                # its word pieces embed (Store.unknown_names).
                passing = set()
                result.unknown_names = unknown

        t0 = time.perf_counter()
        fuse_span = tracing.start("retrieve.fuse", {"brain.retrieval.fusion": cfg.fusion})
        # Each leg's z-scores, for episode context to fuse its groups per leg (rrf: none, best entry).
        per_leg: dict[str, tuple[dict[str, float], float]] | None = None
        weights = cfg.weights
        if cfg.fusion == "rrf":
            fused = rrf(
                {leg: [d for d, _ in s] for leg, s in scored.items()}, k=cfg.rrf_k, weights=cfg.weights
            )
        else:
            weights = leg_weights(scored, cfg.weights) if cfg.adaptive_weights else cfg.weights
            fused = zscore_fusion(scored, weights=weights)
            per_leg = leg_zscores(scored)
        result.timings["fuse"] = time.perf_counter() - t0
        tracing.end(
            fuse_span, {"brain.retrieval.candidates": len(fused), "brain.retrieval.passing": len(passing)}
        )
        # Boosts and diversity reorder only near the top, so only the head is fetched (bodies are large).
        head_size = max(limit * 3, limit + 20)
        early: asyncio.Task[Fetched] | None = None
        context: dict[str, tuple[str, int]] = {}  # id → (episode, seq), when episode context ran
        if fused and (cfg.episode_weight or cfg.adjacent_weight):
            # The head as it stands is fetched while the episode context is looked up: where the
            # context moves nothing new into the head (no episodes, or neighbours already in it) that
            # is the whole fetch, and the two round trips overlap instead of queueing.
            guess = [d for d, _, _ in fused if d in passing][:head_size]
            early = asyncio.create_task(self._timed(result, "fetch", self._fetch(guess, scope)))
            looked = [d for d, _, _ in fused[:CONTEXT_DEPTH]]
            try:
                context = await self._timed(
                    result, "context", self.store.episode_context(looked, scope, cfg.adjacent_window)
                )
            except Exception:  # context refines the ranking; without it the fused order stands
                result.degraded.append("context_failed")
                telemetry.retrieval_degraded.labels("error").inc()
            else:
                fused = episode_context(
                    fused,
                    context,
                    episode_weight=cfg.episode_weight,
                    adjacent_weight=cfg.adjacent_weight,
                    window=cfg.adjacent_window,
                    legs=per_leg,
                    weights=weights,
                    looked=set(looked),
                )
                episodes = {context[d][0] for d in passing if d in context}
                passing |= {d for d, (ep, _) in context.items() if ep in episodes}
        result.below_floor = sum(1 for d, _, _ in fused if d not in passing)
        fused = [f for f in fused if f[0] in passing]
        fused = fused[:head_size]
        head = [d for d, _, _ in fused]
        if early is None:
            hits_by_id, near = await self._timed(result, "fetch", self._fetch(head, scope))
        else:
            hits_by_id, near = await early
            missing = [d for d in head if d not in hits_by_id]
            if missing:  # the context brought new memories into the head: fetch just those
                more, more_near = await self._timed(result, "fetch_more", self._fetch(missing, scope))
                hits_by_id, near = {**hits_by_id, **more}, [*near, *more_near]
        fetched = {h.lineage_id for h in hits_by_id.values()}
        frame = None
        if time_task is not None:
            try:
                frame = result.timeframe = await time_task
            except Exception:  # time refines the ranking; without it relevance alone decides
                result.degraded.append("time_failed")
        history: list[Hit] = []
        if frame is not None and frame.relation == "before" and frame.end is not None and scope.as_of is None:
            # "what did we use before Linear": the versions valid just before it, superseded ones included
            past = await self.retrieve(
                query,
                dataclasses.replace(scope, as_of=frame.end - timedelta(microseconds=1)),
                limit=limit,
                use_time=False,
                select=False,  # candidates for this ranking, not what is injected: all of them
                embedded=(vec,),
            )
            history = past.hits
            result.evidence = {**past.evidence, **proof}
        candidates = []
        for doc, score, found in fused:
            hit = hits_by_id.get(doc)
            if hit is None:
                continue
            hit.score, hit.legs = score, found
            hit.score = boost(
                hit,
                now=now,
                importance_weight=cfg.importance_weight,
                recency_weight=cfg.recency_weight,
                half_life_days=cfg.recency_half_life_days,
            )
            candidates.append(hit)
        present = {h.id for h in candidates}
        candidates += [h for h in history if h.id not in present]
        in_window: set[str] = set()
        if frame is not None and candidates:
            # Additive, on the scale of the best candidate: fused scores are shifted so the lowest is 0,
            # and a multiplicative lift would leave an in-window memory at the bottom where it was.
            lift = cfg.time_weight * max(h.score for h in candidates)
            for hit in candidates:
                if frame.contains(hit.valid_from):
                    hit.score += lift
                    in_window.add(hit.id)
        candidates.sort(key=lambda h: (-h.score, h.id not in in_window))
        candidates = keep_leg_leads(candidates, scored, limit=limit)
        result.hits = diversify(candidates, limit=limit, max_similarity=cfg.max_similarity)
        if select and cfg.standout_ratio:
            # One memory clearly answers: inject it (with a second hop and the turns beside it), not
            # the rest that passed the floor. Required entries still come (policy, not relevance);
            # edges expand from what is kept (the team linked those to it).
            kept = selective(
                result.hits,
                result.evidence,
                floors,
                query=query,
                ratio=cfg.standout_ratio,
                context=context,
                window=cfg.adjacent_window,
            )
            result.narrowed = len(result.hits) - len(kept)
            result.hits = kept
        if pinned_task is not None:
            result.pinned = [h for h in await pinned_task if h.required]
        if cfg.expand_edges and result.hits:
            top = {h.lineage_id: h for h in result.hits[:3]}
            present = {h.id for h in result.hits}
            if fetched.issuperset(top):
                best = sorted((n for n in near if n[0] in top), key=lambda n: -n[1])
                neighbours = [(origin, hit) for origin, _, hit in best[: cfg.expand_edges * 3]]
            else:  # a top hit from "before <event>"'s history, fetched by the inner retrieval
                neighbours = await self._timed(
                    result, "expand", self.store.neighbours(list(top), scope, cfg.expand_edges * 3)
                )
            for origin, hit in neighbours:
                if hit.id not in present and len(result.expanded) < cfg.expand_edges:
                    hit.via = top[origin].id
                    hit.score = top[origin].score * 0.5
                    result.expanded.append(hit)
                    present.add(hit.id)
        total = time.perf_counter() - t_start
        result.timings["total"] = total
        telemetry.retrieval_stage_seconds.labels("total").observe(total)
        return result
