"""Retrieval quality: LoCoMo through `brainctl eval`'s code next to the baseline of shared/data/baselines.md
(BM25Okapi + exact dense + RRF, recomputed in the same run from the same embeddings), and the team
set's selectivity (does the floor keep unrelated questions out and every answer in?)."""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import defaultdict
from typing import Any

import numpy as np
from hack.bench import LOCOMO, TEAM
from tests.kit.database import fresh_database, offline_embedder, open_store, postgres

from brain.local.eval import GATEWAY, MODES, embed_corpus, evaluate, load_dataset, load_into
from brain.retrieval import RetrievalConfig
from brain.store.store import embed_text

NO_FLOOR = {"vector": 0.0, "lexical": 0.0, "trigram": 0.0}


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
    ks = [1, 5, 10, 20]
    ds = load_dataset(json.loads(LOCOMO.read_text()))
    embedder = offline_embedder(threads=None)
    with postgres() as pg:
        async with fresh_database(pg, "bench_quality") as dsn, open_store(dsn, dim=embedder.dim) as store:
            t0 = time.perf_counter()
            mapping = await load_into(store, embedder, ds, episodes="valid_from")
            load_s = time.perf_counter() - t0
            reports = [
                await evaluate(store, embedder, ds, mapping, modes=list(MODES), ks=ks) for _ in range(runs)
            ]
            unfloored = await evaluate(
                store, embedder, ds, mapping, modes=["hybrid"], ks=ks, config=RetrievalConfig(floor=NO_FLOOR)
            )
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
