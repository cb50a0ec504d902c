"""Measure retrieval variants on several eval sets in one process: load each set once, rerun queries.

Each variant is a name and a RetrievalConfig update; the same loaded databases and the same cached
query embeddings serve every variant, so differences are the variant's and nothing else's (`brainctl
eval` would reload and re-embed per run). Used to decide what ships in retrieval/ (docs/performance.md).

    python -m hack.bench.variants --set tests/data/team_eval.json --set /work/shared/data/locomo10-retrieval.json
    python -m hack.bench.variants --set tests/data/generated_eval.json \
        --model BAAI/bge-small-en-v1.5=$(bash hack/model.sh bge-small) --vector-floors 0.5,0.6 --variant calibrated

`--model NAME=DIR` measures another model loaded offline from DIR (its cosines sit elsewhere, so its
vector floor is chosen anew: `--vector-floors` adds a variant per configured floor, calibration on).
A model fastembed does not list is registered with `--mean-pooled DIM` (BERT-style mean pooling,
normalised), e.g. e5-small-v2, which also wants its instructions on both sides:

    python -m hack.bench.variants --set tests/data/generated_eval.json --variant calibrated \
        --model intfloat/e5-small-v2=$(bash hack/model.sh e5-small) --mean-pooled 384 \
        --query-prefix "query: " --doc-prefix "passage: " --vector-floors 0.8,0.85

`--embedder-down` asks every question with the embedder down, as the gateway does during an outage:

    python -m hack.bench.variants --set tests/data/team_eval.json --set tests/data/generated_eval.json \
        --set /work/shared/data/locomo10-retrieval.json --embedder-down --modes hybrid \
        --variant keywords-alone-1.0 --variant keywords-alone-0.4
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from hack.bench import parser
from tests.kit.database import postgres
from tests.kit.embedders import DownEmbedder

from brain.core.contract import RetrievalFloor
from brain.embedder import LocalEmbedder
from brain.local.eval import MODES, evaluate, load_dataset, load_into
from brain.retrieval import calibration
from brain.retrieval.pipeline import RetrievalConfig
from brain.store import Store


class CachedEmbedder:
    """The real model, memoised by text: every variant sees the same query vectors, computed once.
    `prefix` goes before every text it embeds (a model's query instruction, for the questions)."""

    def __init__(self, inner: Any, prefix: str = "") -> None:
        self.inner = inner
        self.model = inner.model
        self.dim = inner.dim
        self.prefix = prefix
        self.cache: dict[str, np.ndarray] = {}

    async def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self.cache]
        if missing:
            for t, v in zip(missing, await self.inner.embed([self.prefix + t for t in missing]), strict=True):
                self.cache[t] = v
        return np.stack([self.cache[t] for t in texts])


ALL_PROBES = calibration.PROBES
VARIANTS: dict[str, dict[str, Any]] = {
    "fixed-floor": {"floor": RetrievalFloor(calibration=0)},
    "calibrated": {},
    "calibrated-0.9": {"floor": RetrievalFloor(calibration=0.9)},
    "calibrated-max": {"floor": RetrievalFloor(calibration=1.0)},
    # robustness to the probe sample: each half of PROBES alone
    "probes-even": {"probes": slice(0, None, 2)},
    "probes-odd": {"probes": slice(1, None, 2)},
    # selectivity (fusion.selective): off, the shipped ratio, a looser one; top_k as the gateway's
    "standout-off": {"standout_ratio": 0.0, "top_k": 5},
    "standout-0.55": {"standout_ratio": 0.55, "top_k": 5},
    "standout-0.5": {"standout_ratio": 0.5, "top_k": 5},
    "standout-0.6": {"standout_ratio": 0.6, "top_k": 5},
    "standout-0.65": {"standout_ratio": 0.65, "top_k": 5},
    # the keyword legs alone, with --embedder-down: the lexical floor's scale (RetrievalConfig.keywords_alone)
    **{f"keywords-alone-{x}": {"keywords_alone": x} for x in (1.0, 0.8, 0.6, 0.5, 0.4, 0.3)},
}


