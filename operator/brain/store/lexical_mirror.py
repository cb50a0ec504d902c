"""The gateway's in-memory copy of the stored BM25 weights, kept current with the database (#33).

Why: the lexical leg in SQL grows with the brain (docs/performance.md, "An in-memory lexical
mirror"); scoring in memory (`brain.store.postings`) does not, nearly. Postgres stays the truth: the
mirror only proposes candidates, which the leg re-scores and filters in one statement by primary key,
so a stale or wrong mirror can cost recall, never show a memory outside the scope.

Current, not eventually: before each use the mirror reads what changed since its last look, in one
statement (migration 0008 stamps each change with its transaction id; the mirror keeps the snapshot
it read at and asks for rows stamped at or past its xmax or by a transaction it saw in progress).
So a memory written through another replica or a job is a candidate as soon as it is committed, as
with the SQL leg. Uses that arrive while a look is under way wait for the next one, which starts
after them; they share it.

When the mirror cannot answer at once it says so (None) and the leg runs in SQL: while it loads, when
more than `page` rows or `chars` of weights changed (a bulk import, a weight rewrite: it catches up in
the background, a slice at a time), when a look fails, and after its loader failed (it retries). It
rebuilds from scratch, in the background while the old copy serves, when dead slots and the delta
reach `rebuild_share` of it; it drops the copy and reloads when the table was replaced (a restore) or
the server changed (a failover or restart, whose transaction counter may have lost commits). A copy
changing hands bumps `generation`, which voids the looks made on the old one.

Off the event loop: the ranking runs on a thread of the mirror's own, one at a time, under a lock
that the looks' writes to the arrays also take (at 1M memories a question of common words ranks for
several ms, which held every other stage on the loop). Looks run on a connection of their own that
plans the look once (in the pool each look was planned anew: 1.0 of its 1.05 ms at 100k memories).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
from prometheus_client import Counter, Gauge

from brain.store.postings import Postings

log = logging.getLogger(__name__)
T = TypeVar("T")

EMPTY = "{}/1"  # no weights (a row without them and no reference length yet): no postings

mirror_memories = Gauge(
    "brain_lexical_mirror_memories",
    "Active memories the gateway's in-memory lexical copy holds (0 while it loads).",
)
mirror_loads = Counter(
    "brain_lexical_mirror_loads_total", "Full loads of the in-memory lexical copy, by outcome.", ["outcome"]
)
lexical_answers = Counter(
    "brain_lexical_leg_total",
    "Lexical leg runs, by where they were scored: mirror (in memory, re-scored by key) or database.",
    ["path"],
)

_WEIGHTS = "coalesce(m.bm25, brain_bm25_doc(m.tsv, (SELECT value::float8 FROM brain_meta WHERE key = 'bm25_avgdl')))::text"
_WHICH = "pg_current_snapshot()::text AS snap, 'memories'::regclass::oid AS rel, pg_postmaster_start_time()::text AS started"
SNAPSHOT_SQL = f"SELECT {_WHICH}"
LOAD_SQL = f"""SELECT m.id, m.namespace, m.kind, {_WEIGHTS} AS w FROM memories m
               WHERE m.status = 'active' AND m.id > $1 ORDER BY m.id LIMIT $2"""
# Every row changed by a transaction the last look did not see committed, in one statement with the
# snapshot it ran at (the LEFT JOIN keeps that row when nothing changed), in (stamp, id) order from a
# keyset. Two index range scans, not an OR, and the keyset as scalar bounds, not a row comparison:
# under a generic plan (asyncpg prepares statements) the OR walked the whole stamp index (1.1 s at 1M
# memories) and the row comparison made the scan start at the index's first entry (56 ms). A stamp at
# or past the snapshot's xmax is no commit of this server's: it is a restored row's, from the cluster
# the dump came from (pg_restore loads rows before the trigger exists), and would be read every look.
_CHANGED = f"""SELECT m.id, m.namespace, m.kind, m.status, {_WEIGHTS} AS w, m.lexical_xid::text AS xid
    FROM memories m
   WHERE m.lexical_xid {{match}} AND m.lexical_xid >= $3::text::xid8
     AND (m.lexical_xid > $3::text::xid8 OR m.id > $4::text)
     AND m.lexical_xid < pg_snapshot_xmax(pg_current_snapshot())
   ORDER BY m.lexical_xid, m.id LIMIT $5"""
CHANGES_SQL = f"""WITH s AS (SELECT {_WHICH})
SELECT s.snap, s.rel, s.started, c.* FROM s LEFT JOIN LATERAL (
  SELECT * FROM (({_CHANGED.format(match="= ANY($2::text[]::xid8[])")})
                 UNION ALL ({_CHANGED.format(match=">= $1::text::xid8")})) u
   ORDER BY u.xid::xid8, u.id LIMIT $5) c ON true"""


@dataclass(frozen=True)
class Seen:
    """The snapshot a look read at: every transaction below `xmax` not in `running` was visible.
    `relation` and `started` say which table and which server: a restore replaces the table, a
    failover or restart changes the server (whose transaction counter may have lost commits)."""

    xmax: int
    running: tuple[int, ...]
    relation: int
    started: str

    @staticmethod
    def parse(snap: str, relation: int, started: str) -> Seen:
        _, xmax, xip = snap.split(":")
        return Seen(int(xmax), tuple(int(x) for x in xip.split(",") if x), int(relation), started)

    def args(self) -> tuple[str, list[str]]:
        return str(self.xmax), [str(x) for x in self.running]

    def follows(self, before: Seen) -> bool:
        """Whether this snapshot continues `before`'s history (else the copy must be reloaded)."""
        return (self.relation, self.started) == (before.relation, before.started) and self.xmax >= before.xmax


