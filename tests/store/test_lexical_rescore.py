"""Outside attack review (session 29): RESCORE_SQL's `ts_match_vq(m.tsv, q)` in place of `m.tsv @@ q`.
Held: `@@` on (tsvector, tsquery) is that very function, so every row, scope, status and hash
collision answers as before; only the index can no longer serve it.

The findings reproduced here were fixed in session 29; the tests keep them fixed.
"""

from __future__ import annotations

from brain.store import Store


async def test_the_operator_is_the_function(store: Store) -> None:
    code = await store.pool_for_tests.fetchval(
        "SELECT oprcode::text FROM pg_operator WHERE oprname = '@@'"
        " AND oprleft = 'tsvector'::regtype AND oprright = 'tsquery'::regtype"
    )
    assert code == "ts_match_vq"
    same = await store.pool_for_tests.fetchval(
        """SELECT bool_and((v @@ q) IS NOT DISTINCT FROM ts_match_vq(v, q))
             FROM (VALUES (to_tsvector('english', 'staging ports'), 'port | x'::tsquery),
                          (to_tsvector('english', 'staging'), NULL::tsquery),
                          (NULL::tsvector, 'port'::tsquery),
                          (to_tsvector('english', 'a b'), ''::tsquery)) t(v, q)"""
    )
    assert same
