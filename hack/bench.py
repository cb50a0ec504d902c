"""`make bench`: measure the memory core and write docs/benchmarks.md.

Sections (each can be run alone with --only):
- quality: LoCoMo through `brainctl eval`'s code, next to the baseline (BM25Okapi + exact dense + RRF,
  as in shared/data/baselines.md) recomputed in the same run from the same embeddings;
- latency: retrieval p50/p95 (embed + search + fuse + render) at 10k and 100k memories, HNSW build time;
- ingest: notes/s end to end (embed + store) in batches.
Every figure is the median of --runs runs where it is a timing. Loopback only; bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the suite's fixtures (tests/kit/database.py)
sys.path.insert(0, str(ROOT / "hack"))
import benchcheck  # noqa: E402  (siblings: outcome check, corpus layouts, vector cache)
import benchcorpus  # noqa: E402
import benchvectors  # noqa: E402

from brain.local.stats import percentile  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo10-retrieval.json"
TEAM = ROOT / "tests" / "data" / "team_eval.json"
NO_FLOOR = {"vector": 0.0, "lexical": 0.0, "trigram": 0.0}


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}, "
        f"commit {commit.strip() or 'uncommitted'}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


# ---------------------------------------------------------------------- baseline (shared/data/baselines.md)


def baseline(
    ds: Any, mem_vecs: np.ndarray, query_vecs: np.ndarray, ks: list[int]
) -> dict[str, dict[str, float]]:
    """BM25Okapi (\\w+ lower-cased) and exact cosine per namespace, RRF(k=60) of each leg's top 40."""
    from rank_bm25 import BM25Okapi

    tok = re.compile(r"\w+")
    by_ns: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(ds.memories):
        by_ns[m.namespace].append(i)
    bm25 = {
        ns: BM25Okapi([tok.findall(f"{ds.memories[i].title} {ds.memories[i].body}".lower()) for i in idx])
        for ns, idx in by_ns.items()
    }
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for qi, q in enumerate(ds.queries):
        idx = by_ns[q.namespace] + (by_ns["shared"] if q.namespace != "shared" else [])
        ids = [ds.memories[i].id for i in idx]
        lex = bm25[q.namespace].get_scores(tok.findall(q.query.lower()))
        if q.namespace != "shared" and "shared" in bm25:
            lex = np.concatenate([lex, bm25["shared"].get_scores(tok.findall(q.query.lower()))])
        dense = mem_vecs[idx] @ query_vecs[qi]
        lex_rank = [ids[i] for i in np.argsort(-lex, kind="stable")]
        dense_rank = [ids[i] for i in np.argsort(-dense, kind="stable")]
        fused: dict[str, float] = defaultdict(float)
        for ranking in (lex_rank[:40], dense_rank[:40]):
            for r, d in enumerate(ranking, start=1):
                fused[d] += 1 / (60 + r)
        rrf_rank = sorted(fused, key=lambda d: -fused[d])
        for name, ranking in (("BM25 only", lex_rank), ("dense only", dense_rank), ("RRF of both", rrf_rank)):
            rel = set(q.relevant)
            row = {f"recall@{k}": len(rel & set(ranking[:k])) / len(rel) for k in ks}
            first = next((i for i, d in enumerate(ranking[: max(ks)], start=1) if d in rel), None)
            row["mrr"] = 1 / first if first else 0.0
            rows[name].append(row)
    return {name: {key: statistics.fmean(r[key] for r in rs) for key in rs[0]} for name, rs in rows.items()}


