"""Outside attack review (session 29) of `Store.unknown_names`'s tsvector fast paths: the answer
compared with the trigram lookups alone (TRIGRAM_ONLY) over names and bodies chosen to make the
tsvector disagree with the text: case, digits, stop words as heads or parts, stemming, names held
only in titles or tags, quotes around words, and every status. Held: the fast paths can only find a
subset of what the trigram lookup finds (same status filter, the same pattern rechecked), so they
never change the answer; the first two tests pin that down. The last is a (performance) finding: a
head the brain holds only inside compounds or inflections is read through the tsvector in full
before the trigram lookup runs anyway.

The findings reproduced here were fixed in session 29; the tests keep them fixed.
"""

from __future__ import annotations

import pytest

from brain.core.models import Actor, MemoryIn
from brain.store import Store
from brain.store.writer import StoreWriter
from tests.store.test_unknown_names import TRIGRAM_ONLY, same_as_trigram_only

# (body, title, tags)
ITEMS = [
    ("KORFAY-WORKER restarts nightly.", "", []),
    ("Runs through the blue-worker and the auth-relay.", "", []),
    ("The runner is up; the running-relay drains.", "", []),  # stemming: running -> run
    ("'quoted'-worker is owned by infra; \"dq\"-relay too.", "", []),
    ("O'Brien-worker and it's-relay and l'amour-relay.", "", []),
    ("Version v2-worker replaced 2024-worker.", "", []),
    ("the-worker is a thing; a-relay too; it-service runs.", "", []),
    ("We ship 1-2-worker builds and x1e5-worker.", "", []),
    ("Names in titles and tags only are not in the body.", "titlonly-worker", ["tagonly-worker"]),
    ("Selfie self-care self-hosted; hand-painted.", "", []),
    ("data-working is not data-worker-ish? data workers are.", "", []),
    ("over-the-top, up-the-relay, the-the", "", []),
    ("Zorbel stands alone. Zorbel's too.", "", []),
    ("caf\u00e9-worker and na\u00efve-relay, \u00c9cole-service.", "", []),
    ("snake_case_worker and dotted.worker and slash/worker.", "", []),
    ("trailing-worker-", "", []),
    ("-leading-worker", "", []),
]
NAMES = [
    "korfay-worker",
    "blue-worker",
    "auth-relay",
    "running-relay",
    "run-relay",
    "runner-worker",
    "quoted-worker",
    "dq-relay",
    "brien-worker",
    "o-brien-worker",
    "it-relay",
    "s-relay",
    "amour-relay",
    "v2-worker",
    "2024-worker",
    "2025-worker",
    "the-worker",
    "a-relay",
    "it-service",
    "is-worker",
    "1-2-worker",
    "2-worker",
    "x1e5-worker",
    "titlonly-worker",
    "tagonly-worker",
    "self-care",
    "self-hosted",
    "self-worker",
    "selfie-worker",
    "hand-painted",
    "hand-worker",
    "data-worker",
    "data-working",
    "data-relay",
    "the-relay",
    "up-the-relay",
    "top-the",
    "zorbel-worker",
    "zorbel-s-worker",
    "caf-worker",
    "cole-service",
    "ve-relay",
    "case-worker",
    "snake-case-worker",
    "dotted-worker",
    "slash-worker",
    "trailing-worker",
    "leading-worker",
    "worker-worker",
    "the-the",
    "a-the",
    "1-1",
    "0-worker",
    "00-worker",
]


async def _compare(store: Store, names: list[str] = NAMES) -> list[str]:
    return await same_as_trigram_only(store, names)


