"""An entry without an episode is an episode of one: curated facts are not outranked by session
records for lacking an episode (brain.retrieval.fusion.episode_context).

Found through the review-browser test's CI failure: after an owner approved "Staging deploys are
retried twice" (a convention, no episode), the chat was given one of the two session records it
was distilled from (each alone in its episode) in its place. The records gained half their own
score from their episodes and the convention nothing, so which one led depended on the rest of
the brain (with the gateway's settings, a session record led in 112 of 120 brains of 0–380 other
notes before this change).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brain.core.models import Actor, MemoryIn
from brain.gateway.settings import GatewaySettings
from brain.retrieval import RetrievalConfig, Retriever
from brain.retrieval.fusion import episode_context, leg_zscores, zscore_fusion
from brain.services import approval
from brain.services.memory import MemoryService
from brain.store import Scope
from tests.kit.retry_convention import OLD, QUESTION, RECORDS, draft_convention

DATA = Path(__file__).resolve().parents[1] / "data"
NS = "repo:deploys"


def test_an_entry_without_an_episode_scores_as_one_alone_in_its_episode() -> None:
    legs = {
        "vector": [("a", 0.9), ("b", 0.5), ("c", 0.49)],
        "lexical": [("b", 10.0), ("c", 9.9), ("d", 1.0)],
    }
    fused = zscore_fusion(legs)
    alone = {d: (f"ep-{d}", 0) for d, _, _ in fused}
    for legs_z in (leg_zscores(legs), None):  # fused per leg, and RRF's form (no z-scores)
        kw: dict[str, Any] = {"episode_weight": 0.5, "adjacent_weight": 0.3, "window": 2, "legs": legs_z}
        assert episode_context(fused, {}, **kw) == episode_context(fused, alone, **kw)
        # half of one entry's episodes: the same scores whichever entries have one
        half = {d: e for d, e in list(alone.items())[::2]}
        assert episode_context(fused, half, **kw) == episode_context(fused, alone, **kw)


def test_a_candidate_past_the_context_lookup_keeps_its_score() -> None:
    # The pipeline looks up the episodes of its first CONTEXT_DEPTH candidates only. One past them
    # may well have an episode: it is not known, so it is not lifted, and a neighbour that joined
    # through the lookup keeps its place above it (as before episodes of one).
    fused = [("a", 3.0, ["lexical"]), ("b", 2.0, ["vector"]), ("deep", 1.0, ["vector"])]
    context = {"a": ("e", 0), "j": ("e", 1)}  # j: the turn after a, found by no leg
    kw: dict[str, Any] = {"episode_weight": 0.5, "adjacent_weight": 0.3, "window": 2}
    out = episode_context(fused, context, looked={"a", "b"}, **kw)
    assert out == [
        ("a", 3.0 + 0.5 * 3.0, ["lexical"]),
        ("b", 2.0 + 0.5 * 2.0, ["vector"]),  # looked up, no episode: an episode of one
        ("j", 0.5 * 3.0 + 0.3 * 3.0, ["episode"]),
        ("deep", 1.0, ["vector"]),
    ]


async def _approve_convention(service: MemoryService, owner: Actor) -> tuple[str, set[str]]:
    agent = Actor(name="agent", role="agent", origin="agent")
    records = [
        (
            await service.note(MemoryIn(body=body, namespace=NS, kind="experience", episode=ep), agent)
        ).memory.id
        for body, ep in RECORDS
    ]
    old = (await service.note(MemoryIn(body=OLD, namespace=NS), agent)).memory
    draft = await draft_convention(service.store, NS, records, old.id, old.content_hash)
    approved = await approval.approve(service, draft, owner, reason="matches the deploy runbook")
    return str(approved["memory_id"]), set(records)


async def test_an_approved_convention_leads_the_session_records_it_was_distilled_from(
    service: MemoryService, owner: Actor
) -> None:
    convention, records = await _approve_convention(service, owner)
    # The rest of the brain, in `shared` (every scope sees it): the team and generated sets' notes.
    # With none, the convention led before too; with these, a session record led at 11.6 to 9.7.
    for name in ("team_eval.json", "generated_eval.json"):
        for m in json.loads((DATA / name).read_text())["memories"]:
            await service.note(MemoryIn(body=m["body"], title=m.get("title"), namespace="shared"), owner)
    r = GatewaySettings().retrieval  # what the gateway retrieves with
    retriever = Retriever(
        service.store,
        service.embedder,
        RetrievalConfig(top_k=r.top_k, floor=r.floor, standout_ratio=r.standout_ratio),
    )
    res = await retriever.retrieve(QUESTION, Scope.of([NS]))
    ranked = [h.id for h in res.hits]
    assert ranked[0] == convention, [(h.body[:40], round(h.score, 2)) for h in res.hits]
    assert set(ranked[1:]) <= records | {h.id for h in res.hits if h.namespace == "shared"}
