"""One Postgres role per job (issue #26): the schema owner, the gateway, ingest, distill, digest, reindex.

Why: a single superuser login let any workload run `COPY ... TO PROGRAM`, create extensions or read
`pg_authid`. `bootstrap` runs once per migration step with the bootstrap superuser (or a CREATEROLE
admin): it creates the extensions (pg_trgm is `trusted`; pgvector's control file is checked at run
time, so the superuser creates both), the roles (none superuser, none a member of
pg_execute_server_program), hands every schema object to the owner, migrates *as the owner* and
grants each workload DML on what it writes. Reindex renames and drops columns of `memories`, which
only the table's owner may do, so its role is a member of the owner role. Not yet called by the
rendered pods: the next step wires it into the migration step. Idempotent: rerunning it re-applies passwords and grants.
"""

from __future__ import annotations

import asyncpg

from brain.store.migrate import migrate

JOBS = ("gateway", "ingest", "distill", "digest", "reindex")
_DML = "SELECT, INSERT, UPDATE, DELETE"
_WRITES_MEMORIES = ("memories", "edges", "lexeme_stats", "brain_meta")
#: What each workload may change; every role reads every brain table (SELECT is granted on all).
WRITES: dict[str, tuple[str, ...]] = {
    "gateway": (*_WRITES_MEMORIES, "events", "proposals", "keys"),
    "ingest": (*_WRITES_MEMORIES, "events", "job_runs"),
    "distill": (*_WRITES_MEMORIES, "events", "proposals", "job_runs"),
    "digest": (*_WRITES_MEMORIES, "events", "job_runs"),
    "reindex": (*_WRITES_MEMORIES, "reindex_runs", "job_runs"),
}


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
    """Table rights per workload (needs the owner or a superuser); rerun after every migration."""
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
                await conn.execute(f"GRANT {_DML} ON {_ident(table)} TO {role}")


async def bootstrap(conn: asyncpg.Connection, *, prefix: str, passwords: dict[str, str], dim: int) -> int:
    """As a superuser: extensions, roles, ownership to the owner, migrations as the owner, grants."""
    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for job in ("owner", *JOBS):
        await ensure_role(conn, role_name(prefix, job), passwords.get(job))
    owner = _ident(role_name(prefix, "owner"))
    db = _ident(await conn.fetchval("SELECT current_database()"))
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
