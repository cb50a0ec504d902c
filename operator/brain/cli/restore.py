"""brainctl restore: put a `pg_dump -Fc` dump (spec.backup's, or a manual one) back into a brain's database.

Nothing touches the target until the dump has been read whole and its brain checked against the
target's:

1. `pg_restore --list` reads its table of contents (not a custom-format dump: refused), then
   `pg_restore -f /dev/null` reads every data block (a truncated or corrupt dump: refused);
2. its `brain_meta` rows (`pg_restore --data-only -t brain_meta -f -`) name the embedding model
   and dimension its vectors were made with; a target brain with another model or dimension is
   refused, naming both (vectors of two models are never mixed: `brainctl reindex --to-model`
   migrates a brain to another model after a restore into a brain of the dump's model);
3. `pg_restore --clean --if-exists --no-owner --no-acl --single-transaction`: the target's tables
   are replaced by the dump's in one transaction (a failure leaves the target as it was). The
   extensions are the target's own (they are left out of the restore: dropping `vector` needs its
   owner, which CloudNativePG's application user is not);
4. the role grants are applied again (brain.store.roles, what the gateway's migration step does):
   the restored tables go to the owner login and each workload login gets its rights back, so the
   running gateway serves the restored memories without a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from brain.cli.common import command, print_json
from brain.core.contract import DB_ROLE_PREFIX, DEFAULT_EMBEDDING_DIM
from brain.core.errors import BrainError

#: TOC entries left out of the restore: the target keeps its own extensions (see the module doc).
_EXTENSION_ENTRY = re.compile(r"^\d+; \d+ \d+ (EXTENSION|COMMENT - EXTENSION) ")


@dataclass(frozen=True)
class DumpBrain:
    """What a dump says about the brain it was taken from."""

    model: str
    dim: int | None


def _tool(name: str) -> str:
    from brain.local.devdb import pg_tool

    try:
        return pg_tool(name)
    except RuntimeError as e:
        raise BrainError(str(e)) from None


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def check_dump(path: Path) -> str:
    """The dump's table of contents; raises (touching nothing) unless the whole file reads back."""
    if not path.is_file():
        raise BrainError(f"--from {path}: no such file")
    listing = _run([_tool("pg_restore"), "--list", str(path)])
    if listing.returncode != 0:
        raise BrainError(
            f"--from {path} is not a readable pg_dump custom-format dump (pg_restore --list: "
            f"{_last_line(listing.stderr)}); nothing was restored"
        )
    whole = _run([_tool("pg_restore"), "-f", "/dev/null", str(path)])
    if whole.returncode != 0:
        raise BrainError(
            f"--from {path} is corrupt or cut short (pg_restore could not read it whole: "
            f"{_last_line(whole.stderr)}); nothing was restored"
        )
    return listing.stdout


def parse_brain_meta(script: str) -> dict[str, str]:
    """The `brain_meta` rows of `pg_restore --data-only -t brain_meta -f -` (a COPY ... FROM stdin block)."""
    rows: dict[str, str] = {}
    inside = False
    for line in script.splitlines():
        if line.startswith("COPY ") and "brain_meta" in line and line.endswith("FROM stdin;"):
            inside = True
            continue
        if inside:
            if line == "\\.":
                break
            key, _, value = line.partition("\t")
            rows[key] = value.replace("\\t", "\t").replace("\\n", "\n").replace("\\\\", "\\")
    return rows


def dump_brain(path: Path, listing: str) -> DumpBrain:
    if not re.search(r"TABLE DATA \S+ brain_meta ", listing):
        raise BrainError(
            f"--from {path} is not a brain's dump (it has no brain_meta table); nothing was restored"
        )
    data = _run([_tool("pg_restore"), "--data-only", "-t", "brain_meta", "-f", "-", str(path)])
    if data.returncode != 0:
        raise BrainError(f"--from {path}: cannot read its brain_meta ({_last_line(data.stderr)})")
    meta = parse_brain_meta(data.stdout)
    dim = meta.get("embedding_dim")
    return DumpBrain(model=meta.get("embedding_model", ""), dim=int(dim) if dim else None)


def _meta_brain(meta: dict[str, str] | None) -> DumpBrain | None:
    if meta is None:
        return None
    dim = meta.get("embedding_dim")
    return DumpBrain(model=meta.get("embedding_model", ""), dim=int(dim) if dim else None)


def refusal(dump: DumpBrain, target: DumpBrain | None) -> str | None:
    """Why the dump may not go into the target, naming both models; None when it may."""
    if target is None:
        return None
    if dump.model and target.model and dump.model != target.model:
        return (
            f"the dump's brain embeds with {dump.model} ({dump.dim} dimensions) but the target brain with "
            f"{target.model} ({target.dim} dimensions): vectors of two models are never mixed. Restore into a "
            f"Brain whose spec.embedding.model is {dump.model}, then `brainctl reindex --to-model {target.model}`"
        )
    if dump.dim and target.dim and dump.dim != target.dim:
        return (
            f"the dump's vectors have {dump.dim} dimensions ({dump.model}) but the target's {target.dim} "
            f"({target.model}): create the Brain with spec.embedding.dim {dump.dim}"
        )
    return None