async def main() -> None:
    ap = parser(__spec__.name, __doc__)
    ap.add_argument("--set", action="append", required=True)
    ap.add_argument("--variant", action="append", help="names from VARIANTS (default: all)")
    ap.add_argument("--modes", default="hybrid,lexical,vector")
    ap.add_argument("--json")
    ap.add_argument(
        "--model",
        help="NAME=DIR: a fastembed model name and its offline directory (default: the shipped model)",
    )
    ap.add_argument(
        "--vector-floors",
        default="",
        help="comma-separated configured vector floors, a variant each; FLOOR:Q also sets the calibration quantile",
    )
    ap.add_argument("--query-prefix", default="", help="an instruction the model puts before questions only")
    ap.add_argument("--doc-prefix", default="", help="an instruction the model puts before stored texts only")
    ap.add_argument(
        "--mean-pooled",
        type=int,
        metavar="DIM",
        help="register --model with fastembed as a mean-pooled, normalised model of this width",
    )
    ap.add_argument(
        "--embedder-down",
        action="store_true",
        help="load with the model, then ask with the embedder down (the keyword legs alone)",
    )
    args = ap.parse_args()
    model, _, model_dir = (args.model or "").partition("=")
    if args.mean_pooled:
        from fastembed import TextEmbedding
        from fastembed.common.model_description import ModelSource, PoolingType

        TextEmbedding.add_custom_model(
            model=model,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=model),
            dim=args.mean_pooled,
            model_file="model.onnx",
        )
    inner = LocalEmbedder(model, model_path=model_dir or None) if model else LocalEmbedder()
    embedder = CachedEmbedder(inner, args.doc_prefix)
    # the questions' embedder: the same model, with its query instruction (the probes are questions too)
    asker: Any = (
        CachedEmbedder(inner, args.query_prefix) if args.query_prefix != args.doc_prefix else embedder
    )
    if args.embedder_down:
        asker = DownEmbedder(inner.model, inner.dim)  # every question to the keyword legs alone
    for v in filter(None, args.vector_floors.split(",")):
        floor, _, q = v.partition(":")  # "0.7:0.9": configured floor 0.7, calibration quantile 0.9
        calib = {"calibration": float(q)} if q else {}
        VARIANTS[f"vector-{v}"] = {"floor": RetrievalFloor(vector=float(floor), **calib)}
    with postgres() as pg:
        out: dict[str, Any] = {}
        try:
            loaded = []
            for path in args.set:
                ds = load_dataset(json.loads(Path(path).read_text()))
                store = await Store.open(
                    await pg.create_database(f"ev_{uuid.uuid4().hex[:8]}"), dim=embedder.dim
                )
                episodes = "valid_from" if "locomo" in path else "field"
                mapping = await load_into(store, embedder, ds, episodes=episodes)  # type: ignore[arg-type]
                loaded.append((path, ds, store, mapping))
            extra = [n for n in VARIANTS if n.startswith("vector-")]
            for name in [*(args.variant or []), *extra] if args.variant else list(VARIANTS):
                update = dict(VARIANTS[name])
                calibration.PROBES = ALL_PROBES[update.pop("probes", slice(None))]
                calibration._probe_vectors.clear()
                for path, ds, store, mapping in loaded:
                    config = RetrievalConfig(embed_timeout_s=30.0).model_copy(update=update)
                    modes = args.modes.split(",") if "locomo" not in path else ["hybrid"]
                    rep = await evaluate(
                        store,
                        asker,
                        ds,
                        mapping,
                        modes=[m for m in modes if m in MODES],
                        ks=[5, 10],
                        config=config,
                    )
                    out.setdefault(name, {})[Path(path).name] = rep
                    h = rep["modes"]["hybrid"]
                    cats = " ".join(f"{c}={v['recall@5']:.3f}" for c, v in h["by_category"].items())
                    legs = " ".join(
                        f"{m}:{rep['modes'][m]['recall@5']:.3f}" for m in rep["modes"] if m != "hybrid"
                    )
                    print(
                        f"{name:<14} {Path(path).name:<26} r@5 {h['recall@5']:.4f} r@10 {h['recall@10']:.4f} "
                        f"abstain {h['abstain']} tok {h['injected_tokens_mean']} inj {h['injected_mean']} "
                        f"| {cats} | {legs}",
                        flush=True,
                    )
                    for split, s in h["splits"].items():
                        print(
                            f"{'':<14} {split:<26} r@5 {s['recall@5']:.4f} r@10 {s['recall@10']:.4f} "
                            f"abstain {s['abstain']} inj {s['injected_mean']} | "
                            + " ".join(f"{c}={v['recall@10']:.3f}" for c, v in s["by_category"].items()),
                            flush=True,
                        )
        finally:
            for _, _, store, _ in loaded:
                await store.close()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
