"""Issue #26: one Postgres login per job, on a real Postgres.

`brain.store.roles` is what a managed Brain's gateway pod runs first (its `migrate` init
container, tests/operator/test_render_db_roles.py): with the superuser's DSN it creates the
logins, migrates the schema as the owner and grants each login its tables. These tests run that
very command and then connect as the logins the gateway and the jobs get: they can do their work
and cannot escape the database (no program execution, no extension, no DDL, no other job's tables).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg
import pytest

from brain.core.contract import DB_ROLES
from brain.core.models import Actor, MemoryIn
from brain.local.devdb import EmbeddedPostgres
from brain.services.memory import MemoryService
from brain.store import Store, roles
from tests.kit.database import open_store

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]


def _login_dsn(pg: EmbeddedPostgres, dsn: str, prefix: str, job: str, password: str) -> str:
    return f"postgresql://{prefix}_{job}:{password}@127.0.0.1:{pg.port}/{dsn.rsplit('/', 1)[1]}"


async def _bootstrap(dsn: str, dim: int) -> tuple[str, dict[str, str]]:
    prefix = "r" + uuid.uuid4().hex[:8]
    passwords = {job: uuid.uuid4().hex for job in DB_ROLES}
    conn = await asyncpg.connect(dsn)
    try:
        await roles.bootstrap(conn, prefix=prefix, passwords=passwords, dim=dim)
    finally:
        await conn.close()
    return prefix, passwords


async def _trusted_extension(dsn: str) -> str:
    """An extension this server has, not yet created, that a non-superuser could create: a
    trusted one needs only CREATE on the database, so refusing it shows the logins lack that right
    (plpython3u, tried before, is not even installed: its refusal proved nothing)."""
    conn = await asyncpg.connect(dsn)
    try:
        name = await conn.fetchval(
            "SELECT e.name FROM pg_available_extensions e JOIN pg_available_extension_versions v"
            " ON v.name = e.name AND v.version = e.default_version"
            " WHERE v.trusted AND e.installed_version IS NULL AND v.requires IS NULL"
            " ORDER BY e.name = 'hstore' DESC, e.name LIMIT 1"
        )
    finally:
        await conn.close()
    assert name, "this Postgres offers no trusted extension to try"
    return str(name)


async def test_no_login_may_create_an_extension_a_plain_role_with_create_could(
    pg: EmbeddedPostgres, dsn: str, embedder
) -> None:
    prefix, passwords = await _bootstrap(dsn, embedder.dim)
    ext = await _trusted_extension(dsn)
    for job in DB_ROLES:  # the owner too: migrations create tables, never extensions
        c = await asyncpg.connect(_login_dsn(pg, dsn, prefix, job, passwords[job]))
        try:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await c.execute(f"CREATE EXTENSION {ext}")
        finally:
            await c.close()
    # the control: the same statement from a role that merely has CREATE on the database succeeds,
    # so what refused the logins is the right they lack, not the extension
    control = f"{prefix}_control"
    admin = await asyncpg.connect(dsn)
    db = dsn.rsplit("/", 1)[1]
    try:
        await admin.execute(f"CREATE ROLE {control} LOGIN PASSWORD 'c-{prefix}'")
        await admin.execute(f'GRANT CONNECT, CREATE ON DATABASE "{db}" TO {control}')
        c = await asyncpg.connect(f"postgresql://{control}:c-{prefix}@127.0.0.1:{pg.port}/{db}")
        try:
            await c.execute(f"CREATE EXTENSION {ext}")
            assert await c.fetchval("SELECT count(*) FROM pg_extension WHERE extname = $1", ext) == 1
            await c.execute(f"DROP EXTENSION {ext}")
        finally:
            await c.close()
    finally:
        await admin.execute(f'REVOKE ALL ON DATABASE "{db}" FROM {control}')
        await admin.execute(f"DROP ROLE {control}")
        await admin.close()


async def test_gateway_role_is_refused_escapes_and_still_notes(
    pg: EmbeddedPostgres, dsn: str, embedder
) -> None:
    prefix, passwords = await _bootstrap(dsn, embedder.dim)
    gw = _login_dsn(pg, dsn, prefix, "gateway", passwords["gateway"])
    marker = f"/tmp/brain-copy-marker-{prefix}"
    c = await asyncpg.connect(gw)
    try:
        for sql in (f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'", "DROP TABLE memories",
                    "SELECT * FROM pg_authid", "CREATE TABLE evil (x int)",
                    "CREATE TEMP TABLE evil (x int)", "ALTER TABLE memories ADD COLUMN x int",
                    "UPDATE job_runs SET status = 'x'", "DELETE FROM reindex_runs"):  # fmt: skip
            with pytest.raises(asyncpg.PostgresError, match=r"denied|must be"):
                await c.execute(sql)
        assert not os.path.exists(marker)
        assert not await c.fetchval("SELECT rolsuper OR rolcreaterole OR rolcreatedb FROM pg_roles"
                                    " WHERE rolname = current_user")  # fmt: skip
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
    ingest = await asyncpg.connect(_login_dsn(pg, dsn, prefix, "ingest", passwords["ingest"]))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await ingest.execute("UPDATE keys SET role = 'owner'")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await ingest.execute("DELETE FROM proposals")
    finally:
        await ingest.close()


def _run_roles(dsn: str, folder: Path, prefix: str, dim: int) -> subprocess.Popen[str]:
    """The init container's command, as rendered (brain_operator.render.gateway._migrate_init)."""
    env = {**os.environ, "BRAIN_DATABASE_URL": dsn, "BRAIN_EMBEDDING_DIM": str(dim)}
    return subprocess.Popen(
        [sys.executable, "-m", "brain.store.roles", "--passwords-dir", str(folder), "--prefix", prefix],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_the_migration_step_command_bootstraps_and_reruns_side_by_side(
    pg: EmbeddedPostgres, dsn: str, embedder, tmp_path: Path
) -> None:
    """`python -m brain.store.roles` with the projected password files: two gateway pods starting
    at once both finish (they take turns), a rerun with the same files changes nothing a login
    sees, and the gateway then opens the store as its own login."""
    prefix = "m" + uuid.uuid4().hex[:8]
    passwords = {job: uuid.uuid4().hex for job in DB_ROLES}
    for job, pw in passwords.items():
        (tmp_path / job).write_text(pw + "\n")  # a Secret's value, as the kubelet writes it
    procs = [_run_roles(dsn, tmp_path, prefix, embedder.dim) for _ in range(2)]
    results = [await asyncio.to_thread(p.communicate, timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["logins"] == [f"{prefix}_{job}" for job in DB_ROLES]
        assert summary["schemaVersion"] >= 1
    again = _run_roles(dsn, tmp_path, prefix, embedder.dim)
    out, err = await asyncio.to_thread(again.communicate, timeout=120)
    assert again.returncode == 0, err
    admin = await asyncpg.connect(dsn)
    try:
        owners = await admin.fetch(
            "SELECT DISTINCT pg_get_userbyid(c.relowner) AS owner FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
        )
        assert {r["owner"] for r in owners} == {f"{prefix}_owner"}
    finally:
        await admin.close()
    store = await Store.open(_login_dsn(pg, dsn, prefix, "gateway", passwords["gateway"]), dim=embedder.dim)
    try:
        actor = Actor(name="ci", role="agent", origin="agent")
        await MemoryService(store, embedder).note(MemoryIn(body="The deploy freeze starts Friday."), actor)
    finally:
        await store.close()


async def test_the_migration_step_refuses_a_missing_password(dsn: str, tmp_path: Path) -> None:
    """A login without its password file is an error, never a login with a made-up password."""
    (tmp_path / "owner").write_text("x")
    proc = _run_roles(dsn, tmp_path, "z" + uuid.uuid4().hex[:8], 384)
    _, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode != 0 and "no password for the gateway login" in err


async def test_security_md_lists_the_rights_each_login_is_granted() -> None:
    """docs/security.md's table is what roles.WRITES grants: a new table a job writes must be documented."""
    text = (ROOT / "docs" / "security.md").read_text()
    for job in roles.JOBS:
        (row,) = [line for line in text.splitlines() if line.startswith(f"| `brain_{job}` |")]
        privileges = roles.PRIVILEGES.get(job, "SELECT, INSERT, UPDATE, DELETE")
        listed = row.split(f"{privileges}` on ", 1)[1].split(";")[0].split(" |")[0].split(" (")[0]
        assert [t.strip(" `") for t in listed.split(",")] == list(roles.WRITES[job]), job


async def test_as_owner_on_a_cloudnativepg_shaped_database(pg: EmbeddedPostgres, dsn: str, embedder) -> None:
    """CloudNativePG's shape: the application user owns the database (no superuser), CNPG creates
    the workload logins from `spec.managed.roles` some time after the pod starts. The migration
    step (`--as-owner`, connected as the owner) waits for them, migrates and grants; the gateway's
    login then works and is refused what the managed logins are refused."""
    owner = "c" + uuid.uuid4().hex[:8]
    db = dsn.rsplit("/", 1)[1]
    admin = await asyncpg.connect(dsn)
    try:  # what CNPG's initdb does: an owner login, the database and the extensions
        await admin.execute(f"CREATE ROLE {owner} LOGIN PASSWORD 'o-{owner}'")
        await admin.execute(f'ALTER DATABASE "{db}" OWNER TO {owner}')
        await admin.execute("CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm")
    finally:
        await admin.close()
    owner_dsn = f"postgresql://{owner}:o-{owner}@127.0.0.1:{pg.port}/{db}"
    env = {**os.environ, "BRAIN_DATABASE_URL": owner_dsn, "BRAIN_EMBEDDING_DIM": str(embedder.dim)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "brain.store.roles", "--as-owner", "--prefix", owner, "--wait-seconds", "60"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    await asyncio.sleep(3)
    assert proc.poll() is None, proc.communicate()  # waiting for the logins, not failing
    admin = await asyncpg.connect(dsn)
    try:  # what CNPG's managed roles then do
        for job in roles.JOBS:
            await admin.execute(f"CREATE ROLE {owner}_{job} LOGIN PASSWORD 'p-{job}'")
        await admin.execute(f"GRANT {owner} TO {owner}_reindex")
    finally:
        await admin.close()
    out, err = await asyncio.to_thread(proc.communicate, timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["logins"] == [f"{owner}_{j}" for j in roles.JOBS]
    gw = _login_dsn(pg, dsn, owner, "gateway", "p-gateway")
    c = await asyncpg.connect(gw)
    try:
        ext = await _trusted_extension(dsn)
        for sql in (f"CREATE EXTENSION {ext}", "CREATE TEMP TABLE evil (x int)", "CREATE TABLE evil (x int)",
                    "DROP TABLE memories", "UPDATE job_runs SET status = 'x'"):  # fmt: skip
            with pytest.raises(asyncpg.PostgresError, match=r"denied|must be"):
                await c.execute(sql)
    finally:
        await c.close()
    store = await Store.open(gw, dim=embedder.dim)
    try:
        actor = Actor(name="ci", role="agent", origin="agent")
        await MemoryService(store, embedder).note(MemoryIn(body="CNPG failover takes ten seconds."), actor)
    finally:
        await store.close()


async def test_an_existing_brain_upgrades_to_the_logins(pg: EmbeddedPostgres, dsn: str, embedder) -> None:
    """A Brain from before issue #26 (or a pg_restore --no-owner): its schema migrated, and its
    memories written, by the superuser. The migration step hands every table and function to the
    owner login; the gateway's login then reads the old memories and writes new ones, and the
    reindex login may alter `memories` (what a model migration does)."""
    async with open_store(dsn, dim=embedder.dim) as old:  # as the superuser, the way it used to be
        actor = Actor(name="claude-mac", role="agent", origin="agent")
        await MemoryService(old, embedder).note(MemoryIn(body="The on-call rota lives in PagerDuty."), actor)
    prefix, passwords = await _bootstrap(dsn, embedder.dim)
    admin = await asyncpg.connect(dsn)
    try:
        owners = await admin.fetch(
            "SELECT DISTINCT pg_get_userbyid(c.relowner) AS o FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
            " UNION SELECT DISTINCT pg_get_userbyid(p.proowner) FROM pg_proc p JOIN pg_namespace n"
            " ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.proname LIKE 'brain\\_%'"
        )
        assert {r["o"] for r in owners} == {f"{prefix}_owner"}
    finally:
        await admin.close()
    async with open_store(_login_dsn(pg, dsn, prefix, "gateway", passwords["gateway"]), embedder.dim) as gw:
        service = MemoryService(gw, embedder)
        actor = Actor(name="ci", role="agent", origin="agent")
        hits = await service.search("where is the on-call rota", actor)
        assert any("PagerDuty" in h.body for h in hits)
        await service.note(MemoryIn(body="Incidents are reviewed on Thursdays."), actor)
    reindex = await asyncpg.connect(_login_dsn(pg, dsn, prefix, "reindex", passwords["reindex"]))
    try:
        await reindex.execute("ALTER TABLE memories ADD COLUMN reindex_probe integer")
        await reindex.execute("ALTER TABLE memories DROP COLUMN reindex_probe")
    finally:
        await reindex.close()


async def test_the_backup_login_dumps_everything_and_writes_nothing_but_its_run(
    pg: EmbeddedPostgres, dsn: str, embedder, tmp_path: Path
) -> None:
    """spec.backup's CronJob connects as `<prefix>_backup`: the real `pg_dump -Fc` of every table
    (sequences and schema included) succeeds as that non-superuser, the dump lists the memories'
    data, and the login may add and finish a `job_runs` row but not change a memory or delete a run."""
    from brain.local.devdb import pg_tool

    prefix, passwords = await _bootstrap(dsn, embedder.dim)
    store = await Store.open(_login_dsn(pg, dsn, prefix, "gateway", passwords["gateway"]), dim=embedder.dim)
    try:
        actor = Actor(name="ci", role="agent", origin="agent")
        await MemoryService(store, embedder).note(
            MemoryIn(body="Backups land in the team-backups volume."), actor
        )
    finally:
        await store.close()
    login = _login_dsn(pg, dsn, prefix, "backup", passwords["backup"])
    dump = tmp_path / "brain.dump"
    proc = await asyncio.to_thread(
        subprocess.run,
        [pg_tool("pg_dump"), "-Fc", "-d", login, "-f", str(dump)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    listing = await asyncio.to_thread(
        subprocess.run,
        [pg_tool("pg_restore"), "--list", str(dump)],
        capture_output=True,
        text=True,
        check=True,
    )
    for wanted in (
        "TABLE DATA public memories",
        "TABLE DATA public keys",
        "SEQUENCE SET public job_runs_id_seq",
    ):
        assert wanted in listing.stdout, wanted
    c = await asyncpg.connect(login)
    try:
        run = await c.fetchval("INSERT INTO job_runs (job) VALUES ('backup') RETURNING id")
        await c.execute("UPDATE job_runs SET status = 'ok', finished_at = now() WHERE id = $1", run)
        for sql in ("UPDATE memories SET body = 'x'", "DELETE FROM memories", "INSERT INTO keys (id) VALUES ('x')",
                    "DELETE FROM job_runs", "UPDATE brain_meta SET value = 'x'", "CREATE TEMP TABLE t (x int)"):  # fmt: skip
            with pytest.raises(asyncpg.PostgresError, match=r"denied|must be"):
                await c.execute(sql)
        assert not await c.fetchval(
            "SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication FROM pg_roles WHERE rolname = current_user"
        )
    finally:
        await c.close()
