"""brainctl note, search, get, list, forget, retire, restore, purge, promote: the owner at the memory door."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from brain.cli.common import command, open_service, owner, print_json


@command("note")
async def cmd_note(args: argparse.Namespace) -> int:
    from brain.services.screening import parse_memory

    body = sys.stdin.read() if args.body == "-" else args.body
    item = parse_memory(
        {
            "body": body,
            "title": args.title or "",
            "kind": args.kind,
            "namespace": args.namespace,
            "tags": args.tag or [],
        }
    )
    async with open_service(args) as svc:
        res = await svc.note(item, owner(args))
    print_json({"id": res.memory.id, "created": res.created, "content_hash": res.memory.content_hash})
    return 0


@command("search")
async def cmd_search(args: argparse.Namespace) -> int:
    as_of = datetime.fromisoformat(args.as_of) if args.as_of else None
    async with open_service(args) as svc:
        hits = await svc.search(
            args.query, owner(args), args.namespace or None, limit=args.limit, as_of=as_of
        )
    for h in hits:
        print(
            f"{h.score:.4f}  {h.id}  [{h.kind} {h.namespace} {h.tier} {h.origin} by {h.author}]  "
            f"{(h.title or h.body)[:80]!r}"
        )
    return 0 if hits else 1


@command("get")
async def cmd_get(args: argparse.Namespace) -> int:
    async with open_service(args) as svc:
        detail = await svc.get(args.id, owner(args))
    print_json(detail.model_dump(mode="json"))
    return 0


@command("list")
async def cmd_list(args: argparse.Namespace) -> int:
    async with open_service(args) as svc:
        rows = await svc.list_memories(owner(args), args.namespace or None, kind=args.kind, limit=args.limit)
    for r in rows:
        print(
            f"{r.id}  {r.valid_from:%Y-%m-%d}  {r.kind:<10} {r.namespace:<16} {r.tier:<8} {r.author:<16} {r.title}"
        )
    return 0


@command("forget")
async def cmd_forget(args: argparse.Namespace) -> int:
    async with open_service(args) as svc:
        m = await svc.forget(args.id, args.reason, owner(args))
    print_json({"id": m.id, "status": m.status})
    return 0


@command("retire")
async def cmd_retire(args: argparse.Namespace) -> int:
    async with open_service(args) as svc:
        m = await svc.retire(args.id, args.reason, owner(args))
    print_json({"id": m.id, "status": m.status})
    return 0


async def cmd_restore(args: argparse.Namespace) -> int:
    """`brainctl restore ID --reason ...` (an entry); `restore --from` is a dump (brain.cli.restore),
    which registers the one `restore` command and its parser."""
    async with open_service(args) as svc:
        m = await svc.restore(args.id, args.reason, owner(args))
    print_json({"id": m.id, "status": m.status})
    return 0


@command("purge")
async def cmd_purge(args: argparse.Namespace) -> int:
    """A forgotten entry whose text must not survive (a leaked secret, personal data): every version's
    body and title become a tombstone; hashes, authors and events stay."""
    async with open_service(args) as svc:
        detail = await svc.purge(args.id, args.reason, owner(args))
    print_json({"id": detail.memory.id, "status": detail.memory.status, "purged": len(detail.history)})
    return 0


@command("promote")
async def cmd_promote(args: argparse.Namespace) -> int:
    async with open_service(args) as svc:
        m = await svc.promote(
            args.id, owner(args), standing=args.standing or None, required=args.required or None
        )
    print_json({"id": m.id, "tier": m.tier, "standing": m.standing, "required": m.required})
    return 0


def add_parsers(sub: Any) -> None:
    """The memory commands, in the order --help lists them."""
    n = sub.add_parser("note", help="save an entry as the owner")
    n.add_argument("body", help="Markdown body, or - to read stdin")
    n.add_argument("--title")
    n.add_argument("--kind", default="note")
    n.add_argument("--namespace", default="shared")
    n.add_argument("--tag", action="append")

    s = sub.add_parser("search", help="hybrid search, as the gateway would retrieve")
    s.add_argument("query")
    s.add_argument("--namespace", action="append", help="scope (repeatable; 'shared' is always included)")
    s.add_argument("--limit", type=int, default=6)
    s.add_argument("--as-of", help="ISO-8601 time: answer as of that moment")

    g = sub.add_parser("get", help="one entry with its content hash and history")
    g.add_argument("id")

    ls = sub.add_parser("list", help="entries newest first, without bodies")
    ls.add_argument("--namespace", action="append")
    ls.add_argument("--kind")
    ls.add_argument("--limit", type=int, default=50)

    for name, helptext in (
        ("forget", "soft-delete an entry, with a reason"),
        ("retire", "retire an entry that is no longer true, with a reason"),
        ("purge", "replace every version's text of a forgotten entry with a tombstone, with a reason"),
    ):
        f = sub.add_parser(name, help=helptext)
        f.add_argument("id")
        f.add_argument("--reason", required=True)

    pr = sub.add_parser("promote", help="move an entry to the curated tier (owner)")
    pr.add_argument("id")
    pr.add_argument("--standing", action="store_true", help="load it at every session start")
    pr.add_argument("--required", action="store_true", help="inject it into every request")
