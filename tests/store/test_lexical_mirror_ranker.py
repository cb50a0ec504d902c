"""Outside attack review (session 29) of the mirror ranking on a worker thread
(brain.store.lexical_mirror.candidates / _on_worker). Each test reproduces one finding.

1. `candidates` checks the generation before it waits for `_reading`, never after: a copy that was
   dropped (a restore, a failover) while it waited still answers, from the dropped copy.
2. Rankings run on the loop's default executor, which the gateway's local embedder also fills
   (`LocalEmbedder.embed` is `asyncio.to_thread(embed_sync)`, and `embed_sync` serialises on a
   threading.Lock, so each waiting embed holds a worker). A ranking queued there holds `_reading`
   meanwhile (every look then waits on it, holding `_look`), and a cancelled question cannot end
   until the queued job has run: its budget no longer bounds it.

The findings reproduced here were fixed in session 29; the tests keep them fixed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator

import pytest

from brain.store import Store
from brain.store.lexical import TERMS_SQL, _dims, plan_terms
from brain.store.lexical_mirror import LexicalMirror
from tests.store.test_lexical_mirror import BODIES, mirrored  # noqa: F401

NS = sorted({ns for ns, _ in BODIES})


async def _query(store: Store, text: str) -> dict[int, float]:
    rows = await store.pool_for_tests.fetch(TERMS_SQL, text)
    terms, _ = plan_terms(rows, max((await store.corpus_stats()).docs, 1))
    return _dims(terms)


async def _asked(store: Store) -> tuple[LexicalMirror, asyncio.Task[list[str] | None]]:
    """The copy, once current, and a question of it in flight."""
    mirror = store.mirror
    assert mirror is not None
    query = await _query(store, "staging database port")
    generation = await mirror.current()
    assert generation is not None
    question = asyncio.create_task(
        mirror.candidates(query, 5, generation, namespaces=NS, kinds=None, exclude_kinds=())
    )
    return mirror, question


@pytest.fixture
async def busy_executor() -> AsyncIterator[threading.Event]:
    """The default executor's every worker busy (as with embeds queued on the embedder's lock),
    until the event is set."""
    free = threading.Event()
    jobs = [asyncio.ensure_future(asyncio.to_thread(free.wait, 30)) for _ in range(40)]
    await asyncio.sleep(0.2)
    try:
        yield free
    finally:
        free.set()
        await asyncio.gather(*jobs)


async def test_a_copy_dropped_while_a_question_waits_does_not_answer(mirrored: Store) -> None:  # noqa: F811
    mirror = mirrored.mirror
    assert mirror is not None
    query = await _query(mirrored, "staging database port")
    generation = await mirror.current()
    assert generation is not None
    await mirror._reading.acquire()  # another question's ranking reads the copy
    try:
        question = asyncio.create_task(
            mirror.candidates(query, 5, generation, namespaces=NS, kinds=None, exclude_kinds=())
        )
        await asyncio.sleep(0.05)
        mirror._reload(drop=True)  # the table was replaced (a restore) or the server changed
        assert mirror.generation != generation
    finally:
        mirror._reading.release()
    got = await question
    assert got is None, (
        f"the dropped copy answered {got} for generation {generation} (now {mirror.generation})"
    )


async def test_a_ranking_does_not_queue_behind_the_embedder(
    mirrored: Store,  # noqa: F811
    busy_executor: threading.Event,
) -> None:
    _, question = await _asked(mirrored)
    done, _ = await asyncio.wait({question}, timeout=2)
    busy_executor.set()
    await question
    assert done, "a ranking of a few postings waited 2 s for the embeds queued on the default executor"


async def test_a_cancelled_question_ends_without_waiting_for_the_executor_queue(
    mirrored: Store,  # noqa: F811
    busy_executor: threading.Event,
) -> None:
    _, question = await _asked(mirrored)
    await asyncio.sleep(0.1)
    question.cancel()  # its retrieval ran out of budget; its ranking has not even started
    began = time.monotonic()
    done, _ = await asyncio.wait({question}, timeout=2)
    busy_executor.set()
    with contextlib.suppress(asyncio.CancelledError):  # or it had answered already
        await question
    assert done, (
        f"a question cancelled before its ranking started took {time.monotonic() - began:.1f}s+ to end"
    )


async def test_a_look_waits_on_a_ranking_queued_in_the_executor(
    mirrored: Store,  # noqa: F811
    busy_executor: threading.Event,
) -> None:
    """Every keyword leg's look stalls while one question's ranking is queued (not running)."""
    mirror, question = await _asked(mirrored)
    await asyncio.sleep(0.05)
    await mirrored.pool_for_tests.execute(
        "UPDATE memories SET status = 'retired' WHERE id = (SELECT min(id) FROM memories WHERE status = 'active')"
    )
    look = asyncio.create_task(mirror.current())
    done, _ = await asyncio.wait({look}, timeout=2)
    busy_executor.set()
    await question
    await look
    assert done, "a look (and every request behind it) waited 2 s for a ranking queued behind embeds"


async def test_repeated_cancels_and_stop_keep_writes_off_until_the_ranking_ends(
    mirrored: Store,  # noqa: F811
) -> None:
    """Holds: a question cancelled three times, then the mirror stopped, while its ranking runs: no
    look applies a change until the thread ends, and the cancellation still reaches the caller."""
    from tests.store.test_lexical_mirror_worker import _held, _started

    mirror = mirrored.mirror
    assert mirror is not None
    release, started, slots = _held(mirrored)
    query = await _query(mirrored, "staging database port")
    generation = await mirror.current()
    assert generation is not None
    question = asyncio.create_task(
        mirror.candidates(query, 5, generation, namespaces=NS, kinds=None, exclude_kinds=())
    )
    await _started(started)
    for _ in range(3):
        question.cancel()
        await asyncio.sleep(0.02)
    await mirrored.pool_for_tests.execute(
        "UPDATE memories SET status = 'retired' WHERE id = (SELECT min(id) FROM memories WHERE status = 'active')"
    )
    look = asyncio.create_task(mirror.current())
    await asyncio.sleep(0.1)
    assert not look.done() and not question.done()
    await asyncio.wait_for(mirror.stop(), 5)  # the gateway shuts down meanwhile: stop() does not hang
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await question
    assert await look is not None
    assert slots[0] == slots[1]
