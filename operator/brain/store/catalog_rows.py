"""The catalog's read: every active persona and skill that may be injected, with its vector.

Untrusted imports and captured model output are never a persona or a skill, and a persona must be
curated; the filter is here, in SQL, so nothing that fails it ever reaches the gateway's memory.
"""

from __future__ import annotations

from typing import Any

from brain.store.store import Store


async def personas_and_skills(store: Store, limit: int) -> list[dict[str, Any]]:
    rows = await store._pool.fetch(
        """SELECT id, kind, namespace, tier, origin, author, title, body, valid_from, importance, standing,
                  required, lineage_id, content_hash, domain_keywords, embedding
             FROM memories
            WHERE kind IN ('persona', 'skill') AND status = 'active' AND origin NOT IN ('untrusted', 'gateway')
              AND (kind = 'skill' OR tier = 'curated')
            ORDER BY importance DESC, valid_from DESC LIMIT $1""",
        limit,
    )
    return [dict(r) for r in rows]
