"""Model migrations on real Postgres and the real model: a brain changes its embedding model while
it serves, and no request fails and no ranking ever compares vectors of two models."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from brain.core.errors import SchemaMismatch
from brain.core.models import Actor, MemoryIn
from brain.embedder.model import DEFAULT_MODEL
from brain.embedder.variants import load_embedder
from brain.services.memory import MemoryService
from brain.store import Store, reindex
from brain.store.store import Scope
from brain.store.writer import StoreWriter

AGENT = Actor(name="claude-mac", role="agent", origin="agent")
TOPICS = [
    (
        "Postgres backups",
        "We back up Postgres nightly with pg_basebackup and keep WAL for point-in-time recovery.",
    ),
    (
        "Release trains",
        "Releases leave every second Tuesday; a change that misses the train waits for the next.",
    ),
    ("Error messages", "Every error a person sees names the field and what would have been accepted."),
    (
        "Flaky tests",
        "A flaky test is quarantined within a day and its owner gets a ticket with the failing seed.",
    ),
    (
        "Feature flags",
        "Feature flags live in the config service and are removed two weeks after full rollout.",
    ),
]


async def seed(service: MemoryService, n: int) -> None:
    items = []
    for i in range(n):
        title, body = TOPICS[i % len(TOPICS)]
        items.append(
            MemoryIn(title=f"{title} {i}", body=f"{body} (note {i} of the runbook)", namespace="shared")
        )
    vectors = await service.embedder.embed([f"{m.title}\n{m.body}" for m in items])  # type: ignore[union-attr]
    await StoreWriter(service.store).note_many(list(zip(items, vectors, strict=True)), actor=AGENT)


async def models_in_index(store: Store) -> set[str | None]:
    rows = await store.pool_for_tests.fetch(
        "SELECT DISTINCT embedding_model FROM memories WHERE embedding IS NOT NULL"
    )
    return {r["embedding_model"] for r in rows}


async def test_model_change_under_traffic(dsn: str, store: Store, embedder) -> None:
    old = MemoryService(store, embedder)
    await seed(old, 150)
    new_emb = load_embedder(f"{DEFAULT_MODEL}@rp384", base=embedder)  # same dimension: silent mixing possible
    probe = "Postgres backups and point-in-time recovery"

    errors: list[BaseException] = []
    seen_models: list[set[str | None]] = []
    vector_hits: list[bool] = []
    stop = asyncio.Event()

    async def traffic() -> None:
        i = 0
        while not stop.is_set():
            try:
                hits = await old.search(probe, AGENT, limit=5)
                assert hits and "Postgres backups" in hits[0].title  # served throughout, lexical at least
                vector_hits.append(any("vector" in h.legs for h in hits))
                await old.note(MemoryIn(body=f"traffic note {i}: the deploy of build {i} went fine"), AGENT)
                seen_models.append(await models_in_index(store))
            except Exception as e:  # a failed request is the failure this test looks for
                errors.append(e)
            i += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(traffic())
    try:
        result = await store.migrate_model(new_emb)
    finally:
        await asyncio.sleep(0.3)  # traffic from the old-model client goes on after the swap
        stop.set()
        await task
    assert errors == []
    assert result["to"] == new_emb.model and result["embedded"] > 150
    # at every point the index held vectors of exactly one model (None: a write stored without a vector)
    assert all(len(m - {None}) == 1 for m in seen_models)
    assert {DEFAULT_MODEL} in seen_models and {
        new_emb.model
    } in seen_models  # traffic before and after the swap
    assert await models_in_index(store) == {new_emb.model}
    assert vector_hits[0] is True  # before the swap the old model's vectors served the old client
    # after the swap the old client's query vector is compared with nothing (not with rotated vectors)
    qv = (await embedder.embed([probe]))[0]
    assert await store.vector_leg(qv, Scope.of(["shared"]), 10) == []
    # writes the old client made after the swap are stored without a vector, and the new model fills them
    new_store = await Store.open(dsn, dim=384, embedding_model=new_emb.model)
    try:
        new = MemoryService(new_store, new_emb)
        assert await new_store.fill_live(new_emb) >= 0
        hits = await new.search(probe, AGENT, limit=5)
        assert "Postgres backups" in hits[0].title and "vector" in hits[0].legs
        n_null = await new_store.pool_for_tests.fetchval(
            "SELECT count(*) FROM memories WHERE status = 'active' AND embedding IS NULL"
        )
        assert n_null == 0
    finally:
        await new_store.close()
    assert await store.pool_for_tests.fetchval("SELECT status FROM reindex_runs") == "swapped"


async def test_dimension_change_and_refusals(dsn: str, store: Store, embedder) -> None:
    old = MemoryService(store, embedder)
    await seed(old, 20)
    small = load_embedder(f"{DEFAULT_MODEL}@rp256", base=embedder)

    # a client with another model may not fill the live index, and is told both names
    with pytest.raises(reindex.ModelMismatch) as e:
        await store.fill_live(small)
    assert DEFAULT_MODEL in e.value.message and small.model in e.value.message
    # nor drive a migration toward a model it does not embed with
    run = await reindex.start(store.pool_for_tests, small.model, small.dim)
    with pytest.raises(reindex.ModelMismatch, match="256 dimensions"):
        await reindex.fill(store.pool_for_tests, embedder, run)
    progress = (await store.index_stats())["reindex"]
    assert progress["toModel"] == small.model and (progress["done"], progress["total"]) == (0, 20)
    await reindex.fill(store.pool_for_tests, small, run)
    assert (await store.index_stats())["reindex"]["done"] == 20
    await reindex.build_index(store.pool_for_tests)
    swapped = await reindex.swap(store.pool_for_tests, small, run)
    assert swapped["dim"] == 256 and (await store.index_stats())["reindex"] is None

    # the old 384-dimensional client keeps working: no vector leg, writes without a vector
    hits = await old.search("point in time recovery", AGENT)
    assert hits and all("vector" not in h.legs for h in hits)
    written = await old.note(MemoryIn(body="a note from a client that still runs the old model"), AGENT)
    assert not written.memory.embedded
    # a restart with the old dimension is refused, naming the dimension
    with pytest.raises(SchemaMismatch, match="256"):
        await Store.open(dsn, dim=384)
    s256 = await Store.open(dsn, dim=256, embedding_model=small.model)
    try:
        hits = await MemoryService(s256, small).search("point in time recovery", AGENT)
        assert "Postgres backups" in hits[0].title and "vector" in hits[0].legs
    finally:
        await s256.close()
    with contextlib.suppress(Exception):
        await store.abandon_reindex()


async def test_brainctl_reindex_refuses_another_model_and_migrates_when_asked(
    dsn: str, store: Store, embedder
) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    await seed(MemoryService(store, embedder), 10)
    brainctl = [str(Path(sys.executable).parent / "brainctl"), "--dsn", dsn]
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    other = f"{DEFAULT_MODEL}@rp128"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*brainctl, *args], capture_output=True, text=True, env=env, timeout=300)

    # the runbook's laptop reindex with another model: refused, naming both, nothing written
    refused = await asyncio.to_thread(run, "--embedding-model", other, "reindex")
    assert refused.returncode == 2, refused.stderr
    assert DEFAULT_MODEL in refused.stderr and other in refused.stderr
    assert await models_in_index(store) == {DEFAULT_MODEL}
    # the brain's own model fills what is missing
    await store.pool_for_tests.execute(
        "UPDATE memories SET embedding = NULL, embedding_model = NULL WHERE title LIKE '%3'"
    )
    filled = await asyncio.to_thread(run, "reindex")
    assert filled.returncode == 0, filled.stderr
    assert '"embedded": 1' in filled.stdout
    # asked explicitly, it migrates
    migrated = await asyncio.to_thread(run, "reindex", "--to-model", other)
    assert migrated.returncode == 0, migrated.stderr
    assert await models_in_index(store) == {other}


async def test_filling_missing_vectors_never_gives_a_purged_entry_its_vector_back(
    store: Store, embedder
) -> None:
    # Written while the embedder was away (no vector), then forgotten and purged by an owner while the
    # mend (or `brainctl reindex`) is embedding it: the purge promises that the vectors go, since they
    # were computed from the text. Before, the fill wrote the purged text's vector onto the tombstone.
    owner = Actor(name="owner", role="owner", origin="owner")
    away = MemoryService(store, None)
    entry = (
        await away.note(
            MemoryIn(body="The vendor's API key rotates every 90 days.", namespace="shared"), owner
        )
    ).memory
    before = (
        await away.note(MemoryIn(body="Staging deploys roll out at noon.", namespace="shared"), owner)
    ).memory
    assert await store.pool_for_tests.fetchval("SELECT count(*) FROM memories WHERE embedding IS NULL") == 2

    class PurgedMeanwhile:
        model, dim = embedder.model, embedder.dim

        async def embed(self, texts: list[str]):  # type: ignore[no-untyped-def]
            await away.forget(entry.id, "pasted by mistake", owner)
            await away.purge(entry.id, "pasted by mistake", owner)
            return await embedder.embed(texts)

    assert await store.fill_live(PurgedMeanwhile()) == 1  # what it wrote: the purge won the other
    rows = await store.pool_for_tests.fetch(
        "SELECT id, body, embedding IS NULL AS bare FROM memories ORDER BY id"
    )
    vectors = {r["id"]: r["bare"] for r in rows}
    assert vectors[before.id] is False  # the other entry got its vector
    assert all(r["bare"] for r in rows if r["id"] != before.id), rows  # every purged version has none
    assert await store.fill_live(embedder) == 0  # and no later fill takes the purged rows up again


async def test_two_fills_at_once_embed_each_missing_entry_once(store: Store, embedder) -> None:
    # Every gateway replica's mend is woken by the same index refresh: each read the same oldest rows
    # without a vector and embedded them again. Now one fill runs at a time per brain: the mend
    # (wait=False) leaves the rows to the fill that is running, `brainctl reindex` waits for it.
    owner = Actor(name="owner", role="owner", origin="owner")
    away = MemoryService(store, None)
    for i in range(20):
        await away.note(MemoryIn(body=f"Runbook step {i}: check the queue depth.", namespace="shared"), owner)
    asked: list[str] = []
    running, answer = asyncio.Event(), asyncio.Event()

    class Counted:
        model, dim = embedder.model, embedder.dim

        async def embed(self, texts: list[str]):  # type: ignore[no-untyped-def]
            asked.extend(texts)
            running.set()
            await answer.wait()  # an embedder over the network: the other replica's refresh lands meanwhile
            return await embedder.embed(texts)

    first = asyncio.create_task(store.fill_live(Counted(), limit=16, wait=False))
    await asyncio.wait_for(running.wait(), 30)
    assert await store.fill_live(Counted(), limit=16, wait=False) == 0  # the second replica's mend
    waited = asyncio.create_task(store.fill_live(Counted()))  # `brainctl reindex`: after the mend
    answer.set()
    assert await first == 16
    assert await waited == 4
    assert sorted(asked) == sorted(set(asked)) and len(asked) == 20
    assert await store.pool_for_tests.fetchval("SELECT count(*) FROM memories WHERE embedding IS NULL") == 0


async def test_a_model_change_keeps_no_vector_of_an_entry_purged_while_it_ran(store: Store, embedder) -> None:
    # `brainctl reindex --to-model`: the new model's vectors are written beside the live ones, then
    # swapped in. An entry purged after its new vector was written kept that vector of the text it
    # removed, and the swap made it live.
    owner = Actor(name="owner", role="owner", origin="owner")
    door = MemoryService(store, embedder)
    await seed(door, 4)
    entry = (
        await door.note(
            MemoryIn(body="The vendor's API key rotates every 90 days.", namespace="shared"), owner
        )
    ).memory
    small = load_embedder(f"{DEFAULT_MODEL}@rp256", base=embedder)
    run = await reindex.start(store.pool_for_tests, small.model, small.dim)
    await reindex.fill(store.pool_for_tests, small, run)
    await door.forget(entry.id, "pasted by mistake", owner)
    await door.purge(entry.id, "pasted by mistake", owner)
    await reindex.build_index(store.pool_for_tests)
    await reindex.swap(store.pool_for_tests, small, run)
    rows = await store.pool_for_tests.fetch("SELECT id, embedding IS NULL AS bare FROM memories")
    assert {r["id"]: r["bare"] for r in rows if r["bare"]} == {entry.id: True}, rows
