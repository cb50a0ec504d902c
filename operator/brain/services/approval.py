"""Approving a proposal: the owner's decision that writes the drafted memory through the door.

The memory is written through `MemoryService` as the approving owner (so the secret gate, the lint
and the curated tier apply, and the owner is recorded as promoter). A proposal that supersedes an
existing memory supersedes it with compare-and-set on the hash the proposal was drafted against, so
an entry changed since then is not silently overwritten. The proposal row is locked while it is
decided: two owners approving at once produce one memory and one conflict.
"""

from __future__ import annotations

from typing import Any

from brain.core.errors import Conflict, Forbidden, NotFound
from brain.core.models import Actor, MemoryIn
from brain.services.memory import MemoryService
from brain.services.proposals import require_owner
from brain.store import proposal_rows


async def approve(
    service: MemoryService, proposal_id: str, actor: Actor, *, reason: str | None = None
) -> dict[str, Any]:
    """Write the proposed memory as the approving owner and mark the proposal approved."""
    owner = require_owner(actor)
    store = service.store
    async with proposal_rows.deciding(store, proposal_id) as decision:
        p = decision.row
        if p is None:
            raise NotFound(f"no proposal with id {proposal_id!r}", field="id")
        if p["status"] != "pending":
            raise Conflict(f"proposal {proposal_id} is already {p['status']}", field="id")
        if not owner.can_write(p["namespace"]):
            raise Forbidden(f"key {owner.name!r} may not write namespace {p['namespace']!r}")
        if p["supersedes"]:
            # What is written is the target's namespace (a supersede keeps it): that is what must be
            # the owner's, and the proposal's own namespace must be it, or the review showed another.
            target = await proposal_rows.memory_brief(store, p["supersedes"])
            if target is None:
                raise Conflict(f"the memory proposal {proposal_id} supersedes no longer exists", field="id")
            if not owner.can_write(target["namespace"]):
                raise Forbidden(
                    f"key {owner.name!r} may not write namespace {target['namespace']!r}, where the memory "
                    f"this proposal supersedes ({p['supersedes']}) lives",
                    field="supersedes",
                )
            if target["namespace"] != p["namespace"]:
                raise Conflict(
                    f"proposal {proposal_id} is for namespace {p['namespace']!r} but would supersede an entry "
                    f"of {target['namespace']!r}; reject it",
                    field="supersedes",
                )
        entry: dict[str, Any] = next(
            (e for e in p["evidence"] if e.get("type") == "entry"), {}
        )  # an agent's own fields
        item = MemoryIn(
            body=p["body"],
            title=p["title"],
            kind=p["kind"],
            namespace=p["namespace"],
            tags=entry.get("tags") or [],
            domain_keywords=entry.get("domain_keywords") or [],
            attrs={
                **(entry.get("attrs") or {}),
                "proposal": proposal_id,
                "evidence": len(p["evidence"]),
                "distilled_from": [e.get("memory_id") for e in p["evidence"] if e.get("memory_id")][:50],
            },
            importance=0.6,
        )
        if p["supersedes"]:
            drafted = next(
                (e.get("content_hash") for e in p["evidence"] if e.get("type") == "supersedes"), None
            )
            mem = await service.supersede(p["supersedes"], item, drafted, owner)
        else:
            mem = (await service.note(item, owner)).memory
            if mem.tier != "curated":  # an identical episodic entry already existed: promote it
                mem = await service.promote(mem.id, owner)
        await decision.approved(owner.name, reason, mem.id)
    return {"id": proposal_id, "status": "approved", "memory_id": mem.id, "tier": mem.tier}
