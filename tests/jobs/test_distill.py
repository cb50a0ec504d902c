"""Distillation end to end: real Postgres, the real model, litellm against the scripted fake upstream."""

from __future__ import annotations

import json

import numpy as np
import pytest

from brain.core.errors import Conflict, Forbidden
from brain.core.models import Actor, MemoryIn
from brain.jobs.distill import (
    InvalidOutput,
    cluster_vectors,
    load_prompt,
    parse_draft,
    run_distill,
)
from brain.jobs.settings.distill import DistillConfig
from brain.services import approval, proposals
from brain.services.memory import MemoryService
from brain.store import Store
from tests.jobs.conftest import FakeLLM

EPISODES = [
    (
        "claude-mac",
        "Flaky CI: the integration suite times out when the Postgres container starts slowly; "
        "waiting on pg_isready before running tests fixed it.",
    ),
    (
        "codex-ci",
        "Integration tests failed with connection refused because Postgres was not ready yet; "
        "adding a pg_isready wait loop in CI resolved the flakiness.",
    ),
    (
        "cursor-lin",
        "The CI integration job is flaky until it waits for pg_isready; after adding the wait the "
        "Postgres connection errors stopped.",
    ),
]
DRAFT = {
    "proposals": [
        {
            "kind": "learning",
            "title": "CI waits for pg_isready before integration tests",
            "body": "The integration suite fails with connection refused when Postgres starts slowly in CI; "
            "the CI job waits for pg_isready before running the tests.",
            "confidence": 0.9,
            "supersedes": None,
            "evidence": [1, 2, 3],
        }
    ]
}


def cfg(url: str, **kw: object) -> DistillConfig:
    base = dict(
        model="echo", api_base=url + "/v1", api_key="sk-fake", timeout_s=5.0, attempts=2, backoff_s=0.01
    )
    base.update(kw)
    return DistillConfig(**base)  # type: ignore[arg-type]


async def capture(
    service: MemoryService, store: Store, texts=EPISODES, kind: str = "experience"
) -> list[str]:
    ids = []
    for author, body in texts:
        actor = Actor(name=author, role="agent", origin="gateway")
        res = await service.note(MemoryIn(kind=kind, title=body[:60], body=body), actor)  # type: ignore[arg-type]
        await store.record_event(
            "capture",
            key_name=author,
            namespace="shared",
            payload={"stored": [{"id": res.memory.id, "kind": kind}], "model": "gpt-x"},
        )
        ids.append(res.memory.id)
    await store.record_event(
        "query_no_hit",
        key_name="claude-mac",
        namespace="shared",
        payload={"query": "why is the CI integration suite flaky with postgres"},
    )
    return ids


def test_prompt_is_versioned_and_parser_is_strict() -> None:
    text, schema = load_prompt()
    assert "supersedes" in text and schema["$id"] == "brain/distill-v1"
    assert parse_draft(json.dumps(DRAFT), schema, set(), 3)[0]["kind"] == "learning"
    for bad in (
        "```json\n" + json.dumps(DRAFT) + "\n```",
        '{"proposals": [{"kind": "rumour"}]}',
        "",
        json.dumps({"proposals": [{**DRAFT["proposals"][0], "supersedes": "not-shown"}]}),
    ):
        with pytest.raises(InvalidOutput):
            parse_draft(bad, schema, set(), 3)
    v = np.array([[1, 0], [0.9, 0.1], [0, 1]], dtype=np.float32)
    assert cluster_vectors(v, 0.8) == [[0, 1], [2]]


async def test_full_loop_capture_distill_approve_serve_retire(
    store: Store, service: MemoryService, fake_llm: FakeLLM, owner: Actor, agent: Actor
) -> None:
    ids = await capture(service, store)
    fake_llm.script({"match": "pg_isready", "content": json.dumps(DRAFT)})
    s = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert (s.episodes, s.clusters, s.proposals, s.invalid, s.deferred) == (3, 1, 1, 0, False)
    assert s.queries == 1 and s.sessions == 3
    sent = fake_llm.requests()[-1]
    assert (
        sent["messages"][0]["content"].startswith("You distill")
        and "pg_isready" in sent["messages"][1]["content"]
    )

    [p] = await proposals.list_proposals(store)
    assert p["authors"] == ["claude-mac", "codex-ci", "cursor-lin"]
    assert {e["memory_id"] for e in p["evidence"] if e["type"] == "episode"} == set(ids)
    assert any(e["type"] == "query" for e in p["evidence"]) and p["score"] > 0.5
    # nothing reaches the curated tier before an owner approves
    assert not await store.pool_for_tests.fetchval("SELECT count(*) FROM memories WHERE tier = 'curated'")
    with pytest.raises(Forbidden):
        await approval.approve(service, p["id"], agent)

    decided = await approval.approve(service, p["id"], owner)
    mem = (await store.get(decided["memory_id"])).memory
    assert (mem.tier, mem.promoted_by, mem.origin, mem.author) == ("curated", "cole", "owner", "cole")
    with pytest.raises(Conflict):
        await approval.approve(service, p["id"], owner)
    hits = await service.search("why do CI integration tests fail with connection refused", agent)
    assert mem.id in [h.id for h in hits]

    # a second run does not propose the same episodes again
    s2 = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert s2.episodes == 0 and s2.proposals == 0

    await service.retire(mem.id, "CI moved to a managed database", owner)
    hits = await service.search("why do CI integration tests fail with connection refused", agent)
    assert mem.id not in [h.id for h in hits]


