"""#32 through the real gateway: what an agent or a confined owner sees over REST and MCP.

The rules themselves are the door's (tests/security/test_governance.py); these check the answers a
client gets: a curated kind from an agent is a 202 proposal, bad arguments are `{code, message,
field}` 4xx (never `internal`), revoke matches one column, forgotten entries are gone for agents,
purge tombstones, and a confined owner is confined on every owner route.
"""

from __future__ import annotations

import uuid
from typing import Any

from brain.services.keys import KeyStore
from brain.services.memory import TOMBSTONE
from tests.gateway.test_auth_mcp_rest import call
from tests.kit.gateway import Gateway

SHAPE = {"code", "message", "field"}


def _error(r: Any, status: int, code: str, field: str | None) -> dict[str, Any]:
    body: dict[str, Any] = r.json()
    assert r.status_code == status and set(body) == SHAPE, r.text
    assert (body["code"], body["field"]) == (code, field), r.text
    return body


async def test_an_agents_skill_is_a_202_proposal_not_a_memory(gw: Gateway, ns: str) -> None:
    entry = {"body": "Roll back payments with the blue/green switch, then page the owner.", "kind": "skill"}
    r = await gw.rest("POST", "/memories", json={**entry, "namespace": ns, "title": "Rollback"})
    assert r.status_code == 202, r.text
    out = r.json()
    assert out["status"] == "proposed" and "owner" in out["message"] and "id" not in out
    listed = await gw.rest("GET", "/memories", params={"namespace": ns, "kind": "skill"})
    assert listed.json()["entries"] == []
    shown = await gw.rest("GET", f"/proposals/{out['proposal']}", key="owner")
    assert shown.status_code == 200 and shown.json()["body"] == entry["body"]
    is_error, res = await call(
        gw, "agent", "brain_note", {**entry, "namespace": ns, "body": entry["body"] + " Twice."}
    )
    assert not is_error and res["status"] == "proposed"
    note = (
        await gw.rest("POST", "/memories", json={"body": "rollbacks use blue/green", "namespace": ns})
    ).json()
    r = await gw.rest(
        "POST", f"/memories/{note['id']}/supersede", json={"body": entry["body"], "kind": "skill"}
    )
    assert r.status_code == 202 and r.json()["supersedes"] == note["id"], r.text
    kept = (await gw.rest("GET", f"/memories/{note['id']}")).json()["memory"]
    assert (kept["kind"], kept["status"]) == ("note", "active")


async def test_bad_mcp_and_rest_arguments_name_the_field(gw: Gateway, ns: str) -> None:
    for tool, args, field in (
        ("brain_search", {"query": "deploys", "limit": "abc"}, "limit"),
        ("brain_list", {"limit": "abc"}, "limit"),
        ("brain_list", {"limit": True}, "limit"),
        ("brain_list", {"kind": ["note"]}, "kind"),
        ("brain_list", {"kind": "nots"}, "kind"),
        ("brain_get", {"id": 42}, "id"),
        ("brain_forget", {"id": "x", "reason": ["why"]}, "reason"),
    ):
        is_error, res = await call(gw, "agent", tool, args)
        assert is_error and (res["code"], res["field"]) == ("invalid_input", field), (tool, args, res)
        assert set(res) == SHAPE
    is_error, res = await call(gw, "agent", "brain_list", {"limit": "5", "namespaces": [ns]})
    assert not is_error and len(res["entries"]) <= 5  # digits as a string are still an integer
    _error(await gw.rest("GET", "/memories", params={"kind": "nots"}), 422, "invalid_input", "kind")
    r = await gw.rest("POST", "/search", json={"query": "deploys", "kinds": ["nots"]})
    _error(r, 422, "invalid_input", "kinds")


async def test_reserved_names_and_revoking_by_one_column(gw: Gateway) -> None:
    r = await gw.rest("POST", "/keys", key="owner", json={"name": "forever", "expires_in_days": 1e12})
    _error(r, 422, "invalid_input", "expires_in_days")  # was an OverflowError: 500 internal
    for name in ("digest", "source:runbooks", "Distill"):
        r = await gw.rest("POST", "/keys", key="owner", json={"name": name})
        _error(r, 422, "invalid_input", "name")
    first = (await gw.rest("POST", "/keys", key="owner", json={"name": f"k-{uuid.uuid4().hex[:8]}"})).json()
    twin = (await gw.rest("POST", "/keys", key="owner", json={"name": first["id"]})).json()
    _error(await gw.rest("DELETE", f"/keys/{first['id']}?by=both", key="owner"), 422, "invalid_input", "by")
    r = await gw.rest("DELETE", f"/keys/{first['id']}", key="owner")  # by name: the twin only
    assert r.status_code == 200 and r.json()["id"] == twin["id"]
    assert (await gw.rest("GET", "/memories", key=first["key"])).status_code == 200
    assert (await gw.rest("GET", "/memories", key=twin["key"])).status_code == 401
    r = await gw.rest("DELETE", f"/keys/{first['id']}?by=id", key="owner")
    assert r.status_code == 200 and r.json()["id"] == first["id"]
    _error(await gw.rest("DELETE", f"/keys/{first['name']}?by=id", key="owner"), 404, "not_found", "id")


