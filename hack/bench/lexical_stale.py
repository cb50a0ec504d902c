"""What a stale BM25 reference length costs in ranking: LoCoMo recall with the weights at other lengths.

    .venv/bin/python -m hack.bench.lexical_stale [--modes lexical,hybrid] [--ratios 0.5,0.8,1,1.25,2]

Loads LoCoMo as `brainctl eval --episodes valid_from` does (weights settled at the live mean),
then for each ratio rewrites the `bm25` column at live mean / ratio (the reference in brain_meta
stays at the mean, so the store's drift upkeep leaves the column alone) and runs the eval's modes.
The lexical floor's coverage share moves with it too, so hybrid shows what abstaining loses.
Prints a Markdown table for docs/performance.md ("Lexical leg"). Not part of `make bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from hack.bench import LOCOMO, parser


async def main(a: argparse.Namespace) -> None:
    from tests.kit.database import fresh_database, offline_embedder, open_store, postgres

    from brain.local.eval import evaluate, load_dataset, load_into
    from brain.store.store import AbandoningPool

    AbandoningPool.release_timeout = 30.0  # a shared, loaded machine: do not count slow resets as hangs
    ds = load_dataset(json.loads(LOCOMO.read_text()))
    embedder = offline_embedder()
    modes = a.modes.split(",")
    ratios = [float(r) for r in a.ratios.split(",")]
    load0 = os.getloadavg()[0]
    lines = []
    with postgres() as pg:
        async with fresh_database(pg, "stale") as dsn, open_store(dsn) as store:
            mapping = await load_into(store, embedder, ds, episodes="valid_from")
            mean = float(
                await store.pool_for_tests.fetchval(
                    "SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl'"
                )
            )
            for ratio in ratios:
                await store.pool_for_tests.execute(
                    "UPDATE memories SET bm25 = brain_bm25_doc(tsv, $1)", mean / ratio
                )
                report = await evaluate(store, embedder, ds, mapping, modes=modes, ks=[5, 10])
                cells = [
                    f"{report['modes'][m]['recall@5']:.4f} / {report['modes'][m]['recall@10']:.4f}"
                    for m in modes
                ]
                lines.append(f"| {ratio} | " + " | ".join(cells) + " |")
                print(lines[-1], file=sys.stderr, flush=True)
    load1 = os.getloadavg()[0]
    print(
        "\n".join(
            [
                f"LoCoMo ({len(ds.memories):,} memories, {len(ds.queries):,} questions, `--episodes valid_from`), "
                f"live mean {mean:.2f} lexemes; load average {load0:.1f} → {load1:.1f}:",
                "",
                "| live mean / reference | " + " | ".join(f"{m} r@5 / r@10" for m in modes) + " |",
                "|---|" + "---|" * len(modes),
                *lines,
            ]
        )
    )


if __name__ == "__main__":
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--modes", default="lexical,hybrid")
    ap.add_argument("--ratios", default="0.5,0.8,1,1.25,2")
    asyncio.run(main(ap.parse_args()))
