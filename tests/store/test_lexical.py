"""The lexical leg over stored sparsevec weights (brain.store.lexical) ranks as the tsvector SQL did.

The reference (tests/kit/lexical_reference.py) is the leg the store shipped until then: BM25 from
each candidate's tsvector at the live mean length, with the query's IDF in the same statement.
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pgvector.asyncpg import register_vector

from brain.core.models import Actor, MemoryIn
from brain.local.devdb import EmbeddedPostgres
from brain.services.memory import MemoryService
from brain.store import Scope, Store, lexical
from brain.store import lexical_weights as weights
from brain.store import migrate as mig
from brain.store.base import LexicalStats
from brain.store.lexical import Lexical, bm25
from brain.store.migrate import migrate
from brain.store.writer import StoreWriter
from tests.kit import lexical_reference as reference
from tests.kit.database import fresh_database, open_store

BODIES = [
    ("repo:payments", "The staging Postgres for payments listens on port 6543 behind PgBouncer."),
    ("repo:payments", "Refunds are settled nightly at 02:00 UTC by the settlement-worker CronJob."),
    ("repo:payments", "Stripe webhooks are verified with the webhook secret; a failed check returns 400."),
    ("repo:web", "The web app's staging database listens on port 5433; staging staging staging."),
    ("shared", "Production deploys are frozen from Friday 16:00 UTC until Monday 08:00 UTC."),
    ("shared", "Database migrations run in the pre-deploy Job, never at application start."),
    ("shared", "Secrets live in Vault; the database password is rotated monthly."),
]
QUERIES = [
    "which port does the staging database use?",
    "when are refunds settled",
    "database",
    "deploy freeze friday",
    "write a haiku about autumn leaves",
    "",
]
# Two lexemes whose dimensions collide (md5's first 32 bits mod 999,999,937 are both 610,723,324:
# found by hashing k0…k400000 offline; the 'simple' configuration keeps tags as they are).
COLLIDING = ("k15231", "k25525")


async def _write(store: Store, items: list[tuple[str, str]], owner: Actor) -> None:
    await StoreWriter(store).note_many(
        [(MemoryIn(body=body, namespace=ns), None) for ns, body in items], actor=owner
    )


async def _stale_rows(store: Store) -> int:
    """Rows whose stored weights differ from their tsvector's at the current reference length."""
    return int(
        await store.pool_for_tests.fetchval(
            """SELECT count(*) FROM memories
                WHERE bm25 IS DISTINCT FROM brain_bm25_doc(tsv, brain_bm25_reference(1))"""
        )
    )


@pytest.mark.parametrize("namespace", ["repo:payments", "repo:web"])
async def test_ranks_as_the_tsvector_sql_at_the_live_mean(store: Store, owner: Actor, namespace: str) -> None:
    await _write(store, BODIES, owner)
    await store.settle_weights()
    for q in QUERIES:
        scope = Scope.of([namespace])
        new = await bm25(store, q, scope, 10)
        old = await reference.bm25(store, q, scope, 10)
        assert _close(new, old.hits), q  # float4 weights
        assert new.query_idf == pytest.approx(old.query_idf), q
    assert (await bm25(store, "staging port", Scope.of([namespace]), 10)).hits
    # scope holds: nothing from the other repo
    hits = (await bm25(store, "staging port", Scope.of(["repo:web"]), 10)).hits
    got = {h.namespace for h in (await store.hits([d for d, _ in hits])).values()}
    assert got <= {"repo:web", "shared"} and hits


async def test_a_stale_reference_is_bm25_with_other_parameters(store: Store, owner: Actor) -> None:
    """Weights at reference L rank as k1' = k1(1−b+b·A/L), b' = b(A/L)k1/k1' at the live mean A,
    scores scaled by (k1+1)/(k1'+1): what docs/performance.md's stale-reference figures rest on."""
    await _write(store, BODIES, owner)
    mean = await store.settle_weights()
    await store.corpus_stats(max_age=0)  # document count and mean, before the reference goes stale
    for ratio in (0.5, 2.0):
        await store.pool_for_tests.execute(
            "UPDATE brain_meta SET value = $1 WHERE key = 'bm25_avgdl'", repr(mean / ratio)
        )
        await store.pool_for_tests.execute("UPDATE memories SET bm25 = brain_bm25_doc(tsv, $1)", mean / ratio)
        store.lexical.refreshed = time.monotonic()  # keep the stale reference: no drift check now
        store.lexical.reference = mean / ratio
        k1 = 1.2 * (1 - 0.3 + 0.3 * ratio)
        b = 0.3 * ratio * 1.2 / k1
        for q in QUERIES[:4]:
            scope = Scope.of(["repo:payments"])
            new = (await bm25(store, q, scope, 10)).hits
            old = (await reference.bm25(store, q, scope, 10, k1=k1, b=b)).hits
            assert [d for d, _ in new] == [d for d, _ in old], (ratio, q)
            scale = 2.2 / (k1 + 1)
            assert [s for _, s in new] == pytest.approx([s * scale for _, s in old], rel=1e-6), (ratio, q)


