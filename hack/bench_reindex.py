"""`make bench` part: a model migration (brain/store/reindex.py) against the model alone.

N memories (LoCoMo turns copied into namespaces until the store holds N, live vectors from the
base model, jittered) are migrated to a second model (`<base>@rp384`, brain/embedder/variants.py)
while a client keeps querying. Reported: the migration's wall time against the same model embedding
the same texts alone in the same run (the migration's overhead is the difference), and retrieval
p50/p95 during the migration against idle. `--size` sets N (default 10 000; see docs/performance.md
for 100k). Prints Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the suite's fixtures (tests/pg_fixtures.py)
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10-retrieval.json"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=10_000)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()

    from tests.pg_fixtures import fresh_database, offline_embedder, open_store, postgres

    from brain.core.models import Actor, MemoryIn
    from brain.embedder.variants import load_embedder
    from brain.local.eval import embed_corpus, load_dataset
    from brain.retrieval import Retriever
    from brain.store import Scope, reindex
    from brain.store.store import embed_text

    ds = load_dataset(json.loads(LOCOMO.read_text()))
    base = offline_embedder(threads=args.threads)
    target = load_embedder(f"{base.model}@rp{base.dim}", base=base)
    print("embedding the corpus (cached after the first run) …", file=sys.stderr, flush=True)
    base_vecs = await embed_corpus(base, [embed_text(m.title, m.body) for m in ds.memories])
    queries = [q.query for q in ds.queries[:100]]
    rng = np.random.default_rng(7)
    with postgres() as pg:
        async with fresh_database(pg, "bench_reindex") as dsn, open_store(dsn, dim=base.dim) as store:
            actor = Actor(name="bench", role="owner", origin="import")
            texts: list[str] = []
            copy = 0
            while len(texts) < args.size:
                batch = []
                for i, m in enumerate(ds.memories):
                    if len(texts) + len(batch) >= args.size:
                        break
                    v = base_vecs[i] + rng.normal(0, 0.02, base.dim).astype(np.float32)
                    body = f"{m.body} ({copy})" if copy else m.body  # copies differ, as real entries do
                    batch.append(
                        (MemoryIn(body=body, title=m.title, namespace=f"bench-{copy}"), v / np.linalg.norm(v))
                    )
                for j in range(0, len(batch), 1000):
                    await store.note_many(batch[j : j + 1000], actor=actor)
                texts += [embed_text(mi.title, mi.body) for mi, _ in batch]
                copy += 1
            await store.pool.execute("VACUUM (ANALYZE) memories, lexeme_stats")

            print(f"{len(texts)} memories stored; the model alone …", file=sys.stderr, flush=True)
            # the model alone, on the same texts, in the reindex's batch size
            t0 = time.perf_counter()
            for i in range(0, len(texts), reindex.BATCH):
                await target.embed(texts[i : i + reindex.BATCH])
            model_alone = time.perf_counter() - t0

            retriever = Retriever(store, base)
            scope = Scope.of(["bench-1"])
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
            result = await reindex.migrate_model(store.pool, target)
            migration = time.perf_counter() - t0
            done.set()
            await task
    n = args.size
    out = [
        "## Model migration (reindex)",
        "",
        f"{n:,} memories migrated from `{base.model}` to `{target.model}` (hack/bench_reindex.py) while a client "
        f"queried about 20 times a second; {failures} queries failed. The model alone embeds the same "
        f"{n:,} texts in batches of {reindex.BATCH} in the same run.",
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
        f"| idle | {len(idle)} | {statistics.median(idle):.1f} | {pct(idle, 0.95):.1f} |",
        f"| during the migration | {len(during)} | {statistics.median(during):.1f} | {pct(during, 0.95):.1f} |",
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
