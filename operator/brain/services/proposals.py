"""Proposals: what distillation drafted, waiting for an owner. Automation proposes; only an owner decides.

This is the queue (create, list, show, reject). Approving writes a memory, so it lives a layer up in
`brain.services.approval`, above the memory door that itself queues an agent's curated entries here.

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
from brain.services.screening import screen
from brain.store import proposal_rows
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


def require_owner(actor: Actor) -> Actor:
    if actor.role != "owner":
        raise Forbidden("only an owner can decide a proposal")
    return Actor(name=actor.name, role="owner", origin="owner", namespaces=actor.namespaces)


async def reject(store: Store, proposal_id: str, actor: Actor, reason: str) -> dict[str, Any]:
    owner = require_owner(actor)
    if not reason.strip():
        raise InvalidInput("rejecting needs a reason (it teaches the next distillation)", field="reason")
    await show(store, proposal_id, actor=owner)  # a confined owner decides its own namespaces only
    if not await proposal_rows.reject(store, proposal_id, owner.name, reason.strip()):
        current = await proposal_rows.status(store, proposal_id)
        if current is None:
            raise NotFound(f"no proposal with id {proposal_id!r}", field="id")
        raise Conflict(f"proposal {proposal_id} is already {current}", field="id")
    return {"id": proposal_id, "status": "rejected"}
