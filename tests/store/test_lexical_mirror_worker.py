"""The mirror ranks on a worker thread (brain.store.lexical_mirror.candidates), against a real
Postgres: what a user would notice is a gateway whose other requests stall while one question of
common words ranks (tens of ms at 1M memories), or an answer read from arrays a write changed under
it. The ranking itself is held still here (a threading.Event) so each case is an ordering, not a
timing."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from brain.core.models import Actor
from brain.store import Scope, Store
from brain.store.lexical import bm25
from tests.store.test_lexical_mirror import _write, mirrored  # noqa: F401


def _held(store: Store) -> tuple[threading.Event, threading.Event, list[int]]:
    """The copy's ranking, held until the first event is set; the second says it started; the list
    gets the copy's slot count when it started and again when it ended."""
    assert store.mirror is not None and store.mirror.postings is not None
    postings = store.mirror.postings
    real = postings.top
    release, started, slots = threading.Event(), threading.Event(), []

    def top(*args: Any, **kwargs: Any) -> Any:
        slots.append(len(postings.ids))
        started.set()
        assert release.wait(10), "the test never released the ranking"
        out = real(*args, **kwargs)
        slots.append(len(postings.ids))
        return out

    postings.top = top  # type: ignore[method-assign]
    return release, started, slots


async def _started(started: threading.Event) -> None:
    for _ in range(200):
        if started.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the ranking never started")


async def test_the_loop_serves_while_a_question_ranks(mirrored: Store) -> None:  # noqa: F811
    release, started, _ = _held(mirrored)
    question = asyncio.create_task(bm25(mirrored, "staging database port", Scope.of([]), 5))
    await _started(started)
    other = await mirrored.pool_for_tests.fetchval("SELECT count(*) FROM memories")
    assert other > 0 and not question.done(), "another request waited for the ranking"
    release.set()
    assert (await question).hits


async def test_a_write_waits_for_the_ranking_that_reads_the_copy(mirrored: Store, owner: Actor) -> None:  # noqa: F811
    release, started, slots = _held(mirrored)
    mirror = mirrored.mirror
    assert mirror is not None
    question = asyncio.create_task(bm25(mirrored, "staging database port", Scope.of([]), 5))
    await _started(started)
    [new] = await _write(mirrored, [("shared", "The staging database port moved to 6543.")], owner)
    look = asyncio.create_task(mirror.current())  # reads the write, then waits to apply it
    await asyncio.sleep(0.1)
    assert not look.done(), "the look changed the arrays while a ranking read them"
    release.set()
    await question
    assert await look is not None
    assert slots[0] == slots[1], "the copy changed under the ranking"
    assert mirror.postings is not None and new in mirror.postings.slot_of


async def test_a_cancelled_question_keeps_writes_off_until_its_ranking_ends(
    mirrored: Store,  # noqa: F811
    owner: Actor,
) -> None:
    release, started, slots = _held(mirrored)
    mirror = mirrored.mirror
    assert mirror is not None
    question = asyncio.create_task(bm25(mirrored, "staging database port", Scope.of([]), 5))
    await _started(started)
    question.cancel()  # its retrieval ran out of budget; the thread cannot be stopped
    await asyncio.sleep(0.05)
    await _write(mirrored, [("shared", "The staging database port moved to 6544.")], owner)
    look = asyncio.create_task(mirror.current())
    await asyncio.sleep(0.1)
    assert not look.done(), "a write went in while the cancelled question's ranking still read the copy"
    release.set()
    assert await look is not None
    assert question.cancelled()
    assert slots[0] == slots[1]


async def test_the_look_is_planned_once_on_a_connection_of_its_own(mirrored: Store, owner: Actor) -> None:  # noqa: F811
    """A look precedes every keyword leg; planned again each time it cost 1.0 of its 1.05 ms at 100k
    memories (#33). Its own connection keeps one generic plan: after many looks, with writes between
    them (so each reads a new snapshot), the statement was planned generically and never custom."""
    from brain.store.lexical_mirror import CHANGES_SQL

    mirror = mirrored.mirror
    assert mirror is not None
    for i in range(8):
        await _write(mirrored, [("shared", f"The okapi rota changed, week {i}.")], owner)
        assert await mirror.current() is not None
    assert mirror._look_pool is not None and mirror._look_pool is not mirrored.pool_for_tests
    async with mirror._look_pool.acquire() as conn:
        generic, custom = await conn.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", CHANGES_SQL
        )
    assert (generic, custom) == (8, 0)
    hits = (await bm25(mirrored, "okapi rota", Scope.of([]), 10)).hits
    assert len(hits) == 8, "the looks' writes are keyword hits"
