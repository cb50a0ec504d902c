"""Ingest of notes: embed + store end to end, next to the model alone on the same texts."""

from __future__ import annotations

import json
import statistics
import time

from hack.bench import LOCOMO
from tests.kit.database import fresh_database, open_store, postgres
from tokenizers import Tokenizer

from brain.core.models import Actor, MemoryIn
from brain.embedder import LocalEmbedder
from brain.embedder.model import offline_model_path
from brain.local.eval import load_dataset
from brain.store.store import embed_text
from brain.store.writer import StoreWriter


def _tokens(texts: list[str]) -> int:
    """Word pieces the encoder sees (with [CLS]/[SEP], cut at 256): its cost is linear in these."""
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
    with postgres() as pg:
        for label, notes in corpora.items():
            texts = [embed_text(m.title, m.body) for m in notes]
            model_rates, e2e_rates = [], []
            for r in range(runs):
                t0 = time.perf_counter()
                for i in range(0, len(texts), 128):
                    await embedder.embed(texts[i : i + 128])
                model_rates.append(len(texts) / (time.perf_counter() - t0))
                async with (
                    fresh_database(pg, f"bench_ingest_{r}") as dsn,
                    open_store(dsn, dim=embedder.dim) as store,
                ):
                    t0 = time.perf_counter()
                    for i in range(0, len(notes), 128):
                        chunk = notes[i : i + 128]
                        vecs = await embedder.embed(texts[i : i + 128])
                        await StoreWriter(store).note_many(list(zip(chunk, vecs, strict=True)), actor=actor)
                    e2e_rates.append(len(notes) / (time.perf_counter() - t0))
            tokens = _tokens(texts) / len(texts)
            model, e2e = statistics.median(model_rates), statistics.median(e2e_rates)
            rows.append(
                f"| {label} | {len(notes)} | {statistics.fmean(len(t) for t in texts):.0f} | {tokens:.0f} "
                f"| {model:.0f} | {model * tokens:.0f} | **{e2e:.0f}** | {e2e / model:.2f}× |"
            )
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
