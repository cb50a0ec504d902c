"""Outside attack review (session 29) of the mirror's look pool (`Store._open_look_pool`, a pool of one
connection with plan_cache_mode=force_generic_plan, opened on the first look, closed in `stop()`).

Findings: the pool is opened lazily and `stop()` closes only the one already open, so a look that
starts after `stop()` (a request still in flight while the gateway shuts down: `current()` does not
check `_stopped`, and the copy stays loaded), or one that was opening the pool while `stop()` ran,
leaves a pool with an open connection that nothing closes. The rest holds (checked here): a killed
look connection falls back to SQL once and the next look reconnects; the gateway's per-job login can
open and use the look pool.

The findings reproduced here were fixed in session 29; the tests keep them fixed.
"""

from __future__ import annotations

import asyncio

import asyncpg

from brain.local.devdb import EmbeddedPostgres
from brain.store import Scope, Store
from brain.store.lexical import bm25
from tests.store.test_lexical_mirror import _count, _ready, mirrored  # noqa: F401


async def test_a_look_after_stop_opens_no_pool(mirrored: Store) -> None:  # noqa: F811
    mirror = mirrored.mirror
    assert mirror is not None and mirror._look_pool is None  # loaded, never looked
    await mirror.stop()  # the gateway shuts down; a request is still in flight
    looked = await mirror.current()
    pool = mirror._look_pool
    leaked = pool is not None and not pool._closed
    if leaked:
        await pool.close()  # tidy up for the fixture
    assert not leaked, f"a look after stop() opened a pool nothing closes (look answered {looked})"


async def test_stop_while_the_first_look_opens_the_pool_closes_it(mirrored: Store) -> None:  # noqa: F811
    mirror = mirrored.mirror
    assert mirror is not None and mirror._open_look_pool is not None
    real = mirror._open_look_pool
    opening, go = asyncio.Event(), asyncio.Event()

    async def slow() -> asyncpg.Pool:  # connecting takes a while (TLS, a busy server)
        opening.set()
        await go.wait()
        return await real()

    mirror._open_look_pool = slow
    look = asyncio.create_task(mirror.current())
    await opening.wait()
    await mirror.stop()
    go.set()
    await look
    pool = mirror._look_pool
    leaked = pool is not None and not pool._closed
    if leaked:
        await pool.close()
    assert not leaked, "the look pool opened while stop() ran stays open after stop()"


async def test_a_killed_look_connection_costs_one_look(mirrored: Store) -> None:  # noqa: F811
    """Holds."""
    mirror = mirrored.mirror
    assert mirror is not None
    assert await mirror.current() is not None
    assert mirror._look_pool is not None
    async with mirror._look_pool.acquire() as conn:
        pid = conn.get_server_pid()
    await mirrored.pool_for_tests.execute("SELECT pg_terminate_backend($1)", pid)
    await asyncio.sleep(0.1)
    before = _count("mirror")
    hits = (await bm25(mirrored, "staging database port", Scope.of([]), 5)).hits
    assert hits, "the SQL leg answers while the look's connection is gone"
    hits = (await bm25(mirrored, "staging database port", Scope.of([]), 5)).hits
    assert hits and _count("mirror") > before, "the look pool reconnects for the next look"


async def test_the_gateway_login_looks_on_its_own_pool(pg: EmbeddedPostgres, dsn: str, embedder) -> None:  # type: ignore[no-untyped-def]
    """Holds: plan_cache_mode is a user setting, so the per-job gateway login may set it at startup."""
    from tests.security.test_db_roles import _bootstrap, _login_dsn

    prefix, passwords = await _bootstrap(dsn, embedder.dim)
    store = await Store.open(_login_dsn(pg, dsn, prefix, "gateway", passwords["gateway"]), dim=embedder.dim)
    try:
        mirror = store.start_mirror()
        await _ready(mirror)
        assert await mirror.current() is not None
        assert mirror._look_pool is not None and mirror._look_pool is not store.pool_for_tests
        async with mirror._look_pool.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
    finally:
        await store.close()
    assert mirror._look_pool._closed


async def test_the_look_plan_made_on_a_small_table_range_scans_once_it_grew(mirrored: Store) -> None:  # noqa: F811
    """The look connection keeps one generic plan (no custom plan sees the table grow); made when the
    brain was small, is it still index range scans after a bulk import, before any ANALYZE?"""
    import json

    from brain.store.lexical_mirror import CHANGES_SQL
    from tests.store.test_lexical_mirror import _nodes

    mirror = mirrored.mirror
    assert mirror is not None
    pool = mirrored.pool_for_tests
    await pool.execute(
        "ALTER TABLE memories SET (autovacuum_enabled = false)"
    )  # before: it invalidates plans
    assert await mirror.current() is not None  # planned now, on a few dozen rows
    await pool.execute(
        """INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)
           SELECT 'bulk' || i, 'bulk' || i, 'note', 'shared', 'import', 'x', 'bulk', 'bulk row ' || i, md5(i::text)
             FROM generate_series(1, 5000) i"""
    )
    assert await mirror.current() is None or True  # drains (past `page`) in the background
    for _ in range(100):
        if mirror._drain is None or mirror._drain.done():
            break
        await asyncio.sleep(0.05)
    assert await mirror.current() is not None
    now = await pool.fetchval("SELECT pg_snapshot_xmax(pg_current_snapshot())::text")
    assert mirror._look_pool is not None
    async with mirror._look_pool.acquire() as conn:
        name = await conn.fetchval(
            "SELECT name FROM pg_prepared_statements WHERE statement = $1", CHANGES_SQL
        )
        plan = await conn.fetchval(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {name}('{now}', '{{}}', '0', '', 10)"
        )
    scans = list(_nodes(json.loads(plan)[0]["Plan"], "memories"))
    assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), scans
    assert all(n["Shared Hit Blocks"] + n["Shared Read Blocks"] <= 6 for n in scans), scans


async def test_a_look_pool_that_cannot_connect_leaves_the_mirror_to_the_main_pool(
    pg: EmbeddedPostgres,
    dsn: str,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """The look needs one connection beyond the pool's (replicas × pool size was the connection
    budget, docs/runbooks/RetrievalDegraded.md). When the server refuses it (the login's or the
    server's connection limit), every look fails to open the pool: no question is ever answered
    from the mirror, and each pays a refused connection attempt and logs a warning. Before, looks
    ran on the pool's own connections."""
    from tests.security.test_db_roles import _bootstrap, _login_dsn

    prefix, passwords = await _bootstrap(dsn, embedder.dim)
    login = _login_dsn(pg, dsn, prefix, "gateway", passwords["gateway"])
    store = await Store.open(login, dim=embedder.dim, min_size=2, max_size=2)
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(
            "INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)"
            " VALUES ('n1', 'n1', 'note', 'shared', 'import', 'x', '', 'the narwhal exporter', 'n1')"
        )
        await admin.execute(f"ALTER ROLE {prefix}_gateway CONNECTION LIMIT 2")  # the pool's two, no more
        mirror = store.start_mirror()
        await _ready(mirror)
        before = _count("mirror")
        for _ in range(3):
            assert (await bm25(store, "narwhal exporter", Scope.of([]), 5)).hits
        assert _count("mirror") > before, "the mirror never answers: its look pool cannot connect"
    finally:
        await admin.execute(f"ALTER ROLE {prefix}_gateway CONNECTION LIMIT -1")
        await admin.close()
        await store.close()
