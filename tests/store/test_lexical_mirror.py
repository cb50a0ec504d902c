"""The lexical leg's in-memory candidates (brain.store.lexical_mirror) rank as the SQL leg does, and see
every commit before they answer, against a real Postgres.

What a user would notice: a memory written through another replica, a job or an open transaction
that commits late is a keyword hit at once, a retired one is gone at once, and no scope ever shows a
memory of another namespace, whatever the mirror holds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from brain.core.models import Actor, MemoryIn
from brain.store import Scope, Store
from brain.store.lexical import bm25
from brain.store.lexical_mirror import LexicalMirror, Seen, lexical_answers
from brain.store.writer import StoreWriter
from tests.store import test_lexical as lexical_tests

# test_lexical's corpus and questions, and a namespace no scope below asks for.
BODIES = [
    *lexical_tests.BODIES,
    ("team-b", "Team B's staging database is on port 7777 and its password is hunter2."),
]
QUERIES = [q for q in lexical_tests.QUERIES if q]


async def _write(store: Store, items: list[tuple[str, str]], owner: Actor) -> list[str]:
    written = await StoreWriter(store).note_many(
        [(MemoryIn(body=body, namespace=ns), None) for ns, body in items], actor=owner
    )
    return [w.id for w in written]


def _count(path: str) -> float:
    return lexical_answers.labels(path)._value.get()


async def _ready(mirror: LexicalMirror) -> None:
    for _ in range(200):
        if mirror.ready:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the mirror did not load within 10 s")


@pytest.fixture
async def mirrored(store: Store, owner: Actor) -> AsyncIterator[Store]:
    await _write(store, BODIES, owner)
    await _ready(store.start_mirror())
    yield store


async def _both(store: Store, query: str, scope: Scope, n: int = 10) -> tuple[list, list]:
    """The leg's hits through the mirror, then in SQL alone, on the same database."""
    mirror = store.mirror
    through = (await bm25(store, query, scope, n)).hits
    store.mirror = None
    try:
        alone = (await bm25(store, query, scope, n)).hits
    finally:
        store.mirror = mirror
    return through, alone


@pytest.mark.parametrize("query", QUERIES)
async def test_the_mirror_ranks_as_the_sql_leg(mirrored: Store, query: str) -> None:
    for scope in (Scope.of(["repo:payments"]), Scope.of(["repo:web", "repo:payments"]), Scope.of([])):
        through, alone = await _both(mirrored, query, scope)
        assert [i for i, _ in through] == [i for i, _ in alone]
        assert [round(s, 5) for _, s in through] == [round(s, 5) for _, s in alone]


async def test_another_namespace_never_answers(mirrored: Store) -> None:
    hits = (await bm25(mirrored, "staging database port password", Scope.of(["repo:web"]), 20)).hits
    namespaces = await mirrored.pool_for_tests.fetch(
        "SELECT DISTINCT namespace FROM memories WHERE id = ANY($1::text[])", [i for i, _ in hits]
    )
    assert {r["namespace"] for r in namespaces} <= {"repo:web", "shared"}
    assert hits, "the question has keyword hits in repo:web and shared"


async def test_a_write_is_a_hit_at_once_and_a_retired_memory_is_gone(mirrored: Store, owner: Actor) -> None:
    scope = Scope.of(["repo:payments"])
    before = _count("mirror")
    assert mirrored.mirror is not None
    looks = mirrored.mirror._looks_started
    [new] = await _write(
        mirrored, [("repo:payments", "The quetzal-ledger reconciles refunds hourly.")], owner
    )
    hits = (await bm25(mirrored, "quetzal ledger", scope, 10)).hits
    assert [i for i, _ in hits][:1] == [new]
    assert _count("mirror") == before + 1, "answered by the mirror, not the SQL leg"
    assert mirrored.mirror._looks_started == looks + 1, "one look a leg: each is a round trip"
    await StoreWriter(mirrored).set_status(new, "retired", "wrong", actor=owner)
    assert new not in [i for i, _ in (await bm25(mirrored, "quetzal ledger", scope, 10)).hits]


async def test_a_commit_by_another_client_is_seen_whatever_the_commit_order(
    mirrored: Store, dsn: str, owner: Actor
) -> None:
    """A transaction that began first and commits last (its xid below what the mirror saw) is read on
    the next look, as is one that committed in between. (No word in common: each insert's lexeme
    counts lock their rows until it ends.)"""
    scope = Scope.of([])
    early = await asyncpg.connect(dsn)
    late = await asyncpg.connect(dsn)
    try:
        tx = early.transaction()
        await tx.start()
        await early.execute(
            "INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)"
            " VALUES ('early1', 'early1', 'note', 'shared', 'import', 'x', 'anaconda', 'anaconda', 'h1')"
        )
        await late.execute(
            "INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)"
            " VALUES ('late1', 'late1', 'note', 'shared', 'import', 'x', 'basilisk', 'basilisk', 'h2')"
        )
        assert [i for i, _ in (await bm25(mirrored, "basilisk", scope, 5)).hits] == ["late1"]
        assert (await bm25(mirrored, "anaconda", scope, 5)).hits == []
        await tx.commit()
        assert [i for i, _ in (await bm25(mirrored, "anaconda", scope, 5)).hits] == ["early1"]
    finally:
        await early.close()
        await late.close()


