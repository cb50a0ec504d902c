"""Expand, then contract (#29): HEAD's migrations leave the previous release working on the newer
schema, a build opens a schema one release newer as it is (a `helm rollback`), and a migration that
breaks the previous release fails the check (tests/kit/migration_compat.py) or, marked destructive, makes
the older build refuse, naming both versions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import asyncpg
import pytest
import pytest_asyncio

from brain.core.errors import SchemaMismatch
from brain.store import migrate as mig
from tests.kit.database import fresh_database
from tests.kit.migration_compat import Column, breaks, migrations_at, named_by, previous_release, snapshot

DIM = 384
HEAD = mig.available()


@pytest_asyncio.fixture(loop_scope="session")
async def conn(pg: object) -> AsyncIterator[asyncpg.Connection]:
    async with fresh_database(pg, "t_compat") as dsn:  # type: ignore[arg-type]
        c = await asyncpg.connect(dsn)
        try:
            yield c
        finally:
            await c.close()


def _next(name: str, sql: str) -> tuple[int, str, str]:
    """A migration after HEAD's newest, as a future change would add it."""
    return HEAD[-1][0] + 1, name, sql


async def _upgrade(
    conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch, *extra: tuple[int, str, str]
) -> list[str]:
    """The previous release's schema from its own files, then HEAD's migrations and `extra`: what
    would break the previous release on the result."""
    _, commit = previous_release()
    old = migrations_at(commit)
    monkeypatch.setattr(mig, "available", lambda: old)
    await mig.migrate(conn, dim=DIM)
    before = await snapshot(conn)
    monkeypatch.setattr(mig, "available", lambda: [*HEAD, *extra])
    await mig.migrate(conn, dim=DIM, allow_destructive=True)
    return breaks(before, await snapshot(conn), partial(named_by, commit))


async def test_heads_migrations_keep_the_previous_release_working(
    conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await _upgrade(conn, monkeypatch) == []
    # and the previous build (knowing only its own migrations) opens the result as it is: a rollback
    _, commit = previous_release()
    old = migrations_at(commit)
    monkeypatch.setattr(mig, "available", lambda: old)
    assert await mig.migrate(conn, dim=DIM) == HEAD[-1][0]


async def test_a_migration_dropping_a_column_the_previous_gateway_reads_fails_the_check(
    conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop = _next("drop_status_reason", "ALTER TABLE memories DROP COLUMN status_reason;")
    assert await _upgrade(conn, monkeypatch, drop) == [
        "column memories.status_reason is dropped, and the previous release reads it"
    ]


async def test_a_required_column_without_a_default_fails_the_check_a_nullable_one_passes(
    conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    add = _next("add_columns", "ALTER TABLE memories ADD COLUMN team text, ADD COLUMN region text NOT NULL;")
    found = await _upgrade(conn, monkeypatch, add)
    assert len(found) == 1 and found[0].startswith("new column memories.region is NOT NULL"), found


async def test_a_changed_type_fails_the_check(
    conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    retype = _next("retype", "ALTER TABLE memories ALTER COLUMN status_reason TYPE varchar(200);")
    assert await _upgrade(conn, monkeypatch, retype) == [
        "column memories.status_reason changes type text -> character varying"
    ]


async def test_a_contract_step_makes_older_builds_refuse_naming_both_versions(
    conn: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A destructive (contract) migration V is written for code that knows V-1 and no longer reads
    what it drops: that build still opens the schema, an older one is refused with a 503."""
    contract = _next("contract", "-- destructive\nALTER TABLE memories DROP COLUMN status_reason;")
    await _upgrade(conn, monkeypatch, contract)
    v = contract[0]
    monkeypatch.setattr(mig, "available", lambda: HEAD)  # knows V-1
    assert await mig.migrate(conn, dim=DIM) == v
    monkeypatch.setattr(mig, "available", lambda: HEAD[:-1])  # knows V-2
    with pytest.raises(SchemaMismatch) as refused:
        await mig.migrate(conn, dim=DIM)
    said = str(refused.value)
    assert f"schema is at version {v} and needs code that knows schema {v - 1} or newer" in said, said
    assert f"this build knows up to {v - 2}" in said and refused.value.status == 503


def test_dropping_what_the_previous_release_never_names_is_a_contract_that_passes() -> None:
    before = {"memories": {"id": Column("text", False, False), "scratch": Column("text", True, False)}}
    after = {"memories": {"id": Column("text", False, False)}}
    assert breaks(before, after, lambda name: name != "scratch") == []
    assert breaks(before, after, lambda name: True) == [
        "column memories.scratch is dropped, and the previous release reads it"
    ]
    assert breaks(before, {}, lambda name: True) == [
        "table memories is dropped, and the previous release reads it"
    ]


def test_the_previous_release_names_the_columns_it_reads() -> None:
    _, commit = previous_release()
    assert named_by(commit, "content_hash") and not named_by(commit, "no_such_column_anywhere")
