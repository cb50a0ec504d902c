"""The gateway process: LiteLLM's proxy app with the brain around it.

One ASGI app serves everything on one port:
- `/healthz`, `/readyz`, `/metrics`, `/brain/v1/health` — probes, Prometheus, index health (no key;
  `/metrics` without identity labels and the health without namespace names unless an owner key asks);
- `/brain/v1/...` — the REST API (OpenAPI at `/brain/v1/openapi.json`), `/mcp` (and `/mcp/`) — MCP;
- `/review` and `/review/assets/*` — the owner's review page (`review.py`; static, data from the API);
- the model APIs of LiteLLM's proxy (`boundary.MODEL_ROUTES`: chat, messages, responses, models),
  whose config (model list, routers, our callback and custom auth) comes from `config_path`;
  every other LiteLLM route (admin, keys, UI, login, its MCP) answers 404 (`boundary.LiteLLMGate`).

Around it, outermost first: `ErrorShield` (JSON 500, never a reset), `BodyLimit` (413 past the cap),
CORS only for configured origins, then the SSE heartbeat. LiteLLM's lifespan (config loading) runs inside ours, after
the brain runtime has started, so the hooks find it on the first request.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from brain.core.errors import BrainError
from brain.embedder.model import Embedder
from brain.gateway import backlog, proposals, rest, review
from brain.gateway.auth import authenticate, key_from_headers
from brain.gateway.boundary import BodyLimit, ErrorShield, LiteLLMGate, NoStandaloneStream
from brain.gateway.config import write_effective_config
from brain.gateway.heartbeat import SSEHeartbeat
from brain.gateway.mcp_server import MCPEndpoint
from brain.gateway.metrics import public_exposition
from brain.gateway.readiness import public_health
from brain.gateway.runtime import Runtime, set_runtime
from brain.gateway.settings import GatewaySettings, load_settings, prepare_litellm_env
from brain.gateway.tools import Tools
from brain.store.outage import UNAVAILABLE


def create_app(
    config_path: str | Path,
    *,
    settings: GatewaySettings | None = None,
    embedder: Embedder | None = None,
    heartbeat: bool = True,
) -> ASGIApp:
    config, effective_path = write_effective_config(config_path)
    prepare_litellm_env(effective_path)
    from litellm.proxy.proxy_server import app as litellm_app

    settings = settings or load_settings(config)
    runtime = Runtime(settings, embedder=embedder)
    set_runtime(runtime)  # for LiteLLM's two entry points only: the hooks and the key check
    tools = Tools(runtime)
    mcp = MCPEndpoint(tools)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        await runtime.start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                state = await stack.enter_async_context(litellm_app.router.lifespan_context(litellm_app))
                await stack.enter_async_context(mcp.manager.run())
                await stack.enter_async_context(backlog.watching(lambda: runtime.store))  # proposals waiting
                yield dict(state or {})
        finally:
            await runtime.stop()

    app = FastAPI(
        title="brain gateway",
        version="1",
        description="The team brain: memory tools over REST (this document) and MCP (`/mcp`); the OpenAI and "
        "Anthropic APIs (`/v1/chat/completions`, `/v1/messages`) are served by LiteLLM on the same port.",
        openapi_url=rest.PREFIX + "/openapi.json",
        docs_url=rest.PREFIX + "/docs",
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,  # no OAuth here; the default would serve a page at /docs/...
        lifespan=lifespan,
    )
    app.state.tools = tools  # what a REST route gets (brain.gateway.tools.ToolsDep)
    app.add_exception_handler(BrainError, rest.brain_error_handler)
    app.add_exception_handler(RequestValidationError, rest.validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, rest.http_error_handler)
    app.add_exception_handler(Exception, rest.internal_error_handler)
    for exc_type in UNAVAILABLE:
        app.add_exception_handler(exc_type, rest.database_down_handler)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        ok = runtime.ready
        return JSONResponse({"status": "ready" if ok else "starting"}, status_code=200 if ok else 503)

    @app.get("/metrics", include_in_schema=False)
    async def prom(request: Request) -> Response:
        """Public: no key names, namespaces or upstream URLs. With an owner key: every label."""
        key = key_from_headers(request.headers)
        if key:
            rest.require_owner(await authenticate(key, "rest"))
            return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
        return Response(public_exposition(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @app.get(rest.PREFIX + "/health", tags=["health"], summary="database, embedder and index numbers")
    async def brain_health(request: Request) -> JSONResponse:
        """Public: totals only. With an owner key (the operator sends the master key): the counts
        per memory namespace too, whose names say which teams exist."""
        doc = await runtime.health()
        key = key_from_headers(request.headers)
        if key:
            with contextlib.suppress(BrainError):  # a bad or unchecked key still gets the public view
                if (await authenticate(key, "rest")).role == "owner":
                    return JSONResponse(doc)
        return JSONResponse(public_health(doc))

    app.include_router(rest.router)
    app.include_router(rest.owner_router)
    app.include_router(proposals.router)
    app.include_router(proposals.digest_router)
    app.include_router(review.api)
    app.include_router(review.pages)  # /review: the owner's page (review.py); static, its data is owner-only
    mcp_app = NoStandaloneStream(mcp)
    app.add_route("/mcp", mcp_app, methods=["GET", "POST", "DELETE"], include_in_schema=False)  # type: ignore[arg-type]
    app.add_route("/mcp/", mcp_app, methods=["GET", "POST", "DELETE"], include_in_schema=False)  # type: ignore[arg-type]
    app.mount("/", LiteLLMGate(litellm_app))
    return edge(SSEHeartbeat(app, interval=settings.heartbeat_s) if heartbeat else app, settings)


def edge(app: ASGIApp, settings: GatewaySettings) -> ASGIApp:
    """The layers every request passes first: the error shield, the body cap, CORS (only if configured)."""
    limits = settings.limits
    inner: ASGIApp = app
    if limits.cors_origins:
        inner = CORSMiddleware(
            app,
            allow_origins=limits.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=[
                "authorization",
                "x-api-key",
                "content-type",
                "anthropic-version",
                "x-brain-memory",
                "x-brain-namespaces",
                "x-brain-episode",
                "mcp-protocol-version",
            ],
        )
    return ErrorShield(BodyLimit(inner, limits))
