"""Placing a named event in time: when did "the migration" or "Linear" first appear in the brain?

"What did we use before Linear" is answered by the version that was valid before Linear was first
recorded, so the event's time is the earliest `valid_from` of a memory (any status: a superseded
note still says when a thing was first written down) that contains every content word of the
event's name. Kept apart from store.py so the store's per-table modules stay as they are.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.store.store import Scope, Store


async def first_mention(store: Store, phrase: str, scope: Scope) -> datetime | None:
    """Earliest `valid_from` of an in-scope memory matching all of `phrase`'s lexemes, else None."""
    value = await store._pool.fetchval(
        """SELECT min(m.valid_from) FROM memories m
            WHERE m.namespace = ANY($2::text[]) AND m.status <> 'forgotten'
              AND numnode(plainto_tsquery('english', $1)) > 0
              AND m.tsv @@ plainto_tsquery('english', $1)""",
        phrase,
        list(scope.namespaces),
    )
    return value if isinstance(value, datetime) else None