async def test_every_write_path_stores_the_weights_of_its_tsvector(
    service: MemoryService, owner: Actor
) -> None:
    """The trigger builds the tsvector itself (a BEFORE trigger cannot read the generated column):
    title, body and tags must come out exactly as `tsv` has them."""
    store = service.store
    first = (
        await service.note(
            MemoryIn(
                title="Deploy rule", body="Deploys go out on Tuesdays; deploys deploy.", tags=["ops", "Rule"]
            ),
            owner,
        )
    ).memory
    await service.supersede(
        first.id,
        MemoryIn(title="Deploy rule", body="Deploys go out on Wednesdays.", tags=["ops"]),
        first.content_hash,
        owner,
    )
    await _write(store, BODIES, owner)
    assert await _stale_rows(store) == 0
    # a caller's own weights are never kept
    await store.pool_for_tests.execute(
        """INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, body, content_hash, bm25)
           VALUES ('x1', 'x1', 'note', 'shared', 'owner', 'cole', 'ports and hosts', 'h', '{1:1000}/999999937')"""
    )
    assert await _stale_rows(store) == 0


async def test_lexemes_sharing_a_dimension_are_summed(store: Store, owner: Actor) -> None:
    a, b = COLLIDING
    dims = await store.pool_for_tests.fetch(
        "SELECT brain_lexeme_dim(l) AS d FROM unnest($1::text[]) l", [a, b]
    )
    assert dims[0]["d"] == dims[1]["d"]
    await StoreWriter(store).note_many([(MemoryIn(body="build cache notes", tags=[a, b]), None)], actor=owner)
    await store.settle_weights()
    row = await store.pool_for_tests.fetchrow(
        "SELECT bm25::text AS v, length(tsv) AS n, tsv::text AS t FROM memories"
    )
    assert row["v"].count(":") == row["n"] - 1, row  # one element for the two lexemes
    hit = (await bm25(store, a, Scope.of([]), 5)).hits
    assert hit and hit[0][1] > 0


async def test_a_body_of_more_lexemes_than_a_sparsevec_holds_is_stored(store: Store, owner: Actor) -> None:
    """pgvector keeps at most 16,000 non-zero elements: a 32 KB body of distinct words keeps its
    16,000 heaviest weights instead of failing the write."""
    body = " ".join(chr(0x4E00 + i) for i in range(16_300))
    await StoreWriter(store).note_many([(MemoryIn(body=body), None)], actor=owner)
    row = await store.pool_for_tests.fetchrow("SELECT bm25::text AS v, length(tsv) AS n FROM memories")
    assert row["n"] > 16_000
    assert row["v"].count(":") == 16_000


async def test_the_reference_follows_the_live_mean(store: Store, owner: Actor) -> None:
    await _write(store, BODIES[:2], owner)
    first = await store.pool_for_tests.fetchval(
        "SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl'"
    )
    long = " ".join(f"word{i} topic{i % 7}" for i in range(60))
    await _write(store, [("shared", f"{long} variant {i}") for i in range(6)], owner)
    stats = await store.corpus_stats(max_age=0)
    assert stats.reference is not None and stats.reference != first
    assert stats.reference == pytest.approx(stats.avg_len)
    assert await _stale_rows(store) == 0  # a small brain is rewritten inline
    assert (
        await store.pool_for_tests.fetchval(
            "SELECT count(*) FROM brain_meta WHERE key = 'bm25_rewrite_after'"
        )
        == 0
    )
    # within DRIFT of the mean, nothing moves
    await _write(store, [("shared", BODIES[2][1])], owner)
    assert (await store.corpus_stats(max_age=0)).reference == stats.reference


