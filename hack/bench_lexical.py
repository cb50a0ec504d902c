"""Lexical leg: BM25 and the query's IDF in one statement, against the two round trips it replaced.

Prints Markdown for docs/benchmarks.md (`python hack/bench.py --only lexical`, or alone with sizes
as arguments: `python hack/bench_lexical.py 10000 100000`). LoCoMo turns are copied into namespaces
until the store holds N memories (no embeddings: only the lexical leg is timed); 200 LoCoMo
questions scoped to one namespace + `shared`. "before" is what retrieval did until issue 16: the
BM25 SQL unnesting each candidate's tsvector, then a second round trip for the query's IDF sum
(retired from the store; kept as tests/lexical_reference.py);
"after" is `brain.store.lexical.bm25`, one statement returning both. Rankings are compared on the same run.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the suite's fixtures and the reference leg (tests/)
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10-retrieval.json"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(sizes: list[int], runs: int = 3) -> str:
    from tests import lexical_reference as reference
    from tests.pg_fixtures import fresh_database, open_store, postgres

    from brain.core.models import Actor, MemoryIn
    from brain.local.eval import load_dataset
    from brain.store import Scope, Store
    from brain.store.lexical import bm25
    from brain.store.store import AbandoningPool

    AbandoningPool.release_timeout = 30.0  # a shared, loaded machine: do not count slow resets as hangs
    ds = load_dataset(json.loads(LOCOMO.read_text()))
    queries = [q.query for q in ds.queries[:200]]
    out = [
        "## Lexical leg: one round trip",
        "",
        "`hack/bench_lexical.py`: LoCoMo turns copied to N memories, 200 LoCoMo questions in one namespace "
        "+ `shared`. before = BM25 unnesting each candidate's tsvector + a second trip for the query's "
        "IDF; after = the same BM25 with the IDF in one statement. Medians of the runs.",
        "",
        "| memories | before p50 / p95 ms | after p50 / p95 ms | same top-10 | full-text GIN B / memory |",
        "|---|---|---|---|---|",
    ]
    with postgres() as pg:
        for size in sizes:
            async with fresh_database(pg, f"bench_lex_{size}") as dsn, open_store(dsn) as store:
                actor = Actor(name="bench", role="owner", origin="import")
                n, copy = 0, 0
                while n < size:
                    batch = [
                        (
                            MemoryIn(
                                body=m.body, title=m.title, namespace=f"bench-{copy}", valid_from=m.valid_from
                            ),
                            None,
                        )
                        for m in ds.memories[: size - n]
                    ]
                    for j in range(0, len(batch), 1000):
                        await store.note_many(batch[j : j + 1000], actor=actor)
                    n += len(batch)
                    copy += 1
                await store.pool.execute("VACUUM (ANALYZE) memories, lexeme_stats")
                space = await store.pool.fetchrow("SELECT pg_relation_size('memories_tsv') AS gin")
                scope = Scope.of(["bench-1"])

                async def before(q: str, store: Store = store, scope: Scope = scope) -> list[str]:
                    hits = await reference.lexical_leg(store, q, scope, 80)
                    await reference.query_idf(store, q)
                    return [d for d, _ in hits]

                async def after(q: str, store: Store = store, scope: Scope = scope) -> list[str]:
                    return [d for d, _ in (await bm25(store, q, scope, 80)).hits]

                for q in queries[:20]:  # warm-up: plans cached, pages in memory
                    await before(q)
                    await after(q)
                same = 0
                for q in queries:
                    same += (await before(q))[:10] == (await after(q))[:10]
                # Interleaved, query by query, so load from anything else on the machine hits both alike.
                p50s: dict[str, list[float]] = {"before": [], "after": []}
                p95s: dict[str, list[float]] = {"before": [], "after": []}
                for _ in range(runs):
                    lat: dict[str, list[float]] = {"before": [], "after": []}
                    for q in queries:
                        for label, fn in (("before", before), ("after", after)):
                            t = time.perf_counter()
                            await fn(q)
                            lat[label].append((time.perf_counter() - t) * 1000)
                    for label, values in lat.items():
                        p50s[label].append(pct(values, 0.5))
                        p95s[label].append(pct(values, 0.95))
                cells = [
                    f"{statistics.median(p50s[label]):.1f} / {statistics.median(p95s[label]):.1f}"
                    for label in ("before", "after")
                ]
                out.append(
                    f"| {size:,} | {cells[0]} | {cells[1]} | {same}/{len(queries)} | {space['gin'] / size:.0f} |"
                )
                print(out[-1], file=sys.stderr, flush=True)  # progress: a long run keeps what it measured
    return "\n".join(out)


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 100_000]
    print(asyncio.run(main(sizes)))
