"""A batch writer's plan, applied through the door: what ingest and eval compute, what services writes.

A source's sync (brain.ingest.sync) and `brainctl eval` (brain.local.eval) write many entries at
once. They do not write: they hold a `Store`, which only reads, and compute a `WritePlan` (entries
to add, entries to supersede, entries to retire, derived edges, and what they already refused).
`apply` writes it as `actor`, each entry admitted (`MemoryService.admit`: the namespace, the kind,
the authorship of what it replaces, then the one screening of every field a stored row will hold,
`source_key` included), so a plan built anywhere gets the same rules as a REST note. An entry the
planner already asked this door about carries the very `Admitted` it got (screening a repository's
chunk costs milliseconds; twice would double it); the door recognises its own by identity and
admits anything else again.
An entry the door refuses is listed in `Applied.rejects` and the rest of the plan goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from brain.core.errors import BrainError
from brain.core.models import Actor, Memory, MemoryIn
from brain.services.memory import Admitted, Held, MemoryService

#: The relations a source derives from its files (brain.ingest): a sync replaces these, no others.
DERIVED_RELATIONS = ("contains", "calls", "imports", "rationale_for")
WRITE_BATCH = 500
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Stored:
    """What the door needs of an entry this plan wrote earlier and now supersedes (`Held`)."""

    id: str
    lineage_id: str
    content_hash: str
    namespace: str
    kind: str
    author: str
    origin: str


@dataclass(frozen=True)
class Add:
    """A new entry. `key` is the planner's identity for it (an item key, a dataset id); `admitted`,
    what the door's `admit` returned for it when planning (written as is only if that door issued it)."""

    key: str
    item: MemoryIn
    vector: np.ndarray | None
    standing: bool = False
    required: bool = False
    admitted: Admitted | None = None
    embed_input: str | None = None  # what `vector` was made of, when not the item's title and body


@dataclass(frozen=True)
class Supersede:
    """A new version of `replaces` (a stored entry) or of the entry this plan wrote under `after`."""

    key: str
    item: MemoryIn
    vector: np.ndarray | None
    replaces: Held | None = None
    after: str | None = None
    standing: bool = False
    required: bool = False
    admitted: Admitted | None = None
    embed_input: str | None = None


@dataclass(frozen=True)
class Retire:
    """An entry of the writer's own that the source no longer yields (or graded out), and why."""

    held: Held
    reason: str


@dataclass(frozen=True)
class Edge:
    """A derived edge between two of the plan's keys (resolved to lineages when written)."""

    source: str
    target: str
    relation: str
    confidence: float = 1.0


@dataclass(frozen=True)
class WritePlan:
    """Everything a batch writer wants, computed without writing (see the module docstring).

    `known` maps keys of entries already stored and left as they are to their lineages, so edges
    can reach them; `edges` is None when the plan does not touch edges at all (eval), else the whole
    set of derived edges out of its lineages, replacing what was there. `episodic` stores every
    entry in the episodic tier, whatever the writer could write (eval's corpus; never a raise).
    """

    adds: tuple[Add, ...] = ()
    supersedes: tuple[Supersede, ...] = ()
    retires: tuple[Retire, ...] = ()
    edges: tuple[Edge, ...] | None = None
    known: Mapping[str, str] = field(default_factory=dict)
    rejects: tuple[tuple[str, str], ...] = ()
    episodic: bool = False


@dataclass
class Applied:
    """What was written: memory ids and lineages by key, counts, what the door refused (key, why),
    and the retires it refused (an entry another writer changed since the plan was computed)."""

    ids: dict[str, str] = field(default_factory=dict)
    lineages: dict[str, str] = field(default_factory=dict)
    added: int = 0
    superseded: int = 0
    retired: int = 0
    edges: int = 0
    rejects: list[tuple[str, str]] = field(default_factory=list)
    unretired: list[tuple[str, str]] = field(default_factory=list)  # (memory id, why) a retire refused