async def test_a_store_from_before_migration_0004_ranks_the_same(pg: EmbeddedPostgres, owner: Actor) -> None:
    async with fresh_database(pg, "pre4") as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            assert await migrate(conn, dim=384, upto=3) == 3
        finally:
            await conn.close()
        pool = await asyncpg.create_pool(dsn, init=register_vector, min_size=1, max_size=2)
        old = Store(pool, dim=384, embedding_model="sentence-transformers/all-MiniLM-L6-v2")
        try:
            await pool.executemany(  # as code of that schema wrote them (today's writer knows later columns)
                "INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, body, content_hash)"
                " VALUES ($1, $1, 'note', $2, 'owner', $3, $4, md5($4))",
                [(f"m{i}", ns, owner.name, body) for i, (ns, body) in enumerate(BODIES)],
            )
            # schema 3 knows no weights: the corpus numbers the tsvector SQL read, without the upkeep
            mean = float(await pool.fetchval("SELECT avg(length(tsv)) FROM memories WHERE status = 'active'"))
            old.lexical = LexicalStats(len(BODIES), mean, time.monotonic())
            scope = Scope.of(["repo:payments"])
            before = {q: (await reference.bm25(old, q, scope, 10)).hits for q in QUERIES}
        finally:
            await old.close()
        async with open_store(dsn) as store:
            assert await store.pool_for_tests.fetchval(
                "SELECT count(*) FROM memories WHERE bm25 IS NULL"
            ) == len(BODIES)
            assert await store.pool_for_tests.fetchval(
                "SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl'"
            ) == (pytest.approx(mean))
            # before the backfill reaches them: weights computed on the fly
            store.lexical = LexicalStats(len(BODIES), mean, time.monotonic(), mean)
            for q in QUERIES:
                assert _close(await bm25(store, q, scope, 10), before[q]), q
            assert await store.pool_for_tests.fetchval(
                "SELECT count(*) FROM memories WHERE bm25 IS NULL"
            ) == len(BODIES)
            # the backfill, in batches: the first corpus_stats of a small brain runs it
            await store.corpus_stats(max_age=0)
            assert (
                await store.pool_for_tests.fetchval("SELECT count(*) FROM memories WHERE bm25 IS NULL") == 0
            )
            assert await _stale_rows(store) == 0
            for q in QUERIES:
                assert _close(await bm25(store, q, scope, 10), before[q]), q


def _close(new: Lexical, old: list[tuple[str, float]]) -> bool:
    hits = new.hits
    return [d for d, _ in hits] == [d for d, _ in old] and [s for _, s in hits] == pytest.approx(
        [s for _, s in old], rel=1e-6
    )


async def test_backfill_batches_resume_where_they_stopped(store: Store, owner: Actor) -> None:
    await _write(store, [("shared", f"note {i} about hosts and ports") for i in range(12)], owner)
    await store.pool_for_tests.execute("UPDATE memories SET bm25 = NULL")
    await store.pool_for_tests.execute(
        "INSERT INTO brain_meta VALUES ('bm25_rewrite_after', '') ON CONFLICT (key) DO UPDATE SET value = ''"
    )
    assert await weights.rewrite_batch(store.pool_for_tests, 5) == 5
    assert await store.pool_for_tests.fetchval("SELECT count(*) FROM memories WHERE bm25 IS NULL") == 7
    assert await weights.catch_up(store.pool_for_tests, 5) == 7
    assert await weights.rewrite_batch(store.pool_for_tests, 5) == 0
    assert await _stale_rows(store) == 0


async def test_history_is_scored_too(service: MemoryService, owner: Actor) -> None:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    old = (await service.note(MemoryIn(body="Issues are tracked in Jira.", valid_from=t0), owner)).memory
    new = await service.supersede(
        old.id,
        MemoryIn(body="Issues are tracked in Linear.", valid_from=t0 + timedelta(days=30)),
        old.content_hash,
        owner,
    )
    now = await bm25(service.store, "where are issues tracked", Scope.of([]), 5)
    then = await bm25(
        service.store, "where are issues tracked", Scope.of([], as_of=t0 + timedelta(days=1)), 5
    )
    assert [d for d, _ in now.hits] == [new.id]
    assert [d for d, _ in then.hits] == [old.id]


