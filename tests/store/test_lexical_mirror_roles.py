"""Migration 0008 under the per-job logins (brain.store.roles), from the outside attack review of
session 28 (which held). Every login that writes memories fires the stamping trigger; the gateway's login loads the mirror
and looks (pg_current_snapshot, the new column, 'memories'::regclass)."""

from __future__ import annotations

import asyncio

import asyncpg

from brain.local.devdb import EmbeddedPostgres
from brain.store.lexical_mirror import LexicalMirror
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
