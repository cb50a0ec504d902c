"""Dev/test splits (issue #28): fixed by a seed, by the unit that keeps test questions unseen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain.local.eval import load_dataset
from brain.local.evalgen import HELD_OUT, generate
from brain.local.splits import SEED, SplitRule, split_units

DATA = Path(__file__).resolve().parents[1] / "data"
LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo10-retrieval.json"
SHARED_LOCOMO = Path("/work/shared/data/locomo10-retrieval.json")


def test_units_split_in_halves_the_same_way_in_any_order() -> None:
    units = [f"locomo-{i}" for i in range(10)]
    first = split_units(units, SplitRule())
    assert first == split_units(list(reversed(units)) * 2, SplitRule())
    assert sorted(first.values()).count("test") == 5
    assert split_units(units, SplitRule(seed=SEED + 1)) != first, "the seed, not the names, decides"


def test_a_held_out_family_is_the_whole_test_split() -> None:
    assert split_units(["a", "b", "a"], SplitRule(by="group", test=["b"])) == {"a": "dev", "b": "test"}


def test_team_set_splits_by_question_and_every_answerable_category_has_dev() -> None:
    ds = load_dataset(json.loads((DATA / "team_eval.json").read_text()))
    splits = ds.splits()
    assert splits == ds.splits() and len(splits) == len(ds.queries)
    assert abs(sum(v == "test" for v in splits.values()) - len(ds.queries) / 2) <= 1
    dev_none = [q for q in ds.queries if not q.relevant and splits[q.id] == "dev"]
    test_none = [q for q in ds.queries if not q.relevant and splits[q.id] == "test"]
    assert dev_none and test_none, "abstention is measured on both"


def test_locomo_splits_by_conversation_five_and_five() -> None:
    path = LOCOMO if LOCOMO.exists() else SHARED_LOCOMO
    if not path.exists():
        pytest.skip("shared/data/locomo10-retrieval.json is not on this machine")
    ds = load_dataset(json.loads(path.read_text()))
    splits = ds.splits()
    by_conv: dict[str, set[str]] = {}
    for q in ds.queries:
        by_conv.setdefault(q.namespace, set()).add(splits[q.id])
    assert all(len(s) == 1 for s in by_conv.values()), "a conversation is never on both sides"
    assert sorted(next(iter(s)) for s in by_conv.values()).count("test") == 5 == len(by_conv) - 5


def test_generated_set_is_what_its_generator_and_seed_give() -> None:
    committed = json.loads((DATA / "generated_eval.json").read_text())
    assert committed == generate()
    ds = load_dataset(committed)
    splits = ds.splits()
    assert {q.group for q in ds.queries if splits[q.id] == "test"} == {HELD_OUT}
    for split in ("dev", "test"):
        cats = {q.category for q in ds.queries if splits[q.id] == split}
        assert {"paraphrase", "identifier", "scoped", "temporal", "multi-hop", "distractor", "none"} <= cats
    assert generate(7) != committed, "another seed, other names"
