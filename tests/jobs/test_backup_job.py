"""spec.backup's job script (brain_operator.render.backup.BACKUP_SCRIPT), run as rendered: `/bin/sh -c`
(dash, as in the database image) with the real pg_dump, pg_restore and psql, as the backup login
against a real Postgres. A good run leaves a readable dump, keeps the newest `keep` and records an
`ok` run with its size; a failed one (the dumps' volume unusable) records `failed`, exits non-zero,
leaves no partial file and deletes no earlier dump. status.index reads the runs back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import asyncpg
import pytest

from brain.core.contract import DB_ROLES
from brain.core.models import Actor, MemoryIn
from brain.local.devdb import EmbeddedPostgres, pg_tool
from brain.services.memory import MemoryService
from brain.store import Store, roles
from brain_operator.render.backup import BACKUP_SCRIPT

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _brain_with_a_memory(pg: EmbeddedPostgres, dsn: str, dim: int, embedder) -> tuple[str, str]:
    """(the backup login's DSN, the gateway login's DSN) of a bootstrapped brain holding one memory."""
    prefix = "b" + uuid.uuid4().hex[:8]
    passwords = {job: uuid.uuid4().hex for job in DB_ROLES}
    conn = await asyncpg.connect(dsn)
    try:
        await roles.bootstrap(conn, prefix=prefix, passwords=passwords, dim=dim)
    finally:
        await conn.close()
    db = dsn.rsplit("/", 1)[1]

    def login(job: str) -> str:
        return f"postgresql://{prefix}_{job}:{passwords[job]}@127.0.0.1:{pg.port}/{db}"

    store = await Store.open(login("gateway"), dim=dim)
    try:
        actor = Actor(name="ci", role="agent", origin="agent")
        await MemoryService(store, embedder).note(MemoryIn(body="The nightly dump runs at 03:00 UTC."), actor)
    finally:
        await store.close()
    return login("backup"), login("gateway")


def _run(dsn: str, folder: Path, keep: int = 7, name: str = "team") -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(pg_tool("pg_dump")).parent)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(folder.parent),
        "BRAIN_DATABASE_URL": dsn,
        "BACKUP_DIR": str(folder),
        "BACKUP_KEEP": str(keep),
        "BACKUP_NAME": name,
        "PGCONNECT_TIMEOUT": "10",
    }
    return subprocess.run(
        ["/bin/sh", "-c", BACKUP_SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )


async def _runs(dsn: str) -> list[asyncpg.Record]:
    c = await asyncpg.connect(dsn)
    try:
        return list(
            await c.fetch(
                "SELECT status, summary::text AS summary FROM job_runs WHERE job = 'backup' ORDER BY id"
            )
        )
    finally:
        await c.close()


async def test_a_good_run_dumps_verifies_keeps_the_newest_and_records_ok(
    pg: EmbeddedPostgres, dsn: str, embedder, tmp_path: Path
) -> None:
    import json

    backup, gateway = await _brain_with_a_memory(pg, dsn, embedder.dim, embedder)
    folder = tmp_path / "backups"
    folder.mkdir()
    for day in ("20200101", "20200102", "20200103"):  # earlier dumps of this brain
        (folder / f"team-{day}T030000Z.dump").write_bytes(b"old")
    (folder / "team-x-20200101T030000Z.dump").write_bytes(b"another brain's")  # same volume, not ours
    (folder / "team-20200104T030000Z.dump.partial").write_bytes(b"a killed run's")
    proc = await asyncio.to_thread(_run, backup, folder, 2)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    dumps = sorted(p.name for p in folder.iterdir())
    assert dumps == ["team-20200103T030000Z.dump", summary["file"], "team-x-20200101T030000Z.dump"], dumps
    dump = folder / summary["file"]
    assert summary["bytes"] == dump.stat().st_size > 1000
    listing = subprocess.run(
        [pg_tool("pg_restore"), "--list", str(dump)], capture_output=True, text=True, check=True
    )
    assert "TABLE DATA public memories" in listing.stdout
    (run,) = await _runs(gateway)
    assert run["status"] == "ok" and json.loads(run["summary"]) == summary
    store = await Store.open(gateway, dim=embedder.dim)
    try:  # what status.index shows (the gateway's /brain/v1/health)
        stats = await store.index_stats()
    finally:
        await store.close()
    assert stats["lastBackupResult"] == "ok" and stats["lastBackupBytes"] == summary["bytes"]
    assert stats["lastBackup"] is not None


async def test_a_failed_run_records_failed_exits_non_zero_and_deletes_nothing(
    pg: EmbeddedPostgres, dsn: str, embedder, tmp_path: Path
) -> None:
    """The dumps' volume unusable (here: not a directory; on the node, a full volume): pg_dump
    cannot write. Nothing earlier is deleted, no partial file stays, the run is `failed`, and the
    last good backup still shows as the last good one."""
    import json

    backup, gateway = await _brain_with_a_memory(pg, dsn, embedder.dim, embedder)
    folder = tmp_path / "backups"
    folder.mkdir()
    good = await asyncio.to_thread(_run, backup, folder, 7)
    assert good.returncode == 0, good.stderr
    before = sorted(os.listdir(folder))
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the volume should be")
    proc = await asyncio.to_thread(_run, backup, blocked, 7)
    assert proc.returncode != 0
    assert "backup failed: pg_dump failed" in proc.stderr
    assert sorted(os.listdir(folder)) == before
    runs = await _runs(gateway)
    assert [r["status"] for r in runs] == ["ok", "failed"]
    assert "pg_dump failed" in json.loads(runs[-1]["summary"])["error"]
    store = await Store.open(gateway, dim=embedder.dim)
    try:
        stats = await store.index_stats()
    finally:
        await store.close()
    assert stats["lastBackupResult"] == "failed"  # the newest run
    assert stats["lastBackup"] is not None  # the last good one is still there to restore
    assert stats["lastBackupBytes"] == json.loads(good.stdout.strip().splitlines()[-1])["bytes"]
