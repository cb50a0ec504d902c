"""What every job needs: connections from its settings, a `job_runs` row, progress, the summary line."""

from __future__ import annotations

import collections
import functools
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec

from brain.core import tracing
from brain.core.contract import DEFAULT_EMBEDDING_DIM, DEFAULT_EMBEDDING_MODEL
from brain.core.errors import BrainError
from brain.embedder.model import Embedder
from brain.jobs.settings import JobSettings, trace_settings
from brain.store import jobruns
from brain.store.store import Store

log = logging.getLogger("brain.jobs")


@dataclass
class JobEnv:
    store: Store
    embedder: Embedder


def make_embedder(settings: JobSettings) -> Embedder:
    """The brain's embedder service when BRAIN_EMBEDDER_URL is set; else the offline model in-process."""
    from brain.embedder import EmbeddingClient, LocalEmbedder

    url = settings.embedder_url
    if url:
        return EmbeddingClient(url, dim=settings.embedding_dim, timeout=60.0, failure_threshold=5)
    return LocalEmbedder()


@asynccontextmanager
async def job_env(
    settings: JobSettings, dsn: str | None = None, embedder: Embedder | None = None
) -> AsyncIterator[JobEnv]:
    dsn = dsn or settings.database_url
    if not dsn:
        raise BrainError("no database: set BRAIN_DATABASE_URL (or pass --dsn)")
    emb = embedder or make_embedder(settings)
    dim = int(getattr(emb, "dim", DEFAULT_EMBEDDING_DIM))
    model = settings.embedding_model or DEFAULT_EMBEDDING_MODEL
    store = await Store.open(dsn, dim=dim, embedding_model=model, max_size=4)
    try:
        yield JobEnv(store, emb)
    finally:
        await store.close()
        close = getattr(emb, "aclose", None)
        if close is not None:
            await close()


async def start_run(store: Store, job: str, source: str | None = None) -> int:
    return await jobruns.start(store, job, source)


async def finish_run(store: Store, run_id: int, status: str, summary: dict[str, Any]) -> None:
    """status: ok | deferred | failed. Only `ok` runs count as the last ingest/distill/digest."""
    await jobruns.finish(store, run_id, status, summary)


def progress_enabled(settings: JobSettings) -> bool:
    return sys.stderr.isatty() or settings.progress not in ("", "0")


class Progress:
    """A one-line progress bar on stderr, redrawn at most ten times a second, only for a person."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last = 0.0
        self._drawn = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        width = 30
        filled = width * done // max(total, 1)
        print(
            f"\r{stage:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
            end="",
            file=sys.stderr,
            flush=True,
        )
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            print(file=sys.stderr, flush=True)
            self._drawn = False


P = ParamSpec("P")


def traced(job: str) -> Callable[[Callable[P, int]], Callable[P, int]]:
    """Each run of a job is one trace (brain.core.tracing, when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
    set): a `job <name>` span over the whole run, its summary's counts and exit code on it, flushed
    before the process exits (bounded: a collector that is down costs the spans, not the run)."""

    def wrap(main: Callable[P, int]) -> Callable[P, int]:
        @functools.wraps(main)
        def run(*args: P.args, **kwargs: P.kwargs) -> int:
            fates: collections.Counter[str] = collections.Counter()
            tracing.configure(
                trace_settings(job),
                counted=lambda reason, n: fates.update({reason: n}),
            )
            try:
                with tracing.span(f"job {job}", {"brain.job.name": job}) as span:
                    code = main(*args, **kwargs)
                    tracing.set_attrs(span, {"brain.job.exit_code": code})
                    return code
            finally:
                tracing.shutdown(5.0)
                dropped = sum(n for reason, n in fates.items() if reason != "exported")
                if dropped:
                    log.warning("%d trace spans dropped (%s)", dropped, dict(fates))

        return run

    return wrap


def emit(summary: dict[str, Any]) -> None:
    """The summary is the last line on stdout; stderr is flushed first so logs cannot follow it.
    Its counts go on the run's span too (numbers only: an error's text may name a URL)."""
    tracing.annotate(
        {f"brain.job.{k}": v for k, v in summary.items() if isinstance(v, int | float)}
        | {"brain.job.error": bool(summary.get("error"))}
    )
    sys.stderr.flush()
    print(json.dumps(summary, default=str), flush=True)


def setup_logging(settings: JobSettings) -> None:
    logging.basicConfig(
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