async def test_a_larger_brain_rewrites_in_the_background(
    store: Store, owner: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above INLINE_ROWS the query that sees the drift does not wait for the rewrite; it finishes in
    a task (and `close` would cancel it), after which every row has the new reference's weights."""
    monkeypatch.setattr(weights, "INLINE_ROWS", 3)
    monkeypatch.setattr(weights, "BATCH", 4)
    await _write(store, [("shared", f"note {i} about ports") for i in range(4)], owner)
    long = " ".join(f"word{i}" for i in range(80))
    await _write(store, [("shared", f"{long} host {i}") for i in range(8)], owner)
    stats = await store.corpus_stats(max_age=0)
    task = store.weights_task
    assert task is not None
    await task
    assert stats.reference == pytest.approx(stats.avg_len)
    assert await _stale_rows(store) == 0
    assert (
        await store.pool_for_tests.fetchval(
            "SELECT count(*) FROM brain_meta WHERE key = 'bm25_rewrite_after'"
        )
        == 0
    )


# A corpus where most query words are common and a few are rare: the shape MaxScore prunes.
_VOCAB = [f"w{i}" for i in range(60)]


def _corpus(count: int, seed: int) -> list[tuple[str, str]]:

    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(len(_VOCAB))]  # Zipf: w0 is in most memories, w59 in few
    return [("shared", " ".join(rng.choices(_VOCAB, weights, k=rng.randint(3, 14)))) for _ in range(count)]


