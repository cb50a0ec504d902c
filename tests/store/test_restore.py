"""`brainctl restore` on a real Postgres, with the real pg_dump and pg_restore (the embedded wheel's).

A dump of one brain goes into another brain's database: a truncated dump is refused before the
target is touched; a target brain of another embedding model is refused naming both models; a
good dump replaces the target's memories with every entry of the dump, and the target's own logins
(granted again by the restore) read and write them at once.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg
import pytest

from brain.core.contract import DB_ROLES, DEFAULT_EMBEDDING_MODEL
from brain.core.models import Actor, MemoryIn
from brain.local.devdb import EmbeddedPostgres, pg_tool
from brain.services.memory import MemoryService
from brain.store import Store, roles
from tests.kit.database import fresh_database

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]
OTHER_MODEL = "BAAI/bge-small-en-v1.5"


class Brain:
    """A bootstrapped brain database: its superuser DSN and its own logins."""

    def __init__(self, pg: EmbeddedPostgres, dsn: str) -> None:
        self.pg, self.dsn = pg, dsn
        self.prefix = "r" + uuid.uuid4().hex[:8]
        self.passwords = {job: uuid.uuid4().hex for job in DB_ROLES}

    def login(self, job: str) -> str:
        db = self.dsn.rsplit("/", 1)[1]
        return f"postgresql://{self.prefix}_{job}:{self.passwords[job]}@127.0.0.1:{self.pg.port}/{db}"

    async def bootstrap(self, dim: int) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            await roles.bootstrap(conn, prefix=self.prefix, passwords=self.passwords, dim=dim)
        finally:
            await conn.close()

    async def note(self, embedder, *bodies: str) -> None:
        store = await Store.open(self.login("gateway"), dim=embedder.dim)
        try:
            actor = Actor(name="ci", role="agent", origin="agent")
            for body in bodies:
                await MemoryService(store, embedder).note(MemoryIn(body=body), actor)
        finally:
            await store.close()

    async def entries(self) -> dict[str, str]:
        """Every active entry, id → body, read as the brain's gateway login."""
        c = await asyncpg.connect(self.login("gateway"))
        try:
            rows = await c.fetch("SELECT id, body FROM memories WHERE status = 'active'")
        finally:
            await c.close()
        return {r["id"]: r["body"] for r in rows}


def brainctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brain.cli.main", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


async def _source_dump(pg: EmbeddedPostgres, embedder, folder: Path) -> tuple[Path, dict[str, str]]:
    async with fresh_database(pg) as dsn:
        src = Brain(pg, dsn)
        await src.bootstrap(embedder.dim)
        await src.note(
            embedder,
            "The staging database listens on port 6543.",
            "Releases are cut from main every Thursday.",
            "The on-call rota lives in the ops wiki.",
        )
        dump = folder / "team-20260101T030000Z.dump"
        proc = await asyncio.to_thread(  # as spec.backup's job does: the backup login, custom format
            subprocess.run, [pg_tool("pg_dump"), "-Fc", "-d", src.login("backup"), "-f", str(dump)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return dump, await src.entries()


async def test_restore_refuses_a_corrupt_dump_and_another_model_then_restores_every_entry(
    pg: EmbeddedPostgres, embedder, tmp_path: Path
) -> None:
    dump, written = await _source_dump(pg, embedder, tmp_path)
    assert len(written) == 3
    async with fresh_database(pg) as dsn:
        target = Brain(pg, dsn)
        await target.bootstrap(embedder.dim)
        await target.note(embedder, "Only the target brain knows this: the VPN moved to vpn2.")
        before = await target.entries()

        truncated = tmp_path / "truncated.dump"
        truncated.write_bytes(dump.read_bytes()[: dump.stat().st_size // 2])
        proc = await asyncio.to_thread(
            brainctl, "restore", "--from", str(truncated), "--into", dsn, "--prefix", target.prefix
        )
        assert proc.returncode != 0
        assert "nothing was restored" in proc.stderr and str(truncated) in proc.stderr
        garbage = tmp_path / "notes.txt"
        garbage.write_text("not a dump at all\n")
        proc = await asyncio.to_thread(
            brainctl, "restore", "--from", str(garbage), "--into", dsn, "--prefix", target.prefix
        )
        assert proc.returncode != 0 and "not a readable pg_dump custom-format dump" in proc.stderr
        assert await target.entries() == before  # untouched

        # A running gateway's store, open across the restore (its pool's connections and prepared
        # statements predate the restored tables): it serves the restored memories without a restart.
        running = await Store.open(target.login("gateway"), dim=embedder.dim)
        try:
            actor = Actor(name="ci", role="agent", origin="agent")
            svc = MemoryService(running, embedder)
            assert not any(
                "6543" in h.body for h in await svc.search("which port does staging postgres use", actor)
            )
            proc = await asyncio.to_thread(
                brainctl, "restore", "--from", str(dump), "--into", dsn, "--prefix", target.prefix
            )
            assert proc.returncode == 0, proc.stderr
            assert await target.entries() == written  # every entry of the dump; the target's own is gone
            hits = await svc.search("which port does staging postgres use", actor)
            assert any("6543" in h.body for h in hits)
            await svc.note(MemoryIn(body="Written after the restore by the running store."), actor)
        finally:
            await running.close()
        assert len(await target.entries()) == 4

    async with fresh_database(pg) as dsn:
        other = Brain(pg, dsn)
        await other.bootstrap(embedder.dim)
        conn = await asyncpg.connect(dsn)
        try:  # a brain whose live index is another model's
            await conn.execute(
                "INSERT INTO brain_meta (key, value) VALUES ('embedding_model', $1)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                OTHER_MODEL,
            )
        finally:
            await conn.close()
        proc = await asyncio.to_thread(
            brainctl, "restore", "--from", str(dump), "--into", dsn, "--prefix", other.prefix
        )
        assert proc.returncode != 0
        assert DEFAULT_EMBEDDING_MODEL in proc.stderr and OTHER_MODEL in proc.stderr, proc.stderr
        assert "nothing was restored" in proc.stderr
        assert await other.entries() == {}


async def test_restore_help_explains_the_checks_and_the_kubectl_path() -> None:
    out = (await asyncio.to_thread(brainctl, "restore", "--help")).stdout
    for words in (
        "--from",
        "--into",
        "custom-format",
        "embedding model",
        "single-transaction",
        "port-forward",
    ):
        assert words in out, words
    bare = await asyncio.to_thread(brainctl, "--dsn", "postgresql://x@127.0.0.1:1/x", "restore")
    assert (
        bare.returncode == 2
        and "give an entry (ID --reason ...) or a dump (--from DUMP --into DSN)" in bare.stderr
    )
