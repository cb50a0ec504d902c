"""Who was given a memory: the owner's read of its exposure receipts (REST, brainctl, the review page).

Owners only: the receipts say which keys' conversations were given what, which is the audit trail of
the team's agents, not something an agent key reads about its peers. A confined owner reads the
memories of its own namespaces (and `shared`) only; any other id is `not_found`, as `get` answers.
The receipts hold ids, key names and a hash of the conversation, never text (docs/security.md).
"""

from __future__ import annotations

from typing import Any

from brain.core.errors import Forbidden, NotFound
from brain.core.models import Actor
from brain.store import exposure_rows
from brain.store.store import Store

NOT_OWNER = (
    "key {name!r} has the role {role!r}: a memory's exposure (which conversations were given it) is "
    "for owner keys only"
)


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


async def exposure(store: Store, memory_id: str, actor: Actor, *, limit: int = 500) -> dict[str, Any]:
    """The conversations given any version of `memory_id`'s lineage, newest first, one entry each."""
    if actor.role != "owner":
        raise Forbidden(NOT_OWNER.format(name=actor.name, role=actor.role))
    detail = await store.get(memory_id)
    m = detail.memory
    if not actor.can_see(m.namespace):
        raise NotFound("no memory with that id is visible to this key", field="id")
    receipts = await exposure_rows.of_lineage(store, m.lineage_id, limit=limit)
    conversations: dict[tuple[str, str], dict[str, Any]] = {}
    for r in receipts:
        k = (r["key_name"], r["conversation"])
        c = conversations.get(k)
        if c is None:
            c = conversations[k] = {
                "conversation": r["conversation"],
                "key": r["key_name"],
                "api": r["api"],
                "versions": [],
                "injections": 0,
                "first_at": r["first_at"],
                "last_at": r["last_at"],
                "noticed_at": r["noticed_at"],
            }
        c["versions"].append({"id": r["memory_id"], "version": r["version"], "injections": r["injections"]})
        c["injections"] += r["injections"]
        c["first_at"] = min(c["first_at"], r["first_at"])
        c["last_at"] = max(c["last_at"], r["last_at"])
        if r["noticed_at"] is not None and (c["noticed_at"] is None or r["noticed_at"] > c["noticed_at"]):
            c["noticed_at"] = r["noticed_at"]
    out = []
    for c in conversations.values():
        out.append(
            {
                **c,
                "first_at": _iso(c["first_at"]),
                "last_at": _iso(c["last_at"]),
                "noticed_at": _iso(c["noticed_at"]),
            }
        )
    retracted = m.status in ("retired", "forgotten")
    return {
        "id": m.id,
        "lineage_id": m.lineage_id,
        "namespace": m.namespace,
        "status": m.status,
        "retracted": {"status": m.status, "reason": m.status_reason} if retracted else None,
        "conversations": out,
        "count": len(out),
        "keys": sorted({c["key"] for c in out}),
        "noticed": sum(1 for c in out if c["noticed_at"]),
        "truncated": len(receipts) >= limit,
    }
