"""`python -m brain.jobs.reindex`, the operator's migration Job, run as the pod runs it: a process
with the rendered env (DSN, embedder Service URL, target model and dimension) against real Postgres
and a real embedder server (brain/embedder/server.py) serving the second model over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import uvicorn

from brain.core.models import Actor, MemoryIn
from brain.embedder.model import DEFAULT_MODEL, Embedder, LocalEmbedder
from brain.embedder.server import create_app
from brain.embedder.variants import load_embedder
from brain.local.devdb import free_port
from brain.services.memory import MemoryService
from brain.store import Store
from brain.store.store import Scope, embed_text
from brain.store.writer import StoreWriter

AGENT = Actor(name="claude-mac", role="agent", origin="agent")
TARGET = f"{DEFAULT_MODEL}@rp384"  # same dimension: only the model's name tells the vectors apart
NOTES = [
    ("Postgres backups", "We back up Postgres nightly with pg_basebackup and keep WAL for recovery."),
    ("Release trains", "Releases leave every second Tuesday; a change that misses waits for the next."),
    ("Flaky tests", "A flaky test is quarantined within a day and its owner gets a ticket."),
    ("Feature flags", "Feature flags live in the config service and go two weeks after rollout."),
]


@asynccontextmanager
async def embedder_service(factory: Callable[[], Embedder]) -> AsyncIterator[str]:
    """The embedder Deployment's server, on a local port: the URL the Job's env names."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(factory), host="127.0.0.1", port=port, log_level="warning")
    )
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined,method-assign,unused-ignore]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def job_env(dsn: str, embedder_url: str | None) -> dict[str, str]:
    """What render_reindex_job sets (tests/operator/test_render_reindex.py), with local values."""
    env = {
        **os.environ,
        "BRAIN_DATABASE_URL": dsn,
        "BRAIN_EMBEDDING_MODEL": TARGET,
        "BRAIN_EMBEDDING_DIM": "384",
    }
    env.pop("BRAIN_EMBEDDER_URL", None)
    if embedder_url:
        env["BRAIN_EMBEDDER_URL"] = embedder_url
    return env


async def run_job(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], str]:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "brain.jobs.reindex", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


async def seed(store: Store, embedder: LocalEmbedder) -> None:
    items = [MemoryIn(title=t, body=b, namespace="shared") for t, b in NOTES]
    vectors = await embedder.embed([embed_text(m.title, m.body) for m in items])
    await StoreWriter(store).note_many(list(zip(items, vectors, strict=True)), actor=AGENT)


async def index_models(store: Store) -> set[str]:
    rows = await store.pool_for_tests.fetch(
        "SELECT DISTINCT embedding_model FROM memories WHERE embedding IS NOT NULL"
    )
    return {r["embedding_model"] for r in rows}


async def test_the_job_migrates_through_the_embedder_service_and_a_rerun_is_a_no_op(
    dsn: str, store: Store, embedder: LocalEmbedder
) -> None:
    await seed(store, embedder)
    target = load_embedder(TARGET, base=embedder)
    assert (await store.index_stats())["liveModel"] == DEFAULT_MODEL

    async with embedder_service(lambda: target) as url:
        rc, summary, err = await run_job(job_env(dsn, url))
        assert rc == 0, err[-2000:]
        assert summary["ok"] is True and (summary["from"], summary["to"]) == (DEFAULT_MODEL, TARGET)
        assert summary["embedded"] == len(NOTES)

        # the swap: the brain's live model is the target, and every vector is the target's own
        stats = await store.index_stats()
        assert stats["liveModel"] == TARGET and stats["reindex"] is None
        assert await index_models(store) == {TARGET}
        rows = await store.pool_for_tests.fetch("SELECT title, body, embedding FROM memories ORDER BY title")
        want = await target.embed([embed_text(r["title"], r["body"]) for r in rows])
        got = np.stack([np.asarray(r["embedding"].to_list(), dtype=np.float32) for r in rows])
        assert np.allclose((got * want).sum(axis=1), 1.0, atol=1e-3)  # cosine 1: the target made them

        # a query compares only same-model vectors: the old model's query vector meets nothing,
        # the target's finds the backups note by its vector
        probe = "point in time recovery of Postgres"
        scope = Scope.of(["shared"])
        assert await store.vector_leg((await embedder.embed([probe]))[0], scope, 10) == []
        new_store = await Store.open(dsn, dim=384, embedding_model=TARGET)
        try:
            hits = await MemoryService(new_store, target).search(probe, AGENT, limit=3)
            assert hits[0].title == "Postgres backups" and "vector" in hits[0].legs
        finally:
            await new_store.close()

        # the pod retried, or the operator resynced: nothing is embedded twice
        rc, again, err = await run_job(job_env(dsn, url))
        assert rc == 0, err[-2000:]
        assert again == {"ok": True, "current": True, "model": TARGET}
        assert await store.pool_for_tests.fetchval("SELECT count(*) FROM reindex_runs") == 1


async def test_an_embedder_still_serving_the_old_model_is_waited_for_and_never_written(
    dsn: str, store: Store, embedder: LocalEmbedder
) -> None:
    """The Job starts while the embedder Deployment still rolls: the old pod's vectors would pass
    every dimension check, so only the model each answer names keeps them out of the new index."""
    await seed(store, embedder)
    async with embedder_service(lambda: embedder) as url:
        rc, summary, _ = await run_job(job_env(dsn, url), "--wait-seconds", "2")
    assert rc == 1 and summary["ok"] is False
    assert f"embedded with {DEFAULT_MODEL!r}, not {TARGET!r}" in summary["error"]  # both, by name
    # the live index is untouched and still serves; no vector was labelled with the target
    assert (await store.index_stats())["liveModel"] == DEFAULT_MODEL
    assert await index_models(store) == {DEFAULT_MODEL}
    assert await store.pool_for_tests.fetchval("SELECT count(embedding_next) FROM memories") == 0


async def test_without_an_embedder_url_the_model_runs_in_process_and_a_dead_database_is_named(
    dsn: str, store: Store, embedder: LocalEmbedder
) -> None:
    await seed(store, embedder)
    rc, summary, err = await run_job(job_env(dsn, None))
    assert rc == 0, err[-2000:]
    assert summary["to"] == TARGET and await index_models(store) == {TARGET}

    rc, down, _ = await run_job(job_env("postgresql://nobody@127.0.0.1:1/none", None))
    assert rc == 1 and down["ok"] is False and down["error"]