async def test_a_confined_owner_is_confined_on_every_owner_route(gw: Gateway, ns: str) -> None:
    mine, other = f"{ns}-mine", f"{ns}-other"
    key, scoped = await KeyStore(gw.store).create(f"own-{uuid.uuid4().hex[:8]}", "owner", namespaces=[mine])
    gw.keys["scoped-owner"] = key
    _error(
        await gw.rest("POST", "/keys", key="scoped-owner", json={"name": "wide"}),
        403,
        "forbidden",
        "namespaces",
    )
    r = await gw.rest("POST", "/keys", key="scoped-owner", json={"name": f"a-{ns[5:]}", "namespaces": [mine]})
    assert r.status_code == 201, r.text
    names = {k["name"] for k in (await gw.rest("GET", "/keys", key="scoped-owner")).json()["keys"]}
    assert names == {scoped.name, r.json()["name"]}  # not the session's unconfined keys
    _error(await gw.rest("DELETE", "/keys/agent", key="scoped-owner"), 404, "not_found", "name")
    theirs = (
        await gw.rest("POST", "/memories", json={"body": "other team's fact", "namespace": other})
    ).json()
    for path, body in (("retire", {"reason": "no"}), ("promote", {"standing": True})):
        r = await gw.rest("POST", f"/memories/{theirs['id']}/{path}", key="scoped-owner", json=body)
        assert r.status_code == 403 and r.json()["code"] == "forbidden", (path, r.text)
    after = (await gw.rest("GET", f"/memories/{theirs['id']}", key="owner")).json()["memory"]
    assert (after["status"], after["tier"], after["standing"]) == ("active", "episodic", False)
    proposal = (
        await gw.rest(
            "POST", "/memories", json={"body": "Escalate via pager.", "kind": "skill", "namespace": other}
        )
    ).json()["proposal"]
    listed = (await gw.rest("GET", "/proposals", key="scoped-owner")).json()["proposals"]
    assert proposal not in [p["id"] for p in listed]
    _error(await gw.rest("GET", f"/proposals/{proposal}", key="scoped-owner"), 404, "not_found", "id")


async def test_forget_hides_the_entry_from_agents_and_purge_tombstones_it(gw: Gateway, ns: str) -> None:
    made = (
        await gw.rest("POST", "/memories", json={"body": "pasted: the customer list", "namespace": ns})
    ).json()
    r = await gw.rest("POST", f"/memories/{made['id']}/forget", json={"reason": "personal data"})
    assert r.status_code == 200, r.text
    _error(await gw.rest("GET", f"/memories/{made['id']}"), 404, "not_found", "id")
    _error(await gw.rest("GET", f"/memories/{made['id']}", key="reader"), 404, "not_found", "id")
    is_error, res = await call(gw, "agent", "brain_get", {"id": made["id"]})
    assert is_error and res["code"] == "not_found"
    _error(
        await gw.rest("POST", f"/memories/{made['id']}/purge", json={"reason": "x"}), 403, "forbidden", None
    )
    r = await gw.rest("POST", f"/memories/{made['id']}/purge", key="owner", json={"reason": "personal data"})
    assert r.status_code == 200 and r.json()["purged"] == 1, r.text
    detail = (await gw.rest("GET", f"/memories/{made['id']}", key="owner")).json()
    assert [(m["body"], m["content_hash"]) for m in detail["history"]] == [(TOMBSTONE, made["content_hash"])]


async def test_the_review_page_names_where_a_supersede_would_write(gw: Gateway, ns: str) -> None:
    from brain.store import proposal_rows

    shared = (
        await gw.rest("POST", "/memories", key="owner", json={"body": f"release day is Tuesday {ns}"})
    ).json()
    pid = await proposal_rows.insert(
        gw.store, kind="fact", namespace=ns, title="Release day", body=f"release day is Thursday {ns}",
        evidence=[], authors=["a"], score=0.5, supersedes=shared["id"],
    )  # fmt: skip
    r = await gw.rest("GET", f"/review/proposals/{pid}", key="owner")
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["namespace"], out["target_namespace"], out["current"]["namespace"]) == (
        ns,
        "shared",
        "shared",
    )
    r = await gw.rest("POST", f"/proposals/{pid}/approve", key="owner")
    _error(r, 409, "conflict", "supersedes")
