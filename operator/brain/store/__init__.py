"""Postgres is the truth: memories, edges, keys, events, proposals, job runs."""

from brain.store.store import Scope, Store

__all__ = ["Scope", "Store"]
