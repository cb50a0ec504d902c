"""Governance that holds against the team's own agents (#32), at the door itself (services).

Every surface (REST, MCP, capture, the jobs, brainctl) writes through `MemoryService`, `KeyStore` and
`services.proposals`, so these rules are checked here, on real Postgres with the real model; the
REST and MCP answers a client sees are in tests/gateway/test_governance_rest.py.
"""

from __future__ import annotations

import pytest

from brain.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from brain.core.models import Actor, MemoryIn
from brain.jobs.digest import DIGEST_ACTOR
from brain.services import approval, capture, proposals
from brain.services.digests import latest_digest
from brain.services.keys import KeyStore
from brain.services.memory import TOMBSTONE, MemoryService, Proposed
from brain.store import Store, proposal_rows
from brain.store.writer import StoreWriter

PAY = "repo:payments"
WEB = "repo:web"
SKILL = "When the payments deploy fails on the schema check, run the migration dry-run first."


def pay_owner() -> Actor:
    return Actor(name="pat", role="owner", origin="owner", namespaces=(PAY,))


# ---------------------------------------------------------------------- 1. write rights per kind


@pytest.mark.parametrize("kind", ["skill", "persona", "digest"])
async def test_an_agent_cannot_write_a_curated_kind_at_the_door(
    service: MemoryService, agent: Actor, kind: str
) -> None:
    with pytest.raises(Forbidden) as err:
        await service.note(MemoryIn(kind=kind, body=SKILL), agent)  # type: ignore[arg-type]
    assert err.value.field == "kind" and kind in err.value.message
    assert await service.list_memories(agent, ["shared"]) == []


async def test_an_agents_skill_becomes_a_proposal_an_owner_approves(
    service: MemoryService, store: Store, agent: Actor, owner: Actor
) -> None:
    entry = MemoryIn(
        kind="skill", title="Payments deploy", body=SKILL, tags=["deploy"], domain_keywords=["ci"]
    )
    out = await service.propose_or_note(entry, agent)
    assert isinstance(out, Proposed) and "proposal" in out.message and out.kind == "skill"
    assert await service.list_memories(owner, ["shared"]) == []  # nothing stored yet
    [p] = await proposals.list_proposals(store)
    assert (p["id"], p["kind"], p["body"], p["authors"]) == (out.proposal, "skill", SKILL, ["claude-mac"])
    decided = await approval.approve(service, out.proposal, owner)
    mem = (await store.get(decided["memory_id"])).memory
    assert (mem.kind, mem.tier, mem.author, mem.body) == ("skill", "curated", "cole", SKILL)
    assert (mem.tags, mem.domain_keywords) == (["deploy"], ["ci"])  # nothing the agent sent is lost


async def test_an_agent_cannot_pin_through_a_proposal(
    service: MemoryService, store: Store, agent: Actor
) -> None:
    with pytest.raises(Forbidden):
        await service.propose_or_note(MemoryIn(kind="skill", body=SKILL), agent, standing=True)
    assert await proposals.list_proposals(store) == []


async def test_an_agent_cannot_turn_a_note_into_a_skill_by_superseding(
    service: MemoryService, store: Store, agent: Actor
) -> None:
    note = (await service.note(MemoryIn(body="deploys run the schema check first"), agent)).memory
    with pytest.raises(Forbidden):
        await service.supersede(note.id, MemoryIn(kind="skill", body=SKILL), note.content_hash, agent)
    out = await service.propose_or_supersede(note.id, MemoryIn(kind="skill", body=SKILL), None, agent)
    assert isinstance(out, Proposed) and out.supersedes == note.id
    current = (await store.get(note.id)).memory
    assert (current.kind, current.status, current.body) == ("note", "active", note.body)


async def test_an_import_still_writes_skills_and_the_digest_job_its_digest(
    service: MemoryService,
) -> None:
    source = Actor(name="source:runbooks", role="agent", origin="import")
    assert (await service.note(MemoryIn(kind="skill", body=SKILL), source)).memory.tier == "curated"
    assert (await service.note(MemoryIn(kind="digest", body="week 49"), DIGEST_ACTOR)).created
    with pytest.raises(Forbidden):  # an import is not the digest job
        await service.note(MemoryIn(kind="digest", body="a forged digest"), source)


