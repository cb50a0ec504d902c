"""brainctl proposals: the owner's review of what distill drafted."""

from __future__ import annotations

import argparse
from typing import Any

from brain.cli.common import command, open_service, owner, print_json


@command("proposals")
async def cmd_proposals(args: argparse.Namespace) -> int:
    """What distill drafted: list, show (both texts for a supersede), approve or reject (owner)."""
    from brain.services import approval, proposals

    async with open_service(args) as svc:
        if args.proposals_command == "list":
            for p in await proposals.list_proposals(svc.store, args.status, args.limit):
                sup = f" supersedes {p['supersedes']}" if p["supersedes"] else ""
                print(
                    f"{p['id']}  {p['score']:.2f}  {p['kind']:<10} {p['namespace']:<16} "
                    f"{len(p['evidence']):>3} evidence  {p['title'][:60]}{sup}"
                )
        elif args.proposals_command == "show":
            print_json(await proposals.show(svc.store, args.id))
        elif args.proposals_command == "approve":
            print_json(await approval.approve(svc, args.id, owner(args), reason=args.reason))
        else:
            print_json(await proposals.reject(svc.store, args.id, owner(args), args.reason))
    return 0


def add_parsers(sub: Any) -> None:
    """`proposals` and its actions."""
    pp = sub.add_parser("proposals", help="review what distill proposed (owner): list, show, approve, reject")
    psub = pp.add_subparsers(dest="proposals_command", required=True, metavar="ACTION")
    pl = psub.add_parser("list", help="proposals by status, best score first")
    pl.add_argument("--status", choices=["pending", "approved", "rejected"], default="pending")
    pl.add_argument("--limit", type=int, default=50)
    psh = psub.add_parser("show", help="one proposal with its evidence (and the text it would supersede)")
    psh.add_argument("id")
    pa = psub.add_parser("approve", help="write the memory as you (curated tier, you as promoter)")
    pa.add_argument("id")
    pa.add_argument("--reason")
    pr2 = psub.add_parser("reject", help="reject with a reason")
    pr2.add_argument("id")
    pr2.add_argument("--reason", required=True)
