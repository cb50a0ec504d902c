"""One review scenario, told twice: through the page (tests/gateway/test_review_browser.py) and
in-process (tests/retrieval/test_episode_of_one.py). Two session records say staging deploys were
retried twice; distill drafted a convention from them that supersedes a note saying they never are.
The records answer the question as well as the convention does, which is what made the approved
convention lose to them for lacking an episode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brain.services import proposals
from brain.store import Store

OLD = "Staging deploys are never retried; a failed deploy pages the on-call engineer at once."
NEW = "Staging deploys are retried twice; only the third failed deploy pages the on-call engineer."
RECORDS = (  # (body, episode): what an agent captured
    ("Deploy to staging failed twice on a flaky registry pull; the third try passed, so I retried.", "s-101"),
    ("Staging deploy failed once on the registry again; retried twice before it went green.", "s-102"),
)
QUESTION = "How many times are staging deploys retried?"


def cited(record_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The records as a proposal's evidence, each cited."""
    return [
        {"type": "episode", "memory_id": i, "author": "agent", "kind": "experience", "cited": True}
        for i in record_ids
    ]


async def draft_convention(
    store: Store, namespace: str, record_ids: Sequence[str], old_id: str, old_hash: str
) -> str:
    """The convention distill drafted from the records, superseding OLD; its proposal id."""
    evidence = [
        *cited(record_ids),
        {"type": "supersedes", "memory_id_current": old_id, "content_hash": old_hash},
    ]
    return await proposals.create(
        store,
        kind="convention",
        namespace=namespace,
        title="Staging deploys retry twice",
        body=NEW,
        evidence=evidence,
        authors=["agent"],
        score=0.99,
        supersedes=old_id,
    )
