"""The gateway process: LiteLLM's proxy app with the brain around it.

One ASGI app serves everything on one port:
- `/healthz`, `/readyz`, `/metrics`, `/brain/v1/health` — probes, Prometheus, index health (no key);
- `/brain/v1/...` — the REST API (OpenAPI at `/brain/v1/openapi.json`), `/mcp` — the MCP endpoint;
- everything else — LiteLLM's proxy (`/v1/chat/completions`, `/v1/messages`, `/v1/models`, …),
  whose config (model list, routers, our callback and custom auth) comes from `config_path`.

The SSE heartbeat wraps the whole app. LiteLLM's lifespan (config loading) runs inside ours, after
the brain runtime has started, so the hooks find it on the first request.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.types import ASGIApp

from brain.embedder.model import Embedder
from brain.errors import BrainError
from brain.gateway import proposals, rest
from brain.gateway.config import write_effective_config
from brain.gateway.heartbeat import SSEHeartbeat
from brain.gateway.mcp_server import MCPEndpoint
from brain.gateway.runtime import DB_ERRORS, Runtime, get_runtime, set_runtime
from brain.gateway.settings import GatewaySettings, load_settings


def prepare_litellm_env(config_path: str | Path) -> None:
    """LiteLLM reads these at import and startup: our config, the bundled cost map, no telemetry."""
    os.environ["CONFIG_FILE_PATH"] = str(config_path)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_TELEMETRY", "False")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")  # do not load a .env from the working directory


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
    set_runtime(runtime)
    mcp = MCPEndpoint()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        await runtime.start()
        try:
            async with contextlib.AsyncExitStack() as stack:
                state = await stack.enter_async_context(litellm_app.router.lifespan_context(litellm_app))
                await stack.enter_async_context(mcp.manager.run())
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
        lifespan=lifespan,
    )
    app.add_exception_handler(BrainError, rest.brain_error_handler)
    app.add_exception_handler(RequestValidationError, rest.validation_error_handler)
    for exc_type in DB_ERRORS:
        app.add_exception_handler(exc_type, rest.database_down_handler)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        rt = get_runtime()
        ok = rt is not None and rt.ready
        return JSONResponse({"status": "ready" if ok else "starting"}, status_code=200 if ok else 503)

    @app.get("/metrics", include_in_schema=False)
    async def prom() -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    @app.get(rest.PREFIX + "/health", tags=["health"], summary="database, embedder and index numbers")
    async def brain_health() -> JSONResponse:
        rt = get_runtime()
        if rt is None:
            return JSONResponse({"status": "degraded", "database": "down", "embedder": "down", "index": None})
        return JSONResponse(await rt.health())

    app.include_router(rest.router)
    app.include_router(rest.owner_router)
    app.include_router(proposals.router)
    app.include_router(proposals.digest_router)
    app.add_route("/mcp", mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False)  # type: ignore[arg-type]
    app.mount("/", litellm_app)
    return SSEHeartbeat(app, interval=settings.heartbeat_s) if heartbeat else app
