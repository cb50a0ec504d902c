"""Exposure receipts and retraction notices: which conversations were given a memory, and telling them
when an owner takes it back.

**The conversation.** The provider sees a conversation as its turns, and so does the gateway: the
hash chain of brain.gateway.placement (a hash of the conversation up to and including each turn, as
the client sent it, cache marks left out). A conversation's id is the chain hash of the first turn of
it this replica's `Ledger` holds a block for (the first question the gateway answered with memory or
with none), else of the turn being answered now. Every later request of that conversation resends
those turns byte for byte, so its chain holds that hash again: the id is found in the request itself,
on any replica, after a restart, without state. A Responses API request that continues by
`previous_response_id` resends nothing; the response id is linked to the conversation here (per
replica, bounded) and the link followed. Keys are part of the id: one key never matches another's.

**Receipts.** Each fresh injection (not a block put back) is queued as (memory id, key, conversation,
API, time) and written in one statement per `flush_s`, after the request has gone on; version,
lineage and namespace come from the memory row. A full queue or a failing database drops receipts and
counts them (`brain_exposure_receipts_dropped_total`), never slows or fails the request. Receipts not
renewed for `retentionDays` are pruned hourly.

**Retractions.** An owner's retire, forget or purge is already an audit event (brain.store.exposure_rows).
Each replica reads the retraction events' fingerprint every `poll_s` (one index range, like the keys'
fingerprint), and when it changes, the retracted lineages and the conversations given one of them
and not told yet: a map held in memory. A request looks its chain's hashes up in that map (a few
dictionary reads; none at all while nothing is retracted) and the notices it finds go where this
turn's memory block goes (placement: the person's newest message, after everything cached), as a
fenced block under the preamble, recorded in the Ledger with the block so later turns put it back
byte for byte. A turn that gets no fresh block (a tool loop's resend) carries none: the notice waits
for the next question rather than disturb the cached prefix. When the request succeeds the notice is
counted (`brain_retraction_notices_total`) and marked delivered in the receipts (`noticed_at`), so no
replica sends it again; when it fails it is put back for the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from brain.core.redact import SecretGate
from brain.gateway import metrics
from brain.gateway.settings import ExposureSettings
from brain.retrieval.render import PREAMBLE, render_retraction
from brain.store import exposure_rows
from brain.store.store import Store

log = logging.getLogger("brain.gateway.retractions")

#: Responses API links (response id → conversation) and delivered notices remembered per replica.
LINKS = 20_000
TOLD = 50_000
#: At most this many untold conversations are held; the rest wait for the next reload.
PENDING_LIMIT = 100_000
PRUNE_EVERY_S = 3600.0
_REDACT = SecretGate("redact")


@dataclass(frozen=True)
class Notice:
    """One retracted memory to tell one conversation about."""

    memory_id: str  # the version the conversation was given
    lineage_id: str
    key_name: str
    conversation: str  # as its receipt names it
    action: str
    by: str
    at: datetime
    reason: str

    @property
    def told(self) -> tuple[str, str, str]:
        return (self.lineage_id, self.key_name, self.conversation)

    def render(self) -> str:
        return render_retraction(
            self.memory_id, self.action, self.by, self.at.date().isoformat(), self.reason
        )


def with_notices(block: str, notices: Sequence[Notice]) -> str:
    """`block` with the notices after it; alone, under the preamble (pure)."""
    if not notices:
        return block
    return "\n\n".join([block or PREAMBLE, *(n.render() for n in notices)])


def conversation_id(
    hashes: Sequence[str], recorded: Iterable[int], target: int | None, linked: str | None = None
) -> str | None:
    """The conversation's id: a link's, else the hash of its first turn with a Ledger record, else
    of the turn answered now (else of its first turn) (pure)."""
    if linked:
        return linked
    turns = [i for i in recorded if 0 <= i < len(hashes)]
    if target is not None and 0 <= target < len(hashes):
        turns.append(target)
    if turns:
        return hashes[min(turns)]
    return hashes[0] if hashes else None


class Exposure:
    """One per gateway replica (the Runtime's): the receipt queue and the retraction map."""

    def __init__(self, settings: ExposureSettings) -> None:
        self.settings = settings
        self._receipts: list[tuple[str, str, str, str, datetime]] = []
        self._noticed: list[tuple[str, str, str]] = []
        self.retracted: dict[str, dict[str, Any]] = {}  # lineage → its retraction
        self.pending: dict[tuple[str, str], list[Notice]] = {}  # (key, conversation) → notices
        self._told: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._links: OrderedDict[str, str] = OrderedDict()
        self._fingerprint: tuple[Any, ...] | None = None
        self._reload = False
        self._lock = asyncio.Lock()
        self._pruned_at = 0.0

    # ------------------------------------------------------------------ the request path (no I/O)

    def conversation(
        self,
        key: str,
        hashes: Sequence[str],
        recorded: Iterable[int],
        target: int | None,
        previous: str | None,
    ) -> str | None:
        linked = self._links.get(f"{key}\x00{previous}") if previous else None
        return conversation_id(hashes, recorded, target, linked)

    def due(self, key: str, hashes: Sequence[str], conversation: str | None) -> list[Notice]:
        """The notices this request owes: its conversation's untold retractions, taken off the map."""
        if not self.pending:
            return []
        out: list[Notice] = []
        for h in dict.fromkeys([*hashes, *([conversation] if conversation else [])]):
            found = self.pending.pop((key, h), None)
            if found:
                out.extend(found)
        for n in out:
            self._remember_told(n.told)
        metrics.retractions_pending.set(len(self.pending))
        return out

    def delivered(self, notices: Sequence[Notice]) -> None:
        if not notices:
            return
        metrics.retraction_notices.inc(len(notices))
        self._noticed.extend(n.told for n in notices)

    def undelivered(self, notices: Sequence[Notice]) -> None:
        """The request failed: the notices wait for the conversation's next request."""
        for n in notices:
            self._told.pop(n.told, None)
            self.pending.setdefault((n.key_name, n.conversation), []).append(n)
        metrics.retractions_pending.set(len(self.pending))

    def receipt(self, ids: Sequence[str], key: str, conversation: str | None, api: str) -> None:
        if not ids or not conversation:
            return
        room = self.settings.queue_size - len(self._receipts)
        if room < len(ids):
            metrics.exposure_dropped.labels("queue_full").inc(len(ids) - max(room, 0))
            ids = ids[: max(room, 0)]
        now = datetime.now(UTC)
        self._receipts.extend((mid, key, conversation, api, now) for mid in ids)

    def link(self, key: str, response_id: str | None, conversation: str | None) -> None:
        """A Responses API answer: a request continuing from it is the same conversation."""
        if not response_id or not conversation:
            return
        self._links[f"{key}\x00{response_id}"] = conversation
        self._links.move_to_end(f"{key}\x00{response_id}")
        while len(self._links) > LINKS:
            self._links.popitem(last=False)

    def _remember_told(self, told: tuple[str, str, str]) -> None:
        self._told[told] = None
        self._told.move_to_end(told)
        while len(self._told) > TOLD:
            self._told.popitem(last=False)

    # ------------------------------------------------------------------ the background (all the I/O)

    async def run(self, store: Store) -> None:
        """Flush, refresh and prune until cancelled; a failure is logged and retried next round."""
        step = min(self.settings.flush_s, self.settings.poll_s)
        polled = 0.0
        while True:
            await asyncio.sleep(step)
            await self.flush(store)
            now = time.monotonic()
            if now - polled >= self.settings.poll_s:
                polled = now
                with contextlib.suppress(Exception):
                    await self.refresh(store)
            if now - self._pruned_at >= PRUNE_EVERY_S:
                self._pruned_at = now
                try:
                    n = await exposure_rows.prune(store, self.settings.retention_days)
                    if n:
                        log.info(
                            "pruned %d exposure receipts older than %d days", n, self.settings.retention_days
                        )
                except Exception as e:
                    log.debug("exposure prune failed: %s", e)

    async def flush(self, store: Store | None) -> None:
        receipts, self._receipts = self._receipts, []
        noticed, self._noticed = self._noticed, []
        if store is None:
            if receipts:
                metrics.exposure_dropped.labels("no_database").inc(len(receipts))
            self._noticed = noticed + self._noticed  # kept: small, and the notice must not go twice
            return
        if receipts:
            try:
                await exposure_rows.record(store, receipts)
                metrics.exposure_recorded.inc(len(receipts))
            except Exception as e:
                log.warning("exposure receipts dropped (%d): %s", len(receipts), type(e).__name__)
                metrics.exposure_dropped.labels("db_error").inc(len(receipts))
            else:
                if self.retracted:
                    self._reload = True  # a receipt of a memory retracted meanwhile must not be missed
        if noticed:
            try:
                await exposure_rows.mark_noticed(store, noticed, datetime.now(UTC))
            except Exception as e:
                log.warning("retraction notices not marked (%d), retried: %s", len(noticed), type(e).__name__)
                self._noticed = noticed[-TOLD:] + self._noticed

    async def refresh(self, store: Store, *, force: bool = False) -> None:
        """Reload the retracted lineages when their events changed, and their untold conversations."""
        async with self._lock:
            days = self.settings.retention_days
            fp = await exposure_rows.fingerprint(store, days)
            changed = force or fp != self._fingerprint
            if changed:
                self.retracted = {
                    r["lineage_id"]: dict(r) for r in await exposure_rows.retractions(store, days)
                }
                self._fingerprint = fp
            if not self.retracted:
                self.pending = {}
            elif changed or self._reload or self.pending:
                # `pending` non-empty: another replica may have told some of them since
                self._reload = False
                found = await exposure_rows.unnoticed(store, list(self.retracted), PENDING_LIMIT)
                pending: dict[tuple[str, str], list[Notice]] = {}
                for r in found:
                    ret = self.retracted.get(r["lineage_id"])
                    if ret is None:
                        continue
                    n = Notice(
                        memory_id=r["memory_id"],
                        lineage_id=r["lineage_id"],
                        key_name=r["key_name"],
                        conversation=r["conversation"],
                        action=str(ret["action"]),
                        by=str(ret["by"] or ""),
                        at=ret["at"],
                        # a retire's reason never passed the gate, and the notice goes to the provider
                        reason=_REDACT.check("reason", str(ret["reason"] or "")),
                    )
                    if n.told not in self._told:
                        pending.setdefault((n.key_name, n.conversation), []).append(n)
                self.pending = pending
            metrics.retractions_pending.set(len(self.pending))

    async def refresh_now(self, store: Store | None, timeout_s: float = 2.0) -> None:
        """After a retraction through this replica: flush what was queued, then reload at once, so the
        next request here already carries the notice (other replicas follow within `poll_s`)."""
        if store is None:
            return
        try:
            await asyncio.wait_for(self._flush_and_refresh(store), timeout_s)
        except Exception as e:  # the write succeeded; the poll catches up
            log.debug("retraction refresh failed: %s", e)

    async def _flush_and_refresh(self, store: Store) -> None:
        await self.flush(store)
        await self.refresh(store, force=True)
