"""brainctl memory exposure ID: which conversations were given a memory, and whether they were told."""

from __future__ import annotations

import argparse
from typing import Any

from brain.cli.common import command, owner, print_json, settings_of
from brain.core.errors import BrainError


@command("memory")
async def cmd_memory(args: argparse.Namespace) -> int:
    from brain.services.exposure import exposure
    from brain.store import Store

    if not args.dsn:
        raise BrainError("no database: pass --dsn or set BRAIN_DATABASE_URL")
    store = await Store.open(args.dsn, dim=settings_of(args).embedding_dim)
    try:
        doc = await exposure(store, args.id, owner(args), limit=args.limit)
    finally:
        await store.close()
    if args.json:
        print_json(doc)
        return 0
    told = f", {doc['noticed']} told" if doc["retracted"] else ""
    print(
        f"memory {doc['id']} ({doc['status']}, {doc['namespace']}): given to {doc['count']} "
        f"conversation(s) of {len(doc['keys'])} key(s){told}"
    )
    if doc["retracted"]:
        print(f"  retracted ({doc['retracted']['status']}): {doc['retracted']['reason'] or ''}")
    for c in doc["conversations"]:
        versions = ",".join(f"v{v['version']}" for v in c["versions"])
        noticed = f"  told {c['noticed_at'][:16]}" if c["noticed_at"] else ""
        print(
            f"  {c['conversation'][:16]}  {c['key']:<20} {c['api']:<9} {versions:<6} "
            f"{c['injections']:>3}x  {c['first_at'][:16]} .. {c['last_at'][:16]}{noticed}"
        )
    return 0


def add_parsers(sub: Any) -> None:
    m = sub.add_parser("memory", help="a memory's exposure: the conversations given it (owner)")
    msub = m.add_subparsers(dest="memory_command", required=True, metavar="ACTION")
    e = msub.add_parser(
        "exposure", help="the conversations given this memory (any version), with key and time"
    )
    e.add_argument("id")
    e.add_argument("--limit", type=int, default=500, help="most receipts read (newest first)")
    e.add_argument("--json", action="store_true", help="the REST API's document instead of lines")
