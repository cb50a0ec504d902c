"""The vector floor, calibrated per scope against questions no team's memory answers.

A fixed cosine floor means different things in different brains. Against 26 engineering notes an
unrelated question ("how long should I boil an egg?") reaches at best ~0.2, so a relevant
paraphrase at 0.23 is evidence; against 6,000 chat turns the same question reaches 0.3–0.6. So the
floor asks the scope itself: the best cosine each of a fixed set of generic questions (`PROBES`:
small talk, general coding, other domains — none about any particular team) reaches in it is a
sample of what "nothing relevant" looks like there, and a `quantile` of that sample is the least
cosine that still turns away that share of such questions.

It only ever *lowers* the configured vector floor: where the corpus is quiet, a weaker cosine is
already evidence; where it is noisy, raising the floor would cut answers whose own cosines are low
(LoCoMo's), which the configured floor is there to prevent. Measured: docs/performance.md,
"Selectivity".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from brain.embedder.model import Embedder
    from brain.store.store import Scope, Store

log = logging.getLogger(__name__)

# Questions no team's memory is about. Written once, before any eval set was measured against them,
# and not to be tuned to one: they sample the null, they are not a classifier.
PROBES: tuple[str, ...] = (
    "good morning, how was your weekend?",
    "can you help me with something?",
    "ok thanks, bye",
    "what's the weather like tomorrow?",
    "tell me something interesting",
    "I'm bored, any ideas?",
    "how do I sort a dictionary by value in Python?",
    "what is a closure in JavaScript?",
    "explain big O notation",
    "how do I undo the last git commit?",
    "what is the difference between TCP and UDP?",
    "write a function that checks if a number is prime",
    "how do I read a CSV file in pandas?",
    "what does SOLID stand for?",
    "how do pointers work in C?",
    "convert a string to an integer in Java",
    "what is the tallest mountain in Europe?",
    "how long should I boil an egg?",
    "who painted the Mona Lisa?",
    "what is the speed of light?",
    "recommend a good science fiction novel",
    "how do I get rid of hiccups?",
    "what year did the Berlin wall fall?",
    "how many players are on a rugby team?",
    "what is photosynthesis?",
    "suggest a name for my puppy",
    "how do I say thank you in Japanese?",
    "what are the rules of chess castling?",
    "plan a three day trip to Rome",
    "why is the sky blue?",
    "compose a limerick about a frog",
    "summarise the plot of Hamlet",
)

PROBE_BATCH = 4  # small batches, so a question's own embedding never queues behind all 32 probes
TTL_S = 300.0  # a scope's null moves only as its memories do; five minutes of staleness costs nothing
RETRY_S = 30.0  # after a failed sample (embedder down): not one doomed attempt per request
MAX_SCOPES = 1024  # callers choose scopes; the cache must not grow with them
# Samples in flight at once, over all scopes. Each is 32 vector lookups, and a caller picks its
# scope (namespaces x kinds), so a burst of new scopes from one hostile key would otherwise be a
# burst of 32x its size on the pool. A scope waiting for a slot keeps the configured floor.
MAX_SAMPLING = 2

# Probe vectors depend on the model alone: one embedding per model per process, shared by retrievers.
_probe_vectors: dict[tuple[str, int], list[Any]] = {}


async def probe_vectors(embedder: Embedder) -> list[Any]:
    key = (embedder.model, embedder.dim)
    if key not in _probe_vectors:
        out: list[Any] = []
        for i in range(0, len(PROBES), PROBE_BATCH):
            out.extend(await embedder.embed(list(PROBES[i : i + PROBE_BATCH])))
        _probe_vectors[key] = out
    return _probe_vectors[key]


def calibrated_floor(best: Sequence[float], quantile: float, configured: float) -> float:
    """The vector floor for a scope whose probes reached cosines `best`: their `quantile`, if lower.

    quantile 0 (or no probes answered: an empty scope) keeps the configured floor, as does a
    configured floor of 0 (no floor stays no floor).
    """
    if quantile <= 0 or not best or configured <= 0:
        return configured
    return min(configured, float(np.quantile(np.asarray(best, dtype=np.float64), quantile)))


class Calibrator:
    """Per-scope null samples, computed off the request path and refreshed after `TTL_S`.

    The first question in a scope is answered with the configured floor while the sample is taken
    (32 embeddings once per process, then 32 one-row vector lookups per scope); `warm` awaits it, for
    callers that measure quality (`brainctl eval`).
    """

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._best: OrderedDict[tuple[Any, ...], tuple[float, list[float]]] = OrderedDict()
        self._pending: dict[tuple[Any, ...], asyncio.Task[None]] = {}
        self._failed_at = -math.inf

    @staticmethod
    def _key(scope: Scope) -> tuple[Any, ...]:
        return (scope.namespaces, scope.kinds, scope.exclude_kinds)

    async def _sample(self, scope: Scope) -> None:
        from dataclasses import replace

        probes = await probe_vectors(self.embedder)
        current = replace(scope, as_of=None)  # the null of what the brain holds now
        best = []
        for vec in probes:
            top = await self.store.vector_leg(vec, current, 1)
            if top:
                best.append(top[0][1])
        key = self._key(scope)
        self._best[key] = (time.monotonic(), best)
        self._best.move_to_end(key)
        while len(self._best) > MAX_SCOPES:
            self._best.popitem(last=False)

    def _refresh(self, scope: Scope) -> asyncio.Task[None]:
        key = self._key(scope)
        task = self._pending.get(key)
        if task is None:
            task = asyncio.create_task(self._sample(scope))
            self._pending[key] = task

            def done(t: asyncio.Task[None]) -> None:
                self._pending.pop(key, None)
                if not t.cancelled() and t.exception() is not None:
                    self._failed_at = time.monotonic()
                    log.warning("floor calibration failed; the configured floor stands: %s", t.exception())

            task.add_done_callback(done)
        return task

    def sample(self, scope: Scope) -> list[float] | None:
        """The scope's probe cosines if known (a refresh starts when they are old), else None."""
        key = self._key(scope)
        entry = self._best.get(key)
        now = time.monotonic()
        due = (entry is None or now - entry[0] > TTL_S) and now - self._failed_at > RETRY_S
        if due and (key in self._pending or len(self._pending) < MAX_SAMPLING):
            self._refresh(scope)
        return None if entry is None else entry[1]

    async def warm(self, scope: Scope) -> None:
        if self._key(scope) not in self._best:
            with contextlib.suppress(Exception):  # logged by the task's callback; the configured floor stands
                await self._refresh(scope)