async def test_the_latest_digest_is_the_digest_jobs(service: MemoryService, store: Store) -> None:
    real = (await service.note(MemoryIn(kind="digest", body="the real week"), DIGEST_ACTOR)).memory
    # A row that skipped today's door (stored before the rule, or straight into the table).
    forged = Actor(name="digest-bot", role="agent", origin="agent")
    await StoreWriter(store).note(
        MemoryIn(kind="digest", body="all is well, no proposals waiting"), actor=forged
    )
    latest = await latest_digest(store)
    assert latest is not None and latest["id"] == real.id


async def test_a_read_keys_capture_is_refused_at_the_door(service: MemoryService, store: Store) -> None:
    from brain.gateway.capture import Item

    reader = Actor(name="ci-reader", role="read", origin="agent")
    exchange = capture.Exchange(caller=reader, write_namespace="shared", api="chat", model="m")
    item = Item(kind="experience", title="t", body="the flaky test is the clock one", tags=[])
    outcome = await capture.keep(service, [item], exchange)
    assert outcome.stored == [] and outcome.filtered == ["forbidden"]


# ---------------------------------------------------------------------- 2. reserved names


@pytest.mark.parametrize(
    "name", ["master", "digest", "Distill", "ingest", "gateway", "source:runbooks", "Digest:2026-W49"]
)
async def test_internal_author_names_are_not_key_names(store: Store, name: str) -> None:
    with pytest.raises(InvalidInput) as err:
        await KeyStore(store).create(name, "agent")
    assert err.value.field == "name" and err.value.message
    assert [k for k in await KeyStore(store).list(include_revoked=True) if k.name == name] == []


async def test_names_with_a_colon_that_are_not_internal_still_work(store: Store) -> None:
    _, info = await KeyStore(store).create("agent-test:abc", "agent")
    assert info.name == "agent-test:abc"


# ---------------------------------------------------------------------- 3. confined owners


async def test_a_confined_owner_mints_and_revokes_only_within_its_namespaces(store: Store) -> None:
    ks, pat = KeyStore(store), pay_owner()
    with pytest.raises(Forbidden) as err:
        await ks.create("wide-owner", "owner", actor=pat)  # unconfined: every namespace
    assert err.value.field == "namespaces"
    with pytest.raises(Forbidden):
        await ks.create("web-agent", "agent", namespaces=[WEB], actor=pat)
    _, mine = await ks.create("pay-agent", "agent", namespaces=[PAY], actor=pat)
    _, other = await ks.create("web-agent", "agent", namespaces=[WEB])
    assert [k.name for k in await ks.list(actor=pat)] == ["pay-agent"]
    with pytest.raises(NotFound):
        await ks.revoke("web-agent", actor=pat)
    assert (await ks.revoke("pay-agent", actor=pat)).revoked_at is not None
    [web] = [k for k in await ks.list() if k.id == other.id]
    assert web.revoked_at is None and mine.name == "pay-agent"


async def test_a_confined_owner_cannot_retire_promote_or_pin_elsewhere(
    service: MemoryService, agent: Actor
) -> None:
    web = (await service.note(MemoryIn(body="web deploys on Fridays", namespace=WEB), agent)).memory
    pat = pay_owner()
    for attempt in (
        lambda: service.retire(web.id, "not true", pat),
        lambda: service.promote(web.id, pat),
        lambda: service.promote(web.id, pat, standing=True),
    ):
        with pytest.raises(Forbidden):
            await attempt()
    after = (await service.store.get(web.id)).memory
    assert (after.status, after.tier, after.standing) == ("active", "episodic", False)


async def test_a_confined_owner_sees_and_decides_only_its_namespaces_proposals(
    service: MemoryService, store: Store
) -> None:
    kw = {"kind": "fact", "title": "t", "evidence": [], "authors": ["a"], "score": 0.5}
    web = await proposals.create(store, namespace=WEB, body="web runs on node 22", **kw)  # type: ignore[arg-type]
    pay = await proposals.create(store, namespace=PAY, body="payments runs on java 21", **kw)  # type: ignore[arg-type]
    pat = pay_owner()
    assert [p["id"] for p in await proposals.list_proposals(store, actor=pat)] == [pay]
    with pytest.raises(NotFound):
        await proposals.show(store, web, actor=pat)
    with pytest.raises(NotFound):
        await proposals.reject(store, web, pat, "not yours")
    assert await proposal_rows.status(store, web) == "pending"


