"""The vector floor calibrated per scope against generic unrelated questions (retrieval/calibration.py)."""

from __future__ import annotations

import asyncio

import pytest

from brain.core.contract import RetrievalFloor
from brain.core.models import Actor, MemoryIn
from brain.embedder import LocalEmbedder
from brain.retrieval.calibration import MAX_SAMPLING, PROBES, calibrated_floor
from brain.retrieval.pipeline import RetrievalConfig, Retriever
from brain.store import Store
from brain.store.store import Scope, embed_text
from brain.store.writer import StoreWriter

ACTOR = Actor(name="t", role="owner", origin="import")

ENGINEERING = [
    ("migrations", "Database migrations run with `alembic upgrade head` in the pre-deploy Job."),
    ("incidents", "During an incident, page the on-call engineer through PagerDuty."),
    ("terraform", "Terraform state lives in the S3 bucket tf-state-prod with DynamoDB locking."),
    ("refunds", "Refunds are settled nightly at 02:00 UTC by the settlement-worker CronJob."),
]
# A scope that holds the probes' own kind of text: generic questions find near-matches here.
CHATTY = [(f"chat {i}", text) for i, text in enumerate(PROBES[::2])]


def test_calibrated_floor_only_lowers() -> None:
    assert calibrated_floor([0.1, 0.12, 0.2], 1.0, 0.3) == pytest.approx(0.2)
    assert calibrated_floor([0.5, 0.6, 0.7], 0.95, 0.3) == 0.3  # a noisy scope keeps the configured floor
    assert calibrated_floor([0.1, 0.2], 0, 0.3) == 0.3  # calibration off
    assert calibrated_floor([], 0.95, 0.3) == 0.3  # an empty scope: nothing to calibrate against
    assert calibrated_floor([0.1], 0.95, 0.0) == 0.0  # no floor stays no floor


async def _load(store: Store, embedder: LocalEmbedder, namespace: str, notes: list[tuple[str, str]]) -> None:
    vecs = await embedder.embed([embed_text(t, b) for t, b in notes])
    await StoreWriter(store).note_many(
        [(MemoryIn(title=t, body=b, namespace=namespace), v) for (t, b), v in zip(notes, vecs, strict=True)],
        actor=ACTOR,
    )


async def test_quiet_scope_lowers_the_floor_noisy_scope_keeps_it(
    store: Store, embedder: LocalEmbedder
) -> None:
    await _load(store, embedder, "repo:eng", ENGINEERING)
    await _load(store, embedder, "repo:chat", CHATTY)
    retriever = Retriever(store, embedder, RetrievalConfig(embed_timeout_s=30.0))
    eng, chat = Scope.of(["repo:eng"]), Scope.of(["repo:chat"])
    for scope in (eng, chat):
        await retriever.warm(scope)
    assert retriever._floors(eng)["vector"] < 0.3
    assert retriever._floors(chat)["vector"] == 0.3
    fixed = Retriever(store, embedder, RetrievalConfig(floor=RetrievalFloor(calibration=0)))
    await fixed.warm(eng)
    assert fixed._floors(eng)["vector"] == 0.3


async def test_weak_paraphrase_answered_in_quiet_scope_and_small_talk_still_gets_nothing(
    store: Store, embedder: LocalEmbedder
) -> None:
    await _load(store, embedder, "repo:eng", ENGINEERING)
    eng = Scope.of(["repo:eng"])
    calibrated = Retriever(store, embedder, RetrievalConfig(embed_timeout_s=30.0))
    fixed = Retriever(
        store, embedder, RetrievalConfig(embed_timeout_s=30.0, floor=RetrievalFloor(calibration=0))
    )
    for r in (calibrated, fixed):
        await r.warm(eng)
    question = "when do schema changes get applied?"  # cosine ~0.23 to the migrations note
    got = await calibrated.retrieve(question, eng)
    assert got.hits and got.hits[0].title == "migrations"
    assert not (await fixed.retrieve(question, eng)).hits  # what the fixed floor cut
    for unrelated in ("write a haiku about autumn leaves", "what is the capital of Australia?"):
        assert not (await calibrated.retrieve(unrelated, eng)).hits, unrelated


async def test_first_question_uses_the_configured_floor_while_calibration_runs(
    store: Store, embedder: LocalEmbedder
) -> None:
    await _load(store, embedder, "repo:eng", ENGINEERING)
    eng = Scope.of(["repo:eng"])
    r = Retriever(store, embedder, RetrievalConfig(embed_timeout_s=30.0))
    assert r._floors(eng)["vector"] == 0.3  # nothing sampled yet: never looser than configured
    await r.warm(eng)
    assert r._floors(eng)["vector"] < 0.3


async def test_a_burst_of_new_scopes_is_sampled_a_few_at_a_time(
    store: Store, embedder: LocalEmbedder
) -> None:
    """A caller chooses its scope, and each new one costs 32 lookups: twenty new scopes at once
    (one hostile key's burst) put MAX_SAMPLING samples in flight, not twenty; the rest keep the
    configured floor and are sampled by a later question once a slot is free."""
    await _load(store, embedder, "repo:eng", ENGINEERING)
    r = Retriever(store, embedder, RetrievalConfig(embed_timeout_s=30.0))
    assert r.calibrator is not None
    kinds = ["fact", "decision", "convention", "incident", "runbook"]
    scopes = [Scope.of([f"repo:eng{i % 4}", "repo:eng"], kinds=(kinds[i % 5],)) for i in range(20)]
    assert len(set(scopes)) == 20
    for scope in scopes:
        assert r._floors(scope)["vector"] == 0.3
    assert len(r.calibrator._pending) == MAX_SAMPLING
    while r.calibrator._pending:
        await asyncio.gather(*r.calibrator._pending.values())
        for scope in scopes:
            r._floors(scope)
    assert all(r.calibrator.sample(scope) is not None for scope in scopes)  # every one sampled in the end
