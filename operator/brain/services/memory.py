"""The governed front door to memory: authorisation, the secret gate, the lint, embedding, then the store.

MCP tools, the REST API, the gateway hooks, the jobs and brainctl all write through here, so the
rules (who may write where, what may be stored, which tier) live in one place. Every entry passes
`brain.services.screening.screen` before it is stored.
The door holds the store's one writer (`brain.store.writer.StoreWriter`), which no other room may
import (.importlinter, only-services-write): a `Store` alone only reads. Batch writers (ingest,
eval) hand the door a plan instead (`brain.services.plan`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

from brain.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from brain.core.models import (
    KINDS,
    Actor,
    Hit,
    Memory,
    MemoryDetail,
    MemoryIn,
    MemorySummary,
    NoteResult,
    check_as_of,
)
from brain.core.redact import SecretGate
from brain.embedder.model import Embedder
from brain.retrieval import telemetry
from brain.retrieval.pipeline import Retriever
from brain.retrieval.render import estimate_tokens
from brain.services import proposals
from brain.services.screening import screen
from brain.store import source_rows
from brain.store.store import Scope, Store, embed_text
from brain.store.writer import StoreWriter

log = logging.getLogger("brain.services.memory")
_MASK = SecretGate("redact")  # what an import embedded, stored beside its entry (`_gate_input`)


#: Kinds that shape every agent's prompts (catalog entries) or speak for the whole team (the digest):
#: they come only from an owner, a MemorySource's import, or the digest job's own identity. An
#: agent's attempt at one becomes a proposal for an owner instead (`MemoryService.propose_or_note`).
CURATED_KINDS = ("skill", "persona", "digest")
#: The digest job's identity (jobs.digest writes as it; key names cannot take it, services.keys).
DIGEST_AUTHOR = "digest"
#: What replaces every version's body (and title) when an owner purges an entry.
TOMBSTONE = "[purged]"


def may_write_kind(actor: Actor, kind: str) -> bool:
    """Who may write an entry of `kind` directly. Everything but the curated kinds: any writer. Skills
    and personas: owners and imports (origin `import` or `untrusted`, which no key can carry: a key's
    Actor is `owner` or `agent`). Digests: the digest job only, so "the latest digest" is its own."""
    if kind not in CURATED_KINDS:
        return True
    if kind == "digest":
        return actor.name == DIGEST_AUTHOR and actor.origin == "import"
    return actor.role == "owner" or actor.origin in ("import", "untrusted")


def tier_for(actor: Actor, kind: str | None = None) -> str:
    """Owners and the owner's own imports write the curated tier; everything else is episodic. A
    digest is episodic whoever writes it: it quotes questions any key can leave (jobs.digest)."""
    if kind == "digest":
        return "episodic"
    return "curated" if actor.origin in ("owner", "import") else "episodic"


def is_import(actor: Actor) -> bool:
    """An import's identity (a MemorySource's `source:<name>`, the digest job): origin `import` or
    `untrusted`, which no key's Actor carries (a key's is `owner` or `agent`)."""
    return actor.origin in ("import", "untrusted")


def import_name(name: str) -> bool:
    """The author names only an import writes as: a MemorySource's `source:<name>`, the digest job's
    `digest` (any case). Keys cannot take them (services.keys.reserved); the door refuses any other
    Actor that carries one (brainctl's `--as`, a future surface), so no entry can pass for an import's."""
    lowered = name.lower()
    return lowered == DIGEST_AUTHOR or lowered.startswith("source:")


def may_replace(actor: Actor, author: str, origin: str = "import") -> bool:
    """Whether `actor` may supersede or retire an entry `author` wrote with `origin`, as far as
    authorship goes. An import replaces and retires only its own entries (its name, an import's
    origin): an entry that carries a source's key but that an owner wrote by hand, or an agent
    planted, is not the source's (ingest writes its own beside it). Every other writer falls under
    the usual rules (curated tier, compare-and-set, confinement)."""
    return not is_import(actor) or (author == actor.name and origin in ("import", "untrusted"))


def may_pin(actor: Actor) -> bool:
    """Who may make an entry standing or required: owners and the owner's imports. Untrusted
    imports and captured model output never are (the core's trust rule, applied here, once)."""
    return actor.origin in ("owner", "import")


def read_only(actor: Actor) -> bool:
    """A read key never writes, on any surface: the door refuses it (`authorize_write`), and a
    surface that would do work before reaching the door (the gateway's capture queue) asks here."""
    return actor.role == "read"


async def pin(writer: StoreWriter, memory_id: str, actor: Actor, *, standing: bool, required: bool) -> bool:
    """Set the front-matter flags of an entry a sync just wrote; whether they were set. A writer who
    may not pin gets its entry stored unpinned, not refused (its text is still worth retrieving)."""
    if not (standing or required) or not may_pin(actor):
        return False
    await writer.set_flags(memory_id, standing=standing, required=required)
    return True


class Held(Protocol):
    """What the door needs of a stored entry an import means to replace (ingest's `Existing` rows)."""

    @property
    def id(self) -> str: ...

    @property
    def lineage_id(self) -> str: ...

    @property
    def content_hash(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def author(self) -> str: ...

    @property
    def origin(self) -> str: ...


@dataclass(frozen=True)
class Admitted:
    """An entry the door authorised for `actor` and screened (`MemoryService.admit`), to be written by
    `_note_admitted` or `_supersede_admitted` (through `plan.apply`): an import authorises each item
    once, before embedding, and the writes keep the store's batching."""

    item: MemoryIn
    actor: Actor
    tier: str
    standing: bool = False
    required: bool = False
    replaces: str | None = None
    expected_hash: str | None = None


class Proposed(BaseModel):
    """What an agent gets back for an entry it may not write itself: the proposal an owner will review."""

    proposal: str
    kind: str
    namespace: str
    supersedes: str | None = None
    message: str


class MemoryService:
    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        *,
        gate: SecretGate | None = None,
        retriever: Retriever | None = None,
        on_missing_vector: Callable[[], None] | None = None,
    ) -> None:
        """`on_missing_vector` is told each time a write is stored without its vector, so whoever
        holds an embedder (the gateway's `VectorMend`) embeds it once the embedder is back."""
        self.store = store
        self.writer = StoreWriter(store)  # the only writer: no other room may import it (.importlinter)
        self.embedder = embedder
        self.gate = gate or SecretGate("refuse")
        self.retriever = retriever or Retriever(store, embedder)
        self.on_missing_vector = on_missing_vector
        # what `admit` handed out, by identity: `plan.apply` writes one of these without screening it
        # twice, and anything else (a copy, one made elsewhere, another door's) is admitted again
        self._issued: weakref.WeakValueDictionary[int, Admitted] = weakref.WeakValueDictionary()

    # ------------------------------------------------------------------ checks

    def _screen(self, item: MemoryIn, actor: Actor) -> MemoryIn:
        return screen(item, self.gate, origin=actor.origin)

    def authorize_write(self, actor: Actor, namespace: str) -> None:
        """Whether `actor` may write `namespace` at all: every write of the door asks it first, and so
        do the writes of other rooms' queues (capture's proposals and its event)."""
        if import_name(actor.name) and not is_import(actor):
            raise Forbidden(
                f"{actor.name!r} is the name an import writes as (source:<name>, digest); "
                "write under another name",
                field="name",
            )
        if read_only(actor):
            raise Forbidden(f"key {actor.name!r} is read-only; writing needs an agent or owner key")
        if not actor.can_write(namespace):
            allowed = ", ".join(actor.namespaces or ())
            raise Forbidden(
                f"key {actor.name!r} may not write namespace {namespace!r}; it is confined to: {allowed}",
            )

    def _authorize_kind(self, actor: Actor, kind: str, *, was: str | None = None) -> None:
        """Curated kinds are refused at the door itself, whichever surface called it (capture, jobs,
        REST, MCP, brainctl); REST and MCP turn the refusal into a proposal (`propose_or_note`)."""
        for k in (kind, was):
            if k is not None and not may_write_kind(actor, k):
                who = "the digest job" if k == "digest" else "an owner (or a MemorySource import)"
                raise Forbidden(
                    f"{k} entries are curated: only {who} writes them; key {actor.name!r} may propose one "
                    "(REST and MCP do that for you) and an owner approves it",
                    field="kind",
                )

    def _authorize_replace(self, actor: Actor, memory_id: str, author: str, origin: str = "import") -> None:
        if not may_replace(actor, author, origin):
            raise Forbidden(
                f"memory {memory_id} was written by {author!r}; {actor.name!r} is an import and supersedes "
                "or retires only its own entries",
                field="id",
            )

    def _authorize_read(self, actor: Actor, namespace: str) -> None:
        if not actor.can_see(namespace):
            raise NotFound("no memory with that id is visible to this key", field="id")

    def scope_for(self, actor: Actor, namespaces: list[str] | None, **kw: Any) -> Scope:
        """A read scope: the asked namespaces (default: the key's own) plus `shared`, never beyond the key."""
        wanted = namespaces or list(actor.namespaces or [])
        for ns in wanted:
            if not actor.can_see(ns):
                raise Forbidden(f"key {actor.name!r} may not read namespace {ns!r}")
        if actor.namespaces is None and not namespaces:
            return Scope.of(["shared"], **kw)
        return Scope.of(wanted, **kw)

    async def _embed(self, text: str) -> np.ndarray | None:
        """The text's vector, or None: stored without one, counted, and the gateway's mend (or
        `brainctl reindex`) fills it, whether the embedder failed or no model is loaded yet."""
        if self.embedder is not None:
            try:
                return (await self.embedder.embed([text]))[0]
            except Exception as e:
                log.warning("embedding failed, storing without a vector: %s", e)
        telemetry.retrieval_degraded.labels("embedder_down").inc()
        if self.on_missing_vector is not None:
            self.on_missing_vector()
        return None

    # ------------------------------------------------------------------ writes

    async def note(
        self, item: MemoryIn, actor: Actor, *, standing: bool = False, required: bool = False
    ) -> NoteResult:
        self.authorize_write(actor, item.namespace)
        self._authorize_kind(actor, item.kind)
        if (standing or required) and not may_pin(actor):
            raise Forbidden("only an owner (or an owner's import) may pin standing or required entries")
        item = self._screen(item, actor)
        return await self.writer.note(
            item,
            actor=actor,
            tier=tier_for(actor, item.kind),
            embedding=await self._embed(embed_text(item.title, item.body)),
            standing=standing,
            required=required,
        )

    async def supersede(
        self, memory_id: str, item: MemoryIn, expected_hash: str | None, actor: Actor
    ) -> Memory:
        current = (await self.store.get(memory_id)).memory
        self.authorize_write(actor, current.namespace)
        self._authorize_kind(actor, item.kind, was=current.kind)  # a note never becomes a skill by supersede
        self._authorize_replace(actor, current.id, current.author, current.origin)
        if current.tier == "curated" and actor.role != "owner" and actor.origin != "import":
            raise Forbidden(
                f"memory {memory_id} is curated; only an owner can supersede it (note a correction instead, "
                "and an owner will promote it)"
            )
        item = self._screen(item.model_copy(update={"namespace": current.namespace}), actor)
        return await self.writer.supersede(
            memory_id,
            item,
            expected_hash=expected_hash,
            actor=actor,
            tier="curated"
            if current.tier == "curated" and item.kind != "digest"
            else tier_for(actor, item.kind),
            embedding=await self._embed(embed_text(item.title, item.body)),
            only_author=actor.name if is_import(actor) else None,
        )

    async def propose_or_note(
        self, item: MemoryIn, actor: Actor, *, standing: bool = False, required: bool = False
    ) -> NoteResult | Proposed:
        """REST and MCP's note: an entry of a curated kind that `actor` may not write is queued as a
        proposal for an owner (screened like any draft) instead of refused; everything else is `note`."""
        if may_write_kind(actor, item.kind) or read_only(actor) or item.kind == "digest":
            return await self.note(item, actor, standing=standing, required=required)
        self.authorize_write(actor, item.namespace)
        if standing or required:  # a proposal carries no pin: asking for one is refused, not dropped
            raise Forbidden("only an owner (or an owner's import) may pin standing or required entries")
        return await self._propose(item, actor, None, None)

    async def propose_or_supersede(
        self, memory_id: str, item: MemoryIn, expected_hash: str | None, actor: Actor
    ) -> Memory | Proposed:
        """REST and MCP's supersede: a change of or into a curated kind by a writer who may not make it
        becomes a proposal to supersede (drafted against the hash it read), for an owner to approve."""
        current = (await self.store.get(memory_id)).memory
        kinds = (item.kind, current.kind)
        if read_only(actor) or "digest" in kinds or all(may_write_kind(actor, k) for k in kinds):
            return await self.supersede(memory_id, item, expected_hash, actor)
        self.authorize_write(actor, current.namespace)
        if current.status != "active":
            raise Conflict(f"memory {memory_id} is {current.status}, not the current version", field="id")
        if expected_hash is not None and expected_hash != current.content_hash:
            raise Conflict(
                f"memory {memory_id} changed since you read it; get it again and reapply your change",
                field="expected_hash",
            )
        item = item.model_copy(update={"namespace": current.namespace})
        return await self._propose(item, actor, memory_id, current.content_hash)

    async def _propose(
        self, item: MemoryIn, actor: Actor, supersedes: str | None, drafted_hash: str | None
    ) -> Proposed:
        item = self._screen(item, actor)  # every field, as a write would be; the draft screening follows
        # The fields a proposal row has no column for travel in its evidence, so approval writes them too.
        entry = {"tags": item.tags, "domain_keywords": item.domain_keywords, "attrs": item.attrs}
        evidence: list[dict[str, Any]] = [
            {"type": "agent", "author": actor.name, "origin": actor.origin},
            {"type": "entry", **entry},
        ]
        if supersedes is not None:
            evidence.append(
                {"type": "supersedes", "memory_id_current": supersedes, "content_hash": drafted_hash}
            )
        pid = await proposals.create(
            self.store,
            kind=item.kind,
            namespace=item.namespace,
            title=item.title,
            body=item.body,
            evidence=evidence,
            authors=[actor.name],
            score=0.5,
            supersedes=supersedes,
        )
        return Proposed(
            proposal=pid,
            kind=item.kind,
            namespace=item.namespace,
            supersedes=supersedes,
            message=f"{item.kind} entries are curated: this was queued as proposal {pid} for an owner to "
            "review (`brainctl proposals show`); nothing was stored yet",
        )

    async def retrieved(
        self,
        actor: Actor,
        ids: Sequence[str],
        query: str,
        *,
        namespace: str,
        api: str,
        namespaces: Sequence[str],
    ) -> None:
        """What one retrieval leaves behind: the access counts of what was injected, or, when nothing
        was, a `query_no_hit` event (the digest's list of gaps). `query` is the question as retrieval
        saw it, its secrets already masked (`brain.retrieval.compose`), cut to 500 characters."""
        if ids:
            await self.store.touch(list(ids))
            return
        await self.store.record_event(
            "query_no_hit",
            key_name=actor.name,
            namespace=namespace,
            payload={"query": query[:500], "api": api, "namespaces": list(namespaces)},
        )

    async def forget(
        self, memory_id: str, reason: str, actor: Actor, expected_hash: str | None = None
    ) -> Memory:
        """Soft delete. Another author's entry needs `expected_hash` (owners excepted; see Store)."""
        current = (await self.store.get(memory_id)).memory
        self.authorize_write(actor, current.namespace)
        self._authorize_replace(actor, memory_id, current.author, current.origin)
        if current.tier == "curated" and actor.role != "owner":
            raise Forbidden(f"memory {memory_id} is curated; only an owner can forget it")
        return await self.writer.set_status(
            memory_id,
            "forgotten",
            self.gate.check("reason", reason),
            actor=actor,
            expected_hash=expected_hash,
        )

    async def restore(self, memory_id: str, reason: str, actor: Actor) -> Memory:
        """Owner only: undo a forget (or a retire); the entry is served again."""
        if actor.role != "owner":
            raise Forbidden("only an owner key can restore a memory")
        current = (await self.store.get(memory_id)).memory
        self.authorize_write(actor, current.namespace)
        return await self.writer.restore(memory_id, self.gate.check("reason", reason), actor=actor)

    async def retire(self, memory_id: str, reason: str, actor: Actor) -> Memory:
        if actor.role != "owner" and actor.origin != "import":
            raise Forbidden("only an owner can retire a memory")
        current = (await self.store.get(memory_id)).memory
        self.authorize_write(actor, current.namespace)  # a confined owner retires only in its namespaces
        self._authorize_replace(actor, memory_id, current.author, current.origin)
        return await self.writer.set_status(
            memory_id, "retired", reason, actor=actor, only_author=actor.name if is_import(actor) else None
        )

    async def promote(
        self, memory_id: str, actor: Actor, *, standing: bool | None = None, required: bool | None = None
    ) -> Memory:
        """Curated (and maybe pinned) only if its text passes today's door: an entry stored before a rule
        existed, or by a path that skipped the door, is refused here by the same codes as a new write."""
        if actor.role == "owner":  # the store refuses everyone else, naming the role
            current = (await self.store.get(memory_id)).memory
            self.authorize_write(actor, current.namespace)  # promoting and pinning are writes too
            stored = MemoryIn(
                body=current.body,
                title=current.title,
                kind=current.kind if current.kind in KINDS else "note",
                namespace=current.namespace,
                tags=current.tags,
                attrs=current.attrs,
                source_key=current.source_key,
                domain_keywords=current.domain_keywords,
            )
            screen(stored, SecretGate("refuse"), origin=current.origin)
        return await self.writer.promote(memory_id, actor=actor, standing=standing, required=required)

    # ------------------------------------------------------------------ imports (a MemorySource's sync)

    def admit(
        self,
        item: MemoryIn,
        actor: Actor,
        *,
        replaces: Held | None = None,
        standing: bool = False,
        required: bool = False,
        episodic: bool = False,
    ) -> Admitted:
        """Authorise and screen one entry of an import, with no round trip: the same checks as `note`
        and `supersede` (namespace, kind, authorship of what it replaces), then the one screening.
        Raises the door's error; a writer who may not pin gets its entry unpinned (see `pin`).
        `episodic` stores it below the writer's tier (never above: that is not a privilege).

        Only a check: nothing is written. `brain.services.plan.apply` writes an `Admitted` only if
        this door issued that very object (`issued`); any other is admitted again, so one made
        anywhere else is never trusted."""
        self.authorize_write(actor, item.namespace)
        self._authorize_kind(actor, item.kind, was=replaces.kind if replaces else None)
        if replaces is not None:
            self._authorize_replace(actor, replaces.id, replaces.author, replaces.origin)
            if replaces.namespace != item.namespace:
                raise InvalidInput(
                    f"supersede keeps the namespace ({replaces.namespace!r}); got {item.namespace!r}",
                    field="namespace",
                )
        pinned = may_pin(actor)
        admitted = Admitted(
            self._screen(item, actor),
            actor,
            "episodic" if episodic else tier_for(actor, item.kind),
            standing=standing and pinned,
            required=required and pinned,
            replaces=replaces.id if replaces else None,
            expected_hash=replaces.content_hash if replaces else None,
        )
        self._issued[id(admitted)] = admitted
        return admitted

    def issued(self, admitted: Admitted, actor: Actor) -> bool:
        """Whether this door's `admit` returned this very object, for `actor` (identity, not equality:
        an equal copy built elsewhere was never screened)."""
        return self._issued.get(id(admitted)) is admitted and admitted.actor == actor

    async def _note_admitted(
        self, batch: Sequence[tuple[Admitted, np.ndarray | None]], inputs: Sequence[str | None] | None = None
    ) -> list[Memory]:
        """Admitted new entries in one transaction per actor and tier (no dedup: imports dedup on
        identity), each pinned as its front matter asked when its writer may pin. `inputs`: what each
        vector was made of, when not the entry's title and body (an import's code card), kept so a
        model migration embeds the same text (masked by the secret gate: `_gate_input`). Private to the
        door: `brain.services.plan.apply` admits, then calls it."""
        out: list[Memory] = []
        groups: dict[tuple[Actor, str], list[int]] = {}
        texts = [self._gate_input(t) for t in inputs or [None] * len(batch)]
        for i, (a, _) in enumerate(batch):
            if a.replaces is not None:
                raise InvalidInput("an admitted supersede is written by _supersede_admitted", field="id")
            groups.setdefault((a.actor, a.tier), []).append(i)
        stored: dict[int, Memory] = {}
        for (actor, tier), idx in groups.items():
            mems = await self.writer.note_many(
                [(batch[i][0].item, batch[i][1]) for i in idx],
                actor=actor,
                tier=tier,
                inputs=[texts[i] for i in idx],
            )
            stored.update(zip(idx, mems, strict=True))
        for i, (a, _) in enumerate(batch):
            out.append(stored[i])
            await pin(self.writer, stored[i].id, a.actor, standing=a.standing, required=a.required)
        return out

    @staticmethod
    def _gate_input(text: str | None) -> str | None:
        """Masked, never refused: the entry's own fields passed the gate, and a card cut from them
        can cut a long token into one that looks like a secret, which must not stop an import."""
        return None if text is None else _MASK.check("embed_input", text)

    async def _supersede_admitted(
        self, admitted: Admitted, embedding: np.ndarray | None, embed_input: str | None = None
    ) -> Memory:
        """An admitted change of an entry: compare-and-set on the hash it was admitted against, and
        (for an import) only while the current version is still its own, checked in the store's
        transaction."""
        if admitted.replaces is None:
            raise InvalidInput("an admitted new entry is written by _note_admitted", field="id")
        new = await self.writer.supersede(
            admitted.replaces,
            admitted.item,
            expected_hash=admitted.expected_hash,
            actor=admitted.actor,
            tier=admitted.tier,
            embedding=embedding,
            only_author=admitted.actor.name if is_import(admitted.actor) else None,
            embed_input=self._gate_input(embed_input),
        )
        await pin(self.writer, new.id, admitted.actor, standing=admitted.standing, required=admitted.required)
        return new

    async def retire_own(self, held: Held, reason: str, actor: Actor) -> Memory:
        """An import retires an entry it wrote (removed upstream, graded out, or left behind in the
        namespace the source moved from): only its own, wherever it wrote it."""
        if not is_import(actor):
            raise Forbidden("retire_own is an import's; an owner retires with retire")
        self._authorize_replace(actor, held.id, held.author, held.origin)
        return await self.writer.set_status(
            held.id, "retired", self.gate.check("reason", reason), actor=actor, only_author=actor.name
        )

    async def replace_edges(
        self,
        actor: Actor,
        lineages: Sequence[str],
        relations: Sequence[str],
        rows: dict[tuple[str, str, str], float],
    ) -> None:
        """An import's derived edges: out of its own lineages only, replaced in one transaction.

        Every lineage named (as a source of the edges dropped, or an end of one kept) must be the
        import's own, checked against the rows: a plan cannot drop or draw another writer's edges."""
        if not is_import(actor):
            raise Forbidden("derived edges are an import's; they come from a source's sync")
        named = sorted({*lineages, *(s for s, _, _ in rows), *(t for _, t, _ in rows)})
        owners = await source_rows.lineage_owners(self.store, named)
        for lid in named:
            author, origin = owners.get(lid, ("", ""))
            self._authorize_replace(actor, lid, author, origin)
        await self.writer.replace_edges(sorted(set(lineages)), relations, rows)

    # ------------------------------------------------------------------ reads

    async def purge(self, memory_id: str, reason: str, actor: Actor) -> MemoryDetail:
        """Owner only, after a forget: every version's body and title become a tombstone and the
        vectors go (they were computed from the text). Hashes, authors, times and the events stay, so
        the history still says what existed, who wrote it and who purged it, never what it said."""
        if actor.role != "owner":
            raise Forbidden("only an owner key can purge a memory")
        current = (await self.store.get(memory_id)).memory
        self.authorize_write(actor, current.namespace)
        await self.writer.purge(memory_id, self.gate.check("reason", reason), TOMBSTONE, actor=actor)
        return await self.store.get(memory_id)

    async def get(self, memory_id: str, actor: Actor) -> MemoryDetail:
        """One entry and its history. A forgotten entry is gone for every key but an owner's: an agent
        or read key gets `not_found` for any version of it, and never a forgotten version's body."""
        detail = await self.store.get(memory_id)
        self._authorize_read(actor, detail.memory.namespace)
        if actor.role == "owner":
            return detail
        newest = max(detail.history, key=lambda m: m.version, default=detail.memory)
        if detail.memory.status == "forgotten" or newest.status == "forgotten":
            raise NotFound("no memory with that id is visible to this key", field="id")
        return detail.model_copy(update={"history": [m for m in detail.history if m.status != "forgotten"]})

    async def list_memories(
        self,
        actor: Actor,
        namespaces: list[str] | None = None,
        *,
        kind: str | None = None,
        limit: int = 50,
        before: datetime | None = None,
    ) -> list[MemorySummary]:
        scope = self.scope_for(actor, namespaces)
        return await self.store.list_memories(scope.namespaces, kind=kind, limit=limit, before=before)

    async def search(
        self,
        query: str,
        actor: Actor,
        namespaces: list[str] | None = None,
        *,
        limit: int = 6,
        as_of: datetime | None = None,
        kinds: list[str] | None = None,
    ) -> list[Hit]:
        if not query.strip():
            raise InvalidInput("query is empty", field="query")
        # Queries leave the process (to the embedder), so they pass the gate too: refused, never echoed.
        SecretGate("refuse").check("query", query)
        if as_of is not None:
            try:
                as_of = check_as_of(as_of)
            except ValueError as e:
                raise InvalidInput(str(e), field="as_of") from None
        scope = self.scope_for(actor, namespaces, as_of=as_of, **({"kinds": tuple(kinds)} if kinds else {}))
        # A search asks for up to `limit` results: selectivity (one memory when it clearly answers) is
        # for what is injected into a prompt (retrieval.compose), not for a list the caller reads.
        result = await self.retriever.retrieve(query, scope, limit=limit, select=False)
        await self.store.touch([h.id for h in result.hits])
        return result.hits + result.expanded

    async def context(
        self, actor: Actor, namespaces: list[str] | None = None, *, budget: int = 1500, decisions: int = 10
    ) -> dict[str, list[Hit]]:
        """Session start: standing facts (curated, within ~`budget` tokens) plus the latest decisions."""
        scope = self.scope_for(actor, namespaces)
        standing, used = [], 0
        for hit in await self.store.standing(scope):
            cost = estimate_tokens(hit.body) + 20
            if hit.tier == "curated" and used + cost <= budget:
                standing.append(hit)
                used += cost
        latest = await self.store.latest(scope, "decision", decisions)
        return {"standing": standing, "decisions": latest}