# ---------------------------------------------------------------------- 4. revoke: one column


async def test_revoking_by_name_never_revokes_a_key_whose_id_is_that_name(store: Store) -> None:
    ks = KeyStore(store)
    _, first = await ks.create("first", "agent")
    _, twin = await ks.create(first.id, "agent")  # a name that happens to be another key's id
    revoked = await ks.revoke(first.id)  # by name (the default)
    assert revoked.id == twin.id
    state = {k.id: k.revoked_at for k in await ks.list(include_revoked=True)}
    assert state[first.id] is None and state[twin.id] is not None
    assert (await ks.revoke(first.id, by="id")).id == first.id
    with pytest.raises(InvalidInput) as err:
        await ks.revoke("first", by="either")
    assert err.value.field == "by"


# ---------------------------------------------------------------------- 5. approval and review


async def test_approval_checks_the_targets_namespace(
    service: MemoryService, store: Store, owner: Actor
) -> None:
    shared = (await service.note(MemoryIn(kind="fact", body="releases go out on Tuesdays"), owner)).memory
    pid = await proposal_rows.insert(
        store,
        kind="fact",
        namespace=PAY,
        title="Release day",
        body="releases go out on Thursdays",
        evidence=[
            {"type": "supersedes", "memory_id_current": shared.id, "content_hash": shared.content_hash}
        ],
        authors=["a"],
        score=0.5,
        supersedes=shared.id,
    )
    shown = await proposals.show(store, pid)
    assert shown["current"]["namespace"] == "shared"  # what a reviewer reads: where it would write
    with pytest.raises(Forbidden) as err:
        await approval.approve(service, pid, pay_owner())
    assert err.value.field == "supersedes"
    with pytest.raises(Conflict):  # even an unconfined owner: the review said repo:payments
        await approval.approve(service, pid, owner)
    current = (await store.get(shared.id)).memory
    assert (current.status, current.body) == ("active", "releases go out on Tuesdays")


async def test_what_is_approved_is_byte_for_byte_what_was_reviewed(
    service: MemoryService, store: Store, owner: Actor
) -> None:
    raw = "Deploys\r\nneed the\u200b schema check.\x07"
    pid = await proposals.create(
        store, kind="fact", namespace="shared", title="  Deploy\u200b  check ", body=raw,
        evidence=[], authors=["a"], score=0.5,
    )  # fmt: skip
    shown = await proposals.show(store, pid)
    decided = await approval.approve(service, pid, owner)
    mem = (await store.get(decided["memory_id"])).memory
    assert (
        (mem.title, mem.body)
        == (shown["title"], shown["body"])
        == ("Deploy check", "Deploys\nneed the schema check.")
    )


# ---------------------------------------------------------------------- 6. forget, purge


async def test_a_forgotten_entry_is_gone_for_agents_and_its_history_too(
    service: MemoryService, agent: Actor, owner: Actor
) -> None:
    v1 = (await service.note(MemoryIn(body="the staging password rotates monthly"), agent)).memory
    v2 = await service.supersede(v1.id, MemoryIn(body="the staging db is db-stg-2"), v1.content_hash, agent)
    await service.forget(v2.id, "wrong host", agent)
    for mid in (v1.id, v2.id):
        with pytest.raises(NotFound):
            await service.get(mid, agent)
    reader = Actor(name="ci", role="read", origin="agent")
    with pytest.raises(NotFound):
        await service.get(v1.id, reader)
    assert [m.status for m in (await service.get(v2.id, owner)).history] == ["superseded", "forgotten"]


async def test_a_forgotten_entrys_older_versions_are_no_point_in_time_answers(
    service: MemoryService, agent: Actor
) -> None:
    v1 = (await service.note(MemoryIn(body="the billing cron runs on host cron-7 at 04:00"), agent)).memory
    v2 = await service.supersede(
        v1.id, MemoryIn(body="the billing cron moved to k8s"), v1.content_hash, agent
    )
    then = v1.valid_from + (v2.valid_from - v1.valid_from) / 2
    hits = await service.search("billing cron host cron-7", agent, as_of=then)
    assert v1.id in [h.id for h in hits]  # history answers "as of then" while the entry is served
    await service.forget(v2.id, "the whole entry was wrong", agent)
    hits = await service.search("billing cron host cron-7", agent, as_of=then)
    assert v1.id not in [h.id for h in hits]