async def test_the_bound_keeps_the_exhaustive_ranking(
    store: Store, owner: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the leg stops by its bound (`exact`), its top n is the exhaustive BM25's to the last id;
    only a query whose remaining words are common (a cost limit) may differ, and says so. The floor
    is lowered to 50 (the leg's floor before #33), so common terms exist here as in a big brain."""
    monkeypatch.setattr(lexical, "COMMON_FLOOR", 50)
    await _write(store, _corpus(400, 33), owner)
    await store.settle_weights()
    await store.corpus_stats(max_age=0)

    rng = random.Random(7)
    checked = inexact = pruned = 0
    for _ in range(60):
        words = rng.sample(_VOCAB, rng.randint(2, 6))
        q = " ".join(words)
        for n in (1, 3, 10):
            got = await bm25(store, q, Scope.of([]), n)
            full = await reference.exhaustive(store, q, Scope.of([]), n)
            assert got.query_idf == pytest.approx(full.query_idf)
            if not got.exact:
                inexact += 1
                continue
            checked += 1
            pruned += got.scanned < got.terms
            assert [d for d, _ in got.hits] == [d for d, _ in full.hits], (q, n)
            assert [s for _, s in got.hits] == pytest.approx([s for _, s in full.hits], rel=1e-9)
            old = await reference.bm25(store, q, Scope.of([]), n)  # the tsvector formula, exhaustive
            assert [s for _, s in got.hits] == pytest.approx([s for _, s in old.hits], rel=1e-5), (q, n)
    # the corpus exercises both: rankings the bound cut short, and some left to a cost limit
    assert checked >= 120 and pruned >= 20 and inexact, (checked, pruned, inexact)


def test_a_pass_scans_until_the_unscanned_bound_falls_to_the_threshold() -> None:
    terms = [lexical.Term(f"t{i}", i, df, lexical.idf(df, 10_000)) for i, df in enumerate((3, 40, 200, 400))]
    assert lexical.next_pass(terms, 0, None, 10_000) == 1  # the rarest alone first
    assert lexical.next_pass(terms, 1, None, 10_000) == 4  # no threshold yet: every allowed term
    bound_after = [lexical.unscanned_bound(terms, k) for k in range(4)]  # 2.2 × their IDF: no max_tf
    # a threshold above what t1..t3 could add stops at once; one between scans just enough
    assert lexical.next_pass(terms, 1, bound_after[1] + 0.01, 10_000) == 1
    assert lexical.next_pass(terms, 1, bound_after[2], 10_000) == 2
    # a term in more than 5 % of a large brain is never scanned after the rarest
    common = [*terms[:2], lexical.Term("c", 9, 6_000, lexical.idf(6_000, 100_000))]
    assert lexical.next_pass(common, 2, None, 100_000) == 2
    # in a small brain a term up to COMMON_FLOOR memories still is: 600 of 10k is 6 %, and scanned
    small = [*terms[:2], lexical.Term("c", 9, 600, lexical.idf(600, 10_000))]
    assert lexical.next_pass(small, 2, None, 10_000) == 3


def test_the_query_vector_sums_lexemes_that_share_a_dimension() -> None:
    a, b = lexical.Term("a", 5, 1, 2.0), lexical.Term("b", 5, 1, 0.5)
    assert lexical.query_vector([lexical.Term("z", 9, 1, 1.0), a, b]) == "{5:2.5,9:1.0}/999999937"


async def test_a_small_brain_ranks_exactly_as_exhaustive_bm25(store: Store, owner: Actor) -> None:
    """Under COMMON_FLOOR memories no term is too common to scan: every query's top n is exhaustive
    BM25's, its common words included (#33: the 5 % rule alone cut 11 of 200 top 10s at 10k)."""
    await _write(store, _corpus(400, 34), owner)
    await store.settle_weights()
    await store.corpus_stats(max_age=0)
    rng = random.Random(8)
    for _ in range(40):
        q = " ".join(rng.sample(_VOCAB, rng.randint(2, 6)))
        got = await bm25(store, q, Scope.of([]), 10)
        full = await reference.exhaustive(store, q, Scope.of([]), 10)
        assert got.exact, q
        assert [d for d, _ in got.hits] == [d for d, _ in full.hits], q


def test_a_terms_bound_follows_the_highest_frequency_on_its_dimension() -> None:
    """k1 + 1 without the counts; tf·2.2 / (tf + 0.84) for one lexeme; the sum where lexemes share the
    dimension (their weights are summed there). The stored weights are checked against it below."""
    assert lexical.Term("t", 1, 5, 1.0).weight_bound == lexical.WEIGHT_BOUND
    assert lexical.Term("t", 1, 5, 1.0, (1,)).weight_bound == pytest.approx(2.2 / 1.84)
    assert lexical.Term("t", 1, 5, 1.0, (3,)).weight_bound == pytest.approx(6.6 / 3.84)
    assert lexical.Term("t", 1, 5, 1.0, (1, None)).weight_bound == pytest.approx(2.2 / 1.84 + 2.2)


def test_a_pass_stops_sooner_when_no_memory_repeats_the_unscanned_terms() -> None:
    """With each term's highest frequency known, the unscanned terms' bound is ~0.54x the 2.2 one,
    so a threshold that the 2.2 bound would scan past already ends the scan."""
    dfs = (3, 40, 200, 400)
    loose = [lexical.Term(f"t{i}", i, df, lexical.idf(df, 10_000)) for i, df in enumerate(dfs)]
    tight = [lexical.Term(t.lexeme, t.dim, t.df, t.idf, (1,)) for t in loose]
    theta = 1.5 * sum(t.idf for t in loose[1:])  # between 1.196x and 2.2x the unscanned IDF
    # the 2.2 bound scans t1 (2.2 x the IDF of t1..t3 is above theta); the tight one stops at once
    assert lexical.next_pass(loose, 1, theta, 10_000) == 2
    assert lexical.next_pass(tight, 1, theta, 10_000) == 1


async def _weights_over_bound(store: Store) -> list[tuple[str, str, float, float]]:
    """Every (memory, lexeme) whose stored weight (read from `memories.bm25` by a one-hot inner
    product) exceeds the bound `lexical.Term` gives from what TERMS_SQL reads for its dimension."""
    rows = await store.pool_for_tests.fetch(
        f"""SELECT m.id, u.lexeme,
                   -(m.bm25 <#> format('{{%s:1}}/{lexical.DIMENSIONS}', brain_lexeme_dim(u.lexeme))::sparsevec) AS w,
                   ARRAY(SELECT o.max_tf FROM lexeme_stats o
                          WHERE brain_lexeme_dim(o.lexeme) = brain_lexeme_dim(u.lexeme)) AS dim_max_tf
              FROM memories m, unnest(m.tsv) u WHERE m.status <> 'forgotten'"""
    )
    over = []
    for r in rows:
        bound = lexical.Term(r["lexeme"], 0, 1, 1.0, tuple(r["dim_max_tf"])).weight_bound
        if r["w"] > bound:
            over.append((r["id"], r["lexeme"], r["w"], bound))
    return over


async def test_the_store_keeps_each_lexemes_highest_term_frequency(
    service: MemoryService, store: Store, owner: Actor
) -> None:
    """The trigger records each lexeme's highest term frequency and never lowers it (a superseded
    version stays scoreable by `as_of`), and no stored weight, short memories and a shared dimension
    included, is above the bound the leg plans with."""
    first = await service.note(
        MemoryIn(body="Canary deploys deploy deploy to one zone first.", namespace="shared"), owner
    )
    await service.note(MemoryIn(body="The deploy freeze starts Friday.", namespace="shared"), owner)
    await service.supersede(
        first.memory.id,
        MemoryIn(body="Canary releases go to one zone first.", namespace="shared"),
        first.memory.content_hash,
        owner,
    )
    await _write(store, [*_corpus(60, 35), ("shared", "deploy deploy"), ("shared", "zone")], owner)
    await StoreWriter(store).note_many([(MemoryIn(body="cache", tags=list(COLLIDING)), None)], actor=owner)
    await store.settle_weights()
    rows = {
        r["lexeme"]: (r["df"], r["max_tf"])
        for r in await store.pool_for_tests.fetch("SELECT lexeme, df, max_tf FROM lexeme_stats")
    }
    assert rows["deploy"] == (2, 3)  # df counts active memories; the superseded version's 3 stays
    assert rows["zone"] == (2, 1) and rows["freez"] == (1, 1)
    planned = await store.pool_for_tests.fetch(lexical.TERMS_SQL, COLLIDING[0])
    assert [sorted(r["dim_max_tf"]) for r in planned] == [[1, 1]]  # both lexemes of the shared dimension
    assert await _weights_over_bound(store) == []


async def test_a_store_from_before_migration_0006_gets_the_highest_frequencies(
    pg: EmbeddedPostgres, owner: Actor
) -> None:
    """Migration 0006 counts what is already stored, history included (a superseded version's tf
    above every active memory's), and leaves no lexeme without its count."""
    async with fresh_database(pg, "pre6") as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            assert await migrate(conn, dim=384, upto=5) == 5
            await conn.execute(
                """INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, body, content_hash,
                                         status)
                   VALUES ('old1', 'old1', 'note', 'shared', 'agent', 'a', 'retry retry retry the payments job', 'h1',
                           'superseded'),
                          ('new1', 'new1', 'note', 'shared', 'agent', 'a', 'retry the payments job once', 'h2',
                           'active')"""
            )
            assert await conn.fetchval("SELECT count(*) FROM lexeme_stats WHERE lexeme = 'retri'") == 1
        finally:
            await conn.close()
        async with open_store(dsn) as store:
            got = await store.pool_for_tests.fetchrow(
                "SELECT df, max_tf FROM lexeme_stats WHERE lexeme = 'retri'"
            )
            assert (got["df"], got["max_tf"]) == (1, 3)
            assert (
                await store.pool_for_tests.fetchval("SELECT count(*) FROM lexeme_stats WHERE max_tf IS NULL")
                == 0
            )


async def test_a_write_during_migration_0006_is_counted(
    pg: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older pod keeps writing while 0006 runs (a rolling upgrade). Its write waits for the
    migration's lock on `memories` and then fires the new trigger, so its term frequency is counted;
    without the lock it would fire the old trigger after the count, and `max_tf` would stay below it.
    The migration is held open for a second after its count, so the write lands in that window."""
    head = mig.available()
    held = [(v, n, sql + "\nSELECT pg_sleep(1);" if v == 6 else sql) for v, n, sql in head if v <= 6]
    async with fresh_database(pg, "race6") as dsn:
        conn, writer = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
        try:
            assert await migrate(conn, dim=384, upto=5) == 5
            await conn.execute(
                "INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, body, content_hash)"
                " VALUES ('a', 'a', 'note', 'shared', 'agent', 'x', 'retry once', 'h1')"
            )
            monkeypatch.setattr(mig, "available", lambda: held)
            migrating = asyncio.create_task(migrate(conn, dim=384))
            await asyncio.sleep(0.5)  # inside the held second, after the count
            await writer.execute(
                "INSERT INTO memories (id, lineage_id, kind, namespace, origin, author, body, content_hash)"
                " VALUES ('b', 'b', 'note', 'shared', 'agent', 'x', 'retry retry retry retry', 'h2')"
            )
            assert await migrating == 6
            got = await writer.fetchrow("SELECT df, max_tf FROM lexeme_stats WHERE lexeme = 'retri'")
            assert (got["df"], got["max_tf"]) == (2, 4)
        finally:
            await conn.close()
            await writer.close()
