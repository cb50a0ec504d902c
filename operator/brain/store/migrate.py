"""Versioned SQL migrations: applied in order on start, idempotent, serialised by an advisory lock.

Migrations expand, then contract (docs/operations.md, "Schema migrations"), so the previous release
keeps working on a schema one release newer: an upgrade rolls while the old gateways serve, and a
`helm rollback` starts the old gateways on the newer schema. `brain_meta.oldest_reader` records the
oldest schema version whose code still runs here; a build that knows only an older schema opens it
read-as-is when it is at least that, and refuses naming both versions when it is not.

A migration file whose first line is `-- destructive` is a contract step (it drops or rewrites what
older code reads): it is refused unless the caller passes `allow_destructive=True`, so nothing
stored is ever dropped by a routine upgrade, and it raises `oldest_reader` to the version before
it. tests/store/test_migration_compat.py fails on a migration that breaks the previous release's schema
without saying so.
"""

from __future__ import annotations

import re
from importlib import resources

import asyncpg

from brain.core.errors import SchemaMismatch

_LOCK_ID = 0x6272_6169_6E  # "brain"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def available() -> list[tuple[int, str, str]]:
    out = []
    for entry in resources.files("brain.store.migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text()))
    return sorted(out)


async def migrate(
    conn: asyncpg.Connection, *, dim: int, allow_destructive: bool = False, upto: int | None = None
) -> int:
    """Brings the schema to the newest version (or to `upto`, for tests of an upgrade); returns it.
    Refuses a dimension change or a newer schema.

    A schema already at the newest version is only read, never locked or altered: a workload's
    role (brain/store/roles.py) has no CREATE right, and must still open the store."""
    migrations = available()
    newest = migrations[-1][0] if migrations else 0
    if upto is None and await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"):
        at = await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")
        stored_dim = await conn.fetchval("SELECT value FROM brain_meta WHERE key = 'embedding_dim'")
        if at > newest:
            oldest = await conn.fetchval("SELECT value FROM brain_meta WHERE key = 'oldest_reader'")
            if newest < int(oldest or 1):
                raise SchemaMismatch(
                    f"the database schema is at version {at} and needs code that knows schema "
                    f"{oldest} or newer; this build knows up to {newest}: upgrade brain-operator"
                )
            if stored_dim is None or int(stored_dim) == dim:
                return int(at)  # a rollback onto a schema expanded by a newer release: used as it is
        if at == newest and (stored_dim is None or int(stored_dim) == dim):
            return int(at)
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_ID)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        current = await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")
        if current > newest and upto is not None:
            raise SchemaMismatch(
                f"the database schema is at version {current}, past the {upto} asked for; "
                "a schema is never migrated down"
            )
        for version, name, sql in migrations:
            if version <= current or (upto is not None and version > upto):
                continue
            if sql.lstrip().startswith("-- destructive") and not allow_destructive:
                raise SchemaMismatch(
                    f"migration {version:04d}_{name} drops or rewrites data; back up the database and rerun "
                    "with allow_destructive (brainctl migrate --allow-destructive)"
                )
            async with conn.transaction():
                await conn.execute(sql.replace("{dim}", str(int(dim))))
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
                if sql.lstrip().startswith("-- destructive") and version > 1:
                    await conn.execute(
                        "INSERT INTO brain_meta (key, value) VALUES ('oldest_reader', $1) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        str(version - 1),
                    )
                if version == 1:
                    await conn.execute(
                        "INSERT INTO brain_meta (key, value) VALUES ('embedding_dim', $1)", str(dim)
                    )
        stored = await conn.fetchval("SELECT value FROM brain_meta WHERE key = 'embedding_dim'")
        if stored is not None and int(stored) != dim:
            raise SchemaMismatch(
                f"this database stores {stored}-dimensional embeddings but embedding.dim is {dim}; "
                "the dimension is fixed when a brain is created (reindex into a new brain to change it)"
            )
        return int(newest if upto is None else min(newest, max(upto, current)))
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_ID)
