"""REST under `/brain/v1/`: the MCP operations plus owner operations (promote, retire, keys, proposals).

Errors are JSON `{"code", "message", "field"}` (`field` null when none applies), unhandled ones
included (`internal`, never exception text). Bodies refuse unknown fields (a misspelt `namespace`
for `namespaces` must not quietly create an unconfined key), and query strings refuse unknown
parameters, as MCP refuses unknown arguments. Keys go in
`Authorization: Bearer <key>` (or `x-api-key`); the master key acts as an owner here. Other
modules extend the API by adding routes to `owner_router` (owner-only) or `router` before the app
is built — the proposals endpoints of the jobs live in `brain.gateway.proposals`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from brain.core.errors import BrainError, InvalidInput
from brain.core.models import Actor
from brain.gateway.auth import authenticate, key_from_headers
from brain.gateway.boundary import INTERNAL, error_body
from brain.gateway.tools import ToolsDep
from brain.services.exposure import exposure
from brain.services.keys import KeyStore, require_role

PREFIX = "/brain/v1"
log = logging.getLogger("brain.gateway.rest")


def _declared_query(request: Request) -> set[str] | None:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return None
    names: set[str] = set()
    stack = [dependant]
    while stack:
        d = stack.pop()
        names |= {p.alias for p in d.query_params}
        stack.extend(d.dependencies)
    return names


def check_params(request: Request) -> None:
    """Unknown query parameters are refused (a typo must not silently widen a request); no NULs anywhere."""
    declared = _declared_query(request)
    for name, value in request.query_params.multi_items():
        if declared is not None and name not in declared:
            accepted = ", ".join(sorted(declared)) or "none"
            raise InvalidInput(f"unknown query parameter {name!r}; accepted: {accepted}", field=name)
        if "\x00" in value or "\x00" in name:
            raise InvalidInput(
                f"{name}: contains a NUL character, which text storage cannot hold", field=name
            )
    for name, value in (request.path_params or {}).items():
        if isinstance(value, str) and "\x00" in value:
            raise InvalidInput(
                f"{name}: contains a NUL character, which text storage cannot hold", field=name
            )


async def current_actor(request: Request) -> Actor:
    actor = await authenticate(key_from_headers(request.headers), "rest")
    check_params(request)
    return actor


def require_owner(actor: Actor) -> Actor:
    require_role(actor, "owner")
    return actor


async def owner_actor(actor: Annotated[Actor, Depends(current_actor)]) -> Actor:
    return require_owner(actor)


ActorDep = Annotated[Actor, Depends(current_actor)]
OwnerDep = Annotated[Actor, Depends(owner_actor)]

router = APIRouter(prefix=PREFIX, tags=["memory"])
owner_router = APIRouter(prefix=PREFIX, tags=["owner"])


class Strict(BaseModel):
    """Request bodies: an unknown field is an error naming it and the accepted ones, never ignored."""

    model_config = ConfigDict(extra="forbid")


class NoteBody(Strict):
    body: str
    title: str | None = None
    kind: str | None = None
    namespace: str | None = None
    tags: list[str] | None = None
    importance: float | None = None
    valid_from: str | None = None
    attrs: dict[str, Any] | None = None
    source_key: str | None = None
    domain_keywords: list[str] | None = Field(default=None, description="persona matching words")
    episode: str | None = Field(
        default=None, description="session or task id: entries of one episode help each other get found"
    )
    standing: bool = Field(default=False, description="owner only: load at every session start")
    required: bool = Field(default=False, description="owner only: inject into every request")


class SupersedeBody(Strict):
    body: str
    expected_hash: str | None = Field(
        default=None, description="content_hash you read; refused if it changed"
    )
    title: str | None = None
    kind: str | None = None
    tags: list[str] | None = None
    importance: float | None = None
    valid_from: str | None = None
    attrs: dict[str, Any] | None = None


class SearchBody(Strict):
    query: str
    namespaces: list[str] | None = None
    limit: int = 6
    as_of: str | None = None
    kinds: list[str] | None = None


class ReasonBody(Strict):
    reason: str


class ForgetBody(ReasonBody):
    expected_hash: str | None = Field(
        default=None, description="content_hash you read; needed to forget another author's entry"
    )


class PromoteBody(Strict):
    standing: bool | None = None
    required: bool | None = None


class KeyBody(Strict):
    name: str = Field(description="who writes with it, e.g. 'claude-mac' (the author of its entries)")
    role: str = Field(default="agent", description="read | agent | owner")
    namespaces: list[str] | None = Field(default=None, description="confine the key to these namespaces")
    expires_at: datetime | None = None
    # At most a century: past that a date overflows (a 500 once), and no key should outlive its team.
    expires_in_days: float | None = Field(default=None, gt=0, le=36_500)


def _fields(model: BaseModel, *drop: str) -> dict[str, Any]:
    return {k: v for k, v in model.model_dump(exclude=set(drop)).items() if v is not None}


@router.get("/context", summary="standing facts plus the latest decisions (session start)")
async def get_context(
    actor: ActorDep, t: ToolsDep, namespace: Annotated[list[str] | None, Query()] = None
) -> dict[str, Any]:
    return await t.context(actor, namespace)


@router.post("/search", summary="hybrid search with provenance on every hit")
async def post_search(actor: ActorDep, t: ToolsDep, q: SearchBody) -> dict[str, Any]:
    return await t.search(actor, q.query, q.namespaces, q.limit, q.as_of, q.kinds)


@router.get("/search", summary="hybrid search (query string form)")
async def get_search(
    actor: ActorDep,
    t: ToolsDep,
    q: str,
    namespace: Annotated[list[str] | None, Query()] = None,
    limit: int = 6,
    as_of: str | None = None,
) -> dict[str, Any]:
    return await t.search(actor, q, namespace, limit, as_of)


@router.get("/memories", summary="entries newest first, without bodies")
async def list_memories(
    actor: ActorDep,
    t: ToolsDep,
    namespace: Annotated[list[str] | None, Query()] = None,
    kind: str | None = None,
    limit: int = 50,
    before: str | None = None,
) -> dict[str, Any]:
    return await t.list_(actor, namespace, kind, limit, before)


@router.post(
    "/memories", status_code=201, summary="save an entry (identical body in a namespace: the existing one)"
)
async def post_memory(actor: ActorDep, t: ToolsDep, item: NoteBody, response: Response) -> dict[str, Any]:
    out = await t.note(
        actor, _fields(item, "standing", "required"), standing=item.standing, required=item.required
    )
    if out.get("status") == "proposed":  # a curated kind from an agent: queued for an owner, not stored
        response.status_code = 202
    return out


@router.get("/memories/{memory_id}", summary="one entry with its content hash and history")
async def get_memory(actor: ActorDep, t: ToolsDep, memory_id: str) -> dict[str, Any]:
    return await t.get(actor, memory_id)


@router.post("/memories/{memory_id}/supersede", summary="replace the current version (compare-and-set)")
async def post_supersede(
    actor: ActorDep, t: ToolsDep, memory_id: str, item: SupersedeBody, response: Response
) -> dict[str, Any]:
    out = await t.supersede(actor, memory_id, _fields(item, "expected_hash"), item.expected_hash)
    if out.get("status") == "proposed":
        response.status_code = 202
    return out


@router.post("/memories/{memory_id}/forget", summary="soft delete, with a reason")
async def post_forget(actor: ActorDep, t: ToolsDep, memory_id: str, body: ForgetBody) -> dict[str, Any]:
    return await t.forget(actor, memory_id, body.reason, body.expected_hash)


@owner_router.post(
    "/memories/{memory_id}/purge",
    summary="replace every version's text of a forgotten entry with a tombstone (owner)",
)
async def post_purge(actor: OwnerDep, t: ToolsDep, memory_id: str, body: ReasonBody) -> dict[str, Any]:
    return await t.purge(actor, memory_id, body.reason)


@owner_router.post("/memories/{memory_id}/retire", summary="retire an entry that is no longer true (owner)")
async def post_retire(actor: OwnerDep, t: ToolsDep, memory_id: str, body: ReasonBody) -> dict[str, Any]:
    return await t.retire(actor, memory_id, body.reason)


@owner_router.post(
    "/memories/{memory_id}/restore", summary="serve a forgotten or retired entry again (owner)"
)
async def post_restore(actor: OwnerDep, t: ToolsDep, memory_id: str, body: ReasonBody) -> dict[str, Any]:
    return await t.restore(actor, memory_id, body.reason)


@owner_router.get(
    "/memories/{memory_id}/exposure",
    summary="the conversations given this memory (any version), with key and time; ids only (owner)",
)
async def get_exposure(actor: OwnerDep, t: ToolsDep, memory_id: str, limit: int = 500) -> dict[str, Any]:
    t.check_inputs(id=memory_id)
    return await exposure(t.store(), memory_id, actor, limit=max(1, min(limit, 5000)))


@owner_router.post("/memories/{memory_id}/promote", summary="move an entry to the curated tier (owner)")
async def post_promote(
    actor: OwnerDep, t: ToolsDep, memory_id: str, body: Annotated[PromoteBody | None, Body()] = None
) -> dict[str, Any]:
    b = body or PromoteBody()
    return await t.promote(actor, memory_id, b.standing, b.required)


@owner_router.get("/keys", summary="keys (never their values)")
async def list_keys(actor: OwnerDep, t: ToolsDep, include_revoked: bool = False) -> dict[str, Any]:
    keys = await KeyStore(t.store()).list(include_revoked=include_revoked, actor=actor)
    return {"keys": [k.public() for k in keys]}


@owner_router.post("/keys", status_code=201, summary="create a key; its value is shown once")
async def create_key(actor: OwnerDep, t: ToolsDep, body: KeyBody) -> dict[str, Any]:
    t.check_inputs(name=body.name, role=body.role, namespaces=body.namespaces)
    expires = body.expires_at
    if expires is None and body.expires_in_days:
        expires = datetime.now(UTC) + timedelta(days=body.expires_in_days)
    key, info = await KeyStore(t.store()).create(
        body.name, body.role, namespaces=body.namespaces, expires_at=expires, actor=actor
    )
    return {"key": key, **info.public()}


@owner_router.delete("/keys/{name}", summary="revoke a key by name (or by id with ?by=id; never both)")
async def revoke_key(actor: OwnerDep, t: ToolsDep, name: str, by: str = "name") -> dict[str, Any]:
    t.check_inputs(name=name, by=by)
    info = await KeyStore(t.store()).revoke(name, by=by, actor=actor)
    await t.rt.keys.recheck()  # this replica at once; the others within a second (KeyVerifier's watcher)
    return info.public()


async def brain_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BrainError)
    headers = {"www-authenticate": 'Bearer realm="brain"'} if exc.status == 401 else None
    return JSONResponse(error_body(exc.code, exc.message, exc.field), status_code=exc.status, headers=headers)


def _accepted(request: Request, loc: list[Any]) -> str:
    """The fields a body model accepts, for the message of an unknown-field error."""
    route = request.scope.get("route")
    for param in getattr(getattr(route, "dependant", None), "body_params", []) or []:
        model = getattr(param.field_info, "annotation", None)
        fields = getattr(model, "model_fields", None)
        if fields:
            return ", ".join(fields)
    return ""


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    errors: list[dict[str, Any]] = list(getattr(exc, "errors", list)())
    first = errors[0] if errors else {"loc": ["body"], "msg": "invalid request"}
    raw_loc = list(first.get("loc", []))
    loc = ".".join(str(p) for p in raw_loc if p not in ("body", "query", "path")) or "body"
    if first.get("type") == "extra_forbidden":
        accepted = _accepted(request, raw_loc)
        message = f"unknown field {loc!r}" + (f"; accepted: {accepted}" if accepted else "")
    elif first.get("type") == "json_invalid":
        message, loc = "body: not valid JSON", "body"
    else:
        message = f"{loc}: {first.get('msg')}"
    return JSONResponse(error_body("invalid_input", message, loc), status_code=422)


_HTTP_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    401: "unauthorized",
    403: "forbidden",
}


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own 404/405/...: the brain's error shape instead of `{"detail": ...}`."""
    status = int(getattr(exc, "status_code", 500))
    if status == 400:  # FastAPI could not parse the body (not JSON, or nested past the parser's limit)
        return JSONResponse(
            error_body("invalid_input", "body: not parseable JSON (malformed, or nested too deeply)", "body"),
            status_code=422,
        )
    detail = getattr(exc, "detail", None)
    message = detail if isinstance(detail, str) else "request refused"
    if status == 405:
        message = f"{request.method} is not served on {request.url.path}"
    headers = getattr(exc, "headers", None)
    return JSONResponse(
        error_body(_HTTP_CODES.get(status, "http_error"), message), status_code=status, headers=headers
    )


async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """A bug: logged with its traceback, answered without it."""
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(INTERNAL, status_code=500)


async def database_down_handler(request: Request, exc: Exception) -> JSONResponse:
    """The database went away mid-request: a 503 that says so, not a 500 with a traceback."""
    return JSONResponse(
        error_body("unavailable", "the brain database is not reachable right now; try again shortly"),
        status_code=503,
    )
