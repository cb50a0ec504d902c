"""The memory store as one object: the memories aggregate, split by job, put back together.

Callers hold one `Store` (the gateway's runtime, the jobs, brainctl); what it does lives in one
module per job: `base` (pool, transactions, `Scope`), `memory_reads`, `legs`,
`lineage`, `events`, `model_swap` (and `writer`, which the facade leaves out on purpose: only
the door writes). Other tables have their own modules that take a `Store` (keys, proposals,
jobruns, digests, episodes, catalog, sources, lexical, …).
"""

from __future__ import annotations

from brain.store.base import AbandoningPool, LexicalStats, Scope, content_hash, new_id
from brain.store.events import Events
from brain.store.legs import RetrievalLegs
from brain.store.lineage import Lineage
from brain.store.memory_reads import MemoryReads
from brain.store.model_swap import ModelSwap
from brain.store.reindex import embed_text


class Store(MemoryReads, RetrievalLegs, Lineage, Events, ModelSwap):
    """Postgres is the truth: every read of memories goes through one of these. It cannot write:
    the writes are `brain.store.writer.StoreWriter`'s, which only `brain.services` imports."""


__all__ = ["AbandoningPool", "LexicalStats", "Scope", "Store", "content_hash", "embed_text", "new_id"]
