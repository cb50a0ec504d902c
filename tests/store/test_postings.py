"""The in-memory postings (brain.store.postings) rank exactly as BM25 computed by hand: every memory
of the scope holding a query term, Σ IDF × weight, best first, ties by id. Pure: no database."""

from __future__ import annotations

import random

import pytest

from brain.store import postings
from brain.store.postings import Postings, parse_batch


def _text(weights: dict[int, float]) -> str:
    return "{" + ",".join(f"{d}:{w}" for d, w in sorted(weights.items())) + "}/999999937"


def _by_hand(
    docs: dict[str, tuple[str, str, dict[int, float]]], query: dict[int, float], scope: set[str], n: int
) -> list[tuple[str, float]]:
    scored = [
        (-sum(q * w.get(d, 0.0) for d, q in query.items()), i)
        for i, (ns, kind, w) in docs.items()
        if ns in scope and kind not in ("skill", "persona", "digest") and any(d in w for d in query)
    ]
    return [(i, -s) for s, i in sorted(scored)[:n]]


def _corpus(seed: int, size: int) -> dict[str, tuple[str, str, dict[int, float]]]:
    rng = random.Random(seed)
    docs = {}
    for k in range(size):
        # a Zipf-like vocabulary: a few dimensions in many memories, most in few
        dims = {int(rng.paretovariate(0.8)) % 400 for _ in range(rng.randint(0, 12))}
        weights = {d: round(rng.uniform(0.3, 1.9), 4) for d in dims}
        docs[f"m{k:05d}"] = (
            rng.choice(["shared", "repo:a", "repo:b"]),
            rng.choice(["note"] * 9 + ["skill"]),
            weights,
        )
    return docs


@pytest.mark.parametrize("essential", [32, 8192])
@pytest.mark.parametrize("seed", range(6))
def test_top_is_exhaustive_bm25_with_writes_and_drops(
    seed: int, essential: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a small first pass (32 postings) every query takes MaxScore's later passes and lookups."""
    monkeypatch.setattr(postings, "ESSENTIAL", essential)
    rng = random.Random(seed)
    docs = _corpus(seed, 3000)
    p = Postings()
    ids = list(docs)
    for start in range(0, len(ids), 700):  # loaded in batches, as the mirror does
        batch = ids[start : start + 700]
        p.load(
            batch,
            [docs[i][0] for i in batch],
            [docs[i][1] for i in batch],
            [_text(docs[i][2]) for i in batch],
        )
    p.seal()
    for i in rng.sample(ids, 200):  # changed after the load: rewritten, moved or retired
        if rng.random() < 0.3:
            p.drop(i)
            del docs[i]
        else:
            kind = docs[i][1]
            docs[i] = (rng.choice(["shared", "repo:a"]), kind, {rng.randrange(400): 1.0, 7: 0.5})
            p.put(i, docs[i][0], docs[i][1], _text(docs[i][2]))
    for _ in range(40):
        query = {rng.randrange(60): rng.uniform(0.5, 9.0) for _ in range(rng.randint(1, 6))}
        scope = {"shared", "repo:a"}
        n = rng.choice([1, 5, 80])
        got = p.top(query, scope, n, exclude_kinds=("skill", "persona", "digest"))
        want = _by_hand(docs, query, scope, n)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5)  # float32 weights


def test_ties_go_by_id_and_n_is_exact() -> None:
    p = Postings()
    ids = [f"id{k:03d}" for k in range(150, 0, -1)]  # loaded in reverse id order
    p.load(ids, ["shared"] * 150, ["note"] * 150, [_text({5: 1.0})] * 150)
    p.seal()
    got = p.top({5: 2.0}, ["shared"], 10)
    assert [i for i, _ in got] == [f"id{k:03d}" for k in range(1, 11)]


def test_a_scope_sees_only_its_namespaces_and_kinds() -> None:
    p = Postings()
    p.load(["a", "b", "c"], ["shared", "team-b", "repo:a"], ["note", "note", "skill"], [_text({1: 1.0})] * 3)
    p.seal()
    assert [i for i, _ in p.top({1: 1.0}, ["shared", "repo:a"], 10, exclude_kinds=("skill",))] == ["a"]
    assert [i for i, _ in p.top({1: 1.0}, ["shared", "repo:a"], 10, kinds=("skill",))] == ["c"]
    assert p.top({1: 1.0}, ["nobody"], 10) == []


def test_empty_weights_parse_to_no_postings() -> None:
    dims, weights, counts = parse_batch(["{}/999999937", "{3:0.5,9:1.25}/999999937", "{}/1"])
    assert dims.tolist() == [3, 9] and weights.tolist() == [0.5, 1.25] and counts.tolist() == [0, 2, 0]
