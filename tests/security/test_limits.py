"""Input abuse through the real gateway: unknown fields, oversized bodies and fields, NUL characters.

Each refusal is a 413 or 422 in the brain's error shape that names the field and the limit, and
nothing is stored or created by a refused request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from brain.gateway.boundary import LimitSettings, input_problem

from .conftest import Gateway

LIMITS = LimitSettings()  # the gateway under test runs with the defaults
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
SHAPE = {"code", "message", "field"}


async def mcp_call(gw: Gateway, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    async with httpx.AsyncClient(timeout=30) as c:
        r = await c.post(f"{gw.url}/mcp", json=body, headers={**MCP_HEADERS, **gw.headers("agent")})
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    return bool(result.get("isError")), json.loads(result["content"][0]["text"])


async def test_a_misspelt_field_creates_no_unconfined_key(gw: Gateway) -> None:
    r = await gw.rest("POST", "/keys", key="owner", json={"name": "typo-key", "namespace": ["repo:alpha"]})
    assert r.status_code == 422, r.text
    err = r.json()
    assert set(err) == SHAPE and err["field"] == "namespace" and "namespaces" in err["message"]
    keys = (await gw.rest("GET", "/keys", key="owner")).json()["keys"]
    assert "typo-key" not in {k["name"] for k in keys}
    r = await gw.rest(
        "POST", "/proposals/p1/reject", key="owner", json={"reason": "no", "status": "approved"}
    )
    assert r.status_code == 422 and r.json()["field"] == "status", r.text


@pytest.mark.parametrize(
    ("method", "path", "payload", "field"),
    [
        ("POST", "/memories", {"body": "a fact", "author": "cole"}, "author"),
        ("POST", "/memories", {"body": "a fact", "tier": "curated"}, "tier"),
        ("POST", "/search", {"query": "x", "namespace": ["repo:beta"]}, "namespace"),
        ("POST", "/memories/m1/forget", {"reason": "x", "force": True}, "force"),
    ],
)
async def test_rest_refuses_unknown_body_fields(
    gw: Gateway, ns: str, method: str, path: str, payload: dict[str, Any], field: str
) -> None:
    r = await gw.rest(method, path, json={**payload, **({"namespace": ns} if path == "/memories" else {})})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and "unknown" in r.json()["message"]


async def test_rest_refuses_unknown_query_parameters_and_mcp_unknown_arguments(gw: Gateway) -> None:
    r = await gw.rest("GET", "/search", params={"q": "x", "namespaces": "repo:beta"})
    assert r.status_code == 422 and r.json()["field"] == "namespaces" and "namespace" in r.json()["message"]
    r = await gw.rest("GET", "/memories", params={"kinds": "note"})
    assert r.status_code == 422 and r.json()["field"] == "kinds"
    err, out = await mcp_call(gw, "brain_search", {"query": "x", "namespace": ["repo:beta"]})
    assert err and out["field"] == "namespace" and "namespaces" in out["message"]


async def test_page_sizes_are_bounded(gw: Gateway) -> None:
    r = await gw.rest("GET", "/memories", params={"limit": 10**9})
    assert r.status_code == 422 and r.json()["field"] == "limit" and "500" in r.json()["message"]
    r = await gw.rest("POST", "/search", json={"query": "x", "limit": 10**6})
    assert r.status_code == 422 and r.json()["field"] == "limit" and "50" in r.json()["message"]
    err, out = await mcp_call(gw, "brain_list", {"limit": 100_000})
    assert err and out["field"] == "limit"


async def test_a_rest_body_over_the_cap_is_413_naming_the_limit(gw: Gateway, ns: str) -> None:
    cap = LIMITS.max_body_bytes
    big = {"body": "x" * (cap + 10), "namespace": ns}
    r = await gw.rest("POST", "/memories", json=big)
    assert r.status_code == 413 and r.json() == {
        "code": "too_large",
        "message": f"request body is over the limit of {cap} bytes",
        "field": "body",
    }

    async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted as it arrives
        yield b'{"namespace": "' + ns.encode() + b'", "body": "'
        for _ in range(cap // 65536 + 2):
            yield b"y" * 65536
        yield b'"}'

    async with httpx.AsyncClient(timeout=60) as c:
        r = await c.post(
            f"{gw.url}/brain/v1/memories",
            content=chunks(),
            headers={**gw.headers("agent"), "content-type": "application/json"},
        )
    assert r.status_code == 413 and str(cap) in r.json()["message"]
    listed = (await gw.rest("GET", "/memories", params={"namespace": ns})).json()["entries"]
    assert [e for e in listed if e["namespace"] == ns] == []  # 'shared' (a digest of another test) aside


async def test_a_model_api_body_over_its_cap_is_413(gw: Gateway) -> None:
    cap = LIMITS.max_model_body_bytes
    body = {"model": "echo", "messages": [{"role": "user", "content": "z" * (cap + 1)}]}
    async with httpx.AsyncClient(timeout=120) as c:
        r = await c.post(f"{gw.url}/v1/chat/completions", json=body, headers=gw.headers("agent"))
    assert r.status_code == 413 and str(cap) in r.json()["message"]
    assert not gw.upstream_bodies(), "an oversized request must not reach the upstream"


@pytest.mark.parametrize(
    ("fields", "field", "limit"),
    [
        ({"attrs": {"blob": "a" * (LIMITS.max_attrs_bytes + 1)}}, "attrs", LIMITS.max_attrs_bytes),
        (
            {"attrs": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}},
            "attrs",
            LIMITS.max_attrs_depth,
        ),
        ({"source_key": "s" * 600}, "source_key", 512),
        ({"episode": "e" * 300}, "episode", 200),
        ({"title": "t" * 300}, "title", 200),
        ({"tags": [f"t{i}" for i in range(30)]}, "tags", 20),
    ],
)
async def test_fields_over_their_caps_are_422_naming_field_and_limit(
    gw: Gateway, ns: str, fields: dict[str, Any], field: str, limit: int
) -> None:
    r = await gw.rest("POST", "/memories", json={"body": "a fact about limits", "namespace": ns, **fields})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and str(limit) in r.json()["message"], r.json()


async def test_a_huge_search_query_is_refused_before_any_work_and_chat_goes_on(gw: Gateway) -> None:
    query = "lorem ipsum " * 80_000  # ~1 MB: under the body cap, over the query cap
    r = await gw.rest("POST", "/search", json={"query": query[: LIMITS.max_body_bytes - 100]})
    assert r.status_code == 422 and r.json()["field"] == "query"
    assert str(LIMITS.max_query_chars) in r.json()["message"]
    err, out = await mcp_call(gw, "brain_search", {"query": "q" * (LIMITS.max_query_chars + 1)})
    assert err and out["field"] == "query"
    r = await gw.rest("GET", "/search", params={"q": "w" * (LIMITS.max_query_chars + 1)})
    assert r.status_code == 422 and r.json()["field"] == "query"
    big, small = await asyncio.gather(
        gw.rest("POST", "/search", json={"query": "x" * 20_000_000}), gw.chat("which port is it?")
    )
    assert big.status_code == 413 and small.status_code == 200
    r = await gw.rest("POST", "/search", json={"query": "q" * LIMITS.max_query_chars})
    assert r.status_code == 200, r.text


NUL_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"title": "a\x00b"}, "title"),
    ({"tags": ["ok", "b\x00d"]}, "tags"),
    ({"source_key": "k\x00"}, "source_key"),
    ({"episode": "ep\x00"}, "episode"),
    ({"domain_keywords": ["x\x00"]}, "domain_keywords"),
    ({"attrs": {"k": "v\x00"}}, "attrs"),
    ({"attrs": {"k\x00": "v"}}, "attrs"),
    ({"attrs": {"deep": [{"x": "\x00"}]}}, "attrs"),
    ({"kind": "note\x00"}, "kind"),
    ({"body": "b\x00ody"}, "body"),
]


@pytest.mark.parametrize(("fields", "field"), NUL_FIELDS)
async def test_a_nul_in_any_field_is_422_not_500(
    gw: Gateway, ns: str, fields: dict[str, Any], field: str
) -> None:
    r = await gw.rest("POST", "/memories", json={"body": "a fact", "namespace": ns, **fields})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and "NUL" in r.json()["message"]
    err, out = await mcp_call(gw, "brain_note", {"body": "a fact", "namespace": ns, **fields})
    assert err and out["field"] == field


async def test_a_writer_cannot_mark_its_entry_purged(gw: Gateway, ns: str) -> None:
    # attrs.purged_by makes a row a purged tombstone to the store: never embedded again, its vector
    # dropped by a model migration. Only a purge writes it.
    fields = {"body": "a fact", "namespace": ns, "attrs": {"purged_by": "cole"}}
    r = await gw.rest("POST", "/memories", json=fields)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "attrs" and "purge" in r.json()["message"]
    err, out = await mcp_call(gw, "brain_note", fields)
    assert err and out["field"] == "attrs"


async def test_a_nul_in_queries_reasons_and_names_is_422(gw: Gateway) -> None:
    checks = [
        await gw.rest("POST", "/search", json={"query": "q\x00"}),
        await gw.rest("GET", "/search", params={"q": "q\x00"}),
        await gw.rest("GET", "/memories", params={"namespace": "ns\x00"}),
        await gw.rest("GET", "/memories/m%00"),
        await gw.rest("POST", "/memories/m1/forget", json={"reason": "r\x00"}),
        await gw.rest("POST", "/keys", key="owner", json={"name": "n\x00"}),
    ]
    assert [r.status_code for r in checks] == [422] * len(checks), [r.text for r in checks]
    for r in checks:
        assert set(r.json()) == SHAPE and "NUL" in r.json()["message"]


async def test_json_nested_past_the_parser_is_422(gw: Gateway) -> None:
    deep = b'{"body": "x", "attrs": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    async with httpx.AsyncClient(timeout=60) as c:
        r = await c.post(
            f"{gw.url}/brain/v1/memories",
            content=deep,
            headers={**gw.headers("agent"), "content-type": "application/json"},
        )
    assert r.status_code == 422 and r.json()["field"] == "body" and set(r.json()) == SHAPE, r.text


def test_input_problem_names_the_path_and_the_limit() -> None:
    lim = LimitSettings(max_attrs_bytes=100, max_list_items=3, max_string_chars=16)
    assert input_problem({"a": {"b": ["ok", "x\x00"]}}, "attrs", lim) == (
        "attrs.a.b[1]: contains a NUL character, which text storage cannot hold"
    )
    assert input_problem("y" * 17, "reason", lim) == "reason: 17 characters is over the limit of 16"
    assert (
        input_problem(["a", "b", "c", "d"], "namespaces", lim) == "namespaces: 4 items is over the limit of 3"
    )
    assert "over the limit of 100" in (input_problem({"k": "v" * 200}, "attrs", lim) or "")
    assert input_problem({"k": [1, 2.5, None, True]}, "attrs", lim) is None


def hostile_notes(n: int) -> list[dict[str, Any]]:
    """`n` write payloads from hypothesis: any Unicode (NUL, controls, lone surrogates), any JSON attrs."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from brain.core.models import KINDS

    text = st.text(st.characters(exclude_categories=()), max_size=40)
    leaf = (
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | text
    )
    attrs = st.dictionaries(
        text,
        st.recursive(
            leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3), max_leaves=12
        ),
        max_size=4,
    )
    note = st.fixed_dictionaries(
        {"body": text},
        optional={
            "title": text,
            "tags": st.lists(text, max_size=4),
            "attrs": attrs,
            "source_key": text,
            "episode": text,
            "domain_keywords": st.lists(text, max_size=3),
            "kind": st.sampled_from(KINDS) | text,
            "importance": st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
        },
    )
    out: list[dict[str, Any]] = []

    @settings(max_examples=n, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(note)
    def collect(payload: dict[str, Any]) -> None:
        out.append(payload)

    collect()
    return out


async def test_no_hostile_note_gets_a_500_over_rest_or_mcp(gw: Gateway, ns: str) -> None:
    """Whatever a writer sends, the answer is stored or refused with the error shape; never a crash."""
    payloads = hostile_notes(300)
    assert len(payloads) >= 200
    crashes: list[str] = []
    async with httpx.AsyncClient(timeout=60) as c:
        for i, p in enumerate(payloads):
            body = json.dumps({**p, "namespace": ns}).encode()  # ASCII escapes carry lone surrogates too
            if i % 2:
                rpc = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "brain_note", "arguments": {**p, "namespace": ns}},
                }
                r = await c.post(
                    f"{gw.url}/mcp",
                    content=json.dumps(rpc).encode(),
                    headers={**MCP_HEADERS, **gw.headers("agent")},
                )
                reply = r.json()
                if r.status_code == 400 and "error" in reply:  # the MCP SDK refused the JSON-RPC itself
                    continue
                result = reply.get("result", {})
                text = (result.get("content") or [{}])[0].get("text", "{}")
                if r.status_code != 200 or (
                    result.get("isError") and json.loads(text).get("code") == "internal"
                ):
                    crashes.append(f"MCP {r.status_code} {r.text[:160]} for {p!r:.200}")
                continue
            r = await c.post(
                f"{gw.url}/brain/v1/memories",
                content=body,
                headers={**gw.headers("agent"), "content-type": "application/json"},
            )
            if r.status_code >= 500 or (r.status_code >= 400 and set(r.json()) != SHAPE):
                crashes.append(f"REST {r.status_code} {r.text[:120]} for {p!r:.200}")
    assert not crashes, f"{len(crashes)} of {len(payloads)} crashed: {crashes[:5]}"
