"""A model change of a running brain, seen from its HTTP API while chats and searches keep coming.

The order is a cluster's: the spec changes, the embedder Service rolls to the new model first, the
operator's migration Job (`python -m brain.jobs.reindex`, a process here) rebuilds the index beside
the live one through that Service and swaps it in, and the gateway rolls to the new model last.
The gateway, embedder server, Postgres and model are real; the second model is the offline model
through a fixed rotation (brain/embedder/variants.py), so only its name tells its vectors apart and
a query ranked against the other model's vectors would rank at random.

What a client sees: no request fails; the search API's `vectorModel` says whose vectors ranked the
hits, and every ranked answer is right; the old gateway, once the embedder serves the new model,
answers lexically rather than compare a new-model query with old-model vectors; after the swap the
new gateway ranks by the new model. The gateway has its own database here (a migration changes the
whole brain), not the session gateway the other tests share.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from brain.embedder import LocalEmbedder
from brain.embedder.model import DEFAULT_MODEL
from brain.embedder.server import create_app as embedder_app
from brain.embedder.variants import load_embedder
from brain.local.devdb import EmbeddedPostgres
from brain.local.fakeupstream import FakeState
from brain.local.fakeupstream import create_app as fake_app
from brain.local.up import stop
from brain.services.keys import KeyStore
from brain.store import Store
from tests.kit.gateway import Served, metric, start_gateway

NEW = f"{DEFAULT_MODEL}@rp384"
NS = "shared"
NOTES = [
    ("Postgres backups", "We back up Postgres nightly with pg_basebackup and keep WAL for recovery."),
    ("Release trains", "Releases leave every second Tuesday; a change that misses the train waits."),
    ("Flaky tests", "A flaky test is quarantined within a day and its owner gets a ticket."),
    ("Feature flags", "Feature flags live in the config service and go two weeks after rollout."),
    ("On-call handover", "On-call hands over on Monday at ten with a written list of open incidents."),
    ("Error messages", "Every error a person sees names the field and what would have been accepted."),
]
# A paraphrase per note (few shared words): its vector finds the note, so a ranking by the wrong
# model's vectors shows as a wrong first hit.
PROBES = {
    "how do we restore the database to a point in time": "Postgres backups",
    "when does the next version ship": "Release trains",
    "a test that fails only sometimes": "Flaky tests",
    "toggles for unfinished functionality": "Feature flags",
}


@dataclass
class Brain:
    """One brain: its database, embedder server (the Service) and the gateway processes in turn."""

    tmp: Path
    pg: EmbeddedPostgres
    dsn: str
    store: Store
    fake: Served
    embedder: Served
    keys: dict[str, str] = field(default_factory=dict)
    gateways: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    async def start_gateway(self, model: str) -> str:
        """A gateway as the Deployment renders it for `model`; the URL it serves."""
        proc, url, _ = await start_gateway(
            self.tmp, self.dsn, self.fake.url, self.embedder.url,
            env={"BRAIN_EMBEDDING_MODEL": model}, name=f"gateway-{len(self.gateways)}",
        )  # fmt: skip
        self.gateways.append((url, proc))
        return url


@pytest_asyncio.fixture(loop_scope="session")
async def brain(tmp_path: Path, embedder: LocalEmbedder) -> AsyncIterator[Brain]:
    pg = await asyncio.to_thread(EmbeddedPostgres().start)
    fake = await Served(fake_app(FakeState())).start()
    emb = await Served(embedder_app(lambda: embedder)).start()
    b: Brain | None = None
    try:
        dsn = await pg.create_database("migration")
        store = await Store.open(dsn, dim=384)
        b = Brain(tmp=tmp_path, pg=pg, dsn=dsn, store=store, fake=fake, embedder=emb)
        ks = KeyStore(store)
        for name, role in (("owner", "owner"), ("agent", "agent")):
            b.keys[name], _ = await ks.create(name, role)
        yield b
    finally:
        if b is not None:
            for _, proc in b.gateways:
                await asyncio.to_thread(stop, proc)
            await b.store.close()
        await fake.stop()
        await emb.stop()
        await asyncio.to_thread(pg.stop)


@dataclass
class Seen:
    """One answered request, as the client saw it."""

    kind: str  # chat | search | note
    gateway: int
    started: float
    status: int
    vector_model: str | None = None
    top: str | None = None
    want: str | None = None


async def traffic(brain: Brain, seen: list[Seen], stop_at: asyncio.Event, current: list[int]) -> None:
    """A steady client of whichever gateway is current: a search, a chat, sometimes a note."""
    headers = {"authorization": f"Bearer {brain.keys['agent']}"}
    i = 0
    async with httpx.AsyncClient(timeout=60) as c:
        while not stop_at.is_set():
            g = current[0]
            url = brain.gateways[g][0]
            query, want = list(PROBES.items())[i % len(PROBES)]
            # each round another text (one gap widened: the tokenizer sees the same words), so the
            # gateway's query cache never answers for the embedder Service
            query = query.replace(" ", " " * (2 + i // len(PROBES)), 1)
            t = time.monotonic()
            r = await c.get(f"{url}/brain/v1/search", params={"q": query, "limit": 3}, headers=headers)
            body = r.json() if r.status_code == 200 else {}
            hits = body.get("hits") or []
            seen.append(Seen("search", g, t, r.status_code, body.get("vectorModel"),
                             hits[0]["title"] if hits else None, want))  # fmt: skip
            t = time.monotonic()
            chat = {"model": "echo", "messages": [{"role": "user", "content": f"{query}? ({i})"}]}
            r = await c.post(f"{url}/v1/chat/completions", json=chat, headers=headers)
            seen.append(Seen("chat", g, t, r.status_code))
            if i % 4 == 0:  # writes go on through the migration; the new index must hold them
                t = time.monotonic()
                note = {"body": f"Build {i} of the billing service deployed cleanly.", "namespace": NS}
                r = await c.post(f"{url}/brain/v1/memories", json=note, headers=headers)
                seen.append(
                    Seen("note", g, t, 200 if r.status_code == 201 else r.status_code, top=note["body"])
                )
            i += 1
            await asyncio.sleep(0.05)


async def until(seen: list[Seen], pred: Any, timeout: float = 120) -> None:
    """Until the client has seen an answer `pred` holds for (a busy machine may answer a few
    searches lexically first: the query embedding has a deadline)."""
    deadline = time.monotonic() + timeout
    while not any(pred(s) for s in seen):
        assert time.monotonic() < deadline, f"no such answer in {timeout:.0f} s; last: {seen[-3:]}"
        await asyncio.sleep(0.2)


async def run_job(brain: Brain) -> dict[str, Any]:
    """The migration Job's process, with the env render_reindex_job gives it."""
    env = {**os.environ, "BRAIN_DATABASE_URL": brain.dsn, "BRAIN_EMBEDDER_URL": brain.embedder.url,
           "BRAIN_EMBEDDING_MODEL": NEW, "BRAIN_EMBEDDING_DIM": "384"}  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "brain.jobs.reindex"], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