def why(e: BrainError | ValueError) -> str:
    """A refused entry's reason: the door's code and message, or pydantic's first line."""
    if isinstance(e, BrainError):
        return f"{e.code}: {e.message}"
    return f"invalid: {str(e).splitlines()[0]}"


async def apply(
    door: MemoryService, plan: WritePlan, actor: Actor, *, progress: Progress | None = None
) -> Applied:
    """Write `plan` as `actor` through `door`: adds, then supersedes (in order), retires, edges."""
    out = Applied(rejects=list(plan.rejects), lineages=dict(plan.known))
    admitted: list[tuple[Admitted, Add]] = []
    written: dict[str, Stored] = {}  # what this plan wrote, for a later supersede `after` it
    for add in plan.adds:
        try:
            a = _admission(door, actor, plan, add, None)
        except (BrainError, ValueError) as e:
            out.rejects.append((add.key, why(e)))
            continue
        admitted.append((a, add))
    for i in range(0, len(admitted), WRITE_BATCH):
        batch = admitted[i : i + WRITE_BATCH]
        mems = await door._note_admitted(
            [(a, add.vector) for a, add in batch], [add.embed_input for _, add in batch]
        )
        for mem, (_, add) in zip(mems, batch, strict=True):
            out.ids[add.key], out.lineages[add.key] = mem.id, mem.lineage_id
            written[add.key] = _held(mem)
        out.added += len(batch)
        if progress:
            progress("writing", min(i + WRITE_BATCH, len(admitted)), len(admitted))
    for s in plan.supersedes:
        target = s.replaces if s.after is None else written.get(s.after)
        if target is None:
            out.rejects.append((s.key, f"not_found: {s.after!r} was not written by this plan"))
            continue
        try:
            a = _admission(door, actor, plan, s, target)
            new = await door._supersede_admitted(a, s.vector, s.embed_input)
        except (BrainError, ValueError) as e:
            out.rejects.append((s.key, why(e)))
            out.lineages[s.key] = target.lineage_id  # the stored version stays, and keeps its edges
            continue
        out.superseded += 1
        out.ids[s.key], out.lineages[s.key] = new.id, new.lineage_id
        written[s.key] = _held(new)
    for r in plan.retires:
        try:
            await door.retire_own(r.held, r.reason, actor)
            out.retired += 1
        except BrainError as e:
            out.unretired.append((r.held.id, why(e)))
    if plan.edges is not None:
        out.edges = await _edges(door, actor, plan.edges, out.lineages)
    return out


def _admission(
    door: MemoryService, actor: Actor, plan: WritePlan, entry: Add | Supersede, target: Held | None
) -> Admitted:
    """The entry's admission: the planner's own `Admitted` when this door issued that very object, for
    this actor, in the tier the plan asks, against exactly the version it replaces; else `admit` now."""
    a = entry.admitted
    replaces = (target.id, target.content_hash) if target is not None else (None, None)
    if (
        a is not None
        and door.issued(a, actor)
        and (not plan.episodic or a.tier == "episodic")
        and (a.replaces, a.expected_hash) == replaces
    ):
        return a
    return door.admit(
        entry.item,
        actor,
        replaces=target,
        standing=entry.standing,
        required=entry.required,
        episodic=plan.episodic,
    )


def _held(mem: Memory) -> Stored:
    return Stored(mem.id, mem.lineage_id, mem.content_hash, mem.namespace, mem.kind, mem.author, mem.origin)


async def _edges(door: MemoryService, actor: Actor, edges: Sequence[Edge], lineage: Mapping[str, str]) -> int:
    """Replace the derived edges out of the plan's lineages with the current set (edges join lineages)."""
    rows: dict[tuple[str, str, str], float] = {}
    for e in edges:
        if e.relation not in DERIVED_RELATIONS:
            raise ValueError(f"edge relation {e.relation!r} is not one a source derives")
        s, t = lineage.get(e.source), lineage.get(e.target)
        if s and t and s != t:
            rows[(s, t, e.relation)] = e.confidence
    await door.replace_edges(actor, sorted(set(lineage.values())), DERIVED_RELATIONS, rows)
    return len(rows)
