"""One Postgres role per job (issue #26): the schema owner, the gateway, ingest, distill, digest, reindex,
backup.

Why: a single superuser login let any workload run `COPY ... TO PROGRAM`, create extensions or read
`pg_authid`. `bootstrap` runs once per migration step with the bootstrap superuser (or a CREATEROLE
admin): it creates the extensions (pg_trgm is `trusted`; pgvector's control file is checked at run
time, so the superuser creates both), the roles (none superuser, none a member of
pg_execute_server_program), hands every schema object to the owner, migrates *as the owner* and
grants each workload DML on what it writes. Reindex renames and drops columns of `memories`, which
only the table's owner may do, so its role is a member of the owner role. Idempotent: rerunning it
re-applies passwords and grants (and hands objects a restore created back to the owner).

Run by the operator's managed database as `python -m brain.store.roles`, the init container of
every gateway pod (brain_operator.render.gateway): it alone gets the superuser's DSN; the gateway
and each job then connect with their own login's Secret. Concurrent runs (two gateway pods
starting) take turns on an advisory lock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import asyncpg

from brain.core.contract import DB_OWNER_ROLE, DB_ROLE_PREFIX, DB_WORKLOAD_ROLES, Env
from brain.store.migrate import migrate
from brain.store.settings import load_migrate_settings

JOBS = DB_WORKLOAD_ROLES
#: Serialises bootstraps (CREATE ROLE and GRANT race otherwise); not migrate's lock, which it takes inside.
_BOOTSTRAP_LOCK_ID = 0x6272_6169_6F  # "braio"
_DML = "SELECT, INSERT, UPDATE, DELETE"
_WRITES_MEMORIES = ("memories", "edges", "lexeme_stats", "brain_meta")
#: What each workload may change; every role reads every brain table (SELECT is granted on all).
WRITES: dict[str, tuple[str, ...]] = {
    "gateway": (*_WRITES_MEMORIES, "events", "proposals", "keys", "memory_exposures"),
    "ingest": (*_WRITES_MEMORIES, "events", "job_runs"),
    "distill": (*_WRITES_MEMORIES, "events", "proposals", "job_runs"),
    "digest": (*_WRITES_MEMORIES, "events", "job_runs"),
    "reindex": (*_WRITES_MEMORIES, "reindex_runs", "job_runs"),
    # pg_dump reads every table and sequence (granted to all below); the run is one job_runs row
    "backup": ("job_runs",),
}
#: What a workload may do to the tables it writes; the backup login only adds and finishes its run.
PRIVILEGES: dict[str, str] = {"backup": "SELECT, INSERT, UPDATE"}


def role_name(prefix: str, job: str) -> str:
    return f"{prefix}_{job}"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


async def ensure_role(conn: asyncpg.Connection, name: str, password: str | None) -> None:
    """Creates a login that can do nothing but log in, or resets an existing one to that."""
    attrs = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
    if password is not None:
        attrs += f" PASSWORD {_literal(password)}"
    exists = await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", name)
    await conn.execute(f"{'ALTER' if exists else 'CREATE'} ROLE {_ident(name)} {attrs}")


async def grant(conn: asyncpg.Connection, prefix: str) -> None:
    """Table rights per workload (needs the owner or a superuser); rerun after every migration.
    The database-level statements take effect only for the database's owner or a superuser (the
    callers make sure of that: bootstrap as the superuser, bootstrap_as_owner as the owner)."""
    db = _ident(await conn.fetchval("SELECT current_database()"))
    await conn.execute(f"REVOKE ALL ON DATABASE {db} FROM PUBLIC; REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    tables = [r["relname"] for r in await conn.fetch(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')")]  # fmt: skip
    for job in JOBS:
        role = _ident(role_name(prefix, job))
        await conn.execute(
            f"GRANT CONNECT ON DATABASE {db} TO {role}; GRANT USAGE ON SCHEMA public TO {role}"
        )
        await conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        await conn.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}")
        for table in WRITES[job]:
            if table in tables:
                await conn.execute(f"GRANT {PRIVILEGES.get(job, _DML)} ON {_ident(table)} TO {role}")


async def bootstrap(conn: asyncpg.Connection, *, prefix: str, passwords: dict[str, str], dim: int) -> int:
    """As a superuser: extensions, roles, ownership to the owner, migrations as the owner, grants."""
    await conn.execute("SELECT pg_advisory_lock($1)", _BOOTSTRAP_LOCK_ID)
    try:
        return await _bootstrap(conn, prefix=prefix, passwords=passwords, dim=dim)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _BOOTSTRAP_LOCK_ID)


async def _bootstrap(conn: asyncpg.Connection, *, prefix: str, passwords: dict[str, str], dim: int) -> int:
    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for job in (DB_OWNER_ROLE, *JOBS):
        await ensure_role(conn, role_name(prefix, job), passwords.get(job))
    owner = _ident(role_name(prefix, DB_OWNER_ROLE))
    db = _ident(await conn.fetchval("SELECT current_database()"))
    # As the superuser: the database and schema `public` belong to it, so only it can take away
    # PUBLIC's default CONNECT and TEMP (and CREATE on public, the default before Postgres 15);
    # grant() below runs as the owner login, for which these revokes would be silent no-ops.
    await conn.execute(f"REVOKE ALL ON DATABASE {db} FROM PUBLIC; REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    for job in (DB_OWNER_ROLE, *JOBS):  # CONNECT (not TEMP, not CREATE): grant() cannot, as the owner
        await conn.execute(f"GRANT CONNECT ON DATABASE {db} TO {_ident(role_name(prefix, job))}")
    await conn.execute(
        f"GRANT CONNECT ON DATABASE {db} TO {owner}; GRANT USAGE, CREATE ON SCHEMA public TO {owner}"
    )
    objects = await conn.fetch(
        "SELECT format('ALTER %s %s OWNER TO ', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,"
        " c.oid::regclass) AS stmt FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT EXISTS (SELECT 1 FROM pg_depend d"
        " WHERE d.objid = c.oid AND d.deptype = 'e')"
        " UNION ALL SELECT format('ALTER FUNCTION %s OWNER TO ', p.oid::regprocedure) FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND NOT EXISTS"
        " (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')"
    )
    for row in objects:
        await conn.execute(row["stmt"] + owner)
    await conn.execute(f"SET ROLE {owner}")
    try:
        version = await migrate(conn, dim=dim)
        await grant(conn, prefix)
    finally:
        await conn.execute("RESET ROLE")
    await conn.execute(f"GRANT {owner} TO {_ident(role_name(prefix, 'reindex'))}")
    return version


async def bootstrap_as_owner(conn: asyncpg.Connection, *, prefix: str, dim: int, wait_s: float = 300) -> int:
    """As the database's owner, where another controller creates the logins: CloudNativePG's
    managed roles (brain_operator.render.database), with `brain_reindex` in the owner's role. Waits
    for the workload logins to exist, then takes PUBLIC's rights away, migrates as itself (the
    owner) and grants each login its tables. Extensions were created by CNPG's initdb."""
    await conn.execute("SELECT pg_advisory_lock($1)", _BOOTSTRAP_LOCK_ID)
    try:
        wanted = {role_name(prefix, job) for job in JOBS}
        deadline = time.monotonic() + wait_s
        while True:
            rows = await conn.fetch(
                "SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])", list(wanted)
            )
            missing = wanted - {r["rolname"] for r in rows}
            if not missing:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"logins still missing after {wait_s:.0f} s: {sorted(missing)}")
            print(f"waiting for the logins {sorted(missing)}", file=sys.stderr, flush=True)
            await asyncio.sleep(2)
        db = _ident(await conn.fetchval("SELECT current_database()"))
        await conn.execute(
            f"REVOKE ALL ON DATABASE {db} FROM PUBLIC; REVOKE CREATE ON SCHEMA public FROM PUBLIC"
        )
        for job in JOBS:
            await conn.execute(f"GRANT CONNECT ON DATABASE {db} TO {_ident(role_name(prefix, job))}")
        version = await migrate(conn, dim=dim)
        await grant(conn, prefix)
        return version
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _BOOTSTRAP_LOCK_ID)


