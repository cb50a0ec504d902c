"""The brain operations behind both MCP tools and REST endpoints: one implementation, two surfaces.

Each takes the calling key's Actor (never an author from the payload) and returns plain JSON-able
data. Errors are `BrainError`s with a code and a message that names the field.

`Tools` is bound to the process's `Runtime` when the app is built and handed to the surfaces: MCP
gets it at construction, a REST route through `ToolsDep` (the app's state). Only LiteLLM's two
entry points, the hooks and the auth object it imports by dotted path, read the process-wide
runtime (`get_runtime`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, cast

from fastapi import Depends, Request

from brain.core.errors import BrainError, InvalidInput
from brain.core.models import KINDS, Actor, Hit, Memory
from brain.gateway.boundary import input_problem, problem_field
from brain.gateway.runtime import Runtime
from brain.services.memory import MemoryService, Proposed
from brain.services.screening import parse_memory
from brain.store.store import Store

WRITE_FIELDS = (
    "body",
    "title",
    "kind",
    "namespace",
    "tags",
    "importance",
    "valid_from",
    "attrs",
    "source_key",
    "domain_keywords",
    "episode",
)


class Unavailable(BrainError):
    code = "unavailable"
    status = 503


DB_DOWN = "the brain database is not reachable right now; try again shortly"


def hit_json(h: Hit) -> dict[str, Any]:
    d = h.model_dump(mode="json", exclude={"legs", "lineage_id"})
    d["score"] = round(h.score, 4)
    if d.get("via") is None:
        d.pop("via", None)
    return d


def memory_json(m: Memory) -> dict[str, Any]:
    return m.model_dump(mode="json")


def proposed_json(p: Proposed) -> dict[str, Any]:
    """A write that became a proposal: `status: proposed` says nothing was stored yet, and why."""
    return {"status": "proposed", **p.model_dump(mode="json")}


def _namespaces(value: Any) -> list[str] | None:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise InvalidInput(
        "namespaces: a list of namespace names (or one comma-separated string)", field="namespaces"
    )


def _kinds(value: Any, field: str) -> list[str]:
    """Kind filters name kinds that exist: a typo is an error naming the accepted ones, not an empty answer."""
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise InvalidInput(f"{field}: one of {', '.join(KINDS)}", field=field)
    bad = [k for k in value if k not in KINDS]
    if bad:
        raise InvalidInput(f"{field}: unknown kind {bad[0]!r}; accepted: {', '.join(KINDS)}", field=field)
    return value


def _when(value: Any, field: str) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{field}: an ISO-8601 time such as 2026-05-01T12:00:00Z", field=field) from None


#: Fields whose length the entry model caps itself (with its own message); the rest use the limits.
_MODEL_CAPPED = {"body": 10**9, "title": 10**9}


class Tools:
    """The operations, bound to one runtime: what a surface calls with the caller's Actor."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def door(self) -> MemoryService:
        """The memory door, or 503 while the database is not there (hung: now, not after a timeout)."""
        svc = self.rt.service
        if svc is None or self.rt.db_watch.hung:
            raise Unavailable(DB_DOWN)
        return svc

    def store(self) -> Store:
        """The store, for the owner surfaces that read tables of their own (keys, proposals, review,
        exposure): 503 like the door's, at once while the database hangs."""
        return self.door().store

    def check_inputs(self, **fields: Any) -> None:
        """422 naming the field and the limit: NULs, over-long strings and lists, too-big attrs.

        Runs before anything touches the database or a retrieval leg, for REST and MCP alike.
        """
        lim = self.rt.settings.limits
        for name, value in fields.items():
            if value is None:
                continue
            cap = lim.max_query_chars if name == "query" else _MODEL_CAPPED.get(name)
            problem = input_problem(value, name, lim, max_chars=cap)
            if problem:
                raise InvalidInput(problem, field=problem_field(problem))

    def _item(self, args: dict[str, Any]) -> Any:
        unknown = sorted(set(args) - set(WRITE_FIELDS))
        if unknown:
            raise InvalidInput(
                f"unknown field(s) {', '.join(unknown)}; an entry has {', '.join(WRITE_FIELDS)} "
                "(author, tier, origin and hashes are set by the brain)",
                field=unknown[0],
            )
        self.check_inputs(**args)
        return parse_memory({k: v for k, v in args.items() if v is not None})

    async def context(self, actor: Actor, namespaces: Any = None) -> dict[str, Any]:
        self.check_inputs(namespaces=namespaces)
        out = await self.door().context(actor, _namespaces(namespaces))
        return {k: [hit_json(h) for h in v] for k, v in out.items()}

    async def search(
        self,
        actor: Actor,
        query: str,
        namespaces: Any = None,
        limit: int = 6,
        as_of: Any = None,
        kinds: Any = None,
    ) -> dict[str, Any]:
        if not isinstance(limit, int) or not 1 <= limit <= 50:
            raise InvalidInput("limit must be an integer from 1 to 50", field="limit")
        if not isinstance(query, str):
            raise InvalidInput("query: a string", field="query")
        self.check_inputs(query=query, namespaces=namespaces, kinds=kinds, as_of=as_of)
        wanted = _namespaces(kinds)
        hits = await self.door().search(
            query,
            actor,
            _namespaces(namespaces),
            limit=limit,
            as_of=_when(as_of, "as_of"),
            kinds=_kinds(wanted, "kinds") if wanted else None,
        )
        # Which model's vectors ranked these hits (a query is only compared with its own model's), or
        # None when no hit came from the vector leg: a client sees a model change, and that no answer
        # ever mixed two models.
        by_vector = any("vector" in h.legs for h in hits)
        return {
            "hits": [hit_json(h) for h in hits],
            "vectorModel": self.door().store.embedding_model if by_vector else None,
        }

    async def get(self, actor: Actor, memory_id: str) -> dict[str, Any]:
        self.check_inputs(id=memory_id)
        detail = await self.door().get(memory_id, actor)
        return {"memory": memory_json(detail.memory), "history": [memory_json(m) for m in detail.history]}

    async def list_(
        self,
        actor: Actor,
        namespaces: Any = None,
        kind: str | None = None,
        limit: int = 50,
        before: Any = None,
    ) -> dict[str, Any]:
        if not isinstance(limit, int) or not 1 <= limit <= 500:
            raise InvalidInput("limit must be an integer from 1 to 500", field="limit")
        self.check_inputs(namespaces=namespaces, kind=kind, before=before)
        if kind is not None:
            _kinds([kind], "kind")
        rows = await self.door().list_memories(
            actor, _namespaces(namespaces), kind=kind, limit=limit, before=_when(before, "before")
        )
        return {"entries": [r.model_dump(mode="json") for r in rows]}

    async def note(
        self, actor: Actor, args: dict[str, Any], *, standing: bool = False, required: bool = False
    ) -> dict[str, Any]:
        item = self._item(args)
        res = await self.door().propose_or_note(item, actor, standing=standing, required=required)
        if isinstance(res, Proposed):
            return proposed_json(res)
        self.rt.invalidate(catalog=item.kind in ("persona", "skill"))
        return {
            "id": res.memory.id,
            "created": res.created,
            "content_hash": res.memory.content_hash,
            "memory": memory_json(res.memory),
        }

    async def supersede(
        self, actor: Actor, memory_id: str, args: dict[str, Any], expected_hash: str | None
    ) -> dict[str, Any]:
        self.check_inputs(id=memory_id, expected_hash=expected_hash)
        current = (await self.door().get(memory_id, actor)).memory
        args = {"namespace": current.namespace, "kind": current.kind, **args}
        m = await self.door().propose_or_supersede(memory_id, self._item(args), expected_hash, actor)
        if isinstance(m, Proposed):
            return proposed_json(m)
        self.rt.invalidate()
        return {
            "id": m.id,
            "supersedes": m.supersedes,
            "content_hash": m.content_hash,
            "memory": memory_json(m),
        }

    async def forget(
        self, actor: Actor, memory_id: str, reason: str, expected_hash: str | None = None
    ) -> dict[str, Any]:
        self.check_inputs(id=memory_id, reason=reason)
        await self.door().get(memory_id, actor)  # invisible entries are "not found", never "forbidden"
        m = await self.door().forget(memory_id, reason, actor, expected_hash or None)
        self.rt.invalidate(catalog=m.kind in ("persona", "skill"))
        await self.rt.retracted()  # live conversations given it are told from their next request
        return {"id": m.id, "status": m.status}

    async def restore(self, actor: Actor, memory_id: str, reason: str) -> dict[str, Any]:
        """Owner only (REST and brainctl): a forgotten or retired entry is served again."""
        self.check_inputs(id=memory_id, reason=reason)
        m = await self.door().restore(memory_id, reason, actor)
        self.rt.invalidate(catalog=m.kind in ("persona", "skill"))
        await self.rt.retracted()  # live conversations given it are told from their next request
        return {"id": m.id, "status": m.status}

    async def purge(self, actor: Actor, memory_id: str, reason: str) -> dict[str, Any]:
        """Owner only (REST and brainctl): a forgotten entry's text is replaced by a tombstone everywhere."""
        self.check_inputs(id=memory_id, reason=reason)
        detail = await self.door().purge(memory_id, reason, actor)
        self.rt.invalidate(catalog=detail.memory.kind in ("persona", "skill"))
        await self.rt.retracted()  # live conversations given it are told from their next request
        return {"id": detail.memory.id, "status": detail.memory.status, "purged": len(detail.history)}

    async def retire(self, actor: Actor, memory_id: str, reason: str) -> dict[str, Any]:
        self.check_inputs(id=memory_id, reason=reason)
        m = await self.door().retire(memory_id, reason, actor)
        self.rt.invalidate()
        await self.rt.retracted()  # live conversations given it are told from their next request
        return {"id": m.id, "status": m.status}

    async def promote(
        self, actor: Actor, memory_id: str, standing: bool | None, required: bool | None
    ) -> dict[str, Any]:
        self.check_inputs(id=memory_id)
        m = await self.door().promote(memory_id, actor, standing=standing, required=required)
        self.rt.invalidate(catalog=True)  # a promoted persona may now shape prompts
        return {"id": m.id, "tier": m.tier, "standing": m.standing, "required": m.required}


def tools_of(request: Request) -> Tools:
    """A REST route's `Tools`: the app's own (set where the app is built, brain.gateway.app)."""
    return cast(Tools, request.app.state.tools)


ToolsDep = Annotated[Tools, Depends(tools_of)]
