"""Found by an outside attack review (session 28), fixed since; each test is the defect's reproduction. rows restored (pg_restore --clean into another cluster: DR, a dump/restore major upgrade)
keep the `lexical_xid` they had on the dumped cluster: the data is COPYed before the trigger exists.
When that cluster's transaction counter was further along than this one's, every stamp lies past
this server's xmax, so every look reads them again ("changed since my snapshot") forever.

Simulated by writing the column directly (what COPY does); the trigger does not fire on it."""

from __future__ import annotations

import asyncio

from brain.core.models import Actor
from brain.store import Scope, Store
from brain.store import lexical_mirror as lm
from brain.store.lexical import bm25
from tests.store.test_lexical_mirror import BODIES, _count, _ready, _write

FUTURE = """UPDATE memories SET lexical_xid =
              (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 50000000)::text::xid8"""


async def test_restored_future_stamps_more_than_a_page_the_mirror_never_answers(
    store: Store, owner: Actor
) -> None:
    await _write(store, BODIES, owner)
    await store.pool_for_tests.execute(FUTURE)  # as pg_restore from a busier cluster leaves them
    mirror = store.start_mirror()  # (or: the relation changed, the mirror reloads)
    mirror.page = mirror.batch = 3
    await _ready(mirror)
    before = _count("mirror")
    for _ in range(60):
        await bm25(store, "refunds settled", Scope.of(["repo:payments"]), 5)
        if _count("mirror") > before:
            break
        await asyncio.sleep(0.05)
    assert _count("mirror") > before, "nothing changed since the load, yet the mirror never answers"


async def test_restored_future_stamps_are_reapplied_on_every_look(
    store: Store, owner: Actor, monkeypatch
) -> None:
    await _write(store, BODIES, owner)
    await store.pool_for_tests.execute(FUTURE)
    mirror = store.start_mirror()
    mirror.rebuild_share = 1e9  # keep the copy: count what each look applies
    await _ready(mirror)
    assert await mirror.current()
    applied: list[int] = []
    real = lm._apply
    monkeypatch.setattr(lm, "_apply", lambda p, rows: (applied.append(len(rows)), real(p, rows))[1])
    for _ in range(5):
        assert await mirror.current()
    assert sum(applied) == 0, f"no writes, yet the looks re-read and re-applied {applied} rows"
