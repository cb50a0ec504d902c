"""Real model vectors of a bench corpus's own text, embedded once and cached on disk (#33).

The key is the model and a hash of the corpus (its texts, in order), so any change to either embeds
again and a rerun of the same corpus costs no embedding. The cache lives outside the repository:
`$BRAIN_CACHE/bench-vectors-v1/` (default `~/.cache/brain-operator`; `/var/tmp/brain-operator` as
root, where Postgres runs as `nobody`). A long embedding (100k texts take minutes on two cores) is
kept in parts as it goes, so an interrupted run resumes where it stopped.

A library of the benches, not a part: `make bench` runs only what hack/bench/__main__.py's PARTS names.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

VERSION = "bench-vectors-v1"
PART = 4096  # texts per part file


def cache_root() -> Path:
    default = (
        Path("/var/tmp/brain-operator") if os.geteuid() == 0 else Path.home() / ".cache" / "brain-operator"
    )
    return Path(os.environ.get("BRAIN_CACHE", default)) / VERSION


def corpus_hash(model: str, texts: list[str]) -> str:
    h = hashlib.sha256(model.encode())
    for t in texts:
        h.update(b"\x1e")
        h.update(t.encode())
    return h.hexdigest()[:24]


def cache_path(model: str, texts: list[str]) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
    return cache_root() / f"{slug}-{len(texts)}-{corpus_hash(model, texts)}.npy"


async def vectors(embedder: Any, texts: list[str], *, batch: int = 256) -> np.ndarray:
    """Unit vectors of `texts` by `embedder` (float32, one row a text), from the cache when there."""
    path = cache_path(embedder.model, texts)
    if path.exists():
        cached = np.load(path)
        if cached.shape == (len(texts), embedder.dim):
            return cached
    parts_dir = path.with_suffix(".parts")
    parts_dir.mkdir(parents=True, exist_ok=True)
    out = []
    t0 = time.perf_counter()
    for start in range(0, len(texts), PART):
        part = parts_dir / f"{start:09d}.npy"
        chunk = texts[start : start + PART]
        if part.exists() and np.load(part).shape == (len(chunk), embedder.dim):
            out.append(np.load(part))
            continue
        vecs = [
            np.asarray(await embedder.embed(chunk[i : i + batch]), dtype=np.float32)
            for i in range(0, len(chunk), batch)
        ]
        arr = np.concatenate(vecs)
        np.save(part, arr)
        out.append(arr)
        done = start + len(chunk)
        print(
            f"  embedded {done:,}/{len(texts):,} ({done / (time.perf_counter() - t0):.0f}/s, cached in {path.parent})",
            file=sys.stderr,
            flush=True,
        )
    arr = np.concatenate(out) if out else np.zeros((0, embedder.dim), dtype=np.float32)
    np.save(path, arr)
    shutil.rmtree(parts_dir, ignore_errors=True)
    return arr
