"""The human gate over REST, through the real gateway: an owner lists what distill drafted, reads it,
approves (the memory becomes curated and searchable) or rejects with a reason; nobody else can."""

from __future__ import annotations

from brain.services import proposals

from .conftest import Gateway

EVIDENCE = [{"type": "episode", "memory_id": "m-1", "excerpt": "retry the flaky deploy twice"}]


async def draft(gw: Gateway, ns: str, body: str, **kw: object) -> str:
    """What the distill job writes for a cluster of sessions."""
    return await proposals.create(
        gw.store,
        kind=str(kw.pop("kind", "convention")),
        namespace=ns,
        title=str(kw.pop("title", "Deploy retries")),
        body=body,
        evidence=EVIDENCE,
        authors=["alice", "bob"],
        score=float(kw.pop("score", 0.8)),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


async def test_only_owners_see_and_decide_proposals(gw: Gateway, ns: str) -> None:
    pid = await draft(gw, ns, "Deploys to staging are retried twice before paging anyone.")
    for key in ("agent", "reader"):
        r = await gw.rest("GET", "/proposals", key=key)
        assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
        r = await gw.rest("POST", f"/proposals/{pid}/approve", key=key)
        assert r.status_code == 403, r.text
    r = await gw.rest("GET", "/proposals", key="owner")
    assert r.status_code == 200
    mine = [p for p in r.json()["proposals"] if p["id"] == pid]
    assert mine and mine[0]["status"] == "pending" and mine[0]["evidence"] == EVIDENCE
    assert mine[0]["authors"] == ["alice", "bob"]
    shown = (await gw.rest("GET", f"/proposals/{pid}", key="owner")).json()
    assert shown["body"].startswith("Deploys to staging") and shown["namespace"] == ns


async def test_approving_writes_a_curated_memory_that_search_finds(gw: Gateway, ns: str) -> None:
    body = "Deploys to staging are retried twice before paging anyone; the third failure pages."
    pid = await draft(gw, ns, body)
    r = await gw.rest("POST", f"/proposals/{pid}/approve", key="owner", json={"reason": "matches runbook"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "approved" and out["tier"] == "curated"
    memory = (await gw.rest("GET", f"/memories/{out['memory_id']}", key="agent")).json()["memory"]
    assert memory["body"] == body and memory["tier"] == "curated" and memory["kind"] == "convention"
    hits = (
        await gw.rest("GET", "/search", key="agent", params={"q": "staging deploy retries", "namespace": ns})
    ).json()
    assert out["memory_id"] in [h["id"] for h in hits["hits"]]
    approved = (await gw.rest("GET", "/proposals", key="owner", params={"status": "approved"})).json()
    [p] = [p for p in approved["proposals"] if p["id"] == pid]
    assert p["memory_id"] == out["memory_id"] and p["reason"] == "matches runbook"
    again = await gw.rest("POST", f"/proposals/{pid}/approve", key="owner")
    assert again.status_code == 409 and "already approved" in again.json()["message"]


async def test_approving_a_supersede_keeps_the_old_version_in_history(gw: Gateway, ns: str) -> None:
    r = await gw.rest(
        "POST", "/memories", key="agent", json={"body": "Staging deploys are never retried.", "namespace": ns}
    )
    old = r.json()
    pid = await draft(
        gw,
        ns,
        "Staging deploys are retried twice.",
        supersedes=old["id"],
    )
    r = await gw.rest("POST", f"/proposals/{pid}/approve", key="owner")
    assert r.status_code == 200, r.text
    detail = (await gw.rest("GET", f"/memories/{r.json()['memory_id']}", key="agent")).json()
    assert detail["memory"]["body"] == "Staging deploys are retried twice."
    assert "Staging deploys are never retried." in [v["body"] for v in detail["history"]]


async def test_rejecting_needs_a_reason_and_bad_requests_say_what_is_wrong(gw: Gateway, ns: str) -> None:
    pid = await draft(gw, ns, "Always deploy on Fridays.")
    r = await gw.rest("POST", f"/proposals/{pid}/reject", key="owner", json={"reason": "  "})
    assert r.status_code == 422 and r.json()["field"] == "reason", r.text
    r = await gw.rest(
        "POST", f"/proposals/{pid}/reject", key="owner", json={"reason": "contradicts the freeze"}
    )
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    r = await gw.rest("POST", f"/proposals/{pid}/approve", key="owner")
    assert r.status_code == 409 and "already rejected" in r.json()["message"]
    rejected = (await gw.rest("GET", "/proposals", key="owner", params={"status": "rejected"})).json()
    assert [p["reason"] for p in rejected["proposals"] if p["id"] == pid] == ["contradicts the freeze"]
    r = await gw.rest("GET", "/proposals/no-such-id", key="owner")
    assert r.status_code == 404 and "no-such-id" in r.json()["message"]
    r = await gw.rest("GET", "/proposals", key="owner", params={"status": "maybe"})
    assert r.status_code == 422 and r.json()["field"] == "status"
    assert "pending, approved, rejected" in r.json()["message"]
