"""The `keys` table: hashed API keys. Only services.keys.KeyStore (the owners' door) calls these."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from brain.store.store import Store, new_id

COLUMNS = "id, name, role, namespaces, expires_at, created_at, revoked_at, last_used_at"

Row = Mapping[str, Any]


async def insert(
    store: Store,
    name: str,
    key_hash: str,
    role: str,
    namespaces: list[str] | None,
    expires_at: datetime | None,
) -> Row | None:
    """The new key's row, or None when the name is taken."""
    try:
        row: Row = await store._pool.fetchrow(
            f"""INSERT INTO keys (id, name, key_hash, role, namespaces, expires_at)
                VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}""",
            new_id(),
            name,
            key_hash,
            role,
            namespaces,
            expires_at,
        )
    except asyncpg.UniqueViolationError:
        return None
    return row


async def listing(store: Store, *, include_revoked: bool) -> list[Row]:
    rows: list[Row] = await store._pool.fetch(
        f"SELECT {COLUMNS} FROM keys WHERE $1 OR revoked_at IS NULL ORDER BY created_at", include_revoked
    )
    return rows


async def find(store: Store, value: str, *, by_id: bool) -> Row | None:
    column = "id" if by_id else "name"
    row: Row | None = await store._pool.fetchrow(f"SELECT {COLUMNS} FROM keys WHERE {column} = $1", value)
    return row


async def revoke(store: Store, value: str, *, by_id: bool) -> Row | None:
    """Revoke by one column only (id or name), never either: a name equal to some id revokes one key."""
    column = "id" if by_id else "name"
    row: Row | None = await store._pool.fetchrow(
        f"""UPDATE keys SET revoked_at = coalesce(revoked_at, now())
             WHERE {column} = $1 RETURNING {COLUMNS}""",
        value,
    )
    return row


async def by_hash(store: Store, key_hash: str) -> Row | None:
    row: Row | None = await store._pool.fetchrow(f"SELECT {COLUMNS} FROM keys WHERE key_hash = $1", key_hash)
    return row


async def by_hashes(store: Store, key_hashes: list[str]) -> list[Row]:
    """The rows of these key hashes (each with its `key_hash`), in one round trip."""
    rows: list[Row] = await store._pool.fetch(
        f"SELECT key_hash, {COLUMNS} FROM keys WHERE key_hash = ANY($1::text[])", key_hashes
    )
    return rows


async def touch(store: Store, key_id: str) -> None:
    await store._pool.execute("UPDATE keys SET last_used_at = now() WHERE id = $1", key_id)


async def fingerprint(store: Store) -> tuple[Any, ...]:
    """What changes whenever a verdict could: a key created or revoked anywhere (every replica reads it).

    No counter to maintain and no migration: revoke sets `revoked_at` (first time only) and create
    adds a row, so the count of keys, of revoked keys and the newest of each time move on every such
    change. One index-free aggregate over a table of a few hundred rows."""
    row = await store._pool.fetchrow(
        "SELECT count(*) AS n, count(revoked_at) AS revoked, max(created_at) AS created, "
        "max(revoked_at) AS last_revoked FROM keys"
    )
    return tuple(row.values())