async def test_a_bulk_change_is_answered_in_sql_until_the_mirror_catches_up(
    mirrored: Store, owner: Actor
) -> None:
    mirror = mirrored.mirror
    assert mirror is not None
    mirror.page = mirror.batch = 3  # the drain pages through the 8 by the (stamp, id) keyset
    ids = await _write(
        mirrored, [("shared", f"Pelican runbook step {i}: drain the pelican queue.") for i in range(8)], owner
    )
    before = _count("database")
    first = (await bm25(mirrored, "pelican runbook", Scope.of([]), 20)).hits
    assert _count("database") == before + 1
    assert {i for i, _ in first} == set(ids)
    for _ in range(100):
        if await mirror.current():
            break
        await asyncio.sleep(0.05)
    through, alone = await _both(mirrored, "pelican runbook", Scope.of([]), 20)
    assert through == alone and {i for i, _ in through} == set(ids)


@pytest.mark.parametrize("change", ["relation", "started"])
async def test_a_replaced_table_or_server_reloads_the_mirror(mirrored: Store, change: str) -> None:
    """A restore replaces the table; a failover or restart changes the server, whose transaction
    counter may have lost commits: either way the copy is reloaded, and the SQL leg answers meanwhile."""
    mirror = mirrored.mirror
    assert mirror is not None and mirror._seen is not None
    seen = mirror._seen
    mirror._seen = Seen(  # what the mirror would have seen before the restore or failover
        seen.xmax,
        seen.running,
        seen.relation + (change == "relation"),
        seen.started + ("x" if change == "started" else ""),
    )
    before = _count("database")
    assert (await bm25(mirrored, "refunds", Scope.of(["repo:payments"]), 5)).hits
    assert _count("database") == before + 1
    await _ready(mirror)
    through, alone = await _both(mirrored, "refunds", Scope.of(["repo:payments"]))
    assert through == alone


async def test_history_and_other_kinds_are_the_sql_legs(mirrored: Store, owner: Actor) -> None:
    """`as_of` scopes score superseded versions, which the mirror does not hold: they run in SQL."""
    from datetime import UTC, datetime

    before = _count("database")
    await bm25(mirrored, "refunds", Scope.of(["repo:payments"], as_of=datetime.now(UTC)), 5)
    assert _count("database") == before + 1
    through, alone = await _both(mirrored, "deploy", Scope.of([], kinds=("note",)))
    assert through == alone


async def test_a_look_cancelled_with_its_caller_is_not_taken_as_done(mirrored: Store, owner: Actor) -> None:
    """Callers that queued behind a look share the next one; when that one is cancelled (its
    retrieval ran out of budget), they must look for themselves, or a commit made before they asked
    would be missing from their answer."""
    mirror = mirrored.mirror
    assert mirror is not None
    real, stalls, calls = mirror._look_once, [asyncio.Event(), asyncio.Event()], [0]

    async def stalled() -> bool:  # the first two looks wait, as on a slow statement
        calls[0] += 1
        if calls[0] <= 2:
            await stalls[calls[0] - 1].wait()
        return await real()

    mirror._look_once = stalled  # type: ignore[method-assign]
    first = asyncio.create_task(mirror.current())
    await asyncio.sleep(0.05)
    [new] = await _write(mirrored, [("shared", "The okapi cache is flushed at noon.")], owner)
    queued = [asyncio.create_task(mirror.current()) for _ in range(2)]  # both want a look after `first`
    await asyncio.sleep(0.05)
    stalls[0].set()
    assert await first
    await asyncio.sleep(0.05)  # the first queued caller is in the second look now
    queued[0].cancel()
    assert await queued[1], "the other caller looked itself"
    assert mirror.postings is not None and new in mirror.postings.slot_of


async def test_the_look_reads_only_new_stamps_under_a_generic_plan(mirrored: Store) -> None:
    """A look runs before every keyword leg, so it must read the stamps past its snapshot only, not
    walk the stamp index: asyncpg's prepared statements can fall back to a generic plan, under which
    an OR of the two conditions walked the whole index and a row-comparison keyset started the scan
    at its first entry (1.1 s and 56 ms at 1M memories). 5,000 stamped rows, nothing new: the look's
    index scans touch a handful of pages, where a walk touches dozens."""
    from brain.store.lexical_mirror import CHANGES_SQL

    pool = mirrored.pool_for_tests
    await pool.execute(
        """INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)
           SELECT 'bulk' || i, 'bulk' || i, 'note', 'shared', 'import', 'x', 'bulk', 'bulk row ' || i, md5(i::text)
             FROM generate_series(1, 5000) i"""
    )
    now = await pool.fetchval("SELECT pg_snapshot_xmax(pg_current_snapshot())::text")
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE memories; SET plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE look(text, text[], text, text, int) AS {CHANGES_SQL}")
        plan = await conn.fetchval(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE look('{now}', '{{}}', '0', '', 10)"
        )
        await conn.execute("DEALLOCATE look; RESET plan_cache_mode")
    scans = list(_nodes(json.loads(plan)[0]["Plan"], "memories"))
    assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), scans
    assert all(n["Shared Hit Blocks"] + n["Shared Read Blocks"] <= 6 for n in scans), scans


def _nodes(node: dict[str, Any], relation: str) -> Iterator[dict[str, Any]]:
    if node.get("Relation Name") == relation:
        yield node
    for child in node.get("Plans", []):
        yield from _nodes(child, relation)
