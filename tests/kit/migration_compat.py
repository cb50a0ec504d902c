"""The migration-compatibility check (#29): a schema one release newer must still serve the previous
release, so `helm upgrade` rolls under traffic and `helm rollback` starts the old gateways again.

Expand, then contract (docs/operations.md, "Schema migrations"): between consecutive releases a
migration may add tables, nullable or defaulted columns, indexes and functions; it may drop only
what the previous release's code never names, and change no column's type. The previous schema is
built from the previous release's own migration files (hack/releases.txt, read from git), HEAD's
newer migrations are applied on top on the real Postgres, and the two catalogs are compared.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = "operator/brain/store/migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Column:
    type: str
    nullable: bool
    default: bool


Schema = dict[str, dict[str, Column]]


def releases() -> dict[str, str]:
    """Every release of hack/releases.txt, tag -> commit."""
    rows = [
        line.split()
        for line in (ROOT / "hack" / "releases.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return {tag: commit for tag, commit, *_ in rows}


def previous_release() -> tuple[str, str]:
    """The newest (tag, commit) of hack/releases.txt."""
    return max(releases().items(), key=lambda r: tuple(int(p) for p in r[0][1:].split(".")))


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def migrations_at(commit: str) -> list[tuple[int, str, str]]:
    """The migration files as they were at `commit` (version, name, sql), oldest first."""
    out = []
    for path in _git("ls-tree", "--name-only", f"{commit}:{MIGRATIONS}").split():
        m = _NAME.match(path)
        if m:
            out.append((int(m.group(1)), m.group(2), _git("show", f"{commit}:{MIGRATIONS}/{path}")))
    return sorted(out)


def named_by(commit: str, name: str) -> bool:
    """Whether the code at `commit` (its migrations aside) names `name` as a word: a column or table
    it may read. Names are found in SQL text inside Python strings, so a word match is the test."""
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "grep", "-q", "-w", "-e", name, commit, "--",
         "operator/brain", f":(exclude){MIGRATIONS}"],
        capture_output=True, text=True,
    )  # fmt: skip
    return proc.returncode == 0


async def snapshot(conn: asyncpg.Connection) -> Schema:
    rows = await conn.fetch(
        """SELECT c.table_name, c.column_name, c.data_type, c.udt_name, c.is_nullable, c.column_default
             FROM information_schema.columns c
             JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'"""
    )
    schema: Schema = {}
    for r in rows:
        kind = r["udt_name"] if r["data_type"] == "USER-DEFINED" else r["data_type"]
        schema.setdefault(r["table_name"], {})[r["column_name"]] = Column(
            kind, r["is_nullable"] == "YES", r["column_default"] is not None
        )
    return schema


def breaks(before: Schema, after: Schema, named: Callable[[str], bool]) -> list[str]:
    """What would break the previous release on the newer schema; `named(word)` says whether its code
    names a table or column (what it never names, it cannot read)."""
    out = []
    for table, columns in before.items():
        if table not in after:
            if named(table):
                out.append(f"table {table} is dropped, and the previous release reads it")
            continue
        for col, was in columns.items():
            now = after[table].get(col)
            if now is None:
                if named(col):
                    out.append(f"column {table}.{col} is dropped, and the previous release reads it")
            elif now.type != was.type:
                out.append(f"column {table}.{col} changes type {was.type} -> {now.type}")
            elif was.nullable and not now.nullable and not now.default:
                out.append(f"column {table}.{col} becomes NOT NULL without a default")
        for col, now in after[table].items():
            if col not in columns and not now.nullable and not now.default:
                out.append(
                    f"new column {table}.{col} is NOT NULL without a default: the previous "
                    "release's inserts leave it out"
                )
    return out
