"""Proposals endpoints (owner): what distill drafted, awaiting a decision.

List, show, approve and reject live on `router`; the logic (how a proposal becomes a memory)
is `brain.services.proposals`. `digest_router` serves the latest digest; both are included under `/brain/v1`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from brain.core.errors import NotFound
from brain.core.models import Actor
from brain.gateway.rest import PREFIX, Strict, owner_actor
from brain.gateway.tools import ToolsDep
from brain.services import approval, digests, proposals

router = APIRouter(prefix=PREFIX + "/proposals", tags=["proposals"])
OwnerDep = Annotated[Actor, Depends(owner_actor)]


@router.get("", summary="proposals by status (default pending), best first")
async def list_proposals(
    actor: OwnerDep, t: ToolsDep, status: str = "pending", limit: int = 50
) -> dict[str, Any]:
    return {"proposals": await proposals.list_proposals(t.store(), status, limit, actor=actor)}


class Decision(Strict):
    reason: str | None = None


@router.get("/{proposal_id}", summary="one proposal with its evidence, and the text it would supersede")
async def show_proposal(proposal_id: str, actor: OwnerDep, t: ToolsDep) -> dict[str, Any]:
    t.check_inputs(id=proposal_id)
    return await proposals.show(t.store(), proposal_id, actor=actor)


@router.post("/{proposal_id}/approve", summary="write the proposed memory as this owner (curated)")
async def approve_proposal(
    proposal_id: str, actor: OwnerDep, t: ToolsDep, body: Decision | None = None
) -> dict[str, Any]:
    t.check_inputs(id=proposal_id, reason=body.reason if body else None)
    out = await approval.approve(t.door(), proposal_id, actor, reason=body.reason if body else None)
    t.rt.invalidate(catalog=True)  # an approved persona or skill shapes prompts from the next request on
    return out


@router.post("/{proposal_id}/reject", summary="reject a proposal, with a reason")
async def reject_proposal(proposal_id: str, actor: OwnerDep, t: ToolsDep, body: Decision) -> dict[str, Any]:
    t.check_inputs(id=proposal_id, reason=body.reason)
    return await proposals.reject(t.store(), proposal_id, actor, body.reason or "")


digest_router = APIRouter(prefix=PREFIX + "/digest", tags=["digest"])


@digest_router.get("/latest", summary="the newest digest (of one namespace): Markdown and its numbers")
async def latest_digest(actor: OwnerDep, t: ToolsDep, namespace: str | None = None) -> dict[str, Any]:
    """Each namespace has a digest of its own (brain/jobs/digest.py); without `namespace`, the newest."""
    t.check_inputs(namespace=namespace)
    latest = await digests.latest_digest(t.store(), namespace)
    if latest is None:
        raise NotFound("no digest yet: the digest job has not run")
    digests.set_metrics(latest["gauges"])
    return latest
