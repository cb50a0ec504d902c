"""Database faults below the gateway: a server that hangs, one that crashes, and who may connect.

Each test runs its own real Postgres (brain.local.devdb), because it freezes, kills or reconfigures it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from brain.core.models import Actor, MemoryIn
from brain.local.devdb import EmbeddedPostgres
from brain.local.up import supervise_postgres
from brain.store import Scope, Store
from brain.store.lexical import bm25
from brain.store.writer import StoreWriter
from tests.kit.database import own_postgres

AGENT = Actor(name="claude-mac", role="agent", origin="agent")


@pytest_asyncio.fixture(loop_scope="session")
async def own_pg() -> AsyncIterator[EmbeddedPostgres]:
    async with own_postgres() as pg:
        yield pg


class Frozen:
    """The server SIGSTOPped until the block ends (or a safety timer thaws it): `.held` says which."""

    def __init__(self, pg: EmbeddedPostgres, safety_s: float = 30.0) -> None:
        self.pg, self.safety_s, self.held = pg, safety_s, False

    async def __aenter__(self) -> Frozen:
        self.pg.freeze()
        self.held = True
        self._timer = asyncio.get_running_loop().call_later(self.safety_s, self._thaw)
        return self

    def _thaw(self) -> None:
        self.held = False
        self.pg.thaw()

    async def __aexit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._thaw()

    async def outcome(self, aw: Awaitable[Any]) -> tuple[str, bool]:
        """What `aw` came to (its value's type or its error's), and whether the server was still frozen."""
        try:
            value = await aw
            what = type(value).__name__
        except BaseException as e:  # the error is the observation
            what = type(e).__name__
        return what, self.held


async def test_a_hanging_database_does_not_hold_callers(own_pg: EmbeddedPostgres) -> None:
    dsn = await own_pg.create_database("hang")
    store = await Store.open(dsn, dim=384, timeout=2.0, statement_timeout_ms=1000, command_timeout=1.5)
    try:
        await StoreWriter(store).note(
            MemoryIn(body="The ledger export runs hourly.", namespace="repo:a"), actor=AGENT
        )
        scope = Scope.of(["repo:a"])
        async with Frozen(own_pg) as frozen:
            # A retrieval leg whose budget runs out returns at once: its connection is abandoned, not
            # released back through a reset query the frozen server would never answer.
            for _ in range(3):
                leg = asyncio.wait_for(bm25(store, "ledger export", scope, 5), 0.3)
                assert await frozen.outcome(leg) == ("TimeoutError", True)
            # A write in a transaction gives up at the command timeout instead of waiting on ROLLBACK.
            write = StoreWriter(store).note(
                MemoryIn(body="The ledger export moved.", namespace="repo:a"), actor=AGENT
            )
            assert await frozen.outcome(write) == ("TimeoutError", True)
            # So do plain pool reads (key lookups, proposals) that set no deadline of their own.
            assert await frozen.outcome(store.pool_for_tests.fetchval("SELECT 1")) == ("TimeoutError", True)
        # The same store works again once the server does: the pool opened fresh connections.
        hits = (await bm25(store, "ledger export", scope, 5)).hits
        assert len(hits) == 1
        assert (
            await store.pool_for_tests.fetchval("SELECT count(*) FROM memories") == 1
        )  # the abandoned write rolled back
    finally:
        await store.close()


async def test_a_slow_statement_is_stopped_by_the_server(own_pg: EmbeddedPostgres) -> None:
    dsn = await own_pg.create_database("slow")
    store = await Store.open(dsn, dim=384, statement_timeout_ms=200, command_timeout=5)
    try:
        with pytest.raises(asyncpg.QueryCanceledError, match="statement timeout"):
            await store.pool_for_tests.execute("SELECT pg_sleep(3)")
        assert await store.pool_for_tests.fetchval("SELECT 1") == 1
    finally:
        await store.close()


async def test_postgres_refuses_connections_without_the_generated_password(own_pg: EmbeddedPostgres) -> None:
    assert own_pg.password_path.stat().st_mode & 0o777 == 0o600
    assert own_pg.password in own_pg.dsn
    for wrong in ("", ":not-the-password"):
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(f"postgresql://postgres{wrong}@127.0.0.1:{own_pg.port}/postgres")
    conn = await asyncpg.connect(own_pg.dsn)
    try:
        assert await conn.fetchval("SELECT current_setting('password_encryption')") == "scram-sha-256"
    finally:
        await conn.close()


async def test_a_data_dir_made_with_trust_auth_is_switched_to_passwords() -> None:
    pg = EmbeddedPostgres()  # its own directory under /tmp, which `nobody` can enter when we are root
    await asyncio.to_thread(pg.init)
    hba = pg.data_dir / "pg_hba.conf"  # type: ignore[operator]
    hba.write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")  # what older builds wrote
    pg.password_path.unlink()
    try:
        await asyncio.to_thread(pg.start)
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{pg.port}/postgres")
        conn = await asyncpg.connect(pg.dsn)
        await conn.close()
    finally:
        await asyncio.to_thread(pg.stop)


async def test_brainctl_up_restarts_a_crashed_postgres() -> None:
    # Durable, as `brainctl up` runs it: with synchronous_commit off a kill -9 may lose the last commits.
    own_pg = await asyncio.to_thread(EmbeddedPostgres(fast=False).start)
    dsn = await own_pg.create_database("crash")
    store = await Store.open(dsn, dim=384, timeout=2.0, command_timeout=2.0)
    said: list[str] = []  # what `brainctl up` would print
    stop = asyncio.Event()
    supervisor = asyncio.create_task(supervise_postgres(own_pg, stop, interval=0.2, say=said.append))
    try:
        mem = (
            await StoreWriter(store).note(MemoryIn(body="Crash-safe fact.", namespace="repo:a"), actor=AGENT)
        ).memory
        old_pid = own_pg.pid
        own_pg.crash()  # kill -9 of the postmaster
        back = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120  # crash recovery on a loaded machine; the test fails, not hangs
        while back is None and loop.time() < deadline:
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                back = await store.pool_for_tests.fetchval("SELECT body FROM memories WHERE id = $1", mem.id)
            await asyncio.sleep(0.2)
        assert back == "Crash-safe fact.", said  # the same Store, reconnected to the restarted server
        assert own_pg.running and own_pg.pid != old_pid
    finally:
        stop.set()
        restarts = await supervisor
        await store.close()
        await asyncio.to_thread(own_pg.stop)
    # (said once the supervisor has finished: the server accepts connections a moment before start() returns)
    assert restarts == 1, said
    assert any("restarting" in line for line in said) and any("is back" in line for line in said), said


def test_password_file_is_private_to_whoever_started_postgres(own_pg: EmbeddedPostgres) -> None:
    st = own_pg.password_path.stat()
    assert st.st_uid == os.geteuid() and st.st_mode & 0o077 == 0


async def test_key_checks_fall_back_to_recent_verdicts_while_the_database_hangs(
    own_pg: EmbeddedPostgres,
) -> None:
    from brain.core.errors import Unauthorized
    from brain.services.keys import KeyStore, KeyVerifier

    dsn = await own_pg.create_database("keys")
    store = await Store.open(dsn, dim=384, timeout=2.0, command_timeout=2.0)
    try:
        ks = KeyStore(store)
        known, _ = await ks.create("claude-mac", "agent")
        never, _ = await ks.create("ci", "read")
        verifier = KeyVerifier(ks, ttl=0.2, lookup_timeout=0.5)
        assert (await verifier.verify(known)).name == "claude-mac"
        await asyncio.sleep(0.3)  # the cached verdict is now past its TTL
        async with Frozen(own_pg) as frozen:
            for _ in range(3):  # answered from the last verdict, not after the outage
                outcome = await frozen.outcome(verifier.verify(known))
                assert outcome == ("Actor", True)
            # A key never verified cannot be vouched for, nor called bad: "retry" (a 503), at once.
            assert await frozen.outcome(verifier.verify(never)) == ("KeyStoreUnavailable", True)
        with pytest.raises(Unauthorized):
            await KeyVerifier(ks).verify("brk_not-a-key")
    finally:
        await store.close()
