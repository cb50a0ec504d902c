"""Compose what is injected: persona prefix, memories (required first), skill slots, within a token budget.

This is the one place that turns a retrieval result into the system text an agent sees, so the
gateway's hooks and `brainctl eval --mode gateway` measure the same thing. `assemble` is pure (the
budget arithmetic and rendering); `compose` adds the two effects around it, the secret check of the
query and the retrieval itself; `InjectionCache` is the short-lived cache agent loops need (they
resend the same question with every tool call), with the clock passed in so it is testable. It
also lets concurrent askers of one question share one retrieval (`fetch`): ten agents of a team
sending the same question at once would otherwise run ten retrievals on the same cores.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from brain.core import tracing
from brain.core.models import Hit
from brain.core.redact import SecretGate
from brain.retrieval import telemetry
from brain.retrieval.catalog import Catalog, keywords
from brain.retrieval.pipeline import Retriever
from brain.retrieval.render import estimate_tokens, render_block, render_hit, render_persona, within_budget
from brain.store.store import Scope

# A persona is a prefix, not the payload: a long one is cut at a line so memories keep their room.
PERSONA_TOKENS = 600


@dataclass(frozen=True)
class ComposeConfig:
    """The gateway's `retrieval` knobs that shape the injected text (spec.gateway.retrieval)."""

    top_k: int = 5
    token_budget: int = 2000
    skill_slots: int = 2
    persona: bool = True


@dataclass
class Injection:
    text: str
    ids: list[str]
    tokens: int
    degraded: list[str]
    #: the question as retrieval saw it (a secret in it masked): what a no-hit event may record
    query: str = ""


def assemble(
    memories: Sequence[Hit],
    persona: Hit | None,
    skills: Sequence[Hit],
    token_budget: int,
    *,
    degraded: Sequence[str] = (),
) -> Injection:
    """Cut the persona, give skills a third of the budget, fill the rest with memories in rank order."""
    prefix = ""
    if persona is not None:
        body = persona.body
        if estimate_tokens(body) > PERSONA_TOKENS:
            body = body[: PERSONA_TOKENS * 4].rsplit("\n", 1)[0] + "\n…"
        prefix = render_persona(persona, body)
    chosen_skills = within_budget(list(skills), token_budget // 3) if skills else []
    skill_cost = sum(estimate_tokens(render_hit(h)) for h in chosen_skills)
    kept = within_budget(list(memories), token_budget - estimate_tokens(prefix) - skill_cost)
    hits: list[Hit] = [*kept, *chosen_skills]
    text = render_block(hits, prefix=prefix)
    tokens = estimate_tokens(text) if text else 0
    ids = [h.id for h in hits] + ([persona.id] if persona else [])
    return Injection(text=text, ids=ids, tokens=tokens, degraded=list(degraded))


async def compose(
    retriever: Retriever,
    catalog: Catalog,
    scope: Scope,
    query: str,
    config: ComposeConfig,
    gate: SecretGate,
) -> Injection:
    """Retrieve for `query` (masked if it carries a secret) and assemble the injection."""
    degraded: list[str] = []
    safe = gate.check("query", query)
    if safe != query:
        degraded.append("secret_in_query")
        telemetry.retrieval_degraded.labels("secret_in_query").inc()
    # One embedding, taken inside retrieve in parallel with the lexical legs, then reused below.
    result = await retriever.retrieve(safe, scope, limit=config.top_k, include_pinned=True)
    degraded += result.degraded
    vec = result.query_vector
    t0 = time.perf_counter()
    with tracing.leaf("compose") as span:
        words = keywords(query)
        persona = catalog.persona(words, vec, scope) if config.persona else None
        skills = catalog.skills_for(vec, words, scope, config.skill_slots)
        injection = assemble(result.all_hits, persona, skills, config.token_budget, degraded=degraded)
        injection.query = safe
        tracing.set_attrs(
            span, {"brain.memory.count": len(injection.ids), "brain.memory.injected_tokens": injection.tokens}
        )
        tracing.text(span, "brain.memory.text", injection.text)
    telemetry.retrieval_stage_seconds.labels("render").observe(time.perf_counter() - t0)
    return injection


CacheKey = tuple[str, tuple[str, ...], str]


@dataclass
class _Flight:
    """One retrieval in progress and how many askers wait on it."""

    task: asyncio.Task[Injection]
    generation: int
    waiters: int = 0


class InjectionCache:
    """Injections by (key name, namespaces, query) for `ttl_s`; cleared on every write."""

    def __init__(self, ttl_s: float, size: int = 2048) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._items: OrderedDict[CacheKey, tuple[float, Injection]] = OrderedDict()
        self._flights: dict[CacheKey, _Flight] = {}
        # Bumped by every clear: a retrieval that began before a write must not be cached after it.
        self._generation = 0

    def get(self, key: CacheKey, now: float) -> Injection | None:
        cached = self._items.get(key)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        return None

    def put(self, key: CacheKey, now: float, injection: Injection) -> None:
        self._items[key] = (now, injection)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    async def fetch(
        self, key: CacheKey, now: float, compute: Callable[[], Awaitable[Injection]]
    ) -> Injection:
        """The cached injection, else the one being computed for the same key, else a new one.

        The retrieval runs as its own task so that one asker's timeout does not fail the others
        who joined it; it is cancelled when its last asker gives up, so a hung database does not
        collect abandoned retrievals. A failure reaches every asker and is not cached.
        """
        cached = self.get(key, now)
        if cached is not None:
            return cached
        flight = self._flights.get(key)
        if flight is None:
            flight = _Flight(asyncio.ensure_future(compute()), self._generation)
            self._flights[key] = flight
            flight.task.add_done_callback(lambda task: self._landed(key, now, flight, task))
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.task.cancel()
                if (
                    self._flights.get(key) is flight
                ):  # a later asker starts afresh, never joins a cancelled one
                    del self._flights[key]

    def _landed(self, key: CacheKey, now: float, flight: _Flight, task: asyncio.Task[Injection]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if task.cancelled() or task.exception() is not None:  # retrieved: no "never retrieved" warning
            return
        # A retrieval that ran without a leg (the embedding late or down) is not kept: the next ask
        # gets the whole one, not the stopgap for the cache's whole TTL.
        if flight.generation == self._generation and not task.result().degraded:
            self.put(key, now, task.result())

    def clear(self) -> None:
        self._items.clear()
        self._flights.clear()
        self._generation += 1

    def __len__(self) -> int:
        return len(self._items)
