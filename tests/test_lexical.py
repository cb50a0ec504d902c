"""One-trip BM25 + query IDF (brain.store.lexical) ranks exactly as the two-statement reference did.

The reference (tests/lexical_reference.py) is the leg the store shipped until issue 16.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from brain.core.models import Actor, MemoryIn
from brain.services.memory import MemoryService
from brain.store import Scope
from brain.store.lexical import bm25
from tests import lexical_reference as reference

BODIES = [
    ("repo:payments", "The staging Postgres for payments listens on port 6543 behind PgBouncer."),
    ("repo:payments", "Refunds are settled nightly at 02:00 UTC by the settlement-worker CronJob."),
    ("repo:payments", "Stripe webhooks are verified with the webhook secret; a failed check returns 400."),
    ("repo:web", "The web app's staging database listens on port 5433; staging staging staging."),
    ("shared", "Production deploys are frozen from Friday 16:00 UTC until Monday 08:00 UTC."),
    ("shared", "Database migrations run in the pre-deploy Job, never at application start."),
    ("shared", "Secrets live in Vault; the database password is rotated monthly."),
]
QUERIES = [
    "which port does the staging database use?",
    "when are refunds settled",
    "database",
    "deploy freeze friday",
    "write a haiku about autumn leaves",
    "",
]


@pytest.mark.parametrize("by_namespace", [False, True], ids=["plain", "by-namespace"])
@pytest.mark.parametrize("namespace", ["repo:payments", "repo:web"])
async def test_one_trip_ranks_as_lexical_leg_and_query_idf_did(
    service: MemoryService, owner: Actor, namespace: str, by_namespace: bool
) -> None:
    """Both candidate steps (the shipped one, and per scope namespace as hack/benchscale.py measures it)."""
    for ns, body in BODIES:
        await service.note(MemoryIn(body=body, namespace=ns), owner)
    store = service.store
    for q in QUERIES:
        scope = Scope.of([namespace])
        new = await bm25(store, q, scope, 10, by_namespace=by_namespace)
        old = await reference.lexical_leg(store, q, scope, 10)
        assert [d for d, _ in new.hits] == [d for d, _ in old], q
        assert [round(s, 9) for _, s in new.hits] == [round(s, 9) for _, s in old], q
        assert new.query_idf == pytest.approx(await reference.query_idf(store, q)), q
    # scope holds: nothing from the other repo
    hits = (await bm25(store, "staging port", Scope.of(["repo:web"]), 10, by_namespace=by_namespace)).hits
    got = {h.namespace for h in (await store.hits([d for d, _ in hits])).values()}
    assert got <= {"repo:web", "shared"} and hits


async def test_history_is_scored_too(service: MemoryService, owner: Actor) -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    old = (await service.note(MemoryIn(body="Issues are tracked in Jira.", valid_from=t0), owner)).memory
    new = await service.supersede(
        old.id,
        MemoryIn(body="Issues are tracked in Linear.", valid_from=t0 + timedelta(days=30)),
        old.content_hash,
        owner,
    )
    now = await bm25(service.store, "where are issues tracked", Scope.of([]), 5)
    then = await bm25(
        service.store, "where are issues tracked", Scope.of([], as_of=t0 + timedelta(days=1)), 5
    )
    assert [d for d, _ in now.hits] == [new.id]
    assert [d for d, _ in then.hits] == [old.id]