def read_passwords(folder: Path) -> dict[str, str]:
    """One file per login (`owner`, `gateway`, ...) holding its password: the role Secrets'
    `password` keys, projected into one folder. Every login must have one (none is made up here)."""
    out = {}
    for job in (DB_OWNER_ROLE, *JOBS):
        path = folder / job
        value = path.read_text().strip() if path.is_file() else ""
        if not value:
            raise SystemExit(f"no password for the {job} login in {path}")
        out[job] = value
    return out


async def _run(dsn: str, *, prefix: str, passwords: dict[str, str] | None, dim: int, wait_s: float) -> int:
    deadline = time.monotonic() + wait_s
    while True:  # the database may still be starting; a crash-looping init container backs off for minutes
        try:
            conn = await asyncpg.connect(dsn, timeout=10)
            break
        except (OSError, asyncpg.CannotConnectNowError, asyncpg.PostgresConnectionError) as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"database not reachable after {wait_s:.0f} s: {exc}") from exc
            print(f"waiting for the database: {exc}", file=sys.stderr, flush=True)
            await asyncio.sleep(2)
    try:
        if passwords is None:
            return await bootstrap_as_owner(conn, prefix=prefix, dim=dim, wait_s=wait_s)
        return await bootstrap(conn, prefix=prefix, passwords=passwords, dim=dim)
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m brain.store.roles",
        description="Create or update the database's per-job logins, migrate the schema as its owner "
        f"and grant each login its tables. Connects with ${Env.DATABASE_URL} (a superuser, or with "
        f"--as-owner the database's owner); the schema's "
        f"embedding dimension is ${Env.EMBEDDING_DIM}. Prints one JSON line.",
    )
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--passwords-dir", type=Path,
                     help="a file per login (owner, gateway, ingest, distill, digest, reindex, backup) with its password")  # fmt: skip
    how.add_argument("--as-owner", action="store_true",
                     help="connected as the database's owner; the workload logins are made by someone else "
                     "(CloudNativePG's managed roles): wait for them, migrate, grant")  # fmt: skip
    p.add_argument("--prefix", default=DB_ROLE_PREFIX, help="logins are named <prefix>_<job> [%(default)s]")
    p.add_argument(
        "--wait-seconds", type=float, default=300, help="wait this long for the database [%(default)s]"
    )
    args = p.parse_args(argv)
    settings = load_migrate_settings()
    dsn = settings.database_url
    if not dsn:
        p.error(f"{Env.DATABASE_URL} is not set")
    dim = settings.embedding_dim
    passwords = None if args.as_owner else read_passwords(args.passwords_dir)
    version = asyncio.run(
        _run(dsn, prefix=args.prefix, passwords=passwords, dim=dim, wait_s=args.wait_seconds)
    )
    logins = [role_name(args.prefix, job) for job in (*(() if args.as_owner else (DB_OWNER_ROLE,)), *JOBS)]
    print(json.dumps({"schemaVersion": version, "logins": logins}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
