"""Proposals: what distillation drafted, waiting for an owner. Automation proposes; only an owner approves.

Approval writes the memory through `MemoryService` as the approving owner (so the secret gate, the
lint and the curated tier apply, and the owner is recorded as promoter). A proposal that supersedes
an existing memory supersedes it with compare-and-set on the hash the proposal was drafted against,
so an entry changed since then is not silently overwritten. The proposal row is locked while it is
decided: two owners approving at once produce one memory and one conflict.
"""

from __future__ import annotations

import json
from typing import Any

from brain.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from brain.core.models import Actor, MemoryIn
from brain.services.memory import MemoryService
from brain.store.store import Store, new_id

STATUSES = ("pending", "approved", "rejected")
_COLS = (
    "id, status, kind, namespace, title, body, supersedes, evidence, authors, score, created_at, decided_by, "
    "decided_at, reason, memory_id"
)


def _row(r: Any) -> dict[str, Any]:
    d = dict(r)
    if isinstance(d.get("evidence"), str):
        d["evidence"] = json.loads(d["evidence"])
    return d


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
    pid = new_id()
    await store.pool.execute(
        """INSERT INTO proposals (id, kind, namespace, title, body, supersedes, evidence, authors, score)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)""",
        pid,
        kind,
        namespace,
        title,
        body,
        supersedes,
        json.dumps(evidence, default=str),
        sorted(set(authors)),
        score,
    )
    return pid


async def list_proposals(store: Store, status: str = "pending", limit: int = 50) -> list[dict[str, Any]]:
    if status not in STATUSES:
        raise InvalidInput("status is one of pending, approved, rejected", field="status")
    rows = await store.pool.fetch(
        f"SELECT {_COLS} FROM proposals WHERE status = $1 ORDER BY score DESC, created_at DESC LIMIT $2",
        status,
        max(1, min(limit, 500)),
    )
    return [_row(r) for r in rows]


async def show(store: Store, proposal_id: str) -> dict[str, Any]:
    """The proposal, and for a supersede the text it would replace: both texts, side by side."""
    r = await store.pool.fetchrow(f"SELECT {_COLS} FROM proposals WHERE id = $1", proposal_id)
    if r is None:
        raise NotFound(f"no proposal with id {proposal_id!r}", field="id")
    out = _row(r)
    if out["supersedes"]:
        cur = await store.pool.fetchrow(
            "SELECT id, title, body, status, content_hash, tier, author FROM memories WHERE id = $1",
            out["supersedes"],
        )
        out["current"] = dict(cur) if cur is not None else None
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
    async with store.pool.acquire() as conn, conn.transaction():
        r = await conn.fetchrow(f"SELECT {_COLS} FROM proposals WHERE id = $1 FOR UPDATE", proposal_id)
        if r is None:
            raise NotFound(f"no proposal with id {proposal_id!r}", field="id")
        p = _row(r)
        if p["status"] != "pending":
            raise Conflict(f"proposal {proposal_id} is already {p['status']}", field="id")
        if not owner.can_write(p["namespace"]):
            raise Forbidden(f"key {owner.name!r} may not write namespace {p['namespace']!r}")
        item = MemoryIn(
            body=p["body"],
            title=p["title"],
            kind=p["kind"],
            namespace=p["namespace"],
            attrs={
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
        await conn.execute(
            """UPDATE proposals SET status = 'approved', decided_by = $2, decided_at = now(), reason = $3,
                      memory_id = $4 WHERE id = $1""",
            proposal_id,
            owner.name,
            reason,
            mem.id,
        )
    return {"id": proposal_id, "status": "approved", "memory_id": mem.id, "tier": mem.tier}


async def reject(store: Store, proposal_id: str, actor: Actor, reason: str) -> dict[str, Any]:
    owner = _require_owner(actor)
    if not reason.strip():
        raise InvalidInput("rejecting needs a reason (it teaches the next distillation)", field="reason")
    row = await store.pool.fetchrow(
        """UPDATE proposals SET status = 'rejected', decided_by = $2, decided_at = now(), reason = $3
            WHERE id = $1 AND status = 'pending' RETURNING id""",
        proposal_id,
        owner.name,
        reason.strip(),
    )
    if row is None:
        current = await store.pool.fetchval("SELECT status FROM proposals WHERE id = $1", proposal_id)
        if current is None:
            raise NotFound(f"no proposal with id {proposal_id!r}", field="id")
        raise Conflict(f"proposal {proposal_id} is already {current}", field="id")
    return {"id": proposal_id, "status": "rejected"}