async def mismatch_seen(url: str, timeout: float = 120) -> None:
    """Until the gateway at `url` has refused a query vector of another model (its counter moved)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=10) as c:
        while True:
            text = (await c.get(f"{url}/metrics")).text
            if metric(text, "brain_retrieval_degraded_total", cause="model_mismatch") > 0:
                return
            assert time.monotonic() < deadline, f"no model_mismatch at {url} in {timeout:.0f} s"
            await asyncio.sleep(0.2)


@pytest.mark.timeout(900)
async def test_a_model_change_under_http_traffic_fails_no_request_and_never_ranks_across_models(
    brain: Brain, embedder: LocalEmbedder
) -> None:
    old_url = await brain.start_gateway(DEFAULT_MODEL)
    owner = {"authorization": f"Bearer {brain.keys['owner']}"}
    async with httpx.AsyncClient(timeout=60) as c:
        for title, body in NOTES:
            r = await c.post(f"{old_url}/brain/v1/memories", json={"title": title, "body": body, "namespace": NS},
                             headers=owner)  # fmt: skip
            assert r.status_code == 201, r.text
    seen: list[Seen] = []
    stop_at = asyncio.Event()
    current = [0]
    client = asyncio.create_task(traffic(brain, seen, stop_at, current))
    try:
        # the old model ranks a search (a chat's answer alone is not what the checks below read),
        # clear of the roll's 0.5 s margin
        await until(seen, lambda x: x.kind == "search" and x.vector_model == DEFAULT_MODEL)
        await asyncio.sleep(1)
        # the embedder Service rolls to the new model (the same address, another model behind it)
        await brain.embedder.stop()
        brain.embedder.app = embedder_app(lambda: load_embedder(NEW, base=embedder))
        await brain.embedder.start()
        rolled = time.monotonic()
        # the old gateway meets the new model's Service (past its breaker's 10 s cooldown after the
        # restart's failed calls) and refuses its vectors: waited for, not slept for
        await mismatch_seen(old_url)
        # and a note written through it meanwhile, a second clear of the Job (the checks below read it)
        await until(seen, lambda x: x.kind == "note" and rolled < x.started < time.monotonic() - 1)
        job_started = time.monotonic()
        summary = await run_job(brain)
        swapped = time.monotonic()
        # the old gateway after the swap answers a search (lexically: checked below), waited for
        await until(seen, lambda x: x.kind == "search" and x.gateway == 0 and x.started > swapped)
        await brain.start_gateway(NEW)  # the gateway rolls last
        current[0] = 1
        moved = time.monotonic()
        await until(seen, lambda x: x.gateway == 1 and x.vector_model == NEW)  # the new model ranks
        # and a note written through the new gateway, which it must embed with the new model
        await until(seen, lambda x: x.kind == "note" and x.gateway == 1 and x.started > moved)
    finally:
        stop_at.set()
        await client

    assert (summary["from"], summary["to"]) == (DEFAULT_MODEL, NEW)
    # no request failed, through every step
    failed = [s for s in seen if s.status != 200]
    assert failed == [], failed[:5]
    searches = [s for s in seen if s.kind == "search"]
    assert {s.kind for s in seen} == {"search", "chat", "note"}
    # a ranked answer is always one model's, and right; the models follow the steps
    ranked = [s for s in searches if s.vector_model is not None]
    assert all(s.top == s.want for s in ranked), [
        (s.vector_model, s.top, s.want) for s in ranked if s.top != s.want
    ]
    # (None: an answer without the vector leg, e.g. the query embedding timed out on a busy machine)
    old_ranked = {s.vector_model for s in searches if s.started < rolled - 0.5}
    assert DEFAULT_MODEL in old_ranked and old_ranked <= {DEFAULT_MODEL, None}
    # the old gateway never ranks with the new model's Service: lexical (or its cached query
    # vectors, still compared with the old index only) until the swap, lexical after it
    assert {s.vector_model for s in searches if s.gateway == 0 and s.started > rolled} <= {
        DEFAULT_MODEL,
        None,
    }
    assert {s.vector_model for s in searches if s.gateway == 0 and s.started > swapped} == {None}
    new_ranked = {s.vector_model for s in searches if s.started > moved}
    assert NEW in new_ranked and new_ranked <= {NEW, None}
    # ...because it refused the new model's query vectors (a query compared with the other model's
    # vectors scores below the floor, so the answer would have been empty, not wrong)
    async with httpx.AsyncClient(timeout=10) as c:
        old_metrics = (await c.get(f"{old_url}/metrics")).text
    assert metric(old_metrics, "brain_retrieval_degraded_total", cause="model_mismatch") > 0
    # the swap: the live model is the new one, and no old-model vector is left
    stats = await brain.store.index_stats()
    assert stats["liveModel"] == NEW and stats["reindex"] is None
    rows = await brain.store.pool_for_tests.fetch(
        "SELECT body, embedding_model FROM memories WHERE status = 'active'"
    )
    model_of = {r["body"]: r["embedding_model"] for r in rows}
    assert set(model_of.values()) <= {NEW, None}
    assert all(model_of[b] == NEW for _, b in NOTES)
    notes = [s for s in seen if s.kind == "note"]
    # written with an old vector before the rollout, or without one while the Service served the
    # new model and the old gateway refused its vectors: the migration embedded both
    before_job = [s for s in notes if s.started < job_started - 1]
    assert any(s.started > rolled for s in before_job)
    assert all(model_of[s.top] == NEW for s in before_job), [(s.top, model_of[s.top]) for s in before_job]
    by_new = [s for s in notes if s.gateway == 1]
    assert by_new and all(model_of[s.top] == NEW for s in by_new)  # the new gateway embeds its own
