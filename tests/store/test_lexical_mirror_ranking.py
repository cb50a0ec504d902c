"""Found by an outside attack review (session 28), fixed since; each test is the defect's reproduction. the mirror's ranking against the SQL leg's on ties.

1. A tie wider than the cut was cut by slot (load/write order), where the database takes the
   smallest ids: a memory rewritten (or written later with a smaller id) dropped out.
2. The database scores in float32 (pgvector's inner product accumulates in `float`), the mirror in
   float64 with a 1e-9 relative tie tolerance: two memories tied in the database are not in the
   mirror, which then proposes only the one the database ranks second.
3. Every mirror answer cost two looks in a row (bm25's, then candidates()' own current()); fixed.
"""

from __future__ import annotations

import numpy as np

from brain.store import Scope, Store
from brain.store.lexical import TERMS_SQL, bm25, plan_terms
from tests.store.test_lexical_mirror import _both, mirrored  # noqa: F401

INSERT = """INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)
            VALUES ($1, $1, 'note', 'shared', 'import', 'x', '', $2, $1)"""


def test_a_wide_tie_is_cut_as_the_database_cuts_it() -> None:
    """25 memories with the same weights (copies of one templated text), then one more with the
    smallest id written later (a newer slot): the database answers the smallest id, the mirror's
    candidates (cut at TIES x n by slot) do not contain it, so the re-score cannot find it."""
    from brain.store.postings import Postings

    p = Postings()
    old = [f"zz{i:02d}" for i in range(25)]
    p.load(old, ["shared"] * 25, ["note"] * 25, ["{7:1.5}/999999937"] * 25)
    p.seal()
    p.put("aa0", "shared", "note", "{7:1.5}/999999937")
    got = [i for i, _ in p.top({7: 1.0}, ["shared"], 1)]
    assert "aa0" in got, f"the database's answer (smallest id among the tied) is not a candidate: {got}"


async def test_a_tie_in_the_database_is_a_tie_in_the_mirror(mirrored: Store) -> None:  # noqa: F811
    pool = mirrored.pool_for_tests
    await pool.execute(INSERT, "a1", "wombat")
    await pool.execute(INSERT, "b1", "wombat")
    stats = await mirrored.corpus_stats()  # cached from here on (30 s): the idf bm25 will use
    [term], _ = plan_terms(await pool.fetch(TERMS_SQL, "wombat"), max(stats.docs, 1))
    idf32 = np.float32(term.idf)
    w1 = np.float32(0.9)
    for _ in range(100_000):
        w2 = np.nextafter(w1, np.float32(2), dtype=np.float32)
        if np.float32(idf32 * w1) == np.float32(idf32 * w2):
            break
        w1 = w2
    else:
        raise AssertionError("no float32 collision found")
    dim = await pool.fetchval("SELECT brain_lexeme_dim('wombat')")
    await pool.execute(
        "UPDATE memories SET bm25 = $2::text::sparsevec WHERE id = $1",
        "a1",
        f"{{{dim}:{float(w1)!r}}}/999999937",
    )
    await pool.execute(
        "UPDATE memories SET bm25 = $2::text::sparsevec WHERE id = $1",
        "b1",
        f"{{{dim}:{float(w2)!r}}}/999999937",
    )
    store_mirror = mirrored.mirror
    mirrored.mirror = None
    try:
        both = (await bm25(mirrored, "wombat", Scope.of([]), 2)).hits
    finally:
        mirrored.mirror = store_mirror
    assert both[0][1] == both[1][1], f"precondition: a tie in the database {both}"
    through, alone = await _both(mirrored, "wombat", Scope.of([]), 1)
    assert [i for i, _ in alone] == ["a1"]
    assert through == alone


async def test_one_answer_one_look(mirrored: Store) -> None:  # noqa: F811
    mirror = mirrored.mirror
    assert mirror is not None
    real, calls = mirror._look_once, [0]

    async def counted() -> bool:
        calls[0] += 1
        return await real()

    mirror._look_once = counted  # type: ignore[method-assign]
    await bm25(mirrored, "refunds settled", Scope.of(["repo:payments"]), 5)
    assert calls[0] == 1, f"{calls[0]} looks, one after the other, for one keyword leg"


def _dim(lexeme: str) -> int:
    import hashlib

    return int(hashlib.md5(lexeme.encode()).hexdigest()[:8], 16) % 999_999_937 + 1


async def test_a_memory_holding_no_query_word_is_not_a_keyword_hit(mirrored: Store) -> None:  # noqa: F811
    """Two lexemes on one dimension (md5 mod ~1e9): the SQL leg needs `tsv @@` the query's words,
    RESCORE_SQL takes the mirror's ids by key alone."""
    seen: dict[int, str] = {}
    pair = None
    for i in range(400_000):
        word = f"q{i}"
        other = seen.setdefault(_dim(word), word)
        if other != word:
            pair = (other, word)
            break
    assert pair is not None
    pool = mirrored.pool_for_tests
    assert await pool.fetchval("SELECT brain_lexeme_dim($1) = brain_lexeme_dim($2)", *pair)
    asked, collider = pair
    await pool.execute(INSERT, "holder", f"{asked} apple")
    await pool.execute(INSERT, "stranger", f"{collider}")
    through, alone = await _both(mirrored, asked, Scope.of([]), 5)
    assert [i for i, _ in alone] == ["holder"]
    assert through == alone, f"{collider!r} answers a question about {asked!r}"
