"""brainctl keys: per-agent keys (create, list, revoke)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from brain.cli.common import command, print_json, settings_of
from brain.core.errors import BrainError


@command("keys")
async def cmd_keys(args: argparse.Namespace) -> int:
    """Per-agent keys: the key's name is the author of what it writes; the value is shown once."""
    from datetime import UTC, timedelta

    from brain.services.keys import KeyStore
    from brain.store import Store

    if not args.dsn:
        raise BrainError("no database: pass --dsn or set BRAIN_DATABASE_URL")
    store = await Store.open(args.dsn, dim=settings_of(args).embedding_dim)
    try:
        ks = KeyStore(store)
        if args.keys_command == "create":
            expires = datetime.now(UTC) + timedelta(days=args.expires_days) if args.expires_days else None
            key, info = await ks.create(
                args.name, args.role, namespaces=args.namespace or None, expires_at=expires
            )
            print_json({"key": key, **info.public()})
            print("store this key now: it is not shown again", file=sys.stderr)
        elif args.keys_command == "list":
            for k in await ks.list(include_revoked=args.all):
                p = k.public()
                ns = ",".join(p["namespaces"]) if p["namespaces"] else "*"
                print(
                    f"{p['name']:<24} {p['role']:<6} {p['state']:<8} {ns:<30} last used {p['last_used_at'] or '-'}"
                    f"  id {p['id']}"
                )
        else:
            by = "id" if args.id else "name"
            print_json((await ks.revoke(args.id or args.name, by=by)).public())
    finally:
        await store.close()
    return 0


def add_parsers(sub: Any) -> None:
    """`keys` and its actions."""
    k = sub.add_parser("keys", help="create, list and revoke per-agent keys")
    ksub = k.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    kc = ksub.add_parser("create", help="create a key (its value is printed once)")
    kc.add_argument("name", help="who uses it, e.g. claude-mac; the author of everything it writes")
    kc.add_argument("--role", choices=["read", "agent", "owner"], default="agent")
    kc.add_argument("--namespace", action="append", help="confine the key to this namespace (repeatable)")
    kc.add_argument("--expires-days", type=float, help="expire after this many days")
    kl = ksub.add_parser("list", help="keys and their state (never their values)")
    kl.add_argument("--all", action="store_true", help="include revoked keys")
    kr = ksub.add_parser("revoke", help="revoke a key by name (or by id with --id; never both)")
    which = kr.add_mutually_exclusive_group(required=True)
    which.add_argument("name", nargs="?", help="the key's name")
    which.add_argument("--id", help="the key's id instead (`brainctl keys list` shows it)")
