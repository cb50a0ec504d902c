"""Every active memory's stored BM25 weights as posting arrays in this process's memory (#33).

Why: the lexical leg in SQL scores a candidate by reading its row (≈ 3.3 µs a posting), so a question
whose terms are held by many memories costs more the bigger the brain, and the MaxScore bound
(brain/store/lexical.py) cannot stop early once the copies or near-copies of a text outnumber the top
n. Summing a question's postings with numpy costs a few nanoseconds each, so scoring every posting of
every query term (exhaustive BM25, no bound and no cost limit) stays within a few milliseconds at 1M
memories. The database stays the truth: these are candidates, re-scored and filtered there
(`brain.store.lexical_mirror`).

Pure: no I/O. A bulk load sorts every posting by dimension once (CSR arrays); later writes append to
per-dimension lists (the delta) and mark the memory's old slot dead. The owner rebuilds from the
database when the delta and the dead slots grow past a share of the whole (`stale_share`), so there
is no compaction code here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

# A memory's weights as pgvector prints a sparsevec: "{dim:weight,dim:weight}/dimensions".
SparseText = str

NEAR = 1e-6  # relative: float32 sums of the same weights differ by less


def parse_batch(texts: Sequence[SparseText]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dimensions, weights and each text's number of pairs, for a batch of sparsevec texts, with one
    numpy parse for the whole batch (a Python loop per pair costs about a second a million)."""
    counts = np.fromiter((t.count(":") for t in texts), dtype=np.int64, count=len(texts))
    inner = ",".join(t[1 : t.index("}")] for t in texts if t[1] != "}").replace(":", ",")
    flat = np.array(inner.split(","), dtype=np.float64) if inner else np.zeros(0)
    return flat[0::2].astype(np.int64), flat[1::2].astype(np.float32), counts


class _Column:
    """A growable numpy column (amortised doubling), for per-slot attributes."""

    def __init__(self, dtype: type) -> None:
        self.data: np.ndarray = np.zeros(1024, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > len(self.data):
            grown = np.zeros(max(end, 2 * len(self.data)), dtype=self.data.dtype)
            grown[: self.size] = self.view
            self.data = grown
        self.data[self.size : end] = values
        self.size = end

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.size]


@dataclass
class Codes:
    """Small integers for namespaces and kinds, so a slot's scope is two array reads."""

    of: dict[str, int] = field(default_factory=dict)

    def code(self, name: str) -> int:
        return self.of.setdefault(name, len(self.of))

    def mask(self, names: Iterable[str], *, invert: bool = False) -> np.ndarray:
        """A boolean per code: in `names` (or not, with `invert`)."""
        m = np.zeros(len(self.of) + 1, dtype=bool)
        for n in names:
            if n in self.of:
                m[self.of[n]] = True
        return ~m if invert else m


@dataclass(frozen=True)
class _Part:
    """Postings sorted by dimension: dims[i]'s are slots/weights[offsets[i]:offsets[i+1]], slots
    ascending within a dimension (they are appended in slot order and sorted stably)."""

    dims: np.ndarray
    offsets: np.ndarray
    slots: np.ndarray
    weights: np.ndarray
    top: np.ndarray  # each dimension's highest weight (its MaxScore bound)

    @staticmethod
    def of(dims: np.ndarray, slots: np.ndarray, weights: np.ndarray) -> _Part:
        order = np.argsort(dims, kind="stable")
        dims, slots, weights = dims[order], slots[order], weights[order]
        unique, starts = np.unique(dims, return_index=True)
        top = np.maximum.reduceat(weights, starts) if len(starts) else np.zeros(0, np.float32)
        return _Part(unique, np.append(starts, len(dims)).astype(np.int64), slots, weights, top)

    @staticmethod
    def merged(parts: Sequence[_Part]) -> _Part:
        """One part of several, older slots first (so each dimension's slots stay ascending)."""
        dims = np.concatenate([np.repeat(p.dims, np.diff(p.offsets)) for p in parts])
        return _Part.of(
            dims, np.concatenate([p.slots for p in parts]), np.concatenate([p.weights for p in parts])
        )

    def __len__(self) -> int:
        return len(self.slots)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.dims, self.offsets, self.slots, self.weights, self.top))

    def find(self, dim: int) -> tuple[np.ndarray, np.ndarray, float] | None:
        i = int(np.searchsorted(self.dims, dim))
        if i == len(self.dims) or self.dims[i] != dim:
            return None
        lo, hi = self.offsets[i], self.offsets[i + 1]
        return self.slots[lo:hi], self.weights[lo:hi], float(self.top[i])


