"""The admin surface, /metrics, CORS and the error shape, attacked through the real gateway.

A brain key (read, agent, owner, master) reaches only the model APIs of LiteLLM; every other route
LiteLLM 1.108 serves answers 404 in the brain's error shape. `/metrics` without a key names no key,
namespace or upstream. CORS headers appear for no origin unless configured.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from brain.gateway.boundary import MODEL_ROUTES, ErrorShield
from brain.gateway.metrics import public_exposition
from tests.kit.client import MCP_HEADERS

from .conftest import Gateway

SHAPE = {"code", "message", "field"}


def litellm_paths() -> list[str]:
    """Every route path LiteLLM's proxy app declares (path parameters filled with a word)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.proxy.proxy_server import app

    found: set[str] = set()

    def walk(routes: Any) -> None:
        for r in routes:
            if hasattr(r, "original_router"):  # FastAPI's lazily included routers
                walk(r.original_router.routes)
            elif hasattr(r, "routes") and not hasattr(r, "path_format"):
                walk(r.routes)
            else:
                found.add(str(getattr(r, "path", "")))

    walk(app.routes)
    return sorted({re.sub(r"\{[^}]+\}", "x", p) for p in found if p.startswith("/")})


@pytest.fixture(scope="module")
def routes() -> list[str]:
    paths = litellm_paths()
    assert len(paths) > 300, "LiteLLM's route list could not be read"  # 1.108 declares over 500
    return paths


async def test_every_litellm_route_but_the_model_apis_is_closed_to_every_key(
    gw: Gateway, routes: list[str]
) -> None:
    allowed = {p for _, p in MODEL_ROUTES}
    ours = {"/", "/metrics", "/mcp", "/mcp/"}
    assert {"/key/generate", "/ui", "/login", "/sso/key/generate", "/config/update", "/spend/logs"} <= set(
        routes
    )
    open_routes: list[str] = []
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=8)) as c:
        sem = asyncio.Semaphore(8)

        async def probe(path: str, method: str, key: str) -> None:
            async with sem:
                try:
                    r = await c.request(method, gw.url + path, headers=gw.headers(key), json={})
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    # A pooled keep-alive connection the server closed just as it was reused (once
                    # in ~2,000 probes, at load 5): the route's answer is what this test reads, so
                    # ask once more on a fresh connection; a route that drops it again still fails.
                    r = await c.request(method, gw.url + path, headers=gw.headers(key), json={})
            if r.status_code not in (404, 405) or set(r.json()) != SHAPE:
                open_routes.append(f"{method} {path} ({key}): {r.status_code}")

        await asyncio.gather(
            *(
                probe(path, method, key)
                for path in routes
                if path not in allowed | ours and not path.startswith("/brain/")
                for method in ("GET", "POST")
                for key in ("reader", "agent")
            )
        )
        # the most dangerous ones with the strongest keys too
        for path in (
            "/key/generate",
            "/key/list",
            "/user/new",
            "/config/update",
            "/model/new",
            "/ui/",
            "/login",
        ):
            for key in ("owner", "master"):
                await probe(path, "POST" if "/new" in path or "generate" in path else "GET", key)
    assert not open_routes, f"{len(open_routes)} LiteLLM routes answered: {open_routes[:20]}"


async def test_the_model_apis_still_work(gw: Gateway) -> None:
    r = await gw.chat("hello there")
    assert r.status_code == 200, r.text
    r = await gw.messages("hello there")
    assert r.status_code == 200, r.text
    async with httpx.AsyncClient(timeout=30) as c:
        models = await c.get(f"{gw.url}/v1/models", headers=gw.headers("agent"))
        assert models.status_code == 200 and any(m["id"] == "echo" for m in models.json()["data"])
        wrong = await c.delete(f"{gw.url}/v1/chat/completions", headers=gw.headers("agent"))
        assert wrong.status_code == 405 and wrong.json()["code"] == "method_not_allowed"


async def test_ui_login_pages_are_not_served_without_a_key(gw: Gateway) -> None:
    async with httpx.AsyncClient(timeout=30, follow_redirects=True) as c:
        for path in ("/ui/", "/ui/login", "/login", "/fallback/login", "/sso/key/generate", "/swagger/", "/"):
            r = await c.get(gw.url + path)
            assert r.status_code == 404, (path, r.status_code, r.text[:200])
            assert "html" not in r.headers.get("content-type", ""), path


async def test_mcp_with_a_trailing_slash_is_the_brain_and_refuses_owner_keys(gw: Gateway) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    async with httpx.AsyncClient(timeout=30) as c:
        for key in ("owner", "master"):
            r = await c.post(f"{gw.url}/mcp/", json=init, headers={**MCP_HEADERS, **gw.headers(key)})
            assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
        r = await c.post(f"{gw.url}/mcp/", json=init, headers={**MCP_HEADERS, **gw.headers("agent")})
        assert r.status_code == 200 and r.json()["result"]["serverInfo"]["name"] == "brain", r.text
        for path in ("/mcp/proxy", "/toolset/x/mcp", "/x/mcp", "/mcp-rest/tools/list"):
            r = await c.post(gw.url + path, json=init, headers={**MCP_HEADERS, **gw.headers("agent")})
            assert r.status_code == 404, (path, r.status_code)


