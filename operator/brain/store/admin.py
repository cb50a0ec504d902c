"""Server-level statements (databases, not tables), run over the server's maintenance connection.

The local stack (brainctl up, the embedded Postgres of the tests) creates and drops whole databases;
this keeps that SQL, and asyncpg, in the store.
"""

from __future__ import annotations

import asyncpg


async def create_database(dsn: str, name: str, *, if_missing: bool = False) -> None:
    """CREATE DATABASE `name` on the server behind `dsn`; with `if_missing`, only when it is absent."""
    conn = await asyncpg.connect(dsn)
    try:
        if if_missing and await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def drop_database(dsn: str, name: str) -> None:
    """DROP DATABASE `name` even while sessions hold it (WITH FORCE): test databases end with their test."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()
