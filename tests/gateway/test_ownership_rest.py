"""Ownership over the wire: another author's entry needs its hash (REST and MCP); owners restore it."""

from __future__ import annotations

import uuid

from .conftest import Gateway
from .test_auth_mcp_rest import call


async def _other_agent(gw: Gateway) -> str:
    r = await gw.rest(
        "POST", "/keys", key="owner", json={"name": f"ci-{uuid.uuid4().hex[:8]}", "role": "agent"}
    )
    assert r.status_code == 201, r.text
    return str(r.json()["key"])


async def _served(gw: Gateway, ns: str) -> list[str]:
    r = await gw.rest("GET", "/search", params={"q": "payments deploys December", "namespace": ns})
    assert r.status_code == 200, r.text
    return [h["body"] for h in r.json()["hits"]]


async def test_another_authors_entry_needs_its_hash_and_owners_restore(gw: Gateway, ns: str) -> None:
    fact = "Payments deploys are paused from December 15 to January 5."
    r = await gw.rest("POST", "/memories", key="agent", json={"body": fact, "namespace": ns})
    assert r.status_code == 201
    entry = r.json()
    other = await _other_agent(gw)

    r = await gw.rest(
        "POST", f"/memories/{entry['id']}/supersede", key=other, json={"body": "Deploy any time."}
    )
    assert r.status_code == 409 and r.json()["field"] == "expected_hash", r.text
    err, out = await call(gw, other, "brain_forget", {"id": entry["id"], "reason": "stale"})
    assert err and out["code"] == "conflict" and out["field"] == "expected_hash"
    assert fact in await _served(gw, ns)

    err, out = await call(
        gw,
        other,
        "brain_forget",
        {"id": entry["id"], "reason": "stale", "expected_hash": entry["content_hash"]},
    )
    assert not err and out["status"] == "forgotten"
    assert fact not in await _served(gw, ns)

    r = await gw.rest("POST", f"/memories/{entry['id']}/restore", key="agent", json={"reason": "mine"})
    assert r.status_code == 403
    r = await gw.rest("POST", f"/memories/{entry['id']}/restore", key="owner", json={"reason": "still true"})
    assert r.status_code == 200 and r.json()["status"] == "active", r.text
    assert fact in await _served(gw, ns)
