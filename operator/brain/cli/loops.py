"""brainctl distill and digest: the learning loops' CronJobs, run now by a person."""

from __future__ import annotations

import argparse
import json
from typing import Any

from brain.cli.common import command, open_service


@command("distill")
async def cmd_distill(args: argparse.Namespace) -> int:
    from brain.jobs.common import finish_run, start_run
    from brain.jobs.distill import run_distill
    from brain.jobs.settings.distill import DistillConfig, load_distill_config

    cfg = load_distill_config()  # the distill job's own variables (BRAIN_DISTILL_*, BRAIN_GATEWAY_URL)
    if args.model:
        cfg = DistillConfig(**{**cfg.__dict__, "model": args.model})
    async with open_service(args) as svc:
        run_id = await start_run(svc.store, "distill")
        summary = await run_distill(svc.store, svc.embedder, cfg)
        await finish_run(svc.store, run_id, "deferred" if summary.deferred else "ok", summary.as_dict())
    print(json.dumps(summary.as_dict(), default=str))
    return 0


@command("digest")
async def cmd_digest(args: argparse.Namespace) -> int:
    from brain.jobs.common import finish_run, start_run
    from brain.jobs.digest import run_digest
    from brain.services.digests import latest_digest

    async with open_service(args) as svc:
        if args.show:
            latest = await latest_digest(svc.store, args.namespace)
            print(latest["markdown"] if latest else "no digest yet")
            return 0 if latest else 1
        run_id = await start_run(svc.store, "digest")
        summary = await run_digest(svc.store, svc.embedder, days=args.days)
        await finish_run(svc.store, run_id, "ok", summary)
        print((await latest_digest(svc.store, args.namespace) or {}).get("markdown", ""))
    return 0


def add_parsers(sub: Any) -> None:
    """`distill` and `digest`."""
    dis = sub.add_parser("distill", help="run distillation now: drafts proposals from captured episodes")
    dis.add_argument("--model", help="model name at the gateway (default: BRAIN_DISTILL_MODEL)")
    dg = sub.add_parser("digest", help="build this week's digest (or --show the latest)")
    dg.add_argument("--days", type=int, default=7)
    dg.add_argument("--show", action="store_true", help="print the latest digest instead of building one")
    dg.add_argument(
        "--namespace", default=None, help="whose digest to print (one per namespace; default: the newest)"
    )
