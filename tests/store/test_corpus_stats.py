"""The corpus statistics the lexical leg needs are refreshed beside the questions, not in front of
one, against a real Postgres: their read scans every active memory (0.6–1.5 s at 1M memories), and
in the question's path one question every 30 s waited for it, at 1M past the gateway's 500 ms budget
(#33, session 29). Here the refresh is held on a lock, so the case is an ordering, not a timing."""

from __future__ import annotations

import asyncio

from brain.core.models import Actor
from brain.store import Scope, Store
from brain.store.lexical import bm25
from tests.store.test_lexical_mirror import _write


async def test_a_question_past_max_age_is_answered_while_the_refresh_waits(
    store: Store, owner: Actor
) -> None:
    await _write(store, [("shared", f"The okapi rota, week {i}.") for i in range(3)], owner)
    docs = (await store.corpus_stats(max_age=0)).docs
    await _write(store, [("shared", f"The okapi rota moved, week {i}.") for i in range(2)], owner)
    async with store.pool_for_tests.acquire() as blocker, blocker.transaction():
        await blocker.execute("LOCK TABLE brain_meta IN ACCESS EXCLUSIVE MODE")  # the refresh reads it
        store.lexical.refreshed -= 60  # older than max_age
        hits = (await asyncio.wait_for(bm25(store, "okapi rota", Scope.of([]), 10), 5)).hits
        assert len(hits) == 5, "the question waited for the refresh, or lost its answer"
        assert store.lexical.docs == docs, "answered with the statistics it had"
        assert store.stats_task is not None and not store.stats_task.done()
    await asyncio.wait_for(store.stats_task, 10)
    assert store.lexical.docs == docs + 2, "the refresh caught up once the lock was gone"


async def test_the_first_read_and_max_age_0_wait_for_the_statistics(store: Store, owner: Actor) -> None:
    await _write(store, [("shared", "The okapi rota.")], owner)
    assert (await store.corpus_stats()).docs >= 1  # never read: read now
    await _write(store, [("shared", "The okapi rota moved.")], owner)
    before = store.lexical.docs
    assert (await store.corpus_stats(max_age=0)).docs == before + 1