@pytest.mark.parametrize("status", ["active", "retired", "superseded", "forgotten"])
async def test_the_answer_is_the_trigram_lookups_whatever_the_text(
    store: Store, owner: Actor, status: str
) -> None:
    written = await StoreWriter(store).note_many(
        [(MemoryIn(body=b, title=t, tags=g, namespace="shared"), None) for b, t, g in ITEMS], actor=owner
    )
    got = await _compare(store)
    assert 0 < len(got) < len(NAMES) and "2025-worker" in got and "korfay-worker" not in got
    # half of them in another status
    ids = [w.id for i, w in enumerate(written) if i % 2 == 0]
    await store.pool_for_tests.execute("UPDATE memories SET status = $2 WHERE id = ANY($1)", ids, status)
    await _compare(store)


async def test_random_names_parse_and_agree(store: Store, owner: Actor) -> None:
    """Thousands of valid names built from stop words, digits, hex, number-like and stemmable parts:
    none breaks the lexemes' tsquery, and the answer is the trigram lookups'."""
    import random

    rnd = random.Random(29)
    parts = [
        "the",
        "a",
        "it",
        "s",
        "t",
        "1",
        "01",
        "1e5",
        "0x1f",
        "v2",
        "2024",
        "run",
        "running",
        "runs",
        "worker",
        "relay",
        "self",
        "care",
        "data",
        "korfay",
        "blue",
        "auth",
        "and",
        "or",
        "not",
        "no",
        "www",
        "com",
        "http",
        "x",
        "ies",
        "e",
        "ed",
        "ing",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ]
    await StoreWriter(store).note_many(
        [(MemoryIn(body=b, title=t, tags=g, namespace="shared"), None) for b, t, g in ITEMS], actor=owner
    )
    names = sorted({"-".join(rnd.choice(parts) for _ in range(rnd.randint(2, 4))) for _ in range(3000)})
    names += ["-".join(["b"] * 1200), "z" * 3000 + "-worker"]  # past the parser's word length
    await _compare(store, names)


async def test_a_head_held_only_inside_compounds_costs_no_more_than_before(store: Store) -> None:
    """A perf probe (a finding): "self" held by many memories only as part of "self-signed" (its
    lexeme 'self' is in each tsvector; the head pattern, a whole word, matches none), and a question
    naming "self-service" (a known kind, an unknown name). The head's tsvector lookup reads every one
    of them, rechecks the pattern and finds nothing; the trigram lookup then runs as before: the
    check reads more than the trigram lookups alone did. Compared by shared buffers (EXPLAIN)."""
    import json

    pool = store.pool_for_tests
    await pool.execute(
        """INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, title, body, content_hash)
           SELECT 'ss' || i, 'ss' || i, 'note', 'shared', 'import', 'x', '',
                  'Node ' || i || ' serves a self-signed certificate; the auth-service trusts it.', md5(i::text)
             FROM generate_series(1, 5000) i"""
    )
    await pool.execute("VACUUM ANALYZE memories")  # the GIN pending list merged: a settled index
    names = ["self-service"]
    assert await store.unknown_names(names) == names
    seen: list[tuple[str, tuple]] = []
    real = store._pool.fetch

    async def spy(sql, *args):  # type: ignore[no-untyped-def]
        seen.append((sql, args))
        return await real(sql, *args)

    store._pool.fetch = spy  # type: ignore[method-assign]
    try:
        await store.unknown_names(names)
    finally:
        store._pool.fetch = real  # type: ignore[method-assign]
    [(new_sql, args)] = seen

    async def cost(sql: str) -> tuple[int, float]:
        plan = json.loads(await pool.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args))[0]
        top = plan["Plan"]
        return top["Shared Hit Blocks"] + top["Shared Read Blocks"], plan["Execution Time"]

    for _ in range(2):  # warm
        new, old = await cost(new_sql), await cost(TRIGRAM_ONLY)
    print(f"unknown_names {new} vs trigram only {old} (buffers, ms)")
    # A bounded probe (a few dozen heap pages) is fair; reading every holder of 'self' is not: that
    # grows with the brain (here 5,000 memories: ~370 extra buffers on ~770).
    assert new[0] <= old[0] + 100, f"the check read {new[0]} buffers, the trigram lookups alone {old[0]}"
