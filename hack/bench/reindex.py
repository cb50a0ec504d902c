"""`make bench` part: a model migration (brain/store/reindex.py) against the model alone.

N memories are migrated to a second model (`<base>@rp384`, brain/embedder/variants.py)
while a client keeps querying. Reported: the migration's wall time against the same model embedding
the same texts alone in the same run (the migration's overhead is the difference), and retrieval
p50/p95 during the migration against idle. `--size` sets N (default 10 000; see docs/performance.md
for 100k). Prints Markdown.

`--corpus short` (the default) stores N distinct short team notes (a title and a body of ~15 tokens
together, drawn from templates below), the size most captured memories have; their live vectors are
the base model's vectors of the first 1 000 notes, jittered, so setting up 100k does not cost a
third full embedding. `--corpus locomo` stores LoCoMo dialogue turns (~30 tokens) copied into
namespaces until the store holds N.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import time

import numpy as np
from hack.bench import LOCOMO, parser, results

from brain.local.stats import percentile

SERVICES = [
    "billing",
    "auth",
    "search",
    "checkout",
    "payments",
    "ingest",
    "webapp",
    "mobile",
    "gateway",
    "reports",
    "notifications",
    "scheduler",
    "inventory",
    "shipping",
    "CLI",
    "analytics",
    "admin",
    "exports",
    "importer",
    "ledger",
    "pricing",
    "wiki",
    "onboarding",
    "mailer",
    "crawler",
    "CDN",
    "flags",
    "audit",
    "datalake",
    "builds",
]
_SLOTS: dict[str, list[str]] = {
    "s": SERVICES,
    "b": ["main", "release", "stable", "deploy", "trunk", "prod"],
    "d": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "h": ["standup", "lunch", "the freeze", "QA", "the nightly"],
    "c": ["ops", "alerts", "oncall", "incidents", "help"],
    "k": ["Loki", "Elasticsearch", "S3", "Datadog", "CloudWatch"],
    "f": ["config.yaml", "a ConfigMap", "Vault", "settings.toml", "flags"],
    "x": ["make test", "pytest -x", "npm test", "go test", "tox"],
    "db": ["Postgres", "the replica", "Redis", "MySQL", "pgbouncer"],
    "p": [
        "Ana",
        "Ben",
        "Chen",
        "Dana",
        "Eli",
        "Fatima",
        "Goran",
        "Hana",
        "Ivo",
        "Jun",
        "Kai",
        "Lena",
        "Mo",
        "Nia",
        "Omar",
        "Pia",
        "Quinn",
        "Rui",
        "Sara",
        "Tom",
    ],
    "a": ["schema", "API", "retries", "timeouts", "alerts"],
    "r": ["disk full", "expired cert", "bad migration", "DNS", "leaked connections"],
    "n": [str(i) for i in range(2, 120)],
    "v": [str(i) for i in range(1, 40)],
}
_TEMPLATES = [  # (title, body): ~10-15 tokens together, the size of a typical team note
    ("{s} deploys", "{s} deploys from {b} on {d}s after {h}."),
    ("{s} on-call", "{p} is on call for {s} on {d}; use #{c}."),
    ("{s} logs", "{s} logs go to {k}, kept {n} days."),
    ("{s} config", "{s} reads config from {f} since v{v}."),
    ("{s} tests", "{s} tests: {x}, about {n} minutes."),
    ("{s} database", "{s} uses {db}, pool of {n}."),
    ("{s} owner", "{p} owns the {s} {a}; ask before v{v}."),
    ("{s} incident", "{s} broke on {d}: {r}. {p} fixed it."),
]


def short_memories(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """n distinct short (title, body) notes, drawn without replacement from the templates' space."""
    slots = [[k for k in _SLOTS if "{" + k + "}" in t + b] for t, b in _TEMPLATES]
    sizes = [int(np.prod([len(_SLOTS[k]) for k in ks])) for ks in slots]
    if n > sum(sizes):
        raise ValueError(f"--size {n}: the short corpus holds {sum(sizes)} distinct notes")
    starts = np.cumsum([0, *sizes])
    out = []
    for x in np.random.default_rng(seed).choice(sum(sizes), size=n, replace=False):
        t = int(np.searchsorted(starts, x, side="right")) - 1
        j = int(x - starts[t])
        fill = {}
        for k in slots[t]:
            j, r = divmod(j, len(_SLOTS[k]))
            fill[k] = _SLOTS[k][r]
        title, body = (s.format(**fill) for s in _TEMPLATES[t])
        out.append((title, body[0].upper() + body[1:]))
    return out


def short_queries() -> list[str]:
    asks = [
        "who owns the {s} API?",
        "where do {s} logs go?",
        "how do I run the {s} tests?",
        "what broke {s}?",
    ]
    return [a.format(s=s) for s in SERVICES for a in asks][:100]