async def test_contradiction_becomes_superseding_proposal(
    store: Store, service: MemoryService, fake_llm: FakeLLM, owner: Actor
) -> None:
    old = (
        await service.note(
            MemoryIn(
                kind="fact",
                title="Release day",
                body="Production releases go out on Tuesdays after the change freeze.",
            ),
            owner,
        )
    ).memory
    await capture(
        service,
        store,
        [
            (
                "a1",
                "Production releases now go out on Thursdays; Tuesday releases were moved after the freeze change.",
            ),
            (
                "a2",
                "Release to production happens on Thursday now, not Tuesday, since the new freeze window.",
            ),
        ],
        kind="summary",
    )
    fake_llm.script(
        {
            "match": "Thursday",
            "content": json.dumps(
                {
                    "proposals": [
                        {
                            "kind": "fact",
                            "title": "Release day",
                            "body": "Production releases go out on Thursdays after the freeze.",
                            "confidence": 0.8,
                            "supersedes": old.id,
                            "evidence": [1, 2],
                        }
                    ]
                }
            ),
        }
    )
    s = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert (s.proposals, s.conflicts) == (1, 1)
    [p] = await proposals.list_proposals(store)
    shown = await proposals.show(store, p["id"])
    assert "Tuesdays" in shown["current"]["body"] and "Thursdays" in shown["body"]
    decided = await approval.approve(service, p["id"], owner)
    detail = await store.get(decided["memory_id"])
    assert [m.status for m in detail.history] == [
        "superseded",
        "active",
    ] and detail.memory.supersedes == old.id


async def test_invalid_output_discarded_and_counted(
    store: Store, service: MemoryService, fake_llm: FakeLLM
) -> None:
    await capture(service, store)
    fake_llm.script({"match": "pg_isready", "content": "Sure! Here is the memory: " + json.dumps(DRAFT)})
    s = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert (s.invalid, s.proposals, s.deferred) == (1, 0, False)
    assert await proposals.list_proposals(store) == []
    # discarded, not lost: the episodes are still there for the next run
    fake_llm.script({"match": "pg_isready", "content": json.dumps(DRAFT)})
    assert (await run_distill(store, service.embedder, cfg(fake_llm.url))).proposals == 1


async def test_provider_down_or_slow_defers_and_loses_nothing(
    store: Store, service: MemoryService, fake_llm: FakeLLM
) -> None:
    await capture(service, store)
    fake_llm.script({"match": "pg_isready", "status": 503, "times": 2})
    s = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert s.deferred and s.provider_errors == 2 and s.deferred_clusters == 1 and s.proposals == 0
    fake_llm.script({"match": "pg_isready", "delay_s": 3.0, "times": 2})
    s = await run_distill(store, service.embedder, cfg(fake_llm.url, timeout_s=0.5))
    assert s.deferred and s.provider_errors == 2
    fake_llm.script({"match": "pg_isready", "content": json.dumps(DRAFT)})
    s = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert (s.deferred, s.episodes, s.proposals) == (False, 3, 1)


async def test_gate_needs_evidence_before_any_model_call(
    store: Store, service: MemoryService, fake_llm: FakeLLM
) -> None:
    await capture(service, store, EPISODES[:1])
    before = len(fake_llm.requests())
    s = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert (s.clusters, s.gated, s.proposals) == (1, 1, 0) and len(fake_llm.requests()) == before


async def test_a_repo_cluster_cannot_supersede_a_shared_entry(
    store: Store, service: MemoryService, fake_llm: FakeLLM, owner: Actor
) -> None:
    """`shared` entries are shown to a repo cluster's draft for context; superseding one would let one
    repo's episodes rewrite what the whole team reads, so such a draft is discarded as invalid."""
    shared = (
        await service.note(
            MemoryIn(kind="fact", title="Release day", body="Production releases go out on Tuesdays."), owner
        )
    ).memory
    for author, body in (
        ("a1", "In repo payments production releases now go out on Thursdays, not Tuesdays."),
        ("a2", "Payments releases to production moved to Thursday; Tuesday is no longer release day."),
    ):
        actor = Actor(name=author, role="agent", origin="gateway")
        res = await service.note(
            MemoryIn(kind="summary", title=body[:60], body=body, namespace="repo:pay"), actor
        )
        await store.record_event(
            "capture", key_name=author, namespace="repo:pay",
            payload={"stored": [{"id": res.memory.id, "kind": "summary"}], "model": "m"},
        )  # fmt: skip
    draft = {
        "kind": "fact",
        "title": "Release day",
        "body": "Production releases go out on Thursdays.",
        "confidence": 0.8,
        "supersedes": shared.id,
        "evidence": [1, 2],
    }
    fake_llm.script({"match": "Thursday", "content": json.dumps({"proposals": [draft]})})
    s = await run_distill(store, service.embedder, cfg(fake_llm.url))
    assert (s.invalid, s.proposals, s.conflicts) == (1, 0, 0)
    assert await proposals.list_proposals(store) == []
    assert (await store.get(shared.id)).memory.status == "active"
