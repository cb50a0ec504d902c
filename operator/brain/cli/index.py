"""brainctl eval, reindex and doctor: measuring retrieval, keeping the index whole, checking it."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from brain.cli.common import command, embedder_for, open_service, print_json, progress_bar
from brain.core.errors import BrainError, InvalidInput


def parse_floor(spec: str | None) -> Any:
    """`vector=0.4,lexical=0.6,calibration=0` → a RetrievalFloor: three legs and the vector floor's
    calibration quantile; unknown names and values outside [0, 1] are refused by name."""
    from pydantic import ValidationError

    from brain.core.contract import RetrievalFloor

    if not spec:
        return RetrievalFloor()
    values: dict[str, str] = {}
    for part in spec.split(","):
        leg, sep, value = part.partition("=")
        if not sep:
            raise InvalidInput(
                f"--floor: {part!r} is not NAME=VALUE (names: {', '.join(RetrievalFloor.model_fields)})",
                field="floor",
            )
        values[leg.strip()] = value.strip()
    try:
        return RetrievalFloor.model_validate(values)
    except ValidationError as e:
        err = e.errors()[0]
        leg = ".".join(str(x) for x in err["loc"])
        accepted = (
            "a number in [0, 1]"
            if leg in RetrievalFloor.model_fields
            else ", ".join(RetrievalFloor.model_fields)
        )
        raise InvalidInput(
            f"--floor: {leg}: {err['msg']} (accepted: {accepted})", field=f"floor.{leg}"
        ) from None


@command("eval")
async def cmd_eval(args: argparse.Namespace) -> int:
    from brain.embedder import LocalEmbedder
    from brain.local.devdb import EmbeddedPostgres
    from brain.local.eval import MODES, evaluate, format_report, load_dataset, load_into
    from brain.retrieval.pipeline import RetrievalConfig
    from brain.store import Store

    try:
        raw = json.loads(Path(args.dataset).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BrainError(f"cannot read dataset {args.dataset}: {e}") from None
    ds = load_dataset(raw)
    # Quality, not latency: on a loaded machine the gateway's 300 ms embedding budget would drop the
    # vector leg for some queries and the figures would measure the load (the report counts `degraded`).
    config = RetrievalConfig(floor=parse_floor(args.floor), embed_timeout_s=30.0)
    modes = list(MODES) if args.mode == "all" else [args.mode]
    ks = sorted({int(k) for k in args.k.split(",")})
    embedder = LocalEmbedder()
    pg = None
    dsn = args.dsn
    if not dsn:
        pg = EmbeddedPostgres().start()
        dsn = await pg.create_database(f"eval_{uuid.uuid4().hex[:8]}")
    try:
        store = await Store.open(dsn, dim=embedder.dim)
        try:
            print(f"loading {len(ds.memories)} memories from {ds.name} …", file=sys.stderr)
            t0 = time.monotonic()
            mapping = await load_into(
                store, embedder, ds, episodes=args.episodes, progress=progress_bar(args)
            )
            print(
                f"\rloaded {len(mapping)} memories in {time.monotonic() - t0:.0f}s; running queries …",
                file=sys.stderr,
            )
            report = await evaluate(store, embedder, ds, mapping, modes=modes, ks=ks, config=config)
        finally:
            await store.close()
    finally:
        if pg:
            pg.stop()
    report["dataset"] = ds.name
    print(format_report(report, ks))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


@command("reindex")
async def cmd_reindex(args: argparse.Namespace) -> int:
    """Fill missing vectors with the brain's own model, or (--to-model) migrate the brain to another.

    A client whose model is not the brain's is refused by name: vectors of two models are never
    mixed. `--to-model` builds the new model's index beside the live one and swaps it in when done
    (brain/store/reindex.py); serving goes on from the old index meanwhile.
    """
    from brain.store import Store, reindex

    if not args.dsn:
        raise BrainError("no database: pass --dsn or set BRAIN_DATABASE_URL")
    stored = await reindex.stored_dim(args.dsn)
    embedder = embedder_for(args, args.to_model)
    store = await Store.open(args.dsn, dim=stored or embedder.dim, embedding_model=embedder.model)
    try:
        if args.abandon:
            print_json({"abandoned": await store.abandon_reindex()})
        elif args.to_model:
            bar = progress_bar(args)
            print_json(await store.migrate_model(embedder, progress=lambda _s, d, t: bar(d, t)))
        else:
            print_json({"embedded": await store.fill_live(embedder), "model": embedder.model})
    finally:
        await store.close()
    return 0


@command("doctor")
async def cmd_doctor(args: argparse.Namespace) -> int:
    """Checks each part a brain needs and says what is wrong in words."""
    ok = True
    checks: list[tuple[str, bool, str]] = []
    try:
        async with open_service(args) as svc:
            stats = await svc.store.index_stats()
            checks.append(("database", True, f"{sum(stats['entriesByKind'].values())} active entries"))
            checks.append(
                (
                    "embedded",
                    stats["embeddedRatio"] >= 0.99,
                    f"{stats['embeddedRatio']:.1%} of entries have vectors (brainctl reindex fills the rest)",
                )
            )
    except Exception as e:
        checks.append(("database", False, str(e)))
    for name, good, detail in checks:
        ok &= good
        print(f"{'ok ' if good else 'BAD'}  {name:<10} {detail}")
    return 0 if ok else 1


def add_eval(sub: Any) -> None:
    """`eval`: its options mirror the gateway's retrieval knobs."""
    e = sub.add_parser(
        "eval",
        help="measure retrieval on a dataset (recall@k, MRR, latency)",
        description="Load DATASET into a fresh database on an embedded Postgres with the offline "
        "model and run every query through the real retrieval pipeline.",
    )
    e.add_argument("dataset", help="dataset JSON (format: shared/data/README.md)")
    e.add_argument(
        "--mode",
        choices=["hybrid", "lexical", "vector", "gateway", "all"],
        default="all",
        help="legs to rank with; 'gateway' scores what the gateway would inject (hybrid, composed with "
        "persona, skill slots and the token budget by retrieval/compose); 'all' is the three leg sets "
        "(default)",
    )
    e.add_argument("--k", default="1,5,10,20", help="comma-separated cut-offs (default %(default)s)")
    e.add_argument("--json", metavar="OUT", help="also write the report as JSON")
    e.add_argument(
        "--episodes",
        choices=["field", "valid_from"],
        default="field",
        help="which memories were recorded together: only those sharing an `episode` field (default), or "
        "also those sharing namespace and valid_from, like the turns of one LoCoMo session",
    )
    e.add_argument(
        "--floor",
        metavar="LEG=VALUE,...",
        help="least evidence for a hit to count, per leg in [0, 1] (vector: cosine, lexical: share of the "
        "query's IDF covered, trigram: share of its identifiers); default: the gateway's "
        "(spec.gateway.retrieval.floor). 'vector=0,lexical=0,trigram=0' ranks without a floor",
    )


def add_reindex(sub: Any) -> None:
    """`reindex` and `doctor`."""
    ri = sub.add_parser(
        "reindex",
        help="embed entries that have no vector, or migrate the brain to another embedding model",
        description="Without options: embed the entries that lack a vector, with the brain's own model "
        "(a client running another model is refused). --to-model: build that model's index beside the "
        "live one and swap it in when complete.",
    )
    ri.add_argument("--to-model", help="migrate to this model (fastembed name, or <base>@rp<dim>)")
    ri.add_argument("--abandon", action="store_true", help="drop a running migration's half-built index")
    sub.add_parser("doctor", help="check the database and the index")
