"""Exposure receipts on real Postgres: written, read by owners (brainctl, the service), pruned, checked
against retractions by a gateway replica's map, and counted in the week's digest per namespace (#31)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from brain.core.errors import Forbidden, NotFound
from brain.core.models import Actor, MemoryIn
from brain.gateway.retractions import Exposure
from brain.gateway.settings import ExposureSettings
from brain.jobs.digest import run_digest
from brain.services.digests import latest_digest
from brain.services.exposure import exposure
from brain.services.memory import MemoryService
from brain.store import Store, exposure_rows

BRAINCTL = str(Path(sys.executable).parent / "brainctl")
GH_TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
IMPORT = Actor(name="source:docs", role="agent", origin="import")


async def _memory(service: MemoryService, owner: Actor, ns: str, body: str) -> str:
    return (await service.note(MemoryIn(body=body, namespace=ns, kind="fact"), owner)).memory.id


async def test_receipts_merge_per_conversation_and_owners_read_them(
    store: Store, service: MemoryService, owner: Actor, agent: Actor, dsn: str
) -> None:
    mid = await _memory(service, owner, "repo:a", "the build cache lives on the blue volume")
    now = datetime.now(UTC)
    n = await exposure_rows.record(
        store,
        [
            (mid, "claude-mac", "c1", "chat", now),
            (mid, "claude-mac", "c1", "chat", now + timedelta(seconds=5)),
            (mid, "codex-ci", "c2", "responses", now),
            ("no-such-memory", "codex-ci", "c2", "responses", now),
        ],
    )
    assert n == 2
    await exposure_rows.record(store, [(mid, "claude-mac", "c1", "chat", now + timedelta(seconds=9))])
    doc = await exposure(store, mid, owner)
    assert doc["count"] == 2 and doc["keys"] == ["claude-mac", "codex-ci"]
    c1 = next(c for c in doc["conversations"] if c["conversation"] == "c1")
    assert c1["injections"] == 3 and c1["versions"] == [{"id": mid, "version": 1, "injections": 3}]
    with pytest.raises(Forbidden):
        await exposure(store, mid, agent)
    confined = Actor(name="cole-b", role="owner", origin="owner", namespaces=("repo:b",))
    with pytest.raises(NotFound):
        await exposure(store, mid, confined)

    done = await asyncio.to_thread(
        subprocess.run,
        [BRAINCTL, "--dsn", dsn, "memory", "exposure", mid, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["count"] == 2
    lines = await asyncio.to_thread(
        subprocess.run, [BRAINCTL, "--dsn", dsn, "memory", "exposure", mid], capture_output=True, text=True
    )
    assert "given to 2 conversation(s) of 2 key(s)" in lines.stdout and "codex-ci" in lines.stdout

    await store.pool_for_tests.execute(
        "UPDATE memory_exposures SET last_at = now() - interval '31 days' WHERE conversation = 'c2'"
    )
    assert await exposure_rows.prune(store, 30) == 1
    assert (await exposure(store, mid, owner))["count"] == 1


async def test_a_replica_tells_each_conversation_once_and_only_of_an_owners_retraction(
    store: Store, service: MemoryService, owner: Actor
) -> None:
    wrong = await _memory(service, owner, "repo:a", "deploys go out on Fridays at five")
    synced = await _memory(service, IMPORT, "repo:a", "the docs site builds with mkdocs")
    now = datetime.now(UTC)
    ex = Exposure(ExposureSettings())
    ex.receipt([wrong, synced], "claude-mac", "c1", "chat")
    ex.receipt([wrong], "codex-ci", "c2", "chat")
    await ex.flush(store)
    await ex.refresh(store)
    assert ex.pending == {}

    await service.retire(synced, "removed from the docs", IMPORT)  # a source sync, not an owner: no notice
    await service.retire(wrong, "wrong: deploys stopped on Fridays", owner)
    await ex.refresh(store)
    assert set(ex.pending) == {("claude-mac", "c1"), ("codex-ci", "c2")}
    [notice] = ex.due("claude-mac", ["h0", "c1"], "h0")
    assert (notice.memory_id, notice.action, notice.by) == (wrong, "retired", "cole")
    assert "wrong: deploys stopped on Fridays" in notice.render()
    ex.delivered([notice])
    await ex.flush(store)
    await ex.refresh(store)
    assert set(ex.pending) == {("codex-ci", "c2")}

    other = Exposure(ExposureSettings())  # another replica, started later: reads what was told
    await other.refresh(store)
    assert set(other.pending) == {("codex-ci", "c2")}

    leaky = await _memory(service, owner, "repo:a", "the CI token is in the vault")
    await exposure_rows.record(store, [(leaky, "codex-ci", "c3", "chat", now)])
    await service.retire(leaky, f"wrong, and it named {GH_TOKEN}", owner)  # a retire reason is not gated
    await other.refresh(store)
    [told] = other.pending[("codex-ci", "c3")]
    assert GH_TOKEN not in told.render() and "«REDACTED:github_token»" in told.render()

    await service.restore(wrong, "it was right after all", owner)
    await service.restore(leaky, "kept after all", owner)
    await other.refresh(store)
    assert other.pending == {} and other.retracted == {}
    assert now  # the receipts' clock is the gateway's


async def test_the_digest_lists_the_weeks_retractions_with_their_conversations_per_namespace(
    store: Store, service: MemoryService, owner: Actor, embedder: object
) -> None:
    mid = await _memory(service, owner, "repo:pay", "refunds are batched at midnight UTC")
    quiet = await _memory(service, owner, "repo:ops", "the pager rota is in the wiki")
    now = datetime.now(UTC)
    await exposure_rows.record(
        store,
        [(mid, "claude-mac", f"c{i}", "chat", now) for i in range(3)]
        + [(quiet, "claude-mac", "c9", "chat", now)],
    )
    await service.forget(mid, "wrong: refunds run hourly", owner)
    await run_digest(store, embedder)
    pay = await latest_digest(store, "repo:pay")
    assert pay is not None
    assert f"`{mid} forgotten: wrong: refunds run hourly`: 3 conversations" in pay["markdown"]
    assert pay["stats"]["retracted"] == [
        {"memory": f"{mid} forgotten: wrong: refunds run hourly", "conversations": 3}
    ]
    ops = await latest_digest(store, "repo:ops")
    assert ops is not None and mid not in ops["markdown"] and ops["stats"]["retracted"] == []