async def test_purge_tombstones_every_version_and_keeps_hashes_and_events(
    service: MemoryService, store: Store, agent: Actor, owner: Actor
) -> None:
    v1 = (await service.note(MemoryIn(title="oops", body="pasted by mistake: customer list A"), agent)).memory
    v2 = await service.supersede(
        v1.id, MemoryIn(body="pasted by mistake: customer list B"), v1.content_hash, agent
    )
    cited = await proposal_rows.insert(
        store, kind="fact", namespace="shared", title="t", body="customers are tracked in a list",
        evidence=[{"type": "episode", "memory_id": v1.id, "title": "oops"}, {"type": "query", "query": "q"}],
        authors=["a"], score=0.5,
    )  # fmt: skip
    with pytest.raises(Conflict):  # still served: forget first
        await service.purge(v2.id, "personal data", owner)
    await service.forget(v2.id, "personal data", agent)
    with pytest.raises(Forbidden):
        await service.purge(v2.id, "personal data", agent)
    detail = await service.purge(v1.id, "personal data", owner)
    assert [(m.body, m.title) for m in detail.history] == [(TOMBSTONE, TOMBSTONE)] * 2
    assert [m.content_hash for m in detail.history] == [v1.content_hash, v2.content_hash]
    assert all(not m.embedded and "customer" not in str(m.attrs) for m in detail.history)
    types = [
        r["type"]
        for r in await store.pool_for_tests.fetch(
            "SELECT type FROM events WHERE payload->>'lineage_id' = $1 ORDER BY id", v1.lineage_id
        )
    ]
    assert types[-2:] == ["memory_forgotten", "memory_purged"]
    shown = await proposals.show(store, cited)  # the evidence quoted v1's title: no longer
    assert shown["evidence"] == [
        {"type": "episode", "memory_id": v1.id, "title": TOMBSTONE},
        {"type": "query", "query": "q"},
    ]
    hits = await service.search("customer list", owner)
    assert v1.id not in [h.id for h in hits] and v2.id not in [h.id for h in hits]


async def test_purge_takes_what_an_import_embedded_with_the_text(
    service: MemoryService, store: Store, owner: Actor
) -> None:
    # an import keeps the text its vector was made of (a code card) beside the body: it is text too
    [m] = await StoreWriter(store).note_many(
        [(MemoryIn(title="export (function)", body="def export():\n    return 'customer list C'"), None)],
        actor=owner,
        inputs=["export (function)\nreturns customer list C"],
    )
    embedded = "SELECT embed_input FROM memories WHERE id = $1"
    assert await store.pool_for_tests.fetchval(embedded, m.id) == "export (function)\nreturns customer list C"
    await service.forget(m.id, "personal data", owner)
    await service.purge(m.id, "personal data", owner)
    assert await store.pool_for_tests.fetchval(embedded, m.id) is None
    # the previous release's purge, which does not know the column (a rolling upgrade, a rollback)
    [old] = await StoreWriter(store).note_many(
        [(MemoryIn(body="def export():\n    return 'customer list D'"), None)],
        actor=owner,
        inputs=["customer list D"],
    )
    await store.pool_for_tests.execute(
        "UPDATE memories SET body = $2, title = $2, embedding = NULL, embedding_model = NULL, updated_at = now(),"
        " attrs = jsonb_build_object('purged_by', 'cole', 'purged_at', now()::text) WHERE lineage_id = $1",
        old.lineage_id,
        TOMBSTONE,
    )
    assert await store.pool_for_tests.fetchval(embedded, old.id) is None


async def test_a_confined_owner_purges_only_its_namespaces(
    service: MemoryService, agent: Actor, owner: Actor
) -> None:
    m = (await service.note(MemoryIn(body="web build cache lives in s3", namespace=WEB), agent)).memory
    await service.forget(m.id, "wrong", agent)
    with pytest.raises(Forbidden):
        await service.purge(m.id, "cleanup", pay_owner())
    assert (await service.get(m.id, owner)).memory.body == "web build cache lives in s3"
