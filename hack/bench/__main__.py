"""`make bench`: measure the memory core and every part of the product, and write docs/benchmarks.md.

Sections, each of which can be run alone with --only:
- quality: LoCoMo through `brainctl eval`'s code, next to the baseline (BM25Okapi + exact dense + RRF,
  as in shared/data/baselines.md) recomputed in the same run from the same embeddings;
- selectivity: the team set, with and without the relevance floor;
- latency: retrieval p50/p95 (embed + search + fuse + render) at 10k and 100k memories, HNSW build time;
- notes: notes/s end to end (embed + store) in batches;
- then each part in PARTS, as its own process (`python -m hack.bench.<part>`, which runs it alone).
Every figure is the median of --runs runs where it is a timing. Loopback only; bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hack.bench import ROOT, check, corpus, latency, notes, parser, quality, results

#: in-process sections; `notes` is notes ingest, the `ingest` part a repository's
SECTIONS = ("quality", "selectivity", "latency", "notes")
#: the parts `make bench` runs after its sections, each `python -m hack.bench.<part>` in its own process
PARTS = (
    "cache",
    "faults",
    "gateway",
    "ha",
    "images",
    "ingest",
    "lexical",
    "operator",
    "pods",
    "reindex",
    "traces",
)


async def run(args: argparse.Namespace) -> int:
    """Every section timed with the machine's load before and after it; the Markdown to --out and the
    figures to bench-results/<date>-<commit>.json. Non-zero when a section failed (an outcome check
    among them: a figure that did not measure what its row says)."""
    record = results.Record.start()
    parts = [
        "# Benchmarks",
        f"Machine: {record.data['machine']}.\n"
        f"Command: `make bench` (`python -m hack.bench --runs {args.runs}`). Timings are medians of the runs. "
        f"The figures of this run, with the machine's load average before and after each section and each "
        f"row's outcome counts, are in `{record.path.relative_to(ROOT)}` (commit {record.data['commit']}).",
        "This file is generated and rewritten by every run. What the figures mean against each issue's "
        "goals, why a goal is not reached and what was tried is in [performance.md](performance.md).",
    ]
    only = args.only.split(",") if args.only else [*SECTIONS, *PARTS]

    async def section(name: str, make: Any) -> None:
        figures: dict[str, Any] = {}
        load0, t0 = os.getloadavg(), time.perf_counter()
        try:
            text = await make(figures)
            ok = True
        except Exception as e:  # the section's own failure: recorded, the others still run
            text, ok = f"## {name}\n\nFAILED: {type(e).__name__}: {e}", False
        why = [w for counts, claim in figures.get("_checks", []) if (w := check.mismatch(counts, claim))]
        if why:
            text += "\n\nOUTCOME CHECK FAILED:\n\n" + "\n".join(f"- {w}" for w in why)
            ok = False
        record.section(
            name, results=figures, markdown=text, ok=ok, load_before=load0, seconds=time.perf_counter() - t0
        )
        parts.append(text)

    async def quality_(_: dict[str, Any]) -> str:
        return await quality.quality(args.runs)

    async def selectivity_(_: dict[str, Any]) -> str:
        return await quality.selectivity()

    async def latency_(figures: dict[str, Any]) -> str:
        sizes = [int(s) for s in args.sizes.split(",")]
        return await latency.latency(args.runs, sizes, args.layouts.split(","), figures)

    async def ingest_(_: dict[str, Any]) -> str:
        return await notes.ingest(args.runs)

    for name, make in (
        ("quality", quality_),
        ("selectivity", selectivity_),
        ("latency", latency_),
        ("notes", ingest_),
    ):
        if name in only:
            await section(name, make)
    for part in PARTS:
        if part not in only:
            continue

        async def sub(figures: dict[str, Any], part: str = part) -> str:
            out = results.RESULTS / f".{part}.json"
            out.unlink(missing_ok=True)
            done = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", f"hack.bench.{part}"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**os.environ, results.HANDOFF: str(out)},
            )
            if out.exists():
                figures |= json.loads(out.read_text())
                out.unlink()
            figures["returncode"] = done.returncode
            if done.returncode != 0:
                raise RuntimeError(f"exit {done.returncode}\n\n{done.stdout}\n\n{done.stderr[-2000:]}")
            return done.stdout

        await section(part, sub)
    path = record.save()
    text = "\n\n".join(parts) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    print(f"figures: {path}", file=sys.stderr)
    if record.failed:
        print(f"FAILED sections: {', '.join(record.failed)}", file=sys.stderr)
    return 1 if record.failed else 0


def main() -> None:
    p = parser("hack.bench", __doc__)
    p.add_argument("--out", help="write Markdown here (docs/benchmarks.md)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--layouts", default="shared,split", help="latency: " + ", ".join(corpus.LAYOUTS))
    p.add_argument("--only", help=f"comma-separated subset of {', '.join(SECTIONS)} and {', '.join(PARTS)}")
    sys.exit(asyncio.run(run(p.parse_args())))


if __name__ == "__main__":
    main()
