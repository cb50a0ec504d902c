"""Issue #26: after the roles step, the gateway's login cannot escape the database (real Postgres).

The roles are not yet wired into the rendered pods: this pins the rights
`brain.store.roles.bootstrap` grants, which the rendering will hand each pod.
"""

from __future__ import annotations

import os
import uuid

import asyncpg
import pytest

from brain.core.models import Actor, MemoryIn
from brain.local.devdb import EmbeddedPostgres
from brain.services.memory import MemoryService
from brain.store import Store, roles

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_gateway_role_is_refused_escapes_and_still_notes(
    pg: EmbeddedPostgres, dsn: str, embedder
) -> None:
    prefix = "r" + uuid.uuid4().hex[:8]
    passwords = {job: uuid.uuid4().hex for job in ("owner", *roles.JOBS)}
    conn = await asyncpg.connect(dsn)
    try:
        await roles.bootstrap(conn, prefix=prefix, passwords=passwords, dim=embedder.dim)
    finally:
        await conn.close()
    db = dsn.rsplit("/", 1)[1]
    gw = f"postgresql://{prefix}_gateway:{passwords['gateway']}@127.0.0.1:{pg.port}/{db}"
    marker = f"/tmp/brain-copy-marker-{prefix}"
    c = await asyncpg.connect(gw)
    try:
        for sql in (f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'", "CREATE EXTENSION IF NOT EXISTS plpython3u",
                    "DROP TABLE memories", "SELECT * FROM pg_authid", "CREATE TABLE evil (x int)"):  # fmt: skip
            with pytest.raises(asyncpg.PostgresError):
                await c.execute(sql)
        assert not os.path.exists(marker)
    finally:
        await c.close()
    store = await Store.open(gw, dim=embedder.dim)
    try:
        service = MemoryService(store, embedder)
        actor = Actor(name="claude-mac", role="agent", origin="agent")
        await service.note(MemoryIn(body="Staging Postgres moved to port 6543."), actor)
        hits = await service.search("which port does staging postgres use", actor)
        assert any("6543" in h.body for h in hits)
    finally:
        await store.close()
    ingest = await asyncpg.connect(
        f"postgresql://{prefix}_ingest:{passwords['ingest']}@127.0.0.1:{pg.port}/{db}"
    )
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await ingest.execute("UPDATE keys SET role = 'owner'")
    finally:
        await ingest.close()
