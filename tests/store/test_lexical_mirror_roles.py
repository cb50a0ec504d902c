"""Found by an outside attack review (session 28), fixed since; each test is the defect's reproduction. migration 0008 under the per-job logins (brain.store.roles) and an open bulk transaction.

Every login that writes memories fires the stamping trigger; the gateway's login loads the mirror
and looks (pg_current_snapshot, the new column, 'memories'::regclass)."""

from __future__ import annotations

import asyncio
import json

import asyncpg

from brain.local.devdb import EmbeddedPostgres
from brain.store import Store
from brain.store.lexical_mirror import CHANGES_SQL, LexicalMirror
from tests.security.test_db_roles import _bootstrap, _login_dsn

WRITERS = ("gateway", "ingest", "distill", "digest", "reindex")


async def test_every_writer_stamps_and_the_gateway_login_mirrors(
    pg: EmbeddedPostgres, dsn: str, embedder
) -> None:  # type: ignore[no-untyped-def]
    prefix, passwords = await _bootstrap(dsn, embedder.dim)
    for job in WRITERS:
        c = await asyncpg.connect(_login_dsn(pg, dsn, prefix, job, passwords[job]))
        try:
            await c.execute(
                "INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)"
                f" VALUES ('{job}1', '{job}1', 'note', 'shared', 'import', 'x', '', 'okapi {job}', '{job}1')"
            )
            first = await c.fetchval(f"SELECT lexical_xid::text FROM memories WHERE id = '{job}1'")
            await c.execute(f"UPDATE memories SET status = 'retired' WHERE id = '{job}1'")
            second = await c.fetchval(f"SELECT lexical_xid::text FROM memories WHERE id = '{job}1'")
            assert first is not None and second is not None and int(second) > int(first), job
        finally:
            await c.close()
    pool = await asyncpg.create_pool(
        _login_dsn(pg, dsn, prefix, "gateway", passwords["gateway"]), min_size=1, max_size=3
    )
    assert pool is not None
    try:
        mirror = LexicalMirror(pool)
        mirror.start()
        for _ in range(200):
            if mirror.ready:
                break
            await asyncio.sleep(0.05)
        assert mirror.ready
        assert await mirror.current()
        await mirror.stop()
    finally:
        await pool.close()


async def test_an_open_bulk_transaction_makes_every_look_read_its_rows(store: Store, dsn: str) -> None:
    """An import's one transaction (note_many) still open: its xid is in the snapshot's running
    list, so every look's `= ANY(running)` branch walks its index entries and checks each heap
    tuple (invisible, so the LIMIT never stops it): O(rows written so far) per look, two looks per
    keyword leg."""
    pool = store.pool_for_tests
    writer = await asyncpg.connect(dsn)
    try:
        tx = writer.transaction()
        await tx.start()
        await writer.execute(
            """INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)
               SELECT 'bulk' || i, 'bulk' || i, 'note', 'shared', 'import', 'x', 'bulk', 'bulk row ' || i, md5(i::text)
                 FROM generate_series(1, 10000) i"""
        )
        snap = await pool.fetchval("SELECT pg_current_snapshot()::text")
        _, xmax, xip = snap.split(":")
        running = [x for x in xip.split(",") if x]  # T is in xip, or at/past xmax: either branch walks it
        async with pool.acquire() as conn:
            await conn.execute("ANALYZE memories")
            plan = await conn.fetchval(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {CHANGES_SQL}", xmax, running, "0", "", 2001
            )
        top = json.loads(plan)[0]
        blocks = top["Plan"]["Shared Hit Blocks"] + top["Plan"]["Shared Read Blocks"]
        assert blocks < 100, f"a look with a 10,000-row transaction open read {blocks} buffers"
        await tx.rollback()
    finally:
        await writer.close()
