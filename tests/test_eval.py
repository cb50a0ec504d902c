"""`brainctl eval` on a small dataset whose answers depend on scope, supersede and as_of."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from brain.cli import main
from brain.errors import InvalidInput
from brain.eval import evaluate, load_dataset, load_into
from brain.store import Store

MINI = Path(__file__).parent / "data" / "mini_eval.json"


async def test_eval_honours_scope_supersede_and_as_of(store: Store, embedder) -> None:  # type: ignore[no-untyped-def]
    ds = load_dataset(json.loads(MINI.read_text()))
    mapping = await load_into(store, embedder, ds)
    report = await evaluate(store, embedder, ds, mapping, modes=["hybrid", "lexical", "vector"], ks=[1, 5])
    hybrid = report["modes"]["hybrid"]
    assert hybrid["recall@1"] == 1.0 and hybrid["mrr"] == 1.0
    assert set(hybrid["by_category"]) == {"current", "as_of", "shared"}
    assert report["memories"] == 6 and report["queries"] == 4
    assert hybrid["latency_ms"]["p95"] >= hybrid["latency_ms"]["p50"] > 0


def test_cli_eval_prints_table_and_writes_json(
    dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert main(["--dsn", dsn, "eval", str(MINI), "--mode", "all", "--k", "1,5", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "hybrid" in printed and "recall@5" in printed
    report = json.loads(out.read_text())
    assert set(report["modes"]) == {"hybrid", "lexical", "vector"}
    assert {"recall@1", "recall@5", "mrr", "latency_ms", "by_category"} <= set(report["modes"]["hybrid"])


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["memories"][2].pop("body"), r"memories\[2\] \(id 'm3'\): field 'body'"),
        (lambda d: d["queries"][1].update(relevant=["nope"]), r"queries\[1\] \(id 'q2'\).*unknown memories"),
        (
            lambda d: d["memories"][1].update(supersedes="m9"),
            r"memories\[1\] \(id 'm2'\): field 'supersedes'",
        ),
        (lambda d: d["memories"][0].update(kind="rumour"), r"memories\[0\].*field 'kind'.*unknown kind"),
        (lambda d: d["memories"].append(dict(d["memories"][0])), r"memories\[6\] \(id 'm1'\): duplicate id"),
        (lambda d: d.update(queries={}), r"'queries' must be an array"),
    ],
)
def test_malformed_dataset_names_record_and_field(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = copy.deepcopy(json.loads(MINI.read_text()))
    mutate(data)
    with pytest.raises(InvalidInput, match=message):
        load_dataset(data)


def test_cli_reports_malformed_dataset_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"memories": [{"id": "a"}], "queries": []}')
    assert main(["eval", str(bad)]) == 2
    assert "memories[0] (id 'a'): field 'namespace'" in capsys.readouterr().err