async def main() -> int:
    p = parser(__spec__.name, __doc__)
    p.add_argument("--size", type=int, default=10_000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--corpus", choices=["short", "locomo"], default="short")
    args = p.parse_args()

    from tests.kit.database import fresh_database, offline_embedder, open_store, postgres

    from brain.core.models import Actor, MemoryIn
    from brain.embedder.variants import load_embedder
    from brain.local.eval import embed_corpus, load_dataset
    from brain.retrieval import Retriever
    from brain.store import Scope, reindex
    from brain.store.store import embed_text
    from brain.store.writer import StoreWriter

    base = offline_embedder(threads=args.threads)
    target = load_embedder(f"{base.model}@rp{base.dim}", base=base)
    rng = np.random.default_rng(7)
    rows: list[tuple[MemoryIn, np.ndarray]] = []

    def jittered(v: np.ndarray) -> np.ndarray:
        w = v + rng.normal(0, 0.02, base.dim).astype(np.float32)
        return w / np.linalg.norm(w)

    if args.corpus == "short":
        notes = short_memories(args.size)
        print(f"embedding the first {min(1000, len(notes))} notes …", file=sys.stderr, flush=True)
        base_vecs = await base.embed([embed_text(t, b) for t, b in notes[:1000]])
        rows = [
            (MemoryIn(body=b, title=t, namespace=f"bench-{i % 10}"), jittered(base_vecs[i % len(base_vecs)]))
            for i, (t, b) in enumerate(notes)
        ]
        queries = short_queries()
        scope = Scope.of([f"bench-{i}" for i in range(10)])
    else:
        ds = load_dataset(json.loads(LOCOMO.read_text()))
        print("embedding the corpus (cached after the first run) …", file=sys.stderr, flush=True)
        base_vecs = await embed_corpus(base, [embed_text(m.title, m.body) for m in ds.memories])
        copy = 0
        while len(rows) < args.size:
            for i, m in enumerate(ds.memories[: args.size - len(rows)]):
                body = f"{m.body} ({copy})" if copy else m.body  # copies differ, as real entries do
                rows.append(
                    (MemoryIn(body=body, title=m.title, namespace=f"bench-{copy}"), jittered(base_vecs[i]))
                )
            copy += 1
        queries = [q.query for q in ds.queries[:100]]
        scope = Scope.of(["bench-1" if copy > 1 else "bench-0"])
    texts = [embed_text(mi.title, mi.body) for mi, _ in rows]
    count = getattr(getattr(base, "_model", None), "token_count", None)  # fastembed's tokenizer
    tokens = (
        statistics.mean(count([t]) - 2 for t in texts[:1000]) if count else float("nan")
    )  # less [CLS], [SEP]
    loads = [os.getloadavg()[0]]
    async with contextlib.AsyncExitStack() as held:
        pg = held.enter_context(postgres())
        dsn = await held.enter_async_context(fresh_database(pg, "bench_reindex"))
        store = await held.enter_async_context(open_store(dsn, dim=base.dim))
        actor = Actor(name="bench", role="owner", origin="import")
        for j in range(0, len(rows), 1000):
            await StoreWriter(store).note_many(rows[j : j + 1000], actor=actor)
            print(f"stored {j + len(rows[j : j + 1000])}/{len(rows)}", file=sys.stderr, flush=True)
        await store.pool_for_tests.execute("VACUUM (ANALYZE) memories, lexeme_stats")

        print(f"{len(texts)} memories stored; the model alone …", file=sys.stderr, flush=True)
        # the model alone, on the same texts, in the reindex's batch size
        t0 = time.perf_counter()
        for i in range(0, len(texts), reindex.BATCH):
            await target.embed(texts[i : i + reindex.BATCH])
        model_alone = time.perf_counter() - t0
        loads.append(os.getloadavg()[0])

        retriever = Retriever(store, base)
        for q in queries[:10]:
            await retriever.retrieve(q, scope)
        idle = []
        for q in queries:
            t = time.perf_counter()
            await retriever.retrieve(q, scope)
            idle.append((time.perf_counter() - t) * 1000)

        during: list[float] = []
        failures = 0
        done = asyncio.Event()

        async def traffic() -> None:
            nonlocal failures
            i = 0
            while not done.is_set():
                t = time.perf_counter()
                try:
                    await retriever.retrieve(queries[i % len(queries)], scope)
                except Exception:
                    failures += 1
                during.append((time.perf_counter() - t) * 1000)
                i += 1
                await asyncio.sleep(0.05)  # a steady client, not a flood: ~20 queries/s at most

        print(f"model alone {model_alone:.1f}s; migrating under traffic …", file=sys.stderr, flush=True)
        task = asyncio.create_task(traffic())
        t0 = time.perf_counter()
        result = await store.migrate_model(target)
        migration = time.perf_counter() - t0
        loads.append(os.getloadavg()[0])
        done.set()
        await task
    n = args.size
    out = [
        "## Model migration (reindex)",
        "",
        f"{n:,} memories migrated from `{base.model}` to `{target.model}` (hack/bench/reindex.py) while a client "
        f"queried about 20 times a second; {failures} queries failed. The model alone embeds the same "
        f"{n:,} texts in batches of {reindex.BATCH} in the same run. Corpus `{args.corpus}`: "
        f"{tokens:.1f} tokens per memory (title and body, by the model's tokenizer). Load average "
        f"(1 min) at the start, after the model alone, after the migration: "
        + ", ".join(f"{x:.1f}" for x in loads)
        + f" on {os.cpu_count()} cores.",
        "",
        "| | seconds | memories/s |",
        "|---|---|---|",
        f"| model alone | {model_alone:.1f} | {n / model_alone:.0f} |",
        f"| migration (fill, index, swap) | {migration:.1f} | {n / migration:.0f} |",
        "",
        f"Migration overhead: {migration / model_alone - 1:+.0%} over the model alone "
        f"({result['stragglers']} stragglers embedded inside the swap).",
        "",
        "| retrieval | queries | p50 ms | p95 ms |",
        "|---|---|---|---|",
        f"| idle | {len(idle)} | {statistics.median(idle):.1f} | {percentile(idle, 0.95):.1f} |",
        f"| during the migration | {len(during)} | {statistics.median(during):.1f} | {percentile(during, 0.95):.1f} |",
    ]
    results.emit("reindex", {}, markdown="\n".join(out))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