class LexicalMirror:
    """One brain's active memories' BM25 weights in memory, for `brain.store.lexical.bm25`."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        open_look_pool: Callable[[], Awaitable[asyncpg.Pool]] | None = None,
        page: int = 2000,
        rebuild_share: float = 0.5,
        batch: int = 2000,
        chars: int = 4_000_000,
    ) -> None:
        self._pool = pool
        # Where looks run (`open_look_pool`: a pool of one connection that plans the look once, opened on
        # the first look; without it, `pool`).
        self._open_look_pool = open_look_pool
        self._look_pool: asyncpg.Pool | None = None
        self._look_pool_retry = 0.0  # monotonic time before which a refused look pool is not retried
        # Rankings run here, one at a time (they hold `_reading`): not in the default executor, where
        # they queued behind embeddings waiting on the model's lock.
        self._ranker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lexical-rank")
        self.page = page  # changed rows a look applies itself; past it the drain does, in the background
        self.rebuild_share = rebuild_share
        self.batch = batch  # rows a load or drain page reads
        self.chars = chars  # weights text parsed or applied at once (a body can carry 16,000 weights)
        self.postings: Postings | None = None
        self._seen: Seen | None = None
        self._look = asyncio.Lock()
        self._reading = asyncio.Lock()  # a worker thread ranks in the copy: no write meanwhile
        self._looks_started = 0
        self._looks_done = 0  # the number (1-based) of the newest look that finished on this copy
        self.generation = 0  # bumped when a copy changes hands: a look on the old one says nothing
        self._loader: asyncio.Task[None] | None = None
        self._drain: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        """Begin the first load in the background; until it ends the leg runs in SQL."""
        self._reload()

    async def stop(self) -> None:
        self._stopped = True
        for task in (self._loader, self._drain):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._look_pool is not None:  # only ever the looks' own pool (the fallback is not kept)
            await self._look_pool.close()
        self._ranker.shutdown(wait=False)
        mirror_memories.set(0)

    @property
    def ready(self) -> bool:
        return self.postings is not None and self._seen is not None

    async def candidates(
        self,
        query: dict[int, float],
        n: int,
        generation: int,
        *,
        namespaces: Iterable[str],
        kinds: Iterable[str] | None,
        exclude_kinds: Iterable[str],
    ) -> list[str] | None:
        """The ids of the best `n` by BM25 over `query` (dimension → IDF) among the current versions in
        a scope (`Scope`'s fields; a history scope is the SQL leg's), ties by id, from the copy that
        `current()` brought up to date (its `generation`); None when another copy took over since."""
        postings = self.postings
        if postings is None or generation != self.generation or self._stopped:
            return None
        async with self._reading:
            if generation != self.generation:  # dropped while this waited (a restore, a failover)
                return None
            top = await _on_worker(
                self._ranker,
                lambda: postings.top(query, namespaces, n, kinds=kinds, exclude_kinds=exclude_kinds),
            )
        return [i for i, _ in top]

    async def current(self) -> int | None:
        """Bring the mirror up to every commit made before this call; the copy's generation, or None
        when it cannot now."""
        wanted = self._looks_started + 1  # a look that starts after this call began
        if self._stopped or not self._usable():
            return None
        async with self._look:
            if not self._usable():
                return None
            if self._looks_done >= wanted:
                return self.generation
            self._looks_started += 1
            number = self._looks_started
            # Only a look that ended counts for those waiting on it: one cancelled with its caller
            # (a retrieval past its budget) or failed leaves them to look for themselves.
            if not await self._look_once():
                return None
            self._looks_done = number
            return self.generation

    async def _pool_for_looks(self) -> asyncpg.Pool:
        """The looks' own connection, opened on the first look. When the server refuses it (the
        login's or the server's connection limit) or does not answer, looks run on the main pool,
        planned each time, and it is tried again a minute later."""
        if self._look_pool is not None:
            return self._look_pool
        if self._open_look_pool is None or time.monotonic() < self._look_pool_retry:
            return self._pool
        try:
            pool = await self._open_look_pool()
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
            log.warning("the lexical mirror's look connection was refused (%s); looking on the main pool", e)
            self._look_pool_retry = time.monotonic() + 60.0
            return self._pool
        if self._stopped:  # stopped while it opened: nothing else would close it
            await pool.close()
            return self._pool
        self._look_pool = pool
        return pool

    def _usable(self) -> bool:
        return self.ready and (self._drain is None or self._drain.done())

    async def _look_once(self) -> bool:
        seen, postings = self._seen, self.postings
        if seen is None or postings is None:
            return False
        xmax, running = seen.args()
        pool = await self._pool_for_looks()
        if self._stopped:
            return False
        rows = await pool.fetch(CHANGES_SQL, xmax, running, "0", "", self.page + 1)
        now = Seen.parse(rows[0]["snap"], rows[0]["rel"], rows[0]["started"])
        if not now.follows(seen):
            log.warning("the memories table was replaced or the server changed: reloading the lexical mirror")
            self._reload(drop=True)
            return False
        changed = [r for r in rows if r["id"] is not None]
        if len(changed) > self.page or sum(len(r["w"] or "") for r in changed) > self.chars:
            self._drain = asyncio.create_task(self._drain_all(self.generation), name="lexical-mirror-drain")
            return False
        async with self._reading:
            _apply(postings, changed)
        self._seen = now
        self._after_changes()
        return True

    async def _drain_all(self, generation: int) -> None:
        """Read every change since the copy's last look, a page at a time, applying a bounded slice
        between chances for requests to run; then looks go on from the first page's snapshot (what
        committed after it is read again, harmlessly). Nothing happens if another copy took over."""
        try:
            async with self._look:
                since, postings = self._seen, self.postings
                if generation != self.generation or since is None or postings is None:
                    return
                xmax, running = since.args()
                after: tuple[str, str] = ("0", "")
                first: Seen | None = None
                while True:
                    rows = await self._pool.fetch(CHANGES_SQL, xmax, running, *after, self.batch)
                    snap = Seen.parse(rows[0]["snap"], rows[0]["rel"], rows[0]["started"])
                    if not snap.follows(since):
                        self._reload(drop=True)
                        return
                    first = first or snap
                    changed = [r for r in rows if r["id"] is not None]
                    for part in _slices(changed, self.chars):
                        async with self._reading:
                            _apply(postings, part)
                        await asyncio.sleep(0)  # requests run between slices (they answer in SQL)
                    if len(changed) < self.batch:
                        break
                    after = (changed[-1]["xid"], changed[-1]["id"])
                self._seen = first
                self._after_changes()
        except Exception:
            log.exception("the lexical mirror could not catch up; reloading it")
            self._reload(drop=True)

    def _after_changes(self) -> None:
        assert self.postings is not None
        mirror_memories.set(self.postings.live)
        if self.postings.stale_share >= self.rebuild_share and (self._loader is None or self._loader.done()):
            self._reload()

    def _reload(self, *, drop: bool = False) -> None:
        """Build a fresh copy in the background; `drop` stops using the current one meanwhile."""
        if self._stopped:
            return
        if drop:
            self.postings, self._seen = None, None
            self.generation += 1
            mirror_memories.set(0)
        if self._loader is None or self._loader.done():
            self._loader = asyncio.create_task(self._load(), name="lexical-mirror-load")

    async def _load(self) -> None:
        delay = 1.0
        while True:
            try:
                postings, seen = await self._read_all()
                break
            except asyncio.CancelledError:
                raise
            except Exception as e:
                mirror_loads.labels("error").inc()
                log.warning(
                    "lexical mirror load failed (%s); the leg runs in SQL, retrying in %.0fs", e, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 60.0)
        async with self._look:  # nothing looks while the copies change hands
            self.postings, self._seen = postings, seen
            self.generation += 1
            self._looks_done = 0  # looks on the old copy say nothing about this one
        mirror_loads.labels("ok").inc()
        mirror_memories.set(postings.live)
        log.info(
            "lexical mirror loaded: %d memories, %.0f MB of arrays", postings.live, postings.nbytes() / 1e6
        )

    async def _read_all(self) -> tuple[Postings, Seen]:
        """Every active memory's weights, a page at a time by id, each page its own short statement
        (a transaction of the load's length, 15–20 s at 1M memories, would hold back vacuum and
        queue a reindex swap's lock, and every reader behind it). The pages do not share a snapshot:
        the first look after the load reads everything changed since the snapshot taken before the
        first page, which mends any page that read a row mid-change."""
        postings = Postings()
        row = await self._pool.fetchrow(SNAPSHOT_SQL)
        seen = Seen.parse(row["snap"], row["rel"], row["started"])
        after = ""
        while True:
            rows = await self._pool.fetch(LOAD_SQL, after, self.batch)
            for part in _slices(rows, self.chars):
                await asyncio.to_thread(_load_batch, postings, part)
            if len(rows) < self.batch:
                break
            after = rows[-1]["id"]
        await asyncio.to_thread(postings.seal)
        _trim()
        return postings, seen


async def _on_worker(executor: concurrent.futures.Executor, work: Callable[[], T]) -> T:
    """`work` on a worker thread, so the event loop serves the other stages meanwhile (at 1M memories
    a question of common words ranks for tens of ms). A caller cancelled once it started still waits
    for it to end: the caller holds the lock that keeps writes off the arrays it reads."""
    future = executor.submit(work)
    done = asyncio.wrap_future(future)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        if future.cancel():  # it never started: nothing reads the arrays
            raise
        while not done.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({done})
        raise


def _slices(rows: Sequence[Any], chars: int) -> Iterator[Sequence[Any]]:
    """`rows` in runs whose weights text adds up to about `chars`: what one parse or apply holds."""
    start, size = 0, 0
    for i, r in enumerate(rows):
        size += len(r["w"] or "")
        if size > chars and i > start:
            yield rows[start:i]
            start, size = i, len(r["w"] or "")
    if start < len(rows):
        yield rows[start:]


def _trim() -> None:
    """Give the load's freed buffers (rows, batches, the sort's temporaries: several times the final
    arrays) back to the system: glibc keeps them otherwise, and the replica's resident memory stayed
    ≈ 4x the arrays at 1M memories."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _load_batch(postings: Postings, rows: Sequence[Any]) -> None:
    postings.load(
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] or EMPTY for r in rows]
    )


def _apply(postings: Postings, rows: Sequence[Any]) -> None:
    for r in rows:
        if r["status"] != "active":
            postings.drop(r["id"])
    postings.put_many(
        [(r["id"], r["namespace"], r["kind"], r["w"] or EMPTY) for r in rows if r["status"] == "active"]
    )
