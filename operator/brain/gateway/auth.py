"""Authentication for every surface: LiteLLM's `custom_auth` hook, REST and MCP, all over our `keys` table.

LiteLLM's own virtual keys need its Prisma database; we do not run it. `user_api_key_auth` is the
`general_settings.custom_auth` entry point: it verifies the key, and hands the key's Actor to our
hooks in the returned `UserAPIKeyAuth.metadata`. The raw key never leaves this module (LiteLLM logs
and labels see a digest prefix only).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from brain.core.errors import Forbidden, KeyStoreUnavailable, Unauthorized
from brain.core.models import Actor
from brain.gateway import metrics
from brain.gateway.runtime import get_runtime
from brain.gateway.settings import fallback_master_key
from brain.services.keys import KeyVerifier, hash_key

ACTOR_KEY = "brain_actor"
_fallback: KeyVerifier | None = None


def verifier() -> KeyVerifier:
    rt = get_runtime()
    if rt is not None:
        return rt.keys
    global _fallback
    if _fallback is None:  # LiteLLM loaded us without the brain runtime: only the master key works
        _fallback = KeyVerifier(None, master_key=fallback_master_key())
    return _fallback


def key_from_headers(headers: Any) -> str:
    auth = headers.get("authorization") or ""
    if auth:
        return str(auth)
    return str(headers.get("x-api-key") or "")


def _reason(e: Unauthorized) -> str:
    m = e.message
    return (
        "missing"
        if m.startswith("no key")
        else "revoked"
        if "revoked" in m
        else "expired"
        if "expired" in m
        else "unknown"
    )


async def authenticate(key: str, surface: str) -> Actor:
    try:
        actor = await verifier().verify(key)
    except Unauthorized as e:
        metrics.auth_failures.labels(surface, _reason(e)).inc()
        raise
    except KeyStoreUnavailable:
        metrics.auth_failures.labels(surface, "db_down").inc()
        raise
    if surface == "mcp" and actor.role == "owner":
        metrics.auth_failures.labels(surface, "owner_on_mcp").inc()
        raise Forbidden(
            "owner keys work only on the REST API, never on MCP: no client an agent drives may carry owner "
            "authority. Use an agent or read key here."
        )
    return actor


def actor_of(user_api_key_dict: Any) -> Actor | None:
    meta = getattr(user_api_key_dict, "metadata", None) or {}
    raw = meta.get(ACTOR_KEY) if isinstance(meta, dict) else None
    return Actor.model_validate(raw) if raw else None


async def user_api_key_auth(request: Request, api_key: str) -> Any:
    """LiteLLM `custom_auth`: our key → `UserAPIKeyAuth` carrying the Actor; refusals are 401s, a
    key that cannot be checked right now a 503 (retry), never a 401 (which says the key is bad)."""
    from litellm.proxy._types import ProxyErrorTypes, ProxyException, UserAPIKeyAuth

    try:
        actor = await authenticate(api_key, "proxy")
    except Unauthorized as e:
        raise ProxyException(
            message=e.message, type=ProxyErrorTypes.auth_error, param="api_key", code=401
        ) from None
    except KeyStoreUnavailable as e:
        raise ProxyException(
            message=e.message, type="service_unavailable", param="api_key", code=503
        ) from None
    problem = await _model_problem(request)
    if problem is not None:
        raise ProxyException(message=problem, type="invalid_request_error", param="model", code=400)
    digest = hash_key(api_key.removeprefix("Bearer ").strip())[:16]
    return UserAPIKeyAuth(
        api_key=f"brain-{digest}",
        token=f"brain-{digest}",
        key_alias=actor.name,
        key_name=actor.name,
        user_id=actor.name,
        metadata={ACTOR_KEY: actor.model_dump(mode="json")},
    )


#: Longer than any provider's model id (Bedrock ARNs reach ~150). LiteLLM's invalid-model path walks
#: the name in several places: one 11 MB name held the gateway's event loop for 25 s on this CPU.
MAX_MODEL_NAME_CHARS = 256


async def _model_problem(request: Request) -> str | None:
    """A `model` no deployment could have, refused before LiteLLM routes it (the body LiteLLM has
    already parsed for its auth step is read back from its cache, not parsed again)."""
    from litellm.proxy.common_utils.http_parsing_utils import read_request_body

    model = (await read_request_body(request)).get("model")
    if isinstance(model, str) and len(model) > MAX_MODEL_NAME_CHARS:
        return (
            f"field 'model': a model name is at most {MAX_MODEL_NAME_CHARS} characters, this one has "
            f"{len(model)}; GET /v1/models lists the names this gateway serves"
        )
    return None
