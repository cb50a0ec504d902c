"""brainctl: the command line for people who run a brain.

Every command talks to the same store and pipeline the gateway uses. Connection settings come from
flags or the environment (BRAIN_DATABASE_URL, BRAIN_EMBEDDER_URL); without an embedder URL the
offline model is loaded in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from brain.core.errors import BrainError, InvalidInput

DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]
COMMANDS: dict[str, Handler] = {}


def command(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = fn
        return fn

    return register


def _embedder(args: argparse.Namespace, model: str | None = None) -> Any:
    """The client's embedder, named by the model it runs (the name every stored vector records)."""
    from brain.embedder import EmbeddingClient
    from brain.embedder.variants import load_embedder

    model = model or getattr(args, "embedding_model", None) or DEFAULT_EMBEDDING_MODEL
    url = getattr(args, "embedder_url", None)
    if url:
        dim = int(os.environ.get("BRAIN_EMBEDDING_DIM", "384"))
        return EmbeddingClient(url, model=model, dim=dim, timeout=30.0)
    return load_embedder(model)


@asynccontextmanager
async def _service(args: argparse.Namespace) -> AsyncIterator[Any]:
    from brain.services.memory import MemoryService
    from brain.store import Store

    if not args.dsn:
        raise BrainError("no database: pass --dsn or set BRAIN_DATABASE_URL")
    embedder = _embedder(args)
    store = await Store.open(args.dsn, dim=embedder.dim, embedding_model=embedder.model)
    try:
        yield MemoryService(store, embedder)
    finally:
        await store.close()


def _owner(args: argparse.Namespace) -> Any:
    from brain.core.models import Actor

    return Actor(name=args.as_name, role="owner", origin="owner")


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# ---------------------------------------------------------------------- eval


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty() or os.environ.get("BRAIN_PROGRESS"):
        width = 30
        filled = width * done // max(total, 1)
        print(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr, flush=True
        )


