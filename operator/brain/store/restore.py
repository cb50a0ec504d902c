"""The database side of `brainctl restore` (brain.cli.restore): what the target brain records, its
extensions, and the role grants again after pg_restore replaced its tables."""

from __future__ import annotations

import asyncpg

from brain.store import roles


class Unreachable(Exception):
    """The target database could not be connected to."""


async def _connect(dsn: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn, timeout=10)
    except (OSError, asyncpg.PostgresError) as e:
        raise Unreachable(str(e)) from None


async def brain_meta(dsn: str) -> dict[str, str] | None:
    """The target's `embedding_model` and `embedding_dim` rows; None for a database no brain used yet."""
    conn = await _connect(dsn)
    try:
        if not await conn.fetchval("SELECT to_regclass('public.brain_meta') IS NOT NULL"):
            return None
        rows = await conn.fetch(
            "SELECT key, value FROM brain_meta WHERE key IN ('embedding_model', 'embedding_dim')"
        )
        return {r["key"]: r["value"] for r in rows}
    finally:
        await conn.close()


async def ensure_extensions(dsn: str) -> None:
    """The restore leaves the dump's extensions out: the target keeps (or here first gets) its own."""
    conn = await _connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm")
    finally:
        await conn.close()


async def regrant(dsn: str, prefix: str, dim: int) -> str:
    """The migration step's grants again: as a superuser (managed) the full bootstrap, keeping each
    login's password; as the database's owner (CloudNativePG) bootstrap_as_owner."""
    conn = await _connect(dsn)
    try:
        if await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
            await roles.bootstrap(conn, prefix=prefix, passwords={}, dim=dim)
            return "bootstrap"
        await roles.bootstrap_as_owner(conn, prefix=prefix, dim=dim, wait_s=10)
        return "as-owner"
    finally:
        await conn.close()


async def active_entries(dsn: str) -> int:
    conn = await _connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM memories WHERE status = 'active'"))
    finally:
        await conn.close()