async def test_public_metrics_name_no_key_namespace_or_upstream(gw: Gateway, ns: str) -> None:
    name = f"probe-{uuid.uuid4().hex[:8]}"
    r = await gw.rest("POST", "/keys", key="owner", json={"name": name, "role": "agent"})
    assert r.status_code == 201, r.text
    key = r.json()["key"]
    r = await gw.rest(
        "POST", "/memories", key=key, json={"body": "the probe metric lives here", "namespace": ns}
    )
    assert r.status_code == 201, r.text
    assert (await gw.chat("what does the probe say?", key=key)).status_code == 200
    async with httpx.AsyncClient(timeout=30) as c:
        for _ in range(100):  # LiteLLM counts in its success callback, after the response
            full = (await c.get(f"{gw.url}/metrics", headers=gw.headers("owner"))).text
            if name in full:
                break
            await asyncio.sleep(0.2)
        assert name in full, "the owner view should carry LiteLLM's per-key labels"
        public = (await c.get(f"{gw.url}/metrics")).text
        refused = await c.get(f"{gw.url}/metrics", headers=gw.headers("agent"))
    assert refused.status_code == 403 and set(refused.json()) == SHAPE
    for needle in (name, ns, "127.0.0.1", "http://", key[-12:]):
        assert needle not in public, needle
    for label in ("hashed_api_key", "api_key_alias", "memory_namespace", "api_base", 'user="'):
        assert label not in public, label
    for metric in ("brain_gateway_requests_total", "brain_gateway_index_entries", "litellm_"):
        assert metric in public, metric


async def test_the_health_names_no_namespace_without_an_owner_key(gw: Gateway, ns: str) -> None:
    """Namespaces name teams and projects; the operator sends the master key to read them."""
    r = await gw.rest("POST", "/memories", json={"body": "the health probe counts this one", "namespace": ns})
    assert r.status_code == 201, r.text
    async with httpx.AsyncClient(timeout=30) as c:
        public = await c.get(f"{gw.url}/brain/v1/health")
        agent = await c.get(f"{gw.url}/brain/v1/health", headers=gw.headers("agent"))
        owner = await c.get(f"{gw.url}/brain/v1/health", headers=gw.headers("owner"))
        master = await c.get(f"{gw.url}/brain/v1/health", headers=gw.headers("master"))
    for view in (public, agent):
        assert view.status_code == 200 and ns not in view.text, view.text
        assert view.json()["index"]["entriesByKind"]["note"] >= 1  # the totals stay public
    for view in (owner, master):
        assert view.json()["index"]["entriesByNamespace"][ns] == 1, view.text


async def test_cors_is_off_by_default(gw: Gateway) -> None:
    evil = {"origin": "https://evil.example", "access-control-request-method": "POST"}
    async with httpx.AsyncClient(timeout=30) as c:
        for path in ("/v1/chat/completions", "/v1/messages", "/brain/v1/search", "/mcp"):
            r = await c.options(
                gw.url + path, headers={**evil, "access-control-request-headers": "authorization"}
            )
            assert not [h for h in r.headers if h.startswith("access-control-")], (path, dict(r.headers))
        r = await c.post(
            f"{gw.url}/v1/chat/completions",
            json={"model": "echo", "messages": [{"role": "user", "content": "hi"}]},
            headers={**gw.headers("agent"), "origin": "https://evil.example"},
        )
        assert r.status_code == 200
        assert not [h for h in r.headers if h.startswith("access-control-")], dict(r.headers)


async def test_every_brain_error_has_code_message_and_field(gw: Gateway) -> None:
    async with httpx.AsyncClient(timeout=30) as c:
        cases = [
            await c.get(f"{gw.url}/brain/v1/memories"),  # 401
            await c.post(f"{gw.url}/brain/v1/keys", json={"name": "x"}, headers=gw.headers("agent")),  # 403
            await c.get(f"{gw.url}/brain/v1/nope", headers=gw.headers("agent")),  # 404
            await c.delete(f"{gw.url}/v1/chat/completions", headers=gw.headers("agent")),  # 405
            await c.post(f"{gw.url}/brain/v1/memories", content=b"{not json", headers=gw.headers("agent")),
            await c.post(f"{gw.url}/brain/v1/search", json={}, headers=gw.headers("agent")),  # 422
        ]
    assert [r.status_code for r in cases] == [401, 403, 404, 405, 422, 422]
    for r in cases:
        assert r.headers["content-type"].startswith("application/json")
        assert set(r.json()) == SHAPE, r.text
        assert "Traceback" not in r.text and "Error(" not in r.text


