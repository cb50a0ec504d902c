"""Found by an outside attack review (session 28), fixed since; each test is the defect's reproduction. a look that fails (its statement hit the gateway's statement_timeout: a heavy page of
changed rows, an open bulk transaction's entries) fails the whole keyword leg, where the SQL leg
could still have answered."""

from __future__ import annotations

import asyncpg

from brain.store import Scope, Store
from brain.store.lexical import bm25
from tests.store.test_lexical_mirror import mirrored  # noqa: F401


async def test_a_failed_look_falls_back_to_sql(mirrored: Store) -> None:  # noqa: F811
    mirror = mirrored.mirror
    assert mirror is not None

    async def timed_out() -> bool:
        raise asyncpg.QueryCanceledError("canceling statement due to statement timeout")

    mirror._look_once = timed_out  # type: ignore[method-assign]
    hits = (await bm25(mirrored, "refunds settled", Scope.of(["repo:payments"]), 5)).hits
    assert hits, "the SQL leg has the answer"
