"""The gateway's process container and call registry: the live parts, and what a call learned.

The work is done elsewhere: what is injected in `brain.retrieval.compose`, the capture write path
in `brain.services.capture`, `/health` and the database watch in `brain.gateway.readiness`. This
module holds the parts they need (store, embedder, service, keys, catalog, capture queue, the
injection cache) and the per-call context the pre- and post-call hooks share.

LiteLLM imports our hooks and auth by dotted path, so those two entry points reach this state
through one process-wide `Runtime` (`get_runtime()`); every other surface is handed it where the
app is built (`brain.gateway.tools.Tools`, for REST and MCP). Nothing here may stop the proxy from
serving: the database is opened (and migrated) in the background with retries, the offline model
loads in a thread, and until they are there the hooks simply add no memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from brain.core import tracing
from brain.core.errors import BrainError
from brain.core.models import Actor
from brain.core.redact import SecretGate
from brain.embedder.client import EmbeddingClient
from brain.embedder.model import Embedder, QueryCache
from brain.gateway import metrics
from brain.gateway.capture import (
    CaptureQueue,
    Item,
    analyse,
    injected_passages,
    restated_by_meaning,
    restates,
)
from brain.gateway.mend import VectorMend
from brain.gateway.placement import Ledger
from brain.gateway.readiness import DatabaseWatch, health
from brain.gateway.retractions import Exposure, Notice
from brain.gateway.settings import GatewaySettings
from brain.retrieval.catalog import Catalog
from brain.retrieval.compose import ComposeConfig, Injection, InjectionCache, compose
from brain.retrieval.pipeline import RetrievalConfig, Retriever
from brain.services import capture
from brain.services.keys import KeyStore, KeyVerifier
from brain.services.memory import MemoryService, read_only
from brain.store.store import Scope, Store

log = logging.getLogger("brain.gateway")

# A database that hangs must not hold the gateway: the server stops a slow statement at
# DB_STATEMENT_TIMEOUT_MS, the client abandons a connection whose server has not answered within
# DB_COMMAND_TIMEOUT_S (a little later, so a merely slow statement is the server's to stop), and a
# new connection that gets no answer within DB_CONNECT_TIMEOUT_S is given up. The request path is
# bounded tighter still: retrieval by its own budget (retrieval.timeoutMs), key checks by
# keys.KeyVerifier. See docs/operations.md, "When the database hangs".
DB_STATEMENT_TIMEOUT_MS = 5000
DB_COMMAND_TIMEOUT_S = 6.0
DB_CONNECT_TIMEOUT_S = 3.0
MEND_TIMEOUT_S = 30.0  # one batch of stored texts (brain.gateway.mend.BATCH) on a busy embedder


PostCall = Literal["headers", "logged", "failed"]  # LiteLLM's post-call hooks that read a CallContext


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
    injected_text: str = ""  # the memory block put into the request: capture never re-learns it
    memory: str = "skipped"
    degraded: list[str] = field(default_factory=list)  # what retrieval ran without (x-brain-memory-degraded)
    route: dict[str, str] = field(default_factory=dict)
    episode: str | None = None  # what this exchange's captures are recorded under, with its siblings
    conversation: str | None = None  # its id in the exposure receipts (brain.gateway.retractions)
    notices: list[Notice] = field(default_factory=list)  # retractions told in this request
    span: Any = None  # the request's trace span (brain.core.tracing), ended by the post-call hook
    settled: set[PostCall] = field(default_factory=set)  # the post-call hooks that have had it (recall)


class Runtime:
    def __init__(self, settings: GatewaySettings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store: Store | None = None
        self.service: MemoryService | None = None
        self.keys = KeyVerifier(None, master_key=settings.master_key)
        self.embedder: Embedder | None = embedder
        self._embedding_client: EmbeddingClient | None = None
        self._mend_client: EmbeddingClient | None = None
        self.catalog = Catalog()
        self.capture = CaptureQueue(settings.capture.queue_size, settings.capture.workers)
        self.index_stats: dict[str, Any] | None = None
        self.ready = False
        self.calls: OrderedDict[str, CallContext] = OrderedDict()
        self.injections = InjectionCache(settings.retrieval.cache_ttl_s)
        self.ledger = Ledger()  # what earlier turns were given, put back byte for byte (placement.py)
        self.exposure = Exposure(settings.exposure)  # receipts and retraction notices (retractions.py)
        self._tasks: list[asyncio.Task[None]] = []
        self._redact = SecretGate("redact")
        self.db_watch = DatabaseWatch()
        self.mend = VectorMend()  # vectors for what was written while the embedder was away (mend.py)
        r = settings.retrieval
        self.retrieval_config = RetrievalConfig(
            top_k=r.top_k,
            embed_timeout_s=max(0.05, r.timeout_ms / 1000 * 0.6),
            floor=r.floor,
            standout_ratio=r.standout_ratio,
        )
        self.compose_config = ComposeConfig(
            top_k=r.top_k, token_budget=r.token_budget, skill_slots=r.skill_slots, persona=r.persona
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        tracing.configure(self.settings.traces, counted=metrics.trace_spans, key=self.settings.master_key)
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
            # The mend's batches get a client of their own, with a stored text's time limit: a slow
            # batch must never open the breaker the questions' embeddings go through.
            self._mend_client = EmbeddingClient(
                self.settings.embedder_url,
                model=self.settings.embedding.model,
                dim=self.settings.embedding.dim,
                timeout=MEND_TIMEOUT_S,
                batch=self.mend.batch,
                require_model=True,
            )
        elif self.embedder is None:
            self._tasks.append(asyncio.create_task(self._load_local_model()))
        metrics.register_index_collector(lambda: self.index_stats)
        self._tasks.append(asyncio.create_task(self._connect()))
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        self.db_watch.stop()
        await self.capture.stop()
        with contextlib.suppress(Exception):  # the receipts still queued
            await asyncio.wait_for(self.exposure.flush(self.store), 2)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.keys.close()
        if self.store is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.store.close(), 5)
        for client in (self._embedding_client, self._mend_client):
            if client is not None:
                await client.aclose()
        await asyncio.to_thread(tracing.shutdown, 2.0)

    async def _load_local_model(self) -> None:
        from brain.embedder.model import QUERY_THREADS, LocalEmbedder, threads_from_env

        try:
            # One thread unless told otherwise: it embeds one question per request on cores the proxy
            # and Postgres need for the same request (brain/embedder/model.py, QUERY_THREADS).
            threads = threads_from_env(QUERY_THREADS)
            local = await asyncio.to_thread(LocalEmbedder, threads=threads)
            # The first inference allocates onnxruntime's buffers, which on a busy machine outlasts the
            # first question's embedding deadline (that question would be answered by keywords only):
            # pay for it here, before the model counts as loaded.
            await asyncio.to_thread(local.embed_sync, ["warm-up"])
        except Exception:
            log.exception("could not load the offline embedding model; retrieval answers from keywords only")
            return
        self.embedder = QueryCache(local)
        if self.service is not None:
            self._build_service(self.service.store)

    def _build_service(self, store: Store) -> None:
        retriever = Retriever(store, self.embedder, self.retrieval_config)
        self.service = MemoryService(
            store, self.embedder, retriever=retriever, on_missing_vector=self.mend.wake
        )

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
        if self.settings.retrieval.lexical_mirror and self.settings.retrieval.enabled:
            self.store.start_mirror()
        self._build_service(self.store)
        self.keys.keys = KeyStore(self.store)
        self._tasks.append(asyncio.create_task(self.exposure.run(self.store)))
        self._tasks.append(
            asyncio.create_task(self.mend.run(lambda: self.store, self._mend_embedder, self.invalidate))
        )
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

    def _mend_embedder(self) -> Embedder | None:
        """What embeds stored texts for the mend: its own client, or the model under the query cache
        (whose entries are for questions that repeat, not for texts embedded once)."""
        if self._mend_client is not None:
            return self._mend_client
        return self.embedder.inner if isinstance(self.embedder, QueryCache) else self.embedder

    async def _refresh_index(self) -> None:
        assert self.store is not None
        self.index_stats = await self.store.index_stats()
        if self.index_stats.get("entriesWithoutVector"):  # written without a vector, here or elsewhere
            self.mend.wake()

    # ------------------------------------------------------------------ retrieval

    def scope_for(self, actor: Actor, requested: list[str] | None) -> Scope:
        """The asked namespaces the key may see (others are ignored), else the key's own; `shared` always."""
        wanted = [ns for ns in requested or [] if actor.can_see(ns)]
        if not wanted:
            wanted = list(actor.namespaces or [])
        return Scope.of(wanted)

    async def memory_block(self, actor: Actor, scope: Scope, query: str) -> Injection:
        """What `retrieval.compose` makes of the query, cached briefly, skipped while the database hangs."""
        key = (actor.name, scope.namespaces, query)
        now = time.monotonic()
        cached = self.injections.get(key, now)
        if cached is not None:
            return cached
        service = self.service
        if service is None:
            raise ConnectionError("database not connected")
        if self.db_watch.hung:
            raise ConnectionError("the database does not answer; retrieval skipped until it does")
        try:  # concurrent askers of the same question share one retrieval
            return await self.injections.fetch(
                key,
                now,
                lambda: compose(
                    service.retriever, self.catalog, scope, query, self.compose_config, self._redact
                ),
            )
        except (asyncio.CancelledError, TimeoutError):  # the budget ran out: is the database there at all?
            self.db_watch.suspect(self.store)
            raise

    def invalidate(self, *, catalog: bool = False) -> None:
        """Forget cached injections after a write, so the next request sees it (and reload personas/skills)."""
        self.injections.clear()
        if catalog and self.store is not None:
            task = asyncio.create_task(self.catalog.refresh(self.store))
            self._tasks.append(task)
            self._tasks = [t for t in self._tasks if not t.done() or t is task]

    async def retracted(self) -> None:
        """A retire, forget, purge or restore through this replica: the retraction map now, not at the
        next poll (brain.gateway.retractions). Never fails the write that called it."""
        await self.exposure.refresh_now(self.store)

    # ------------------------------------------------------------------ calls

    def remember(self, call_id: str, ctx: CallContext) -> None:
        self.calls[call_id] = ctx
        while len(self.calls) > 10_000:
            self.calls.popitem(last=False)
        metrics.calls_open.set(len(self.calls))

    def recall(self, call_id: str | None, hook: PostCall) -> CallContext | None:
        """The call's context for one of its post-call hooks.

        LiteLLM hands the success log to its logging worker as soon as the provider answers, while
        the proxy is still finishing the response, so under load the log can run before the headers
        hook. The context therefore stays until both have had it; the request's failure (the proxy's
        failure hook, once every retry is spent) ends it at once, as no headers follow one.
        """
        if not call_id or (ctx := self.calls.get(call_id)) is None:
            return None
        ctx.settled.add(hook)
        if hook == "failed" or {"headers", "logged"} <= ctx.settled:
            del self.calls[call_id]
            metrics.calls_open.set(len(self.calls))
        return ctx

    def after_injection(self, ctx: CallContext, injection: Injection | None) -> None:
        """What the retrieval leaves behind, recorded by the door through the queue (never on the
        request path): access counts, or the no-hit event."""
        service = self.service
        if service is None or injection is None:
            return
        ids, query = injection.ids, injection.query
        self.capture.submit(
            lambda: service.retrieved(
                ctx.actor, ids, query, namespace=ctx.write_namespace, api=ctx.api, namespaces=ctx.namespaces
            ),
            "touch" if ids else "event",
        )

    def capture_exchange(self, ctx: CallContext, answer: str, reasoning: str, model: str | None) -> None:
        if not self.settings.capture.enabled:
            return
        if not ctx.capture:
            metrics.captures_filtered.labels("opted_out").inc()
            return
        if read_only(ctx.actor):  # the door's rule, asked before queueing work it would refuse
            metrics.captures_filtered.labels("read_only_key").inc()
            return
        self.capture.submit(lambda: self._capture(ctx, answer, reasoning, model), "capture")

    async def _capture(self, ctx: CallContext, answer: str, reasoning: str, model: str | None) -> None:
        # after the answer, in a queue worker: a child of the request's span, so one chat is one trace
        attrs = {tracing.OPERATION: "create_memory", tracing.MODEL: model or None}
        with tracing.span("capture", attrs, parent=tracing.context_of(ctx.span)) as span:
            stored = await self._captured(ctx, answer, reasoning, model)
            tracing.set_attrs(span, {"brain.memory.count": stored})

    async def _captured(self, ctx: CallContext, answer: str, reasoning: str, model: str | None) -> int:
        f = self.settings.capture.filters
        with tracing.span("capture.gate") as gate:
            decision = analyse(
                ctx.query,
                answer,
                reasoning,
                min_code_lines=f.min_code_lines,
                venting=f.venting,
                noise=f.noise,
                trusted_hosts=self.settings.capture.trusted_hosts,
            )
            # what the request was given is not the caller's knowledge: a restatement is not learned again
            fresh = await self._new_to(decision.items, ctx.injected_text)
            if decision.items and not fresh:
                decision.filtered = "restates_injected"  # counted once below, like every refused exchange
            else:
                for _ in range(len(decision.items) - len(fresh)):
                    metrics.captures_filtered.labels("restates_injected").inc()
            tracing.set_attrs(
                gate, {"brain.capture.items": len(fresh), "brain.capture.filtered": decision.filtered}
            )
        to_review = [i for i in fresh if i.review]
        to_keep = [i for i in fresh if not i.review]
        service = self.service
        if service is None:
            metrics.captures_filtered.labels("db_down").inc()
            return 0
        exchange = capture.Exchange(
            caller=ctx.actor,
            write_namespace=ctx.write_namespace,
            api=ctx.api,
            model=model,
            episode=ctx.episode,
            injected=tuple(ctx.injected),
        )
        with tracing.span(
            "capture.store", {"brain.capture.items": len(to_keep), "brain.capture.proposed": len(to_review)}
        ):
            outcome = await capture.write(service, to_keep, to_review, exchange, decision.filtered)
        for reason in outcome.filtered:
            metrics.captures_filtered.labels(reason).inc()
        for row in outcome.stored:
            metrics.captures.labels(row["kind"]).inc()
        if decision.filtered:
            metrics.captures_filtered.labels(decision.filtered).inc()
        return len(outcome.stored)

    async def _new_to(self, items: list[Item], injected: str) -> list[Item]:
        """The items that are not a restatement of an injected passage (verbatim or by meaning)."""
        passages = injected_passages(injected)
        if not items or not passages:
            return items
        items = [i for i in items if not any(restates(i.body, p) for p in passages)]
        if not items or self.embedder is None:
            return items
        try:
            vectors = await self.embedder.embed([i.body for i in items] + passages)
        except Exception:  # no embedder now: the verbatim test alone decides
            log.debug("capture: embedding for the restatement check failed", exc_info=True)
            return items
        same = restated_by_meaning(vectors[: len(items)], vectors[len(items) :])
        return [i for i, s in zip(items, same, strict=True) if not s]

    # ------------------------------------------------------------------ health

    async def health(self) -> dict[str, Any]:
        report = await health(self.store, self.db_watch, self.embedder, self._embedding_client)
        if report["index"] is not None:
            self.index_stats = report["index"]
        return report


_runtime: Runtime | None = None


def get_runtime() -> Runtime | None:
    return _runtime


def set_runtime(rt: Runtime | None) -> None:
    global _runtime
    _runtime = rt
