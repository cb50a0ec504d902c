"""Found by an outside attack review (session 28), fixed since; each test is the defect's reproduction. a rebuild's copy (loaded at an older snapshot L) changing hands while looks are queued.

1. `_looks_done` is not reset when the loader swaps in its copy and sets `_seen` back to L: a caller
   queued behind the loader whose wanted look finished *before* the swap returns True at once, and
   answers from the copy at L, which lacks commits made before that caller asked.
2. A drain created by a look (since = the old copy's `_seen`, S1 > L) that gets the lock after the
   loader swapped in the copy at L applies only the changes since S1 to it and then sets `_seen`
   past them: whatever changed between L and S1 is never read into the copy.
Both are ordinary under a write storm: a rebuild runs (rebuild_share) while requests look.
"""

from __future__ import annotations

import asyncio

from brain.core.models import Actor
from brain.store import Scope, Store
from brain.store.lexical_mirror import LexicalMirror
from tests.store.test_lexical_mirror import _both, _write, mirrored  # noqa: F401


async def test_a_caller_queued_behind_a_swap_sees_commits_made_before_it_asked(
    mirrored: Store,  # noqa: F811
    owner: Actor,
) -> None:
    mirror = mirrored.mirror
    assert mirror is not None
    real_look, real_read = mirror._look_once, mirror._read_all
    stall, read_done, calls = asyncio.Event(), asyncio.Event(), [0]

    async def stalled() -> bool:
        calls[0] += 1
        if calls[0] == 1:
            await stall.wait()
        return await real_look()

    async def read():  # type: ignore[no-untyped-def]
        out = await real_read()
        read_done.set()  # the loader now queues for the lock
        return out

    mirror._look_once = stalled  # type: ignore[method-assign]
    mirror._read_all = read  # type: ignore[method-assign]
    first = asyncio.create_task(mirror.current())  # look s, slow, holds the lock
    await asyncio.sleep(0.05)
    v = asyncio.create_task(mirror.current())  # wants look s+1
    await asyncio.sleep(0.05)
    mirror._reload()  # a rebuild (as at rebuild_share), snapshot L
    await read_done.wait()
    await asyncio.sleep(0.05)
    [new] = await _write(mirrored, [("shared", "The narwhal exporter rotates its logs hourly.")], owner)
    y = asyncio.create_task(mirror.current())  # asked after the commit: must see it
    await asyncio.sleep(0.05)
    stall.set()
    assert await first and await v
    assert await y
    assert mirror.postings is not None
    assert new in mirror.postings.slot_of, (
        "current() said True, but the copy lacks a commit made before the call"
    )


async def test_a_drain_after_a_swap_loses_what_changed_between_the_load_and_its_look(
    mirrored: Store,  # noqa: F811
    owner: Actor,
) -> None:
    mirror = mirrored.mirror
    assert mirror is not None
    mirror.page = mirror.batch = 3
    real_look = mirror._look_once
    gate, read_done = _stall_loads(mirror)
    mirror._reload()  # a rebuild starts: snapshot L
    await read_done.wait()
    mirror.rebuild_share = 1e9  # no further rebuild hides the loss
    [lost] = await _write(mirrored, [("shared", "The axolotl sidecar restarts at midnight.")], owner)
    assert await mirror.current()  # the old copy takes it; _seen = S1 > L
    await _write(mirrored, [("shared", f"Pelican runbook step {i}.") for i in range(5)], owner)

    async def look() -> bool:  # the loader finishes while this look holds the lock
        gate.set()
        await asyncio.sleep(0.05)
        return await real_look()

    mirror._look_once = look  # type: ignore[method-assign]
    assert not await mirror.current()  # > page: a drain since S1
    mirror._look_once = real_look  # type: ignore[method-assign]
    for task in (mirror._loader, mirror._drain):
        assert task is not None
        await task
    for _ in range(100):
        if await mirror.current():
            break
        await asyncio.sleep(0.05)
    through, alone = await _both(mirrored, "axolotl sidecar", Scope.of([]), 5)
    assert [i for i, _ in alone] == [lost]
    assert through == alone, "a committed memory is missing from the mirror for good"


async def test_a_swap_between_the_look_and_the_candidates_answers_from_the_older_copy(
    mirrored: Store,  # noqa: F811
    owner: Actor,
) -> None:
    """bm25 looks beside the terms statement, then takes candidates without looking again: a rebuild
    whose copy (snapshot L) changes hands in between answers from L, without a commit made before
    the question."""
    from brain.store.lexical import bm25

    mirror = mirrored.mirror
    assert mirror is not None
    real_current = mirror.current
    gate, read_done = _stall_loads(mirror)
    mirror._reload()  # a rebuild (rebuild_share reached), snapshot L
    await read_done.wait()
    [new] = await _write(mirrored, [("shared", "The narwhal exporter rotates its logs hourly.")], owner)

    async def current() -> bool:  # the look ends first; the rebuild ends while the terms statement runs
        ok = await real_current()
        gate.set()
        await asyncio.sleep(0.05)
        return ok

    mirror.current = current  # type: ignore[method-assign]
    hits = (await bm25(mirrored, "narwhal exporter", Scope.of([]), 5)).hits
    assert [i for i, _ in hits] == [new], "committed before the question, missing from its answer"


def _stall_loads(mirror: LexicalMirror) -> tuple[asyncio.Event, asyncio.Event]:
    """Loads that, once read, wait for the first event before their copy changes hands; the second
    says the read is done (its snapshot taken)."""
    real_read = mirror._read_all
    gate, read_done = asyncio.Event(), asyncio.Event()

    async def read():  # type: ignore[no-untyped-def]
        out = await real_read()
        read_done.set()
        await gate.wait()
        return out

    mirror._read_all = read  # type: ignore[method-assign]
    return gate, read_done