_EMPTY = _Part.of(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32))
# Delta parts kept apart before they are merged into one: each costs a binary search a query term.
DELTA_PARTS = 8


class Postings:
    """Active memories' BM25 weights by dimension; `top` is exhaustive BM25 over a scope.

    Slots number memories in load order; a memory written again gets a new slot and its old one is
    marked dead (its postings stay until the owner rebuilds). Writes since the load are parts of
    their own, a batch each (numpy, 8 bytes a posting), merged into one past DELTA_PARTS."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.slot_of: dict[str, int] = {}
        self.namespaces = Codes()
        self.kinds = Codes()
        self._ns = _Column(np.int32)
        self._kind = _Column(np.int32)
        self._alive = _Column(np.bool_)
        self._bulk = _EMPTY
        self._deltas: list[_Part] = []
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # loaded, not yet sealed
        self.dead = 0

    @property
    def live(self) -> int:
        return len(self.slot_of)

    @property
    def delta_postings(self) -> int:
        return sum(len(p) for p in self._deltas)

    @property
    def stale_share(self) -> float:
        """Dead slots and delta postings against the bulk part: what a rebuild would reclaim."""
        return max(self.dead / max(len(self.ids), 1), self.delta_postings / max(len(self._bulk), 1))

    def nbytes(self) -> int:
        """The arrays' bytes (ids and the id map, Python objects, are not counted)."""
        parts = sum(p.nbytes() for p in (self._bulk, *self._deltas))
        return parts + self._ns.data.nbytes + self._kind.data.nbytes + self._alive.data.nbytes

    def _append(self, ids: Sequence[str], namespaces: Sequence[str], kinds: Sequence[str]) -> int:
        """New slots for `ids` (an id's older slot dies); returns the first."""
        start = len(self.ids)
        for i, mid in enumerate(ids):
            old = self.slot_of.get(mid)
            if old is not None:  # written again (or listed twice in one batch): the later row wins
                self._alive.data[old] = False
                self.dead += 1
            self.slot_of[mid] = start + i
        self.ids.extend(ids)
        for names, col, codes in ((namespaces, self._ns, self.namespaces), (kinds, self._kind, self.kinds)):
            col.extend(np.fromiter((codes.code(x) for x in names), np.int32, len(names)))
        self._alive.extend(np.ones(len(ids), dtype=np.bool_))
        return start

    def _parsed(self, start: int, texts: Sequence[SparseText]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dims, weights, counts = parse_batch(texts)
        slots = np.repeat(np.arange(start, start + len(texts), dtype=np.int32), counts)
        return dims, slots, weights

    def load(
        self, ids: Sequence[str], namespaces: Sequence[str], kinds: Sequence[str], texts: Sequence[SparseText]
    ) -> None:
        """Append a batch of memories to the bulk part's pending arrays (call `seal` after the last)."""
        self._pending.append(self._parsed(self._append(ids, namespaces, kinds), texts))

    def seal(self) -> None:
        """Sort the loaded postings by dimension into the bulk part."""
        parts = self._pending
        if parts:
            self._bulk = _Part.of(*(np.concatenate([p[i] for p in parts]) for i in range(3)))
            parts.clear()

    def put_many(self, rows: Sequence[tuple[str, str, str, SparseText]]) -> None:
        """Memories written or changed since the load: their old slots die, new ones hold them, in
        one delta part."""
        if not rows:
            return
        ids, namespaces, kinds, texts = (list(c) for c in zip(*rows, strict=True))
        self._deltas.append(_Part.of(*self._parsed(self._append(ids, namespaces, kinds), texts)))
        if len(self._deltas) > DELTA_PARTS:
            self._deltas = [_Part.merged(self._deltas)]

    def put(self, memory_id: str, namespace: str, kind: str, text: SparseText) -> None:
        self.put_many([(memory_id, namespace, kind, text)])

    def drop(self, memory_id: str) -> None:
        """A memory no longer active (or gone): its slot stops counting."""
        old = self.slot_of.pop(memory_id, None)
        if old is not None:
            self._alive.data[old] = False
            self.dead += 1

    def top(
        self,
        query: dict[int, float],
        namespaces: Iterable[str],
        n: int,
        *,
        kinds: Iterable[str] | None = None,
        exclude_kinds: Iterable[str] = (),
    ) -> list[tuple[str, float]]:
        """The best `n` memories of the scope by Σ IDF × weight over the query's dimensions (`query`:
        dimension → IDF), best first, ties by id.

        Exact, by MaxScore (Turtle & Flood, 1995) over the arrays: the rarest terms' postings are read
        whole (the essential terms), each memory found gets the other terms' weights by binary search
        in their sorted postings, and when the other terms' bounds add up to less than the n-th score
        (by more than NEAR: a tie could rank above it by id), no memory holding only those can enter.
        Else more terms become essential, and only their postings are read in the next pass: a
        memory holding an earlier one has its whole score already, and one found now is scored only
        while its partial score plus the terms still unread can reach the n-th score found so far.
        A common word's postings are read only when its bound is needed, as in the SQL leg, but with
        no cost limit. (Passes that re-read every essential term, with their own partial scores as
        the bar, took 20–33 ms for the slowest questions at 1M memories; these take ≤ 13 ms.)"""
        terms = self._terms(query)
        if not terms or n <= 0:
            return []
        ns_ok = self.namespaces.mask(namespaces)
        kind_ok = self.kinds.mask(kinds) if kinds is not None else self.kinds.mask(exclude_kinds, invert=True)
        found_slots: list[np.ndarray] = []
        found_scores: list[np.ndarray] = []
        seen: np.ndarray | None = None  # slots holding a term read in an earlier pass
        theta = -np.inf  # the n-th best whole score found so far
        read, k, budget = 0, 1, ESSENTIAL
        while True:
            while k < len(terms) and sum(t.df for t in terms[: k + 1]) <= budget:
                k += 1
            slots, scores = _union(terms[read:k], len(self.ids))
            if seen is not None:
                fresh = ~seen[slots]
                slots, scores = slots[fresh], scores[fresh]
            rest = terms[k:]
            if rest:  # a later pass skips these: scored now, or unable to reach the n-th
                if seen is None:
                    seen = np.zeros(len(self.ids), dtype=bool)
                seen[slots] = True
            keep = self._alive.data[slots] & ns_ok[self._ns.data[slots]] & kind_ok[self._kind.data[slots]]
            slots, scores = slots[keep], scores[keep]
            rest_bound = sum(t.bound for t in rest)
            if rest and not np.isfinite(theta) and len(slots) > n:
                # a bar to start with: the whole scores of the n best partial ones (any n found bound
                # the n-th from below)
                head = np.argpartition(-scores, n - 1)[:n]
                theta = float(min(scores[head] + sum(t.lookup(slots[head]) for t in rest)))
            # each term's weights, dropping those whose bound for the terms still to add (summed, not
            # subtracted from the whole: no cancellation) can no longer reach the n-th
            for i, t in enumerate(rest):
                if np.isfinite(theta):
                    remaining = sum(u.bound for u in rest[i:])
                    reach = scores + remaining >= theta - NEAR * abs(theta)
                    slots, scores = slots[reach], scores[reach]
                scores = scores + t.lookup(slots)
            found_slots.append(slots)
            found_scores.append(scores)
            total = sum(len(f) for f in found_slots)
            if total >= n:
                theta = _nth(np.concatenate(found_scores), n)
            # Stop when a memory holding none of the terms read cannot even tie the n-th (one that ties
            # it, or is within NEAR of it, could rank above it by id or in the database's float32).
            if not rest or (total >= n and rest_bound < theta - NEAR * abs(theta)):
                break
            read, k, budget = k, k + 1, budget * 4
        return self._best(np.concatenate(found_slots), np.concatenate(found_scores), n)

    def _best(self, slots: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[str, float]]:
        """The best `n`, ties broken by id as the database orders them (ORDER BY score DESC, id), so
        the re-score reads about n rows, not every copy tied with the n-th (171 of each turn in the
        copied bench corpus at 1M). pgvector sums in float32, so memories within its precision of
        the n-th may be tied there and apart here: up to n more of those go too, and the database's
        order and LIMIT decide."""
        if len(slots) > n:
            nth = _nth(scores, n)
            chosen = np.flatnonzero(scores >= nth - NEAR * abs(nth))
            slots, scores = slots[chosen], scores[chosen]
        names = np.array([self.ids[s] for s in slots.tolist()], dtype=object)
        order = np.lexsort((names.astype(str), -scores))
        ranked = [(str(names[i]), float(scores[i])) for i in order.tolist()]
        if len(ranked) <= n:
            return ranked
        nth = ranked[n - 1][1]  # exact ties with it (the same weights) lose to smaller ids there too
        return ranked[:n] + [r for r in ranked[n : 2 * n] if r[1] != nth]

    def _terms(self, query: dict[int, float]) -> list[_Term]:
        """The query's dimensions that some slot holds, rarest first."""
        out = []
        for dim, idf in query.items():
            found = [f for f in (p.find(dim) for p in (self._bulk, *self._deltas)) if f is not None]
            if found:
                lists = [(s, w) for s, w, _ in found]
                out.append(
                    _Term(idf, lists, sum(len(s) for s, _ in lists), idf * max(t for _, _, t in found))
                )
        return sorted(out, key=lambda t: t.df)


# Postings the first MaxScore pass reads whole (the rarest terms'); each further pass reads 4x more.
ESSENTIAL = 8192


@dataclass(frozen=True)
class _Term:
    idf: float
    lists: list[tuple[np.ndarray, np.ndarray]]  # (slots ascending, weights): the bulk part's, the delta's
    df: int
    bound: float  # IDF × the highest weight in its postings

    def lookup(self, slots: np.ndarray) -> np.ndarray:
        """This term's contribution to each of `slots` (0 where it is absent), by binary search."""
        out = np.zeros(len(slots))
        for s, w in self.lists:
            pos = np.minimum(np.searchsorted(s, slots), len(s) - 1)
            hit = s[pos] == slots
            out[hit] += w[pos[hit]]
        return out * self.idf


def _nth(scores: np.ndarray, n: int) -> float:
    """The n-th highest of `scores` (−inf when there are fewer)."""
    if len(scores) < n:
        return -np.inf
    return float(np.partition(scores, len(scores) - n)[len(scores) - n])


def _union(terms: Sequence[_Term], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each slot holding one of `terms`, once, and its score over them."""
    idx = np.concatenate([s for t in terms for s, _ in t.lists])
    w = np.concatenate([wt * np.float64(t.idf) for t in terms for _, wt in t.lists])
    if len(idx) == 0:
        return idx, w
    if len(idx) * 4 < size:  # sort them rather than touch every slot: 1.9 ms against 6 ms for 91k of 1M
        order = np.argsort(idx, kind="stable")  # runs already sorted (each list's), merged
        idx, w = idx[order], w[order]
        first = np.r_[True, idx[1:] != idx[:-1]]
        # summed left to right, as bincount and the lookups sum: a memory's score is the same
        # whichever pass finds it (reduceat's pairwise sums differed by an ulp)
        return idx[first], np.bincount(np.cumsum(first) - 1, weights=w)
    summed = np.bincount(idx, weights=w)
    slots = np.flatnonzero(np.bincount(idx, minlength=size))  # held, even at a score of 0
    return slots, summed[slots]