def _where(dsn: str) -> str:
    """The target without its password, for messages and the summary."""
    u = urlsplit(dsn)
    return f"{u.hostname or 'localhost'}:{u.port or 5432}{u.path}"


@command("restore")
async def cmd_restore(args: argparse.Namespace) -> int:
    """Two forms share the name: an entry (`restore ID --reason ...`) or a database (`--from`)."""
    from brain.cli import memory

    if args.from_file is None:
        if not args.id or not args.reason or args.into:
            raise BrainError(
                "restore: give an entry (ID --reason ...) or a dump (--from DUMP --into DSN); see --help"
            )
        return await memory.cmd_restore(args)
    if args.id or not args.into:
        raise BrainError("restore --from DUMP needs --into DSN (and no entry ID); see --help")
    return await restore_database(args)


async def restore_database(args: argparse.Namespace) -> int:
    from brain.store import restore

    path = Path(args.from_file)
    listing = await asyncio.to_thread(check_dump, path)
    dump = await asyncio.to_thread(dump_brain, path, listing)
    try:
        why = refusal(dump, _meta_brain(await restore.brain_meta(args.into)))
        if why:
            raise BrainError(f"refused: {why}; nothing was restored")
        await restore.ensure_extensions(args.into)
    except restore.Unreachable as e:
        raise BrainError(f"--into {_where(args.into)}: cannot connect ({e}); nothing was restored") from None
    with tempfile.TemporaryDirectory(prefix="brain-restore-") as tmp:
        toc = Path(tmp) / "toc.list"
        toc.write_text(
            "".join(f"{line}\n" for line in listing.splitlines() if not _EXTENSION_ENTRY.match(line))
        )
        proc = await asyncio.to_thread(
            _run,
            [_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--no-acl", "--single-transaction",
             "--exit-on-error", "-L", str(toc), "-d", args.into, str(path)],
        )  # fmt: skip
    if proc.returncode != 0:
        raise BrainError(
            f"the restore into {_where(args.into)} failed and was rolled back (one transaction): "
            f"{_last_line(proc.stderr)}"
        )
    grants = (
        "skipped"
        if args.no_grants
        else await restore.regrant(args.into, args.prefix, dump.dim or DEFAULT_EMBEDDING_DIM)
    )
    print_json(
        {
            "restored": str(path),
            "into": _where(args.into),
            "embeddingModel": dump.model,
            "embeddingDim": dump.dim,
            "activeEntries": await restore.active_entries(args.into),
            "grants": grants,
        }
    )
    return 0


def add_parsers(sub: Any) -> None:
    r = sub.add_parser(
        "restore",
        help="serve a forgotten or retired entry again (ID --reason), or restore a database dump "
        "(--from DUMP --into DSN)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""brainctl restore ID --reason TEXT
  Serve a forgotten or retired entry again, with a reason.

brainctl restore --from DUMP --into DSN
  Replace the tables of the brain database --into with those of the dump --from (pg_dump -Fc:
  spec.backup's dumps, docs/operations.md "Database backups").

Before touching the target it reads the whole dump (a file that is not a custom-format dump, or is
cut short, is refused) and compares the embedding model recorded in the dump's brain_meta with the
target's: a target brain using another model or dimension is refused, naming both. Then it runs
pg_restore --clean --if-exists --no-owner --no-acl --single-transaction (all or nothing) and grants
the brain's logins their tables again, as the gateway's migration step does: a running gateway
serves the restored memories at once.

--into is a DSN that may own the schema: the managed database's superuser
(Secret <brain>-db-credentials, key dsn) or CloudNativePG's application owner
(Secret <brain>-db-app, key uri). From outside the cluster, port-forward first:

  kubectl -n team port-forward svc/team-db 5432 &
  brainctl restore --from team-20260101T030000Z.dump \\
    --into "postgresql://brain:$PW@127.0.0.1:5432/brain"

Keys live in the database: a restore brings back the keys (and revocations) of the dump's time.""",
    )
    r.add_argument("id", nargs="?", help="the entry to serve again (the entry form)")
    r.add_argument("--reason", help="why the entry is served again (the entry form; required there)")
    r.add_argument("--from", dest="from_file", metavar="DUMP", help="the dump file (pg_dump -Fc)")
    r.add_argument("--into", metavar="DSN", help="the target brain's database, as its owner or superuser")
    r.add_argument(
        "--prefix", default=DB_ROLE_PREFIX, help="the brain's logins are <prefix>_<job> [%(default)s]"
    )
    r.add_argument(
        "--no-grants",
        action="store_true",
        help="do not grant the logins their tables (a database with no brain logins)",
    )
