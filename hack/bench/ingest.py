"""Ingest benchmark: this repository plus a vendored PyPI sdist (≥ 50k lines), grading on.

    .venv/bin/python -m hack.bench.ingest [--package NAME] [--no-vendor] [--dsn DSN]

Each tree is committed to a throwaway git repository and imported through the real job code
(`run_ingest`: git fetch, tree-sitter chunking, tier-1/2 grading, embedding, bulk write, edges)
into a fresh database on an embedded Postgres. Prints a Markdown section: chunks per second and
chunk counts kept / dropped per tier. The sdist is fetched with `pip download --no-binary :all:`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from hack.bench import ROOT, parser, results
from tests.kit.database import fresh_database, postgres

from brain.core.contract import Env
from brain.embedder import LocalEmbedder
from brain.ingest.code import language_for
from brain.ingest.source import parse_source, walk_files
from brain.jobs.common import Progress, progress_enabled
from brain.jobs.ingest import run_ingest
from brain.jobs.settings import load_job_settings
from brain.store import Store


def git_repo(src: Path, dest: Path) -> Path:
    """Copy the tracked-looking files of `src` into a fresh repository with one commit."""
    shutil.copytree(
        src, dest, ignore=shutil.ignore_patterns(".git", ".venv", "node_modules", "__pycache__", "*.pyc")
    )
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(
            ["git", "-c", "user.email=b@b", "-c", "user.name=b", *args],
            cwd=dest,
            check=True,
            capture_output=True,
        )
    return dest


def fetch_sdist(package: str, into: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-binary",
            ":all:",
            "--no-deps",
            "-d",
            str(into),
            package,
        ],
        check=True,
    )
    archive = next(p for p in into.iterdir() if p.name.endswith((".tar.gz", ".zip", ".tgz")))
    out = into / "src"
    if archive.name.endswith(".zip"):
        shutil.unpack_archive(archive, out)
    else:
        with tarfile.open(archive) as t:
            t.extractall(out, filter="data")
    return out


def code_lines(root: Path) -> int:
    return sum(
        (root / rel).read_bytes().count(b"\n") for rel in walk_files(root) if language_for(rel) is not None
    )


async def bench_tree(
    store: Store, embedder: LocalEmbedder, name: str, repo: Path, work: Path
) -> dict[str, Any]:
    spec = parse_source({"name": name, "spec": {"git": {"url": str(repo), "format": "code"}}})
    t0 = time.perf_counter()
    s = await run_ingest(
        store, embedder, spec, workdir=work / name, progress=Progress(progress_enabled(load_job_settings()))
    )
    s["wall"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = await run_ingest(store, embedder, spec, workdir=work / name, progress=Progress(enabled=False))
    s["rerun_wall"] = time.perf_counter() - t0
    s["rerun_skipped"] = again["skipped"]
    s["lines"] = code_lines(repo)
    return s


def report(rows: list[tuple[str, dict[str, Any]]]) -> str:
    out = [
        "## Ingest benchmark (code, grading on)",
        "",
        "| tree | code lines | chunks | kept | tier 1 dropped | tier 2 dropped | entries written | edges "
        "| wall s | chunks/s | re-run s (all skipped) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in rows:
        g = s["grading"]
        out.append(
            f"| {name} | {s['lines']:,} | {g['chunks']:,} | {g['kept']:,} | {g['tier1_dropped']:,} "
            f"| {g['tier2_dropped']:,} | {s['added']:,} | {s['edges']:,} | {s['wall']:.1f} "
            f"| {g['chunks'] / s['wall']:.0f} | {s['rerun_wall']:.1f} ({s['rerun_skipped']:,}) |"
        )
    total_chunks = sum(s["grading"]["chunks"] for _, s in rows)
    total_wall = sum(s["wall"] for _, s in rows)
    out += [
        "",
        f"Overall: {total_chunks:,} chunks in {total_wall:.1f} s = **{total_chunks / total_wall:.0f} chunks/s** "
        "(chunks = functions, methods and types graded; entries also include file map entries and docstring "
        "summaries). Target ≥ 100 chunks/s.",
    ]
    return "\n".join(out)


async def main() -> int:
    p = parser(__spec__.name, __doc__)
    p.add_argument(
        "--package",
        default="coverage",
        help="PyPI sdist to vendor (default %(default)s: ~53k lines of Python and C; sqlalchemy, 654k, is not mid-size)",
    )
    p.add_argument("--no-vendor", action="store_true", help="only this repository")
    p.add_argument("--dsn", help="use this database instead of an embedded Postgres")
    p.add_argument("--threads", type=int, default=None, help="onnxruntime threads for the embedder")
    args = p.parse_args()
    # The trees are local git repositories, which a job imports only where the operator allows
    # insecure git URLs (`--allow-insecure-git-urls`, as for a laptop): this bench is such a place.
    os.environ[Env.GIT_ALLOW_INSECURE_URLS] = "1"
    embedder = LocalEmbedder(threads=args.threads)
    rows: list[tuple[str, dict[str, Any]]] = []
    async with contextlib.AsyncExitStack() as held:
        dsn = args.dsn or await held.enter_async_context(
            fresh_database(held.enter_context(postgres()), "bench")
        )
        store = await Store.open(dsn, dim=embedder.dim)
        with tempfile.TemporaryDirectory(prefix="brain-bench-") as tmp:
            work = Path(tmp)
            trees = [("brain-operator", git_repo(ROOT, work / "repo-self"))]
            if not args.no_vendor:
                src = fetch_sdist(args.package, work / "sdist")
                trees.append((args.package, git_repo(src, work / "repo-vendor")))
            for name, repo in trees:
                rows.append((name, await bench_tree(store, embedder, name, repo, work)))
        await store.close()
    text = report(rows)
    results.emit("ingest", {"trees": dict(rows)}, markdown=text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