async def quality(runs: int) -> str:
    from brain.embedder import LocalEmbedder
    from brain.local.devdb import EmbeddedPostgres
    from brain.local.eval import MODES, embed_corpus, evaluate, load_dataset, load_into
    from brain.retrieval import RetrievalConfig
    from brain.store import Store
    from brain.store.store import embed_text

    ks = [1, 5, 10, 20]
    ds = load_dataset(json.loads(LOCOMO.read_text()))
    embedder = LocalEmbedder()
    pg = EmbeddedPostgres().start()
    try:
        dsn = await pg.create_database("bench_quality")
        store = await Store.open(dsn, dim=embedder.dim)
        t0 = time.perf_counter()
        mapping = await load_into(store, embedder, ds, episodes="valid_from")
        load_s = time.perf_counter() - t0
        reports = [
            await evaluate(store, embedder, ds, mapping, modes=list(MODES), ks=ks) for _ in range(runs)
        ]
        unfloored = await evaluate(
            store, embedder, ds, mapping, modes=["hybrid"], ks=ks, config=RetrievalConfig(floor=NO_FLOOR)
        )
        await store.close()
    finally:
        pg.stop()
    mem_vecs = await embed_corpus(embedder, [embed_text(m.title, m.body) for m in ds.memories])
    query_vecs = await embedder.embed([q.query for q in ds.queries])
    base = baseline(ds, mem_vecs, query_vecs, ks)
    report = reports[-1]
    out = [
        "## Retrieval quality: LoCoMo (`brainctl eval`)",
        "",
        f"`{len(ds.memories)}` memories, `{len(ds.queries)}` queries, offline all-MiniLM-L6-v2 (int8). "
        f"Load into Postgres (embeddings cached on disk): {load_s:.1f} s. Baseline recomputed in this run "
        "from the same embeddings, as described in `shared/data/baselines.md`.",
        "",
        "| method | recall@1 | recall@5 | recall@10 | recall@20 | MRR | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in base.items():
        out.append(
            f"| baseline: {name} | "
            + " | ".join(f"{m[f'recall@{k}']:.3f}" for k in ks)
            + f" | {m['mrr']:.3f} | | |"
        )
    for mode, m in report["modes"].items():
        p50 = statistics.median(r["modes"][mode]["latency_ms"]["p50"] for r in reports)
        p95 = statistics.median(r["modes"][mode]["latency_ms"]["p95"] for r in reports)
        out.append(
            f"| brain: {mode} | "
            + " | ".join(f"{m[f'recall@{k}']:.3f}" for k in ks)
            + f" | {m['mrr']:.3f} | {p50:.1f} | {p95:.1f} |"
        )
    h, b = report["modes"]["hybrid"], base["RRF of both"]
    out += [
        "",
        f"Ratio hybrid / baseline RRF: recall@10 {h['recall@10'] / b['recall@10']:.2f}×, "
        f"MRR {h['mrr'] / b['mrr']:.2f}×. Latency is the median over {runs} runs of each run's percentile, "
        "per query: embed + legs + fuse + fetch + render.",
        "",
        f"The relevance floor costs hybrid recall@10 {h['recall@10']:.4f} with it vs "
        f"{unfloored['modes']['hybrid']['recall@10']:.4f} without it "
        f"({h['recall@10'] / unfloored['modes']['hybrid']['recall@10']:.3f}×).",
        "",
        "| category | queries | hybrid recall@10 | hybrid MRR |",
        "|---|---|---|---|",
    ]
    for cat, c in h["by_category"].items():
        out.append(f"| {cat} | {c['queries']} | {c['recall@10']:.3f} | {c['mrr']:.3f} |")
    return "\n".join(out)


async def selectivity() -> str:
    """The team set: does the floor keep unrelated questions out and every answer in?"""
    from tests.kit.database import fresh_database, offline_embedder, open_store, postgres

    from brain.local.eval import GATEWAY, MODES, evaluate, load_dataset, load_into
    from brain.retrieval import RetrievalConfig

    ds = load_dataset(json.loads(TEAM.read_text()))
    embedder = offline_embedder(threads=None)
    with postgres() as pg:
        async with fresh_database(pg, "bench_team") as dsn, open_store(dsn, dim=embedder.dim) as store:
            mapping = await load_into(store, embedder, ds)
            # the leg modes, then what the gateway would inject (retrieval/compose: budget, persona, skills)
            floored = await evaluate(store, embedder, ds, mapping, modes=[*MODES, GATEWAY], ks=[5])
            bare = await evaluate(
                store, embedder, ds, mapping, modes=["hybrid"], ks=[5], config=RetrievalConfig(floor=NO_FLOOR)
            )
    modes = floored["modes"]
    out = [
        "## Selectivity: the team set (`tests/data/team_eval.json`)",
        "",
        f"`{len(ds.memories)}` memories, `{len(ds.queries)}` queries, of which "
        f"{modes['hybrid']['abstain_queries']} have nothing relevant (small talk, general coding, other "
        "domains). abstain = share of those that got nothing; recall counts only hits above the floor.",
        "",
        "| mode | abstain | recall@5 | injected tokens / query |",
        "|---|---|---|---|",
    ]
    for mode, m in modes.items():
        out.append(f"| {mode} | {m['abstain']:.2f} | {m['recall@5']:.3f} | {m['injected_tokens_mean']:.0f} |")
    b = bare["modes"]["hybrid"]
    out.append(
        f"| hybrid, no floor | {b['abstain']:.2f} | {b['recall@5']:.3f} | {b['injected_tokens_mean']:.0f} |"
    )
    out += ["", "| category | hybrid recall@5 | best single leg |", "|---|---|---|"]
    for cat, c in modes["hybrid"]["by_category"].items():
        best = max(modes[m]["by_category"][cat]["recall@5"] for m in ("lexical", "vector"))
        out.append(f"| {cat} | {c['recall@5']:.3f} | {best:.3f} |")
    return "\n".join(out)


# ---------------------------------------------------------------------- latency at scale


async def latency(runs: int, sizes: list[int], layouts: list[str], results: dict[str, Any]) -> str:
    from brain.core.models import Actor, MemoryIn
    from brain.embedder import LocalEmbedder
    from brain.local.devdb import EmbeddedPostgres
    from brain.local.eval import load_dataset
    from brain.retrieval import Retriever, render_block
    from brain.retrieval.render import within_budget
    from brain.store import Store
    from brain.store.store import embed_text
    from brain.store.writer import StoreWriter

    ds = load_dataset(json.loads(LOCOMO.read_text()))
    embedder = LocalEmbedder()
    base_vecs = await benchvectors.vectors(embedder, [embed_text(m.title, m.body) for m in ds.memories])
    queries = [q.query for q in ds.queries[:200]]
    rng = np.random.default_rng(1)
    out = [
        "## Retrieval latency at scale",
        "",
        "LoCoMo turns copied until the store holds N active memories, each copy with its text's own "
        "embedding (hack/benchvectors.py) jittered so copies differ; the queried scope holds them all "
        "(layouts, each its own database: "
        + "; ".join(f"{k}: {benchcorpus.LAYOUTS[k]}" for k in layouts)
        + "). 200 LoCoMo questions, each embedded for real (no cache), then legs, fusion, fetch, budget "
        "and rendering — the gateway's path. Each question's outcome is counted (hack/benchcheck.py); the "
        "run fails when any retrieval was degraded, timed out or failed.",
        "",
        "| memories | layout | HNSW build s | p50 ms | p95 ms | runs | outcomes | load before / after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    profiles: dict[tuple[int, str], dict[str, list[float]]] = {}
    checks: list[tuple[benchcheck.Counts, benchcheck.Claim]] = []
    pg = EmbeddedPostgres().start()
    try:
        for size in sizes:
            for layout in layouts:
                load0 = os.getloadavg()
                name = f"bench_lat_{size}_{layout}"
                dsn = await pg.create_database(name)
                store = await Store.open(dsn, dim=embedder.dim)
                await store.pool_for_tests.execute("DROP INDEX memories_embedding")
                actor = Actor(name="bench", role="owner", origin="import")
                n = 0
                copy = 0
                while n < size:
                    batch: list[tuple[MemoryIn, np.ndarray]] = []
                    for i, m in enumerate(ds.memories):
                        if n + len(batch) >= size:
                            break
                        v = base_vecs[i] + np.asarray(
                            rng.normal(0, 0.02, base_vecs.shape[1]), dtype=np.float32
                        )
                        batch.append(
                            (
                                MemoryIn(
                                    body=m.body,
                                    title=m.title,
                                    namespace=benchcorpus.namespace(layout, n + len(batch)),
                                    valid_from=m.valid_from,
                                    episode=f"copy-{copy}@{m.valid_from}",
                                    seq=i,
                                ),
                                v / np.linalg.norm(v),
                            )
                        )
                    for j in range(0, len(batch), 1000):
                        await StoreWriter(store).note_many(batch[j : j + 1000], actor=actor)
                    n += len(batch)
                    copy += 1
                t0 = time.perf_counter()
                await store.pool_for_tests.execute(
                    "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = 16, ef_construction = 64)"
                )
                build = time.perf_counter() - t0
                # Steady state, as autovacuum leaves a live brain: GIN pending lists merged, visibility map
                # set, statistics current. Measuring right after a bulk load times autovacuum instead.
                await store.pool_for_tests.execute("VACUUM (ANALYZE) memories, lexeme_stats")
                retriever = Retriever(store, embedder)
                scope = benchcorpus.scope(layout)
                counts = benchcheck.Counts()
                p50s, p95s = [], []
                stage_ms: dict[str, list[float]] = {}
                for q in queries[:10]:  # warm-up: plans cached, pages in memory
                    await retriever.retrieve(q, scope, include_pinned=True)
                for _ in range(runs):
                    lat = []
                    for q in queries:
                        t = time.perf_counter()
                        try:
                            res = await retriever.retrieve(q, scope, include_pinned=True)
                        except Exception as e:  # counted: the check fails the run after the table
                            counts.add_result(error=e)
                            continue
                        render_block(within_budget(res.all_hits, 1500))
                        lat.append((time.perf_counter() - t) * 1000)
                        counts.add_result(res)
                        for stage, sec in res.timings.items():
                            stage_ms.setdefault(stage, []).append(sec * 1000)
                    p50s.append(percentile(lat, 0.5) if lat else float("nan"))
                    p95s.append(percentile(lat, 0.95) if lat else float("nan"))
                load1 = os.getloadavg()
                out.append(
                    f"| {size:,} | {layout} | {build:.1f} | {statistics.median(p50s):.1f} | "
                    f"{statistics.median(p95s):.1f} | {runs} | {counts.summary()} | {load0[0]:.1f} / {load1[0]:.1f} |"
                )
                checks.append(
                    (
                        counts,
                        benchcheck.retrieval(f"latency, {size:,} memories, {layout}", runs * len(queries)),
                    )
                )
                results.setdefault("latency", []).append(
                    {
                        "memories": size,
                        "layout": layout,
                        "hnsw_build_s": build,
                        "p50_ms": statistics.median(p50s),
                        "p95_ms": statistics.median(p95s),
                        "runs": runs,
                        "outcomes": counts.as_dict(),
                        "load_before": load0,
                        "load_after": load1,
                        "stages": {
                            st: [percentile(v, 0.5), percentile(v, 0.95)] for st, v in stage_ms.items()
                        },
                    }
                )
                profiles[size, layout] = stage_ms
                await store.close()
                await pg.drop_database(name)
    finally:
        pg.stop()
    out += [
        "",
        "Per stage, from `RetrievalResult.timings` (the gateway exports the same as "
        "`brain_retrieval_stage_duration_seconds`), all runs pooled. The lexical legs run while the query "
        "is embedded; the vector leg follows the embedding; the rest is sequential.",
        "",
        "| memories | layout | " + " | ".join(f"{st} p50 / p95" for st in STAGES) + " |",
        "|---|---|" + "---|" * len(STAGES),
    ]
    for (size, layout), stage_ms in profiles.items():
        cells = [
            f"{percentile(stage_ms[st], 0.5):.1f} / {percentile(stage_ms[st], 0.95):.1f}"
            if st in stage_ms
            else "–"
            for st in STAGES
        ]
        out.append(f"| {size:,} | {layout} | " + " | ".join(cells) + " |")
    results.setdefault("checks", []).extend(
        {"row": claim.row, "claims": claim.says, "ok": benchcheck.mismatch(counts, claim) is None}
        for counts, claim in checks
    )
    results.setdefault("_checks", []).extend(checks)
    return "\n".join(out)


STAGES = ("embed", "lexical", "trigram", "vector", "fuse", "context", "fetch", "expand", "total")


# ---------------------------------------------------------------------- ingest


def _tokens(texts: list[str]) -> int:
    """Word pieces the encoder sees (with [CLS]/[SEP], cut at 256): its cost is linear in these."""
    from tokenizers import Tokenizer

    from brain.embedder.model import offline_model_path

    path = offline_model_path()
    if path is None:
        return 0
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.no_padding()  # tokenizer.json pads to a fixed 128; the embedder pads to each batch's longest
    tok.enable_truncation(256)
    return sum(len(e.ids) for e in tok.encode_batch(texts))


async def ingest(runs: int) -> str:
    """Notes end to end (embed + store, batches of 128) next to the model alone on the same texts,
    so the ratio shows what the pipeline adds; for dialogue turns and for short notes."""
    from brain.core.models import Actor, MemoryIn
    from brain.embedder import LocalEmbedder
    from brain.local.devdb import EmbeddedPostgres
    from brain.local.eval import load_dataset
    from brain.store import Store
    from brain.store.store import embed_text
    from brain.store.writer import StoreWriter

    ds = load_dataset(json.loads(LOCOMO.read_text()))
    corpora = {
        "dialogue turns": [
            MemoryIn(body=m.body, title=m.title, namespace=m.namespace) for m in ds.memories[:1000]
        ],
        "short notes (LoCoMo questions)": [
            MemoryIn(body=q, namespace="bench")
            for q in list(dict.fromkeys(q.query for q in ds.queries))[:1000]
        ],
    }
    embedder = LocalEmbedder()
    actor = Actor(name="bench", role="owner", origin="import")
    rows = []
    pg = EmbeddedPostgres().start()
    try:
        for label, notes in corpora.items():
            texts = [embed_text(m.title, m.body) for m in notes]
            model_rates, e2e_rates = [], []
            for r in range(runs):
                t0 = time.perf_counter()
                for i in range(0, len(texts), 128):
                    await embedder.embed(texts[i : i + 128])
                model_rates.append(len(texts) / (time.perf_counter() - t0))
                dsn = await pg.create_database(f"bench_ingest_{r}_{uuid.uuid4().hex[:6]}")
                store = await Store.open(dsn, dim=embedder.dim)
                t0 = time.perf_counter()
                for i in range(0, len(notes), 128):
                    chunk = notes[i : i + 128]
                    vecs = await embedder.embed(texts[i : i + 128])
                    await StoreWriter(store).note_many(list(zip(chunk, vecs, strict=True)), actor=actor)
                e2e_rates.append(len(notes) / (time.perf_counter() - t0))
                await store.close()
            tokens = _tokens(texts) / len(texts)
            model, e2e = statistics.median(model_rates), statistics.median(e2e_rates)
            rows.append(
                f"| {label} | {len(notes)} | {statistics.fmean(len(t) for t in texts):.0f} | {tokens:.0f} "
                f"| {model:.0f} | {model * tokens:.0f} | **{e2e:.0f}** | {e2e / model:.2f}× |"
            )
    finally:
        pg.stop()
    return "\n".join(
        [
            "## Ingest of notes",
            "",
            "Embedded in batches of 128 with the offline model and stored with every index maintained "
            "(HNSW, GIN full-text, trigram, lexeme statistics). Baseline: the model alone on the same texts "
            f"in the same run. Medians over {runs} runs.",
            "",
            "| notes | count | chars | tokens | model alone /s | model tokens/s | end to end /s | ratio |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


SECTIONS = ("quality", "selectivity", "latency", "ingest")


def commit_id() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, cwd=ROOT
    )
    return (done.stdout.strip() or "uncommitted") + ("-dirty" if dirty.stdout.strip() else "")


async def run(args: argparse.Namespace) -> int:
    """Every section timed with the machine's load before and after it; the Markdown to --out and the
    figures to bench-results/<date>-<commit>.json. Non-zero when a section failed (an outcome check
    among them: a figure that did not measure what its row says)."""
    started = datetime.now(UTC)
    commit = commit_id()
    record_path = ROOT / "bench-results" / f"{started:%Y-%m-%d-%H%M}-{commit}.json"
    record_path.parent.mkdir(exist_ok=True)
    record: dict[str, Any] = {
        "commit": commit,
        "started": started.isoformat(timespec="seconds"),
        "machine": machine(),
        "argv": sys.argv[1:],
        "sections": {},
    }
    parts = [
        "# Benchmarks",
        f"Machine: {machine()}.\n"
        f"Command: `make bench` (`python hack/bench.py --runs {args.runs}`). Timings are medians of the runs. "
        f"The figures of this run, with the machine's load average before and after each section and each "
        f"row's outcome counts, are in `{record_path.relative_to(ROOT)}` (commit {commit}).",
        "This file is generated and rewritten by every run. What the figures mean against each issue's "
        "goals, why a goal is not reached and what was tried is in [performance.md](performance.md).",
    ]
    only = args.only.split(",") if args.only else SECTIONS
    failed: list[str] = []

    async def section(name: str, make: Any) -> None:
        results: dict[str, Any] = {}
        load0, t0 = os.getloadavg(), time.perf_counter()
        try:
            text = await make(results)
            ok = True
        except Exception as e:  # the section's own failure: recorded, the others still run
            text, ok = f"## {name}\n\nFAILED: {type(e).__name__}: {e}", False
        record["sections"][name] = {
            "load_before": load0,
            "load_after": os.getloadavg(),
            "seconds": time.perf_counter() - t0,
            "ok": ok,
            "results": {k: v for k, v in results.items() if not k.startswith("_")},
            "markdown": text,  # the section as docs/benchmarks.md shows it, every figure with its words
        }
        checks = results.get("_checks", [])
        why = [w for counts, claim in checks if (w := benchcheck.mismatch(counts, claim))]
        if why:
            text += "\n\nOUTCOME CHECK FAILED:\n\n" + "\n".join(f"- {w}" for w in why)
            record["sections"][name]["ok"] = ok = False
        if not ok:
            failed.append(name)
        parts.append(text)

    async def quality_(_: dict[str, Any]) -> str:
        return await quality(args.runs)

    async def selectivity_(_: dict[str, Any]) -> str:
        return await selectivity()

    async def latency_(results: dict[str, Any]) -> str:
        sizes = [int(s) for s in args.sizes.split(",")]
        return await latency(args.runs, sizes, args.layouts.split(","), results)

    async def ingest_(_: dict[str, Any]) -> str:
        return await ingest(args.runs)

    for name, make in (
        ("quality", quality_),
        ("selectivity", selectivity_),
        ("latency", latency_),
        ("ingest", ingest_),
    ):
        if name in only:
            await section(name, make)
    # Other parts of the product measure themselves in hack/bench_<part>.py, each printing Markdown
    # (and, where it supports it, its figures as JSON to $BRAIN_BENCH_JSON).
    for script in sorted((ROOT / "hack").glob("bench_*.py")):
        part = script.stem.removeprefix("bench_")
        if args.only and part not in only:
            continue

        async def sub(results: dict[str, Any], script: Path = script, part: str = part) -> str:
            out = record_path.parent / f".{part}.json"
            out.unlink(missing_ok=True)
            done = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, str(script)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**os.environ, "BRAIN_BENCH_JSON": str(out)},
            )
            if out.exists():
                results |= json.loads(out.read_text())
                out.unlink()
            results["returncode"] = done.returncode
            if done.returncode != 0:
                raise RuntimeError(f"exit {done.returncode}\n\n{done.stdout}\n\n{done.stderr[-2000:]}")
            return done.stdout

        await section(part, sub)
    record["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    record["failed"] = failed
    record_path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    text = "\n\n".join(parts) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    print(f"figures: {record_path}", file=sys.stderr)
    if failed:
        print(f"FAILED sections: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="write Markdown here (docs/benchmarks.md)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--layouts", default="shared,split", help="latency: " + ", ".join(benchcorpus.LAYOUTS))
    p.add_argument(
        "--only", help=f"comma-separated subset of {', '.join(SECTIONS)} and hack/bench_<part>.py parts"
    )
    sys.exit(asyncio.run(run(p.parse_args())))


if __name__ == "__main__":
    main()
