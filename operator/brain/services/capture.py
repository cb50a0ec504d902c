"""The capture write path: what the gateway learned from an exchange goes in through the one door.

The gateway decides *what* is worth keeping (`brain.gateway.capture.analyse`, heuristics on the
text); this module decides *how* it is written, with the same rules as every other writer: the
entry is built as a `MemoryIn` under `captured_as(caller)`: the caller's own key name, role and
namespaces, origin `gateway` (provenance comes from the key, never from the model's text), secrets are masked rather than refused (an experience is
worth keeping without its token; the masked «REDACTED:…» placeholder is never a secret again, so
the door's refusing gate then finds nothing), and `MemoryService.note` applies the strict lint.
`write` is the whole path after the heuristics: keep, propose, and the `capture` event, in that
order; it returns what happened instead of counting it, so the surface owns its metrics.

Code the heuristics marked for review (it downloads from a host outside `capture.trustedHosts` and
runs something) is never written as a memory: `propose` queues it through the proposals door, where
an owner sees the hosts and decides; the door screens it like any draft (a plain `curl | sh` is
refused there too, and counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from brain.core.errors import BrainError
from brain.core.models import Actor, MemoryIn
from brain.core.redact import SecretGate
from brain.services import proposals
from brain.services.memory import MemoryService
from brain.services.screening import gate_fields


class CapturedItem(Protocol):
    """One entry a capture heuristic proposes (fields of `MemoryIn` the heuristic may set)."""

    kind: str
    title: str
    body: str
    tags: list[str]
    attrs: dict[str, Any]
    importance: float
    review: list[str]


@dataclass
class CaptureOutcome:
    stored: list[dict[str, str]] = field(default_factory=list)  # id, kind, created (true: a new row)
    proposed: list[str] = field(default_factory=list)  # proposal ids: code waiting for an owner
    # Why items were masked or dropped, one reason per event: secret_redacted (masked and kept),
    # instruction_like, invalid, or the door's error code.
    filtered: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Exchange:
    """Who captured what, from which call: the provenance the door records (never from the text)."""

    caller: Actor  # the key that made the call, as the gateway's auth resolved it
    write_namespace: str
    api: str
    model: str | None
    episode: str | None = None
    injected: tuple[str, ...] = ()


_MASK = SecretGate("redact")


def captured_as(caller: Actor) -> Actor:
    """Who a captured entry is written as: the caller's key name and namespaces, origin `gateway`.
    The text is the model's, so an owner's exchange writes as an agent (never curated, never a
    persona or skill), and a read key stays a read key, which the door refuses."""
    role = "read" if caller.role == "read" else "agent"
    return Actor(name=caller.name, role=role, origin="gateway", namespaces=caller.namespaces)


async def write(
    service: MemoryService,
    to_keep: Sequence[CapturedItem],
    to_review: Sequence[CapturedItem],
    exchange: Exchange,
    filtered: str | None,
) -> CaptureOutcome:
    """The capture of one exchange: each entry kept or proposed through the door, then its event. A
    caller the door would not let write there (a read key, a key confined elsewhere) leaves nothing:
    no entry, no proposal, no event."""
    try:
        service.authorize_write(captured_as(exchange.caller), exchange.write_namespace)
    except BrainError as e:
        return CaptureOutcome(filtered=[e.code for _ in (*to_keep, *to_review)])
    outcome = await keep(service, to_keep, exchange)
    await _propose(service, to_review, exchange, outcome)
    await _record(service, exchange, outcome, filtered)
    return outcome


async def keep(service: MemoryService, items: Sequence[CapturedItem], exchange: Exchange) -> CaptureOutcome:
    """Write each item through the door as `captured_as` the caller; one refused item never stops the rest."""
    out = CaptureOutcome()
    actor = captured_as(exchange.caller)
    for item in items:
        try:
            proposed = MemoryIn(
                kind=item.kind,
                namespace=exchange.write_namespace,
                title=item.title,
                body=item.body,
                tags=item.tags,
                attrs={**item.attrs, "model": exchange.model or "", "api": exchange.api},
                importance=item.importance,
                episode=exchange.episode,
            )
            masked = gate_fields(proposed, _MASK)
            if masked != proposed:
                out.filtered.append("secret_redacted")
            res = await service.note(masked, actor)
        except BrainError as e:
            out.filtered.append("instruction_like" if e.code == "instruction_rejected" else e.code)
            continue
        except ValueError:  # the entry would not validate (e.g. an over-long generated field)
            out.filtered.append("invalid")
            continue
        out.stored.append({"id": res.memory.id, "kind": item.kind, "created": str(res.created)})
    return out


async def _propose(
    service: MemoryService, items: Sequence[CapturedItem], exchange: Exchange, out: CaptureOutcome
) -> None:
    """Queue each item for an owner instead of storing it (masked first, like `keep`). Only `write`
    calls it, after the door said the caller may write the namespace: a proposal is a write waiting
    for an owner."""
    for item in items:
        try:
            masked = gate_fields(
                MemoryIn(
                    kind=item.kind, namespace=exchange.write_namespace, title=item.title, body=item.body
                ),
                _MASK,
            )
            pid = await proposals.create(
                service.store,
                kind=item.kind,
                namespace=exchange.write_namespace,
                title=masked.title,
                body=masked.body,
                evidence=[
                    {
                        "capture": exchange.api,
                        "model": exchange.model or "",
                        "downloads_from": list(item.review),
                    }
                ],
                authors=[exchange.caller.name],
                score=0.0,
            )
        except BrainError as e:
            out.filtered.append("instruction_like" if e.code == "instruction_rejected" else e.code)
            continue
        except ValueError:
            out.filtered.append("invalid")
            continue
        out.proposed.append(pid)


async def _record(
    service: MemoryService, exchange: Exchange, outcome: CaptureOutcome, filtered: str | None
) -> None:
    """The `capture` event: what was stored and why the rest was not (the digest and review read it)."""
    await service.store.record_event(
        "capture",
        key_name=exchange.caller.name,
        namespace=exchange.write_namespace,
        payload={
            "stored": outcome.stored,
            "proposed": outcome.proposed,
            "filtered": filtered,
            "model": exchange.model,
            "api": exchange.api,
            "injected": list(exchange.injected),
        },
    )
