"""The gateway's live parts: store, embedder, service, keys, catalog, capture queue, caches.

LiteLLM imports our hooks and auth by dotted path, so they reach this state through one
process-wide `Runtime` (`get_runtime()`). Nothing here may stop the proxy from serving: the
database is opened (and migrated) in the background with retries, the offline model loads in a
thread, and until they are there the hooks simply add no memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from brain.core.errors import BrainError
from brain.core.models import Actor, Hit, MemoryIn
from brain.core.redact import SecretGate
from brain.embedder.client import EmbeddingClient
from brain.embedder.model import Embedder, QueryCache
from brain.gateway import metrics as gm
from brain.gateway.capture import CaptureQueue, analyse
from brain.gateway.settings import GatewaySettings
from brain.retrieval import telemetry as metrics
from brain.retrieval.catalog import Catalog, keywords
from brain.retrieval.pipeline import RetrievalConfig, Retriever
from brain.retrieval.render import (
    PREAMBLE,
    estimate_tokens,
    render_block,
    render_hit,
    render_persona,
    within_budget,
)
from brain.services.keys import KeyStore, KeyVerifier
from brain.services.memory import MemoryService, gate_fields
from brain.store import outage
from brain.store.store import Scope, Store

log = logging.getLogger("brain.gateway")

PERSONA_TOKENS = 600
DB_ERRORS = outage.UNAVAILABLE
# A database that hangs must not hold the gateway: the server stops a slow statement at
# DB_STATEMENT_TIMEOUT_MS, the client abandons a connection whose server has not answered within
# DB_COMMAND_TIMEOUT_S (a little later, so a merely slow statement is the server's to stop), and a
# new connection that gets no answer within DB_CONNECT_TIMEOUT_S is given up. The request path is
# bounded tighter still: retrieval by its own budget (retrieval.timeoutMs), key checks by
# keys.KeyVerifier. See docs/operations.md, "When the database hangs".
DB_STATEMENT_TIMEOUT_MS = 5000
DB_COMMAND_TIMEOUT_S = 6.0
DB_CONNECT_TIMEOUT_S = 3.0


@dataclass
class CallContext:
    """What the pre-call hook learned about a request, for the post-call hooks of the same call."""

    actor: Actor
    api: str
    query: str
    namespaces: tuple[str, ...]
    write_namespace: str
    capture: bool
    injected: list[str] = field(default_factory=list)
    memory: str = "skipped"
    route: dict[str, str] = field(default_factory=dict)
    episode: str | None = None  # what this exchange's captures are recorded under, with its siblings
    created: float = field(default_factory=time.monotonic)


class DatabaseWatch:
    """Whether the database answers at all, so a hang costs the retrieval budget once, not per request.

    A retrieval that runs out of budget may have been slow for any reason (the embedder, load), so it
    only raises a suspicion: a probe (`SELECT 1` within `probe_timeout`) then decides. While probes
    go unanswered the database counts as hung and retrieval is skipped at once (`db_down`); the
    first answered probe ends that. A refused connection needs none of this: it fails fast anyway.
    """

    def __init__(self, probe_timeout: float = 1.0, interval: float = 0.5) -> None:
        self.probe_timeout = probe_timeout
        self.interval = interval
        self.hung = False
        self._probe: asyncio.Task[None] | None = None

    def suspect(self, store: Store | None) -> None:
        if store is not None and (self._probe is None or self._probe.done()):
            self._probe = asyncio.create_task(self._watch(store))

    async def _watch(self, store: Store) -> None:
        while True:
            try:
                await asyncio.wait_for(store.ping(), self.probe_timeout)
            except Exception:
                if not self.hung:
                    log.warning("the database does not answer; retrieval is skipped until it does")
                self.hung = True
                await asyncio.sleep(self.interval)
                continue
            if self.hung:
                log.warning("the database answers again; retrieval resumes")
            self.hung = False
            return

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.cancel()


@dataclass
class Injection:
    text: str
    ids: list[str]
    tokens: int
    degraded: list[str]


class Runtime:
    def __init__(self, settings: GatewaySettings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store: Store | None = None
        self.service: MemoryService | None = None
        self.keys = KeyVerifier(None, master_key=settings.master_key)
        self.embedder: Embedder | None = embedder
        self._embedding_client: EmbeddingClient | None = None
        self.catalog = Catalog()
        self.capture = CaptureQueue(settings.capture.queue_size, settings.capture.workers)
        self.index_stats: dict[str, Any] | None = None
        self.ready = False
        self.calls: OrderedDict[str, CallContext] = OrderedDict()
        self._cache: OrderedDict[tuple[str, tuple[str, ...], str], tuple[float, Injection]] = OrderedDict()
        self._tasks: list[asyncio.Task[None]] = []
        self._redact = SecretGate("redact")
        self.db_watch = DatabaseWatch()
        r = settings.retrieval
        self.retrieval_config = RetrievalConfig(
            top_k=r.top_k, embed_timeout_s=max(0.05, r.timeout_ms / 1000 * 0.6), floor=r.floor
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.capture.start()
        if self.embedder is None and self.settings.embedder_url:
            self._embedding_client = EmbeddingClient(
                self.settings.embedder_url,
                model=self.settings.embedding.model,
                dim=self.settings.embedding.dim,
                # during a model change's rollout the Service may answer from the other model's pod:
                # such a query vector is refused (lexical answers), never ranked against ours
                require_model=True,
            )
            self.embedder = QueryCache(self._embedding_client)
        elif self.embedder is None:
            self._tasks.append(asyncio.create_task(self._load_local_model()))
        gm.register_index_collector(lambda: self.index_stats)
        self._tasks.append(asyncio.create_task(self._connect()))
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        self.db_watch.stop()
        await self.capture.stop()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.store is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.store.close(), 5)
        if self._embedding_client is not None:
            await self._embedding_client.aclose()

    async def _load_local_model(self) -> None:
        from brain.embedder.model import LocalEmbedder

        try:
            local = await asyncio.to_thread(LocalEmbedder)
        except Exception:
            log.exception("could not load the offline embedding model; retrieval answers from keywords only")
            return
        self.embedder = QueryCache(local)
        if self.service is not None:
            self._build_service(self.service.store)

    def _build_service(self, store: Store) -> None:
        retriever = Retriever(store, self.embedder, self.retrieval_config)
        self.service = MemoryService(store, self.embedder, retriever=retriever)

    async def _connect(self) -> None:
        """Open the store (migrating it) with retries; then keep the catalog and index numbers fresh."""
        dsn = self.settings.database_url
        if not dsn:
            log.warning("BRAIN_DATABASE_URL is not set: the gateway proxies without memory")
            return
        delay = 1.0
        while self.store is None:
            try:
                self.store = await Store.open(
                    dsn,
                    dim=self.settings.embedding.dim,
                    embedding_model=self.settings.embedding.model,
                    max_size=20,
                    timeout=DB_CONNECT_TIMEOUT_S,
                    statement_timeout_ms=DB_STATEMENT_TIMEOUT_MS,
                    command_timeout=DB_COMMAND_TIMEOUT_S,
                )
            except BrainError:
                raise
            except Exception as e:
                log.warning("database not reachable yet (%s); retrying in %.0fs", type(e).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        self._build_service(self.store)
        self.keys.keys = KeyStore(self.store)
        while True:
            for what, coro in (
                ("catalog", self.catalog.refresh(self.store)),
                ("index", self._refresh_index()),
            ):
                try:
                    await asyncio.wait_for(coro, 10)
                except Exception as e:
                    log.debug("%s refresh failed: %s", what, e)
            await asyncio.sleep(30)

    async def _refresh_index(self) -> None:
        assert self.store is not None
        self.index_stats = await self.store.index_stats()

    # ------------------------------------------------------------------ retrieval

    def scope_for(self, actor: Actor, requested: list[str] | None) -> Scope:
        """The asked namespaces the key may see (others are ignored), else the key's own; `shared` always."""
        wanted = [ns for ns in requested or [] if actor.can_see(ns)]
        if not wanted:
            wanted = list(actor.namespaces or [])
        return Scope.of(wanted)

    async def memory_block(self, actor: Actor, scope: Scope, query: str) -> Injection:
        """Persona prefix, memories (required first), skills: one system text within the token budget."""
        key = (actor.name, scope.namespaces, query)
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self.settings.retrieval.cache_ttl_s:
            return cached[1]
        service = self.service
        if service is None:
            raise ConnectionError("database not connected")
        if self.db_watch.hung:
            raise ConnectionError("the database does not answer; retrieval skipped until it does")
        try:
            injection = await self._compose(service, scope, query)
        except (asyncio.CancelledError, TimeoutError):  # the budget ran out: is the database there at all?
            self.db_watch.suspect(self.store)
            raise
        self._cache[key] = (now, injection)
        self._cache.move_to_end(key)
        while len(self._cache) > 2048:
            self._cache.popitem(last=False)
        return injection

    async def _compose(self, service: MemoryService, scope: Scope, query: str) -> Injection:
        r = self.settings.retrieval
        degraded: list[str] = []
        safe = self._redact.check("query", query)
        if safe != query:
            degraded.append("secret_in_query")
            metrics.retrieval_degraded.labels("secret_in_query").inc()
        # One embedding, taken inside retrieve in parallel with the lexical legs, then reused below.
        result = await service.retriever.retrieve(safe, scope, limit=r.top_k, include_pinned=True)
        degraded += result.degraded
        vec = result.query_vector
        t0 = time.perf_counter()
        words = keywords(query)
        persona = self.catalog.persona(words, vec, scope) if r.persona else None
        skills = self.catalog.skills_for(vec, words, scope, r.skill_slots)
        prefix = ""
        if persona is not None:
            body = persona.body
            if estimate_tokens(body) > PERSONA_TOKENS:
                body = body[: PERSONA_TOKENS * 4].rsplit("\n", 1)[0] + "\n…"
            prefix = render_persona(persona, body)
        skill_budget = r.token_budget // 3
        chosen_skills = within_budget(skills, skill_budget) if skills else []
        skill_cost = sum(estimate_tokens(render_hit(h)) for h in chosen_skills)
        memories = within_budget(result.all_hits, r.token_budget - estimate_tokens(prefix) - skill_cost)
        hits: list[Hit] = [*memories, *chosen_skills]
        text = render_block(hits, prefix=prefix)
        metrics.retrieval_stage_seconds.labels("render").observe(time.perf_counter() - t0)
        tokens = estimate_tokens(text) if text else 0
        ids = [h.id for h in hits] + ([persona.id] if persona else [])
        return Injection(text=text, ids=ids, tokens=tokens, degraded=degraded)

    def invalidate(self, *, catalog: bool = False) -> None:
        """Forget cached injections after a write, so the next request sees it (and reload personas/skills)."""
        self._cache.clear()
        if catalog and self.store is not None:
            task = asyncio.create_task(self.catalog.refresh(self.store))
            self._tasks.append(task)
            self._tasks = [t for t in self._tasks if not t.done() or t is task]

    # ------------------------------------------------------------------ calls

    def remember(self, call_id: str, ctx: CallContext) -> None:
        self.calls[call_id] = ctx
        while len(self.calls) > 10_000:
            self.calls.popitem(last=False)

    def recall(self, call_id: str | None, *, pop: bool = True) -> CallContext | None:
        if not call_id:
            return None
        return self.calls.pop(call_id, None) if pop else self.calls.get(call_id)

    def after_injection(self, ctx: CallContext, injection: Injection | None) -> None:
        """Access tracking and no-hit events, through the queue (never on the request path)."""
        store = self.store
        if store is None:
            return
        if injection is not None and injection.ids:
            ids = list(injection.ids)
            self.capture.submit(lambda: store.touch(ids), "touch")
        elif injection is not None:
            query = self._redact.check("query", ctx.query)[:500]
            self.capture.submit(
                lambda: store.record_event(
                    "query_no_hit",
                    key_name=ctx.actor.name,
                    namespace=ctx.write_namespace,
                    payload={"query": query, "api": ctx.api, "namespaces": list(ctx.namespaces)},
                ),
                "event",
            )

    def capture_exchange(self, ctx: CallContext, answer: str, reasoning: str, model: str | None) -> None:
        if not self.settings.capture.enabled:
            return
        if not ctx.capture:
            gm.captures_filtered.labels("opted_out").inc()
            return
        if ctx.actor.role == "read":
            gm.captures_filtered.labels("read_only_key").inc()
            return
        self.capture.submit(lambda: self._capture(ctx, answer, reasoning, model), "capture")

    async def _capture(self, ctx: CallContext, answer: str, reasoning: str, model: str | None) -> None:
        f = self.settings.capture.filters
        decision = analyse(
            ctx.query, answer, reasoning, min_code_lines=f.min_code_lines, venting=f.venting, noise=f.noise
        )
        service, store = self.service, self.store
        if service is None or store is None:
            gm.captures_filtered.labels("db_down").inc()
            return
        stored: list[dict[str, str]] = []
        actor = Actor(name=ctx.actor.name, role="agent", origin="gateway", namespaces=ctx.actor.namespaces)
        for item in decision.items:
            try:
                proposed = MemoryIn(
                    kind=item.kind,
                    namespace=ctx.write_namespace,
                    title=item.title,
                    body=item.body,
                    tags=item.tags,
                    attrs={**item.attrs, "model": model or "", "api": ctx.api},
                    importance=item.importance,
                    episode=ctx.episode,
                )
                # Secrets are masked, not refused, in captures; the door's refusing gate then finds
                # nothing (a «REDACTED:…» placeholder is never a secret again) and lints strictly.
                masked = gate_fields(proposed, self._redact)
                if masked != proposed:
                    gm.captures_filtered.labels("secret_redacted").inc()
                res = await service.note(masked, actor)
            except BrainError as e:
                gm.captures_filtered.labels(
                    "instruction_like" if e.code == "instruction_rejected" else e.code
                ).inc()
                continue
            except ValueError:  # the entry would not validate (e.g. an over-long generated field)
                gm.captures_filtered.labels("invalid").inc()
                continue
            gm.captures.labels(item.kind).inc()
            stored.append({"id": res.memory.id, "kind": item.kind, "created": str(res.created)})
        if decision.filtered:
            gm.captures_filtered.labels(decision.filtered).inc()
        await store.record_event(
            "capture",
            key_name=ctx.actor.name,
            namespace=ctx.write_namespace,
            payload={
                "stored": stored,
                "filtered": decision.filtered,
                "model": model,
                "api": ctx.api,
                "injected": ctx.injected,
            },
        )

    # ------------------------------------------------------------------ health

    async def health(self) -> dict[str, Any]:
        database, index = "down", None
        if self.store is not None and not self.db_watch.hung:  # hung: say so now, not after 3 s
            try:
                index = await asyncio.wait_for(self.store.index_stats(), 3)
                self.index_stats = index
                database = "ok"
            except Exception:
                database = "down"
        embedder = await self._embedder_health()
        status = "ok" if database == "ok" and embedder == "ok" else "degraded"
        return {"status": status, "database": database, "embedder": embedder, "index": index}

    async def _embedder_health(self) -> str:
        client = self._embedding_client
        if client is None:
            return "ok" if self.embedder is not None else "down"
        try:
            return "ok" if await client.ready(timeout=2.0) else "down"
        except Exception:
            return "down"


_runtime: Runtime | None = None


def get_runtime() -> Runtime | None:
    return _runtime


def set_runtime(rt: Runtime | None) -> None:
    global _runtime
    _runtime = rt


__all__ = ["DB_ERRORS", "PREAMBLE", "CallContext", "Injection", "Runtime", "get_runtime", "set_runtime"]
