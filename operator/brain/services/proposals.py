"""Proposals: what distillation drafted, waiting for an owner. Automation proposes; only an owner approves.

Approval writes the memory through `MemoryService` as the approving owner (so the secret gate, the
lint and the curated tier apply, and the owner is recorded as promoter). A proposal that supersedes
an existing memory supersedes it with compare-and-set on the hash the proposal was drafted against,
so an entry changed since then is not silently overwritten. The proposal row is locked while it is
decided: two owners approving at once produce one memory and one conflict.

`create` is a door too: a draft is model output, so it is screened like every other writer's entry
(the refusing secret gate, then the strict lint of origin `model`) before it is queued, and nothing
hostile ever waits in front of an owner. Approval screens it again, under the owner's policy, when
it is written.
"""

from __future__ import annotations

from typing import Any

from brain.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from brain.core.models import KINDS, Actor, MemoryIn
from brain.core.redact import SecretGate
from brain.services.memory import MemoryService, screen
from brain.store import proposals as proposal_rows
from brain.store.store import Store

STATUSES = ("pending", "approved", "rejected")


async def create(
    store: Store,
    *,
    kind: str,
    namespace: str,
    title: str,
    body: str,
    evidence: list[dict[str, Any]],
    authors: list[str],
    score: float,
    supersedes: str | None = None,
) -> str:
    """Queue a draft for an owner; refused (`secret_rejected`, `instruction_rejected`) like any write.

    What is queued is the screened text (normalised as the entry model normalises it), so the text an
    owner reviews is byte for byte the text approval writes."""
    item = screen_draft(kind=kind, namespace=namespace, title=title, body=body)
    return await proposal_rows.insert(
        store,
        kind=kind,
        namespace=namespace,
        title=item.title,
        body=item.body,
        evidence=evidence,
        authors=authors,
        score=score,
        supersedes=supersedes,
    )


def screen_draft(*, kind: str, namespace: str, title: str, body: str) -> MemoryIn:
    """The door's screening of a draft, and the text to queue (the entry model's normalised title and
    body: what approval would write). Distill calls it before embedding a draft too: a secret in model
    output must not reach the embedder either. Raises `BrainError` (by code) or `ValueError` (a draft
    that is not a valid entry)."""
    item = MemoryIn(title=title, body=body, kind=kind if kind in KINDS else "note", namespace=namespace)
    return screen(item, SecretGate("refuse"), origin="model")


def _visible(actor: Actor | None, namespace: str) -> bool:
    """A confined owner sees the proposals (and their targets) of the namespaces it may read: its own
    and `shared`, as with memories. Deciding one needs the right to write there (`approve`)."""
    return actor is None or actor.can_see(namespace)


async def list_proposals(
    store: Store, status: str = "pending", limit: int = 50, *, actor: Actor | None = None
) -> list[dict[str, Any]]:
    """Proposals by status, best first; for a confined owner, those of its namespaces (None: brainctl)."""
    if status not in STATUSES:
        raise InvalidInput("status is one of pending, approved, rejected", field="status")
    if not 1 <= limit <= 500:
        raise InvalidInput(f"limit must be an integer from 1 to 500; got {limit}", field="limit")
    rows = await proposal_rows.by_status(store, status, 500 if actor and actor.namespaces else limit)
    return [p for p in rows if _visible(actor, p["namespace"])][:limit]


async def show(store: Store, proposal_id: str, *, actor: Actor | None = None) -> dict[str, Any]:
    """The proposal, and for a supersede the text it would replace (with its namespace): both texts,
    side by side. A proposal of a namespace `actor` is confined away from is `not_found`."""
    out = await proposal_rows.get(store, proposal_id)
    if out is None or not _visible(actor, out["namespace"]):
        raise NotFound(f"no proposal with id {proposal_id!r}", field="id")
    if out["supersedes"]:
        current = await proposal_rows.memory_brief(store, out["supersedes"])
        if current is not None and not _visible(actor, current["namespace"]):
            current = {"id": current["id"], "namespace": current["namespace"]}  # where, never what
        out["current"] = current
    return out


def _require_owner(actor: Actor) -> Actor:
    if actor.role != "owner":
        raise Forbidden("only an owner can decide a proposal")
    return Actor(name=actor.name, role="owner", origin="owner", namespaces=actor.namespaces)


async def approve(
    service: MemoryService, proposal_id: str, actor: Actor, *, reason: str | None = None
) -> dict[str, Any]:
    """Write the proposed memory as the approving owner and mark the proposal approved."""
    owner = _require_owner(actor)
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


async def reject(store: Store, proposal_id: str, actor: Actor, reason: str) -> dict[str, Any]:
    owner = _require_owner(actor)
    if not reason.strip():
        raise InvalidInput("rejecting needs a reason (it teaches the next distillation)", field="reason")
    await show(store, proposal_id, actor=owner)  # a confined owner decides its own namespaces only
    if not await proposal_rows.reject(store, proposal_id, owner.name, reason.strip()):
        current = await proposal_rows.status(store, proposal_id)
        if current is None:
            raise NotFound(f"no proposal with id {proposal_id!r}", field="id")
        raise Conflict(f"proposal {proposal_id} is already {current}", field="id")
    return {"id": proposal_id, "status": "rejected"}