def parse_floor(spec: str | None) -> Any:
    """`vector=0.4,lexical=0.6` → a Floor; unknown legs and values outside [0, 1] are refused by name."""
    from pydantic import ValidationError

    from brain.retrieval.pipeline import Floor

    if not spec:
        return Floor()
    values: dict[str, str] = {}
    for part in spec.split(","):
        leg, sep, value = part.partition("=")
        if not sep:
            raise InvalidInput(
                f"--floor: {part!r} is not LEG=VALUE (legs: {', '.join(Floor.model_fields)})", field="floor"
            )
        values[leg.strip()] = value.strip()
    try:
        return Floor.model_validate(values)
    except ValidationError as e:
        err = e.errors()[0]
        leg = ".".join(str(x) for x in err["loc"])
        accepted = (
            "a number in [0, 1]" if leg in Floor.model_fields else f"legs {', '.join(Floor.model_fields)}"
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
            mapping = await load_into(store, embedder, ds, episodes=args.episodes, progress=_progress)
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


# ---------------------------------------------------------------------- memory commands


@command("note")
async def cmd_note(args: argparse.Namespace) -> int:
    from brain.services.memory import parse_memory

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
    async with _service(args) as svc:
        res = await svc.note(item, _owner(args))
    _print({"id": res.memory.id, "created": res.created, "content_hash": res.memory.content_hash})
    return 0


@command("search")
async def cmd_search(args: argparse.Namespace) -> int:
    as_of = datetime.fromisoformat(args.as_of) if args.as_of else None
    async with _service(args) as svc:
        hits = await svc.search(
            args.query, _owner(args), args.namespace or None, limit=args.limit, as_of=as_of
        )
    for h in hits:
        print(
            f"{h.score:.4f}  {h.id}  [{h.kind} {h.namespace} {h.tier} {h.origin} by {h.author}]  "
            f"{(h.title or h.body)[:80]!r}"
        )
    return 0 if hits else 1


@command("get")
async def cmd_get(args: argparse.Namespace) -> int:
    async with _service(args) as svc:
        detail = await svc.get(args.id, _owner(args))
    _print(detail.model_dump(mode="json"))
    return 0


@command("list")
async def cmd_list(args: argparse.Namespace) -> int:
    async with _service(args) as svc:
        rows = await svc.list_memories(_owner(args), args.namespace or None, kind=args.kind, limit=args.limit)
    for r in rows:
        print(
            f"{r.id}  {r.valid_from:%Y-%m-%d}  {r.kind:<10} {r.namespace:<16} {r.tier:<8} {r.author:<16} {r.title}"
        )
    return 0


@command("forget")
async def cmd_forget(args: argparse.Namespace) -> int:
    async with _service(args) as svc:
        m = await svc.forget(args.id, args.reason, _owner(args))
    _print({"id": m.id, "status": m.status})
    return 0


@command("retire")
async def cmd_retire(args: argparse.Namespace) -> int:
    async with _service(args) as svc:
        m = await svc.retire(args.id, args.reason, _owner(args))
    _print({"id": m.id, "status": m.status})
    return 0


@command("restore")
async def cmd_restore(args: argparse.Namespace) -> int:
    async with _service(args) as svc:
        m = await svc.restore(args.id, args.reason, _owner(args))
    _print({"id": m.id, "status": m.status})
    return 0


@command("promote")
async def cmd_promote(args: argparse.Namespace) -> int:
    async with _service(args) as svc:
        m = await svc.promote(
            args.id, _owner(args), standing=args.standing or None, required=args.required or None
        )
    _print({"id": m.id, "tier": m.tier, "standing": m.standing, "required": m.required})
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
    embedder = _embedder(args, args.to_model)
    store = await Store.open(args.dsn, dim=stored or embedder.dim, embedding_model=embedder.model)
    try:
        if args.abandon:
            _print({"abandoned": await reindex.abandon(store.pool)})
        elif args.to_model:
            _print(
                await reindex.migrate_model(store.pool, embedder, progress=lambda _s, d, t: _progress(d, t))
            )
        else:
            _print({"embedded": await reindex.fill_live(store.pool, embedder), "model": embedder.model})
    finally:
        await store.close()
    return 0


@command("doctor")
async def cmd_doctor(args: argparse.Namespace) -> int:
    """Checks each part a brain needs and says what is wrong in words."""
    ok = True
    checks: list[tuple[str, bool, str]] = []
    try:
        async with _service(args) as svc:
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


# ---------------------------------------------------------------------- up and keys


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
    jobs = build_jobs(brain, sources, dsn=args.dsn, state=state, gateway_url=None, master_key=None)
    worst = 0
    for job in jobs:
        result = await run_job(job)
        print(describe(result), file=sys.stderr)
        _print(result)
        worst = max(worst, int(result["rc"] or 0))
    return worst


@command("up")
async def cmd_up(args: argparse.Namespace) -> int:
    from brain.local.up import up

    return await up(args.file, state_dir=args.state_dir, host=args.host, port=args.port)


@command("keys")
async def cmd_keys(args: argparse.Namespace) -> int:
    """Per-agent keys: the key's name is the author of what it writes; the value is shown once."""
    from datetime import UTC, timedelta

    from brain.services.keys import KeyStore
    from brain.store import Store

    if not args.dsn:
        raise BrainError("no database: pass --dsn or set BRAIN_DATABASE_URL")
    store = await Store.open(args.dsn, dim=int(os.environ.get("BRAIN_EMBEDDING_DIM", "384")))
    try:
        ks = KeyStore(store)
        if args.keys_command == "create":
            expires = datetime.now(UTC) + timedelta(days=args.expires_days) if args.expires_days else None
            key, info = await ks.create(
                args.name, args.role, namespaces=args.namespace or None, expires_at=expires
            )
            _print({"key": key, **info.public()})
            print("store this key now: it is not shown again", file=sys.stderr)
        elif args.keys_command == "list":
            for k in await ks.list(include_revoked=args.all):
                p = k.public()
                ns = ",".join(p["namespaces"]) if p["namespaces"] else "*"
                print(
                    f"{p['name']:<24} {p['role']:<6} {p['state']:<8} {ns:<30} last used {p['last_used_at'] or '-'}"
                )
        else:
            _print((await ks.revoke(args.name)).public())
    finally:
        await store.close()
    return 0


# ---------------------------------------------------------------------- learning loops (brain.jobs)


@command("proposals")
async def cmd_proposals(args: argparse.Namespace) -> int:
    """What distill drafted: list, show (both texts for a supersede), approve or reject (owner)."""
    from brain.services import proposals

    async with _service(args) as svc:
        if args.proposals_command == "list":
            for p in await proposals.list_proposals(svc.store, args.status, args.limit):
                sup = f" supersedes {p['supersedes']}" if p["supersedes"] else ""
                print(
                    f"{p['id']}  {p['score']:.2f}  {p['kind']:<10} {p['namespace']:<16} "
                    f"{len(p['evidence']):>3} evidence  {p['title'][:60]}{sup}"
                )
        elif args.proposals_command == "show":
            _print(await proposals.show(svc.store, args.id))
        elif args.proposals_command == "approve":
            _print(await proposals.approve(svc, args.id, _owner(args), reason=args.reason))
        else:
            _print(await proposals.reject(svc.store, args.id, _owner(args), args.reason))
    return 0


@command("ingest")
async def cmd_ingest(args: argparse.Namespace) -> int:
    """The ingest job, run by a person: same code as the CronJob, with a progress bar."""
    from brain.ingest.source import load_source_file
    from brain.jobs.ingest import run_ingest

    if args.file:
        return await _ingest_manifests(args)

    spec = load_source_file(args.source_file)
    async with _service(args) as svc:
        summary = await run_ingest(
            svc.store, svc.embedder, spec, workdir=Path(args.workdir) if args.workdir else None
        )
    print(json.dumps(summary, default=str))
    return 0


@command("distill")
async def cmd_distill(args: argparse.Namespace) -> int:
    from brain.jobs.common import finish_run, start_run
    from brain.jobs.distill import DistillConfig, run_distill

    cfg = DistillConfig.from_env()
    if args.model:
        cfg = DistillConfig(**{**cfg.__dict__, "model": args.model})
    async with _service(args) as svc:
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

    async with _service(args) as svc:
        if args.show:
            latest = await latest_digest(svc.store)
            print(latest["markdown"] if latest else "no digest yet")
            return 0 if latest else 1
        run_id = await start_run(svc.store, "digest")
        summary = await run_digest(svc.store, svc.embedder, days=args.days)
        await finish_run(svc.store, run_id, "ok", summary)
        print((await latest_digest(svc.store) or {}).get("markdown", ""))
    return 0


# ---------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="brainctl",
        description="Run and inspect a brain: one shared, governed memory for a team's coding agents.",
        epilog="Connection: --dsn / BRAIN_DATABASE_URL, --embedder-url / BRAIN_EMBEDDER_URL "
        "(without it the offline model loads in-process).",
    )
    p.add_argument("--dsn", default=os.environ.get("BRAIN_DATABASE_URL"), help="Postgres DSN of the brain")
    p.add_argument("--embedder-url", default=os.environ.get("BRAIN_EMBEDDER_URL"), help="embedder base URL")
    p.add_argument(
        "--embedding-model",
        default=os.environ.get("BRAIN_EMBEDDING_MODEL", DEFAULT_EMBEDDING_MODEL),
        help="the model this client embeds with (must be the brain's; default: BRAIN_EMBEDDING_MODEL)",
    )
    p.add_argument(
        "--as",
        dest="as_name",
        default=os.environ.get("USER", "owner"),
        help="owner name recorded as author/promoter (default: $USER)",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
        ("restore", "serve a forgotten or retired entry again, with a reason"),
    ):
        f = sub.add_parser(name, help=helptext)
        f.add_argument("id")
        f.add_argument("--reason", required=True)

    pr = sub.add_parser("promote", help="move an entry to the curated tier (owner)")
    pr.add_argument("id")
    pr.add_argument("--standing", action="store_true", help="load it at every session start")
    pr.add_argument("--required", action="store_true", help="inject it into every request")

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

    u = sub.add_parser(
        "up",
        help="run the whole stack locally from a Brain manifest (embedded Postgres, offline model)",
        description="Start embedded Postgres, the echo upstream (when a model points at a free loopback port) "
        "and the gateway with the offline model, then print URLs and keys. Ctrl-C stops everything.",
    )
    u.add_argument(
        "-f", "--file", action="append", required=True, help="Brain (and RoutingPolicy) YAML; repeatable"
    )
    u.add_argument("--state-dir", help="where data and keys live (default ~/.local/state/brain/<name>)")
    u.add_argument("--host", default="127.0.0.1")
    u.add_argument("--port", type=int, default=4000)

    k = sub.add_parser("keys", help="create, list and revoke per-agent keys")
    ksub = k.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    kc = ksub.add_parser("create", help="create a key (its value is printed once)")
    kc.add_argument("name", help="who uses it, e.g. claude-mac; the author of everything it writes")
    kc.add_argument("--role", choices=["read", "agent", "owner"], default="agent")
    kc.add_argument("--namespace", action="append", help="confine the key to this namespace (repeatable)")
    kc.add_argument("--expires-days", type=float, help="expire after this many days")
    kl = ksub.add_parser("list", help="keys and their state (never their values)")
    kl.add_argument("--all", action="store_true", help="include revoked keys")
    kr = ksub.add_parser("revoke", help="revoke a key by name or id")
    kr.add_argument("name")

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
    dis = sub.add_parser("distill", help="run distillation now: drafts proposals from captured episodes")
    dis.add_argument("--model", help="model name at the gateway (default: BRAIN_DISTILL_MODEL)")
    dg = sub.add_parser("digest", help="build this week's digest (or --show the latest)")
    dg.add_argument("--days", type=int, default=7)
    dg.add_argument("--show", action="store_true", help="print the latest digest instead of building one")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(COMMANDS[args.command](args))
    except BrainError as e:
        print(f"brainctl: error: {e.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
