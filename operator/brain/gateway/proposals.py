"""Proposals endpoints (owner): what distill drafted, awaiting a decision.

Only the listing lives here so far; the jobs add approve/reject next to it on `router` (their
logic owns how a proposal becomes a memory). The router is included under `/brain/v1`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from brain.errors import InvalidInput
from brain.gateway.rest import PREFIX, owner_actor
from brain.gateway.runtime import get_runtime
from brain.gateway.tools import Unavailable
from brain.models import Actor

router = APIRouter(prefix=PREFIX + "/proposals", tags=["proposals"])
OwnerDep = Annotated[Actor, Depends(owner_actor)]


@router.get("", summary="proposals by status (default pending), newest first")
async def list_proposals(actor: OwnerDep, status: str = "pending", limit: int = 50) -> dict[str, Any]:
    if status not in ("pending", "approved", "rejected"):
        raise InvalidInput("status is one of pending, approved, rejected", field="status")
    rt = get_runtime()
    if rt is None or rt.store is None:
        raise Unavailable("the brain database is not reachable right now; try again shortly")
    rows = await rt.store.pool.fetch(
        """SELECT id, status, kind, namespace, title, body, supersedes, evidence, authors, score, created_at,
                  decided_by, decided_at, reason, memory_id
             FROM proposals WHERE status = $1 ORDER BY created_at DESC LIMIT $2""",
        status,
        max(1, min(limit, 500)),
    )
    out = []
    for r in rows:
        d = dict(r)
        d["evidence"] = json.loads(d["evidence"]) if isinstance(d["evidence"], str) else d["evidence"]
        out.append(d)
    return {"proposals": out}
