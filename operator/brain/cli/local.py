"""brainctl up and ingest: the laptop stack, and MemorySources run now by a person."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from brain.cli.common import command, open_service, print_json, settings_of
from brain.core.errors import BrainError, InvalidInput


async def _ingest_manifests(args: argparse.Namespace) -> int:
    """Run the manifests' MemorySources now, as their CronJobs (and `brainctl up`) run them."""
    from brain.local.jobs import build_jobs, describe, load_sources, run_job
    from brain.local.up import load_manifests

    if not args.now:
        raise BrainError("sources import on their schedule under `brainctl up`; pass --now to import at once")
    if not args.dsn:
        raise BrainError("no database: pass --dsn or set BRAIN_DATABASE_URL (`brainctl up` prints it)")
    brain, _ = load_manifests(args.file)
    sources, skipped = load_sources(args.file, brain.metadata.name or "brain")
    if args.source:
        sources = [s for s in sources if s.metadata.name in args.source]
        missing = set(args.source) - {s.metadata.name for s in sources}
        if missing:
            raise InvalidInput(
                f"--source: no MemorySource named {', '.join(sorted(missing))} for this Brain", field="source"
            )
    for line in skipped:
        print(f"brainctl ingest: skipped {line}", file=sys.stderr)
    state = Path(args.state_dir) if args.state_dir else Path.home() / ".local" / "state" / "brain" / "ingest"
    jobs = build_jobs(
        brain,
        sources,
        dsn=args.dsn,
        state=state,
        gateway_url=None,
        master_key=None,
        base_env=settings_of(args).local.environ,
    )
    worst = 0
    for job in jobs:
        result = await run_job(job)
        print(describe(result), file=sys.stderr)
        print_json(result)
        worst = max(worst, int(result["rc"] or 0))
    return worst


@command("up")
async def cmd_up(args: argparse.Namespace) -> int:
    from brain.local.up import up

    return await up(
        args.file, state_dir=args.state_dir, host=args.host, port=args.port, settings=settings_of(args).local
    )


@command("ingest")
async def cmd_ingest(args: argparse.Namespace) -> int:
    """The ingest job, run by a person: same code as the CronJob, with a progress bar."""
    from brain.ingest.source import load_source_file
    from brain.jobs.ingest import run_ingest
    from brain.jobs.settings.ingest import load_ingest_settings

    if args.file:
        return await _ingest_manifests(args)

    jobs = load_ingest_settings()  # the ingest job's own variables (BRAIN_INLINE_DIR, BRAIN_CHUNK_*)
    spec = load_source_file(args.source_file, inline_dir=jobs.inline_dir)
    async with open_service(args) as svc:
        summary = await run_ingest(
            svc.store,
            svc.embedder,
            spec,
            settings=jobs,
            workdir=Path(args.workdir) if args.workdir else None,
            # a person's own command: a local path, file:// or http:// is theirs to read
            allow_insecure=True,
        )
    print(json.dumps(summary, default=str))
    return 0


def add_up(sub: Any) -> None:
    """`up`."""
    u = sub.add_parser(
        "up",
        help="run the whole stack locally from a Brain manifest (embedded Postgres, offline model)",
        description="Start embedded Postgres, the echo upstream (when a model points at a free loopback port) "
        "and the gateway with the offline model, then print URLs and keys. Ctrl-C stops everything.",
    )
    u.add_argument(
        "-f", "--file", action="append", required=True, help="Brain (and RoutingPolicy) YAML; repeatable"
    )
    u.add_argument(
        "--state-dir",
        help="where data and keys live (default ~/.local/state/brain/<name>; as root /var/lib/brain/<name>)",
    )
    u.add_argument("--host", default="127.0.0.1")
    u.add_argument("--port", type=int, default=4000)


def add_ingest(sub: Any) -> None:
    """`ingest`."""
    ing = sub.add_parser(
        "ingest",
        help="import MemorySources now: a source document, or the manifests' sources (-f … --now)",
        description="--source-file: one source document (JSON, as the operator writes it), in this process. "
        "-f brain.yaml -f sources.yaml --now: every MemorySource of the Brain, each through "
        "`python -m brain.jobs.ingest` as its CronJob (and `brainctl up`) runs it.",
    )
    what = ing.add_mutually_exclusive_group(required=True)
    what.add_argument("--source-file", help="MemorySource document (JSON), as the operator writes it")
    what.add_argument("-f", "--file", action="append", help="Brain and MemorySource YAML; repeatable")
    ing.add_argument(
        "--now", action="store_true", help="with -f: import now (schedules run under `brainctl up`)"
    )
    ing.add_argument("--source", action="append", help="with -f: only this MemorySource; repeatable")
    ing.add_argument("--workdir", help="keep the checkout here between runs")
    ing.add_argument(
        "--state-dir", help="with -f: checkouts and job logs (default ~/.local/state/brain/ingest)"
    )