async def _failing_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["path"] == "/midway":
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
    raise RuntimeError("secret internals: password=hunter2 at /srv/app.py line 12")


async def test_an_escaped_exception_is_a_json_500_or_a_clean_end_never_a_reset() -> None:
    transport = httpx.ASGITransport(app=ErrorShield(_failing_app), raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
        r = await c.get("/anything")
        assert r.status_code == 500 and r.json()["code"] == "internal" and set(r.json()) == SHAPE
        assert "hunter2" not in r.text and "RuntimeError" not in r.text
        r = await c.get("/midway")  # the stream already started: it ends, the client keeps what came
        assert r.status_code == 200 and r.text == "partial"


def test_public_exposition_merges_identity_labels_away() -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge

    reg = CollectorRegistry()
    c = Counter(
        "litellm_requests", "r", ["hashed_api_key", "api_key_alias", "api_base", "model"], registry=reg
    )
    c.labels("abc", "alice", "http://10.0.0.5:8000/v1", "echo").inc(2)
    c.labels("def", "bob", "http://10.0.0.5:8000/v1", "echo").inc(3)
    budget = Gauge("litellm_remaining_api_key_budget", "b", ["hashed_api_key"], registry=reg)
    budget.labels("abc").set(10)
    text = public_exposition(reg).decode()
    assert 'litellm_requests_total{model="echo"} 5.0' in text
    for needle in ("alice", "bob", "abc", "10.0.0.5", "remaining_api_key_budget{"):
        assert needle not in text


async def test_model_api_errors_keep_the_providers_words_and_lose_the_internals(gw: Gateway) -> None:
    gw.script({"status": 429, "times": 5})  # LiteLLM retries: every attempt is refused
    r = await gw.chat("hello")
    assert r.status_code == 429
    assert r.json()["error"]["message"] == "scripted failure 429", r.text  # no exception chain, no trailer
    async with httpx.AsyncClient(timeout=30) as c:
        r = await c.post(
            f"{gw.url}/v1/chat/completions",
            json={"model": "echo", "messages": "not a list"},
            headers=gw.headers("agent"),
        )
    assert r.status_code == 400 and set(r.json()["error"]) >= {"message", "type"}
    for internal in ("has no attribute", "litellm.", "Exception", "Retried"):
        assert internal not in r.text, r.text


def test_error_messages_lose_urls_addresses_and_python() -> None:
    from brain.gateway.boundary import scrub_error_message

    assert scrub_error_message("upstream http://10.0.0.3:8000/v1 refused; host 10.0.0.3:8000") == (
        "upstream <url> refused; host <address>"
    )
    assert scrub_error_message(
        "litellm.BadRequestError: AnthropicException - prompt is too long: 210000 tokens > 200000 maximum"
    ) == ("prompt is too long: 210000 tokens > 200000 maximum")
    assert scrub_error_message("KeyError: 'choices' at line 12", "api_error") == (
        "the request could not be processed (api_error)"
    )


async def test_configured_cors_origins_are_the_only_ones_answered() -> None:
    from brain.gateway.app import edge
    from brain.gateway.boundary import LimitSettings
    from brain.gateway.settings import GatewaySettings

    async def ok(scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"ok"})

    settings = GatewaySettings(limits=LimitSettings(cors_origins=["https://console.example"]))
    transport = httpx.ASGITransport(app=edge(ok, settings))
    pre = {"access-control-request-method": "POST", "access-control-request-headers": "authorization"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
        good = await c.options("/brain/v1/search", headers={"origin": "https://console.example", **pre})
        evil = await c.options("/brain/v1/search", headers={"origin": "https://evil.example", **pre})
        plain = await c.get("/brain/v1/health", headers={"origin": "https://evil.example"})
    assert good.headers.get("access-control-allow-origin") == "https://console.example"
    assert "access-control-allow-origin" not in evil.headers
    assert "access-control-allow-origin" not in plain.headers
    transport = httpx.ASGITransport(app=edge(ok, GatewaySettings()))  # the default: no CORS at all
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as c:
        r = await c.options("/brain/v1/search", headers={"origin": "https://console.example", **pre})
    assert not [h for h in r.headers if h.startswith("access-control-")]


async def test_mcp_opens_no_standalone_stream(gw: Gateway) -> None:
    """A stateless endpoint has nothing to push: GET is 405 (as the MCP spec allows), not a held connection."""
    async with httpx.AsyncClient(timeout=10) as c:
        for path in ("/mcp", "/mcp/"):
            r = await c.get(gw.url + path, headers={"accept": "text/event-stream", **gw.headers("agent")})
            assert r.status_code == 405 and r.json()["code"] == "method_not_allowed"
            assert "POST" in r.headers["allow"]
