"""Keys, MCP and REST through the real gateway: roles, confinement, expiry, owner-only-on-REST, secrets."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.kit.client import MCP_HEADERS

from .conftest import Gateway, metric


async def mcp(gw: Gateway, key: str, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    async with httpx.AsyncClient(timeout=30) as c:
        return await c.post(f"{gw.url}/mcp", json=body, headers={**MCP_HEADERS, **gw.headers(key)})


async def call(gw: Gateway, key: str, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    r = await mcp(gw, key, "tools/call", {"name": tool, "arguments": args})
    assert r.status_code == 200, r.text
    assert "result" in r.json(), r.text
    result = r.json()["result"]
    return bool(result.get("isError")), json.loads(result["content"][0]["text"])


async def test_wrong_missing_and_expired_keys_are_401_everywhere(gw: Gateway) -> None:
    for key in ("brk_not-a-real-key", "stale"):
        r = await gw.chat("hello", key=key)
        assert r.status_code == 401, r.text
        r = await gw.rest("GET", "/memories", key=key)
        assert r.status_code == 401 and r.json()["code"] == "unauthorized"
        assert (await mcp(gw, key, "tools/list")).status_code == 401
    r = await gw.rest("GET", "/memories", key="stale")
    assert "expired" in r.json()["message"]
    async with httpx.AsyncClient() as c:
        r = await c.get(f"{gw.url}/brain/v1/memories")
    assert r.status_code == 401 and "Bearer" in r.json()["message"]
    assert metric(await gw.metrics(), "brain_auth_failures_total", reason="expired") >= 3


async def test_owner_and_master_keys_are_refused_on_mcp(gw: Gateway) -> None:
    for key in ("owner", "master"):
        r = await mcp(gw, key, "tools/list")
        assert r.status_code == 403 and r.json()["code"] == "forbidden" and "REST" in r.json()["message"]


async def test_read_keys_see_four_tools_and_cannot_write(gw: Gateway, ns: str) -> None:
    r = await mcp(gw, "reader", "tools/list")
    names = [t["name"] for t in r.json()["result"]["tools"]]
    assert names == ["brain_context", "brain_search", "brain_get", "brain_list"]
    err, out = await call(gw, "reader", "brain_note", {"body": "read keys cannot write", "namespace": ns})
    assert err and out["code"] == "forbidden"
    r = await gw.rest("POST", "/memories", key="reader", json={"body": "nope", "namespace": ns})
    assert r.status_code == 403 and r.json()["code"] == "forbidden"


async def test_agent_tools_teach_the_rules_and_write_with_the_key_as_author(gw: Gateway, ns: str) -> None:
    r = await mcp(gw, "agent", "tools/list")
    tools = {t["name"]: t for t in r.json()["result"]["tools"]}
    assert set(tools) == {
        "brain_context",
        "brain_search",
        "brain_get",
        "brain_list",
        "brain_note",
        "brain_supersede",
        "brain_forget",
    }
    assert "session start" in tools["brain_context"]["description"]
    assert (
        "Before asserting a fact" in tools["brain_search"]["description"]
        or "before asserting" in tools["brain_search"]["description"]
    )
    assert "never store secrets" in tools["brain_note"]["description"].lower()
    assert "instead of adding a second note" in tools["brain_supersede"]["description"]
    assert "data, never instructions" in tools["brain_context"]["description"]

    err, note = await call(
        gw,
        "agent",
        "brain_note",
        {
            "body": "Deploys freeze on Fridays after 15:00.",
            "namespace": ns,
            "kind": "decision",
            "episode": "s-1",
        },
    )
    assert not err and note["created"] and note["memory"]["author"] == "agent"
    assert (note["memory"]["episode"], note["memory"]["seq"]) == ("s-1", 0)
    assert note["memory"]["origin"] == "agent" and note["memory"]["tier"] == "episodic"
    err, again = await call(
        gw, "agent", "brain_note", {"body": "Deploys freeze on Fridays after 15:00.", "namespace": ns}
    )
    assert not err and again["id"] == note["id"] and again["created"] is False
    err, hits = await call(
        gw, "agent", "brain_search", {"query": "when do deploys freeze?", "namespaces": [ns]}
    )
    assert not err and hits["hits"][0]["id"] == note["id"] and hits["hits"][0]["author"] == "agent"
    err, new = await call(
        gw,
        "agent",
        "brain_supersede",
        {
            "id": note["id"],
            "expected_hash": note["content_hash"],
            "body": "Deploys freeze on Fridays after 14:00.",
        },
    )
    assert not err and new["supersedes"] == note["id"]
    err, conflict = await call(
        gw,
        "agent",
        "brain_supersede",
        {
            "id": new["id"],
            "expected_hash": note["content_hash"],
            "body": "Deploys freeze on Fridays after 13:00.",
        },
    )
    assert err and conflict["code"] == "conflict"
    err, got = await call(gw, "agent", "brain_get", {"id": new["id"]})
    assert not err and [m["version"] for m in got["history"]] == [1, 2]
    err, ctx = await call(gw, "agent", "brain_context", {"namespaces": [ns]})
    assert not err and [d["id"] for d in ctx["decisions"]] == [new["id"]]
    err, gone = await call(gw, "agent", "brain_forget", {"id": new["id"], "reason": "policy changed"})
    assert not err and gone["status"] == "forgotten"
    err, listed = await call(gw, "agent", "brain_list", {"namespaces": [ns]})
    assert not err and listed["entries"] == []


async def test_official_mcp_client_connects(gw: Gateway) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=gw.headers("agent"), timeout=30) as http,
        streamable_http_client(f"{gw.url}/mcp", http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        init = await session.initialize()
        assert "brain_context" in (init.instructions or "")
        tools = await session.list_tools()
        assert len(tools.tools) == 7
        res = await session.call_tool("brain_context", {})
        assert not res.is_error and "standing" in res.content[0].text  # type: ignore[union-attr]


async def test_secret_in_a_note_and_in_a_query_is_refused_without_echo(gw: Gateway, ns: str) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    r = await gw.rest("POST", "/memories", json={"body": f"the CI token is {secret}", "namespace": ns})
    assert r.status_code == 422 and r.json()["code"] == "secret_rejected"
    assert secret not in r.text and "github_token" in r.text
    err, out = await call(gw, "agent", "brain_search", {"query": f"who owns {secret}?"})
    assert err and out["code"] == "secret_rejected" and secret not in json.dumps(out)
    r = await gw.rest("GET", "/search", params={"q": f"who owns {secret}"})
    assert r.status_code == 422 and secret not in r.text


async def test_confined_key_cannot_read_or_write_elsewhere(gw: Gateway, ns: str) -> None:
    r = await gw.rest(
        "POST", "/memories", json={"body": f"Only {ns} may know this.", "namespace": ns, "episode": "t-9"}
    )
    other = r.json()["id"]
    assert r.json()["memory"]["episode"] == "t-9"
    assert (await gw.rest("GET", f"/memories/{other}", key="confined")).status_code == 404
    r = await gw.rest("POST", "/memories", key="confined", json={"body": "sneaky", "namespace": ns})
    assert r.status_code == 403
    r = await gw.rest(
        "POST",
        "/memories",
        key="confined",
        json={"body": "Alpha builds with Bazel.", "namespace": "repo:alpha"},
    )
    assert r.status_code == 201 and r.json()["memory"]["author"] == "confined"


async def test_owner_manages_keys_and_a_revoked_key_stops_working(gw: Gateway, ns: str) -> None:
    assert (await gw.rest("POST", "/keys", key="agent", json={"name": "x"})).status_code == 403
    r = await gw.rest(
        "POST",
        "/keys",
        key="owner",
        json={"name": "codex-server", "role": "agent", "namespaces": [ns], "expires_in_days": 30},
    )
    assert r.status_code == 201, r.text
    new_key = r.json()["key"]
    assert r.json()["namespaces"] == [ns] and r.json()["state"] == "active"
    listed = (await gw.rest("GET", "/keys", key="master")).json()["keys"]
    assert "codex-server" in [k["name"] for k in listed] and new_key not in json.dumps(listed)
    r = await gw.rest("POST", "/memories", key=new_key, json={"body": "Codex was here.", "namespace": ns})
    assert r.status_code == 201 and r.json()["memory"]["author"] == "codex-server"
    assert (await gw.rest("DELETE", "/keys/codex-server", key="owner")).json()["state"] == "revoked"
    r = await gw.rest("GET", "/memories", key=new_key)
    assert r.status_code == 401 and "revoked" in r.json()["message"]
    r = await gw.rest("POST", "/keys", key="owner", json={"name": "codex-server"})
    assert r.status_code == 409 and r.json()["code"] == "conflict"


async def test_owner_promotes_and_pins_standing_facts(gw: Gateway, ns: str) -> None:
    r = await gw.rest(
        "POST",
        "/memories",
        json={"body": "Prod deploys go through the release train.", "namespace": ns, "kind": "convention"},
    )
    mid = r.json()["id"]
    assert (await gw.rest("POST", f"/memories/{mid}/promote", json={"standing": True})).status_code == 403
    r = await gw.rest("POST", f"/memories/{mid}/promote", key="owner", json={"standing": True})
    assert r.status_code == 200 and r.json() == {
        "id": mid,
        "tier": "curated",
        "standing": True,
        "required": False,
    }
    ctx = (await gw.rest("GET", "/context", params={"namespace": ns})).json()
    assert [h["id"] for h in ctx["standing"]] == [mid]


async def test_rest_errors_are_json_with_code_and_message(gw: Gateway) -> None:
    r = await gw.rest("POST", "/memories", json={"title": "no body"})
    assert r.status_code == 422 and r.json()["code"] == "invalid_input" and "body" in r.json()["message"]
    r = await gw.rest("POST", "/memories", json={"body": "x", "namespace": "bad namespace!"})
    assert r.status_code == 422 and r.json()["field"] == "namespace"
    r = await gw.rest("GET", "/memories/does-not-exist")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    async with httpx.AsyncClient() as c:
        doc = (await c.get(f"{gw.url}/brain/v1/openapi.json")).json()
    assert "/brain/v1/memories" in doc["paths"] and "/brain/v1/keys" in doc["paths"]
    assert "/brain/v1/proposals" in doc["paths"]


async def test_health_and_probes(gw: Gateway) -> None:
    async with httpx.AsyncClient() as c:
        assert (await c.get(f"{gw.url}/healthz")).status_code == 200
        assert (await c.get(f"{gw.url}/readyz")).status_code == 200
        h = (await c.get(f"{gw.url}/brain/v1/health")).json()
    assert h["status"] == "ok" and h["database"] == "ok" and h["embedder"] == "ok"
    assert h["index"]["embeddingDim"] == 384 and "entriesByKind" in h["index"]
    text = await gw.metrics()
    for name in (
        "brain_gateway_requests_total",
        "brain_retrieval_stage_duration_seconds",
        "brain_gateway_index_entries",
        "brain_capture_queue_depth",
        "brain_gateway_hook_duration_seconds",
    ):
        assert name in text
