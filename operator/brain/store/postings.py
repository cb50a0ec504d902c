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

# Memories tied with the n-th best score are ranked by id among up to this many times n: a tie wider
# than that is cut at random, where the SQL leg would take the smallest ids.
TIES = 20


def parse_batch(texts: Sequence[SparseText]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dimensions, weights and each text's number of pairs, for a batch of sparsevec texts, with one
    numpy parse for the whole batch (a Python loop per pair costs about a second a million)."""
    counts = np.fromiter((t.count(":") for t in texts), dtype=np.int64, count=len(texts))
    inner = ",".join(t[1 : t.index("}")] for t in texts if t[1] != "}").replace(":", ",")
    flat = np.array(inner.split(","), dtype=np.float64) if inner else np.zeros(0)
    return flat[0::2].astype(np.int64), flat[1::2].astype(np.float32), counts


class _Column:
    """A growable numpy column (amortised doubling), for per-slot attributes."""

    def __init__(self, dtype: type, values: np.ndarray | None = None) -> None:
        self.data: np.ndarray = np.zeros(1024, dtype=dtype) if values is None else values.astype(dtype)
        self.size = 0 if values is None else len(values)

    def append(self, value: int | bool) -> None:
        if self.size == len(self.data):
            self.data = np.concatenate([self.data, np.zeros_like(self.data)])
        self.data[self.size] = value
        self.size += 1

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


class Postings:
    """Active memories' BM25 weights by dimension; `top` is exhaustive BM25 over a scope.

    Slots number memories in load order; a memory written again gets a new slot and its old one is
    marked dead (its postings stay until the owner rebuilds)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.slot_of: dict[str, int] = {}
        self.namespaces = Codes()
        self.kinds = Codes()
        self._ns = _Column(np.int32)
        self._kind = _Column(np.int32)
        self._alive = _Column(np.bool_)
        # The bulk part, sorted by dimension: dims[i]'s postings are slots/weights[offsets[i]:offsets[i+1]].
        self._dims = np.zeros(0, dtype=np.int64)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int32)
        self._weights = np.zeros(0, dtype=np.float32)
        self._max = np.zeros(0, dtype=np.float32)  # each dimension's highest weight (its MaxScore bound)
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # loaded, not yet sealed
        self._delta: dict[int, tuple[list[int], list[float]]] = {}
        self.delta_postings = 0
        self.dead = 0

    @property
    def live(self) -> int:
        return len(self.slot_of)

    @property
    def stale_share(self) -> float:
        """Dead slots and delta postings against the bulk part: what a rebuild would reclaim."""
        bulk = max(len(self._slots), 1)
        return max(self.dead / max(len(self.ids), 1), self.delta_postings / bulk)

    def nbytes(self) -> int:
        """The arrays' bytes (ids and the id map, Python objects, are not counted)."""
        arrays = (self._dims, self._offsets, self._slots, self._weights)
        return sum(a.nbytes for a in arrays) + self._ns.data.nbytes * 2 + self._alive.data.nbytes

    def load(
        self, ids: Sequence[str], namespaces: Sequence[str], kinds: Sequence[str], texts: Sequence[SparseText]
    ) -> None:
        """Append a batch of memories to the bulk part's pending arrays (call `seal` after the last)."""
        dims, weights, counts = parse_batch(texts)
        start = len(self.ids)
        slots = np.repeat(np.arange(start, start + len(ids), dtype=np.int32), counts)
        for i, mid in enumerate(ids):
            old = self.slot_of.get(mid)
            if old is not None:  # listed twice in one load: the later row wins
                self._alive.data[old] = False
                self.dead += 1
            self.slot_of[mid] = start + i
        self.ids.extend(ids)
        for name, col, codes in ((namespaces, self._ns, self.namespaces), (kinds, self._kind, self.kinds)):
            col.data = np.concatenate(
                [col.view, np.fromiter((codes.code(x) for x in name), np.int32, len(name))]
            )
            col.size = len(col.data)
        self._alive.data = np.concatenate([self._alive.view, np.ones(len(ids), dtype=np.bool_)])
        self._alive.size = len(self._alive.data)
        self._pending.append((dims, slots, weights))

    def seal(self) -> None:
        """Sort the loaded postings by dimension into the bulk part."""
        parts = self._pending
        if not parts:
            return
        dims = np.concatenate([p[0] for p in parts])
        slots = np.concatenate([p[1] for p in parts])
        weights = np.concatenate([p[2] for p in parts])
        parts.clear()
        order = np.argsort(dims, kind="stable")
        dims, self._slots, self._weights = dims[order], slots[order], weights[order]
        self._dims, starts = np.unique(dims, return_index=True)
        self._offsets = np.append(starts, len(dims)).astype(np.int64)
        self._max = np.maximum.reduceat(self._weights, starts) if len(starts) else np.zeros(0, np.float32)

    def put(self, memory_id: str, namespace: str, kind: str, text: SparseText) -> None:
        """A memory written or changed since the load: its old slot dies, a new one holds it."""
        self.drop(memory_id)
        dims, weights, _ = parse_batch([text])
        slot = len(self.ids)
        self.ids.append(memory_id)
        self.slot_of[memory_id] = slot
        self._ns.append(self.namespaces.code(namespace))
        self._kind.append(self.kinds.code(kind))
        self._alive.append(True)
        for d, w in zip(dims.tolist(), weights.tolist(), strict=True):
            s, ws = self._delta.setdefault(d, ([], []))
            s.append(slot)
            ws.append(w)
        self.delta_postings += len(dims)

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
        in their sorted postings, and when the other terms' bounds add up to at most the n-th score,
        no memory holding only those can enter. Else one more term becomes essential. A common word's
        postings are read only when its bound is needed, as in the SQL leg, but with no cost limit."""
        terms = self._terms(query)
        if not terms or n <= 0:
            return []
        ns_ok = self.namespaces.mask(namespaces)
        kind_ok = self.kinds.mask(kinds) if kinds is not None else self.kinds.mask(exclude_kinds, invert=True)
        k, budget = 1, ESSENTIAL
        while True:
            while k < len(terms) and sum(t.df for t in terms[: k + 1]) <= budget:
                k += 1
            slots, scores = _union(terms[:k], len(self.ids))
            keep = self._alive.data[slots] & ns_ok[self._ns.data[slots]] & kind_ok[self._kind.data[slots]]
            slots, scores = slots[keep], scores[keep]
            rest = terms[k:]
            rest_bound = sum(t.bound for t in rest)
            if rest and len(slots) > n:  # only memories that could still reach the n-th partial score
                reach = scores + rest_bound >= _nth(scores, n)
                slots, scores = slots[reach], scores[reach]
            for t in rest:
                scores = scores + t.lookup(slots)
            if not rest or (len(slots) >= n and rest_bound <= _nth(scores, n)):
                break
            k, budget = k + 1, budget * 4
        return self._best(slots, scores, n)

    def _best(self, slots: np.ndarray, scores: np.ndarray, n: int) -> list[tuple[str, float]]:
        """The best `n`, ties broken by id as the database orders them (ORDER BY score DESC, id), so
        the re-score reads n rows, not every copy tied with the n-th (171 of each turn in the copied
        bench corpus at 1M). Tied memories hold the same weights, so their sums are equal here and
        in SQL alike; past TIES × n of them, the cut keeps an arbitrary set."""
        if len(slots) > n:
            cut = _nth(scores, n)
            chosen = np.flatnonzero(scores >= cut)
            if len(chosen) > TIES * n:
                chosen = chosen[np.argsort(-scores[chosen], kind="stable")[: TIES * n]]
            slots, scores = slots[chosen], scores[chosen]
        ranked = sorted(zip((-scores).tolist(), (self.ids[s] for s in slots.tolist()), strict=True))
        return [(i, -neg) for neg, i in ranked[:n]]

    def _terms(self, query: dict[int, float]) -> list[_Term]:
        """The query's dimensions that some slot holds, rarest first."""
        out = []
        for dim, idf in query.items():
            lists: list[tuple[np.ndarray, np.ndarray]] = []
            top = 0.0
            i = int(np.searchsorted(self._dims, dim))
            if i < len(self._dims) and self._dims[i] == dim:
                lo, hi = self._offsets[i], self._offsets[i + 1]
                lists.append((self._slots[lo:hi], self._weights[lo:hi]))
                top = float(self._max[i])
            extra = self._delta.get(dim)
            if extra:
                lists.append((np.asarray(extra[0], dtype=np.int32), np.asarray(extra[1], dtype=np.float32)))
                top = max(top, max(extra[1]))
            if lists:
                out.append(_Term(idf, lists, sum(len(s) for s, _ in lists), idf * top))
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
    if len(idx) * 16 < size:  # few postings: sort them rather than touch every slot
        slots, inverse = np.unique(idx, return_inverse=True)
        return slots, np.bincount(inverse, weights=w)
    summed = np.bincount(idx, weights=w)
    slots = np.flatnonzero(summed)
    return slots, summed[slots]
