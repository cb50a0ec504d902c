"""The owner's review page: proposals with their evidence and a diff, a memory browser, the digest.

The page is three static files shipped inside the package (`review_assets/`, package data, so they
are in the gateway image; nothing is fetched from a CDN, air-gapped clusters work). It is served at
`/review` to anyone, because it holds no data: every figure on it comes from the owner-only REST API,
called by `review.js` with the owner key in an `Authorization` header.

The session is the key in the tab's `sessionStorage`, sent as a header, never a cookie:
- the REST API already authenticates by header, so the page gets exactly an owner key's rights and
  no new way in (no cookie path through `auth.py`, nothing for MCP or the model APIs to accept);
- a browser never attaches a header by itself, so there is no cross-site request forgery to defend
  against (a cookie, even SameSite=Strict, would need that reasoning for every owner route);
- it dies with the tab, and nothing of it reaches the server's logs or a proxy's cache.
The price is that script on the page can read it, so the page allows no script but its own file
(`Content-Security-Policy: script-src 'self'`, no inline script, no `eval`) and `review.js` writes
data only through `textContent`, never as HTML.

The routes under `/brain/v1/review/` are the few reads the page needs that the API lacked: who the
key is (refusing non-owners with a sentence a person can act on), a proposal with its evidence
records and a word diff against the memory it would supersede, and listings by author and namespace.
"""

from __future__ import annotations

import difflib
import re
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from brain.core.errors import Forbidden, InvalidInput, NotFound
from brain.core.models import Actor
from brain.gateway.rest import PREFIX, current_actor
from brain.gateway.tools import ToolsDep
from brain.services import proposals
from brain.store import browse

#: The files of the page, by URL name: (package file, content type). Nothing else is served.
ASSETS: dict[str, tuple[str, str]] = {
    "review.js": ("review.js", "text/javascript; charset=utf-8"),
    "review.css": ("review.css", "text/css; charset=utf-8"),
}
PAGE = "index.html"
PAGE_PATHS = ("/review", "/review/")
ASSET_PREFIX = "/review/assets/"

#: No inline script or style, no other origin, no framing, no form posts: the page is its own files
#: plus fetches to this gateway.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}
NOT_OWNER = (
    "key {name!r} has the role {role!r}: the review page needs an owner key. Agent and read keys cannot "
    "see or decide proposals; sign in with an owner key (`brainctl keys create NAME --role owner`)."
)


def asset_bytes(name: str) -> bytes:
    return resources.files("brain.gateway").joinpath("review_assets", name).read_bytes()


pages = APIRouter(include_in_schema=False)


@pages.api_route("/review", methods=["GET", "HEAD"])
@pages.api_route("/review/", methods=["GET", "HEAD"])
async def review_page() -> Response:
    return Response(asset_bytes(PAGE), media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)


@pages.api_route(ASSET_PREFIX + "{name}", methods=["GET", "HEAD"])
async def review_asset(name: str) -> Response:
    found = ASSETS.get(name)
    if found is None:
        raise NotFound(f"no such asset: {name!r}; the page has {', '.join(sorted(ASSETS))}", field="name")
    file, media = found
    return Response(asset_bytes(file), media_type=media, headers=SECURITY_HEADERS)


# ------------------------------------------------------------------------------------ the page's API


async def review_owner(actor: Annotated[Actor, Depends(current_actor)]) -> Actor:
    if actor.role != "owner":
        raise Forbidden(NOT_OWNER.format(name=actor.name, role=actor.role))
    return actor


OwnerDep = Annotated[Actor, Depends(review_owner)]
api = APIRouter(prefix=PREFIX + "/review", tags=["review"])


def _visible(actor: Actor, namespace: str) -> bool:
    return actor.namespaces is None or namespace in actor.namespaces or namespace == "shared"


@api.get("/session", summary="who this key is; refuses any key but an owner's")
async def session(actor: OwnerDep) -> dict[str, Any]:
    return {"name": actor.name, "role": actor.role, "namespaces": actor.namespaces}


_TOKEN = re.compile(r"\s+|\S+\s*")


def word_diff(old: str, new: str) -> list[dict[str, str]]:
    """`old` → `new` as runs of equal, deleted and inserted text, split at words (whitespace kept).

    Words, not lines: a memory is usually one paragraph, and a line diff of a paragraph says only
    "all of it changed". A word carries the space after it, so a replaced phrase reads as one
    struck run and one inserted run rather than alternating words and spaces. Adjacent runs of the
    same kind are merged, so the page renders few spans.
    """
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    out: list[dict[str, str]] = []

    def add(op: str, text: str) -> None:
        if not text:
            return
        if out and out[-1]["op"] == op:
            out[-1]["text"] += text
        else:
            out.append({"op": op, "text": text})

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            add("equal", "".join(a[i1:i2]))
        else:
            add("delete", "".join(a[i1:i2]))
            add("insert", "".join(b[j1:j2]))
    return out


@api.get("/proposals/{proposal_id}", summary="a proposal, its evidence records and its diff")
async def proposal_detail(proposal_id: str, actor: OwnerDep, t: ToolsDep) -> dict[str, Any]:
    """`GET /proposals/{id}` plus what a reviewer reads beside it: the session records the evidence
    cites (body and author, not just ids), and the word diff against the memory it would supersede."""
    t.check_inputs(id=proposal_id)
    store = t.store()
    out = await proposals.show(store, proposal_id, actor=actor)
    ids = [str(e["memory_id"]) for e in out["evidence"] if isinstance(e, dict) and e.get("memory_id")][:100]
    by_id = {r["id"]: r for r in await browse.records(store, ids) if _visible(actor, r["namespace"])}
    out["records"] = [by_id[i] for i in ids if i in by_id]
    current = out.get("current")
    # Where approval writes: a supersede keeps its target's namespace, so that is the one to read.
    out["target_namespace"] = current["namespace"] if current else out["namespace"]
    out["diff"] = word_diff(current["body"], out["body"]) if current and "body" in current else None
    return out


@api.get("/namespaces", summary="memory namespaces this key may read, with their active entries")
async def namespaces(actor: OwnerDep, t: ToolsDep) -> dict[str, Any]:
    sizes = await browse.namespace_sizes(t.store())
    return {"namespaces": [{"name": ns, "entries": n} for ns, n in sizes if _visible(actor, ns)]}


@api.get("/memories", summary="entries newest first, by namespace, author, kind and status: who wrote what")
async def memories(
    actor: OwnerDep,
    t: ToolsDep,
    namespace: Annotated[list[str] | None, Query()] = None,
    author: str | None = None,
    kind: str | None = None,
    status: str = "active",
    limit: int = 100,
) -> dict[str, Any]:
    t.check_inputs(namespaces=namespace, author=author, kind=kind, status=status)
    if status not in ("active", "superseded", "forgotten", "retired", "any"):
        raise InvalidInput("status is one of active, superseded, forgotten, retired, any", field="status")
    for ns in namespace or []:
        if not _visible(actor, ns):
            raise Forbidden(f"key {actor.name!r} may not read namespace {ns!r}", field="namespace")
    visible = None if actor.namespaces is None else [*actor.namespaces, "shared"]
    rows = await browse.entries(
        t.store(),
        namespaces=namespace or None,
        visible=visible,
        author=author or None,
        kind=kind or None,
        status=status,
        limit=max(1, min(limit, 500)),
    )
    writers = await browse.authors(t.store(), visible)
    return {"entries": rows, "authors": [{"author": a, "entries": n} for a, n in writers]}
