"""hack/bench/ is one package (#30): every part runs as `python -m hack.bench.<part>`, and one writer
records the figures, whether `make bench` runs the part or a person runs it alone (#33)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hack.bench import ROOT, check, results
from hack.bench.__main__ import PARTS

MODULES = sorted(p.stem for p in (ROOT / "hack" / "bench").glob("*.py") if not p.stem.startswith("_"))
#: what the parts share, and `make bench`'s in-process sections: imported, not run
LIBRARIES = {"check", "corpus", "vectors", "results", "quality", "latency", "notes"}
#: run by hand: the scale run (hours at 1M) and the studies behind docs/performance.md's decisions
BY_HAND = {"scale", "variants", "lexical_stale", "lexical_ta", "lexical_top"}


def test_make_bench_runs_every_part_the_package_has() -> None:
    """A module left out of PARTS would never run under `make bench`: every module is a part, a
    library, or a bench run by hand."""
    assert set(PARTS) == set(MODULES) - LIBRARIES - BY_HAND


@pytest.mark.parametrize("module", ["", *sorted(set(MODULES) - LIBRARIES)])
def test_every_bench_explains_itself(module: str) -> None:
    """`--help` explains and measures nothing: a part without a parser would start its servers."""
    name = "hack.bench" + (f".{module}" if module else "")
    done = subprocess.run(
        [sys.executable, "-m", name, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: python -m {name}"), done.stdout[:200]


@pytest.fixture
def alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    monkeypatch.setattr(results, "_alone", None)
    monkeypatch.delenv(results.HANDOFF, raising=False)
    return tmp_path


def _counts(outcome: str, causes: list[str] | None = None) -> check.Counts:
    c = check.Counts()
    c.add(outcome, causes or [])
    return c


def test_a_part_run_alone_writes_its_own_record(alone: Path) -> None:
    path = results.emit(
        "scale",
        {"p95_ms": 1.5},
        markdown="## Retrieval at 10,000 memories",
        checks=[(_counts("injected"), check.retrieval("10,000 memories, shared", 1))],
    )
    assert path.parent == alone and path.name.endswith("-scale.json")
    record = json.loads(path.read_text())
    assert record["commit"] in path.name
    assert "cores" in record["machine"]
    section = record["sections"]["scale"]
    assert section["results"] == {"p95_ms": 1.5}
    assert section["markdown"] == "## Retrieval at 10,000 memories"
    assert section["ok"] is True and record["failed"] == []
    assert len(section["load_before"]) == 3 and len(section["load_after"]) == 3
    # a later call (the gateway bench writes after every level) rewrites the same file
    assert results.emit("scale", {"p95_ms": 2.5}) == path
    assert json.loads(path.read_text())["sections"]["scale"]["results"] == {"p95_ms": 2.5}
    assert list(alone.iterdir()) == [path]


def test_a_failed_outcome_check_marks_the_record_failed(alone: Path) -> None:
    """A row whose requests were degraded did not measure retrieval: its record says so."""
    path = results.emit(
        "gateway",
        {"rows": []},
        checks=[(_counts("degraded", ["embedder_down"]), check.memory_on("brain p50", 1))],
    )
    record = json.loads(path.read_text())
    assert record["sections"]["gateway"]["ok"] is False
    assert record["failed"] == ["gateway"]


def test_under_make_bench_the_figures_go_to_the_runner(
    alone: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    handoff = tmp_path_factory.mktemp("handoff") / ".scale.json"
    also = tmp_path_factory.mktemp("also") / "figures.json"
    monkeypatch.setenv(results.HANDOFF, str(handoff))
    assert results.emit("scale", {"p95_ms": 1.5}, also=str(also)) == handoff
    assert json.loads(handoff.read_text()) == {"p95_ms": 1.5}
    assert json.loads(also.read_text()) == {"p95_ms": 1.5}
    assert list(alone.iterdir()) == []  # one file per run: the runner's


def _calls_and_literals(path: Path) -> tuple[set[str], set[str], set[str]]:
    tree = ast.parse(path.read_text())
    calls = {
        n.func.id if isinstance(n.func, ast.Name) else n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)
    }
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docstrings may name them
    literals = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    }
    defs = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return calls, literals, defs


@pytest.mark.parametrize(
    "path", sorted((ROOT / "hack").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_one_postgres_one_percentile_one_writer(path: Path) -> None:
    """Postgres is started by tests.kit.database.postgres, percentiles are brain.local.stats', and only
    hack/bench/results.py names the results folder or the runner's hand-off: the 8 starts, 5 copies of
    a percentile and per-script JSON writers this package replaced stay gone."""
    calls, literals, defs = _calls_and_literals(path)
    assert "EmbeddedPostgres" not in calls
    assert not defs & {"percentile", "pct", "_pct", "p95", "quantile"}
    if path != ROOT / "hack" / "bench" / "results.py":
        assert not {s for s in literals if "bench-results" in s or results.HANDOFF in s}


def test_gold_recall_counts_any_copy_of_an_evidence_turn_once() -> None:
    """The lexical benches' recall column: a ranking that differs from reference BM25 is judged by
    the evidence turns in its top 10 (copies of one turn count once; questions without evidence are
    left out), so two rankings that hold the same turns in another order score alike."""
    from hack.bench.corpus import gold_recall

    relevant = {"a": {"t1", "t2"}, "b": {"t3"}, "c": set()}
    tops = {"a": ["t1", "t1", "t9"], "b": ["t9"] * 10 + ["t3"], "c": ["t1"]}
    assert gold_recall(tops, relevant) == pytest.approx((0.5 + 0.0) / 2)
    assert gold_recall({"a": ["t9", "t2", "t1"], "b": ["t3"]}, relevant) == 1.0


def test_no_renamed_copy_repeats_another_copys_bodies_and_only_copy_zero_is_evidence() -> None:
    """The scale bench's `renamed` texts (#33): the write path keeps one active memory per body in a
    namespace, so a corpus that stands for a real `shared` at 1M may not repeat a body from copy to
    copy; copy 0 is LoCoMo as the questions ask it, and a renamed copy, about other people, is no
    evidence."""
    from types import SimpleNamespace as M

    from hack.bench.corpus import alias, renamed, turn_of

    turns = [
        M(id="c1/1", namespace="c1", title="Caroline in session 1", body="Caroline: Hey Mel! Melanie?"),
        M(id="c1/2", namespace="c1", title="Melanie in session 1", body="Melanie: Hi Caroline. Carolines"),
        M(id="c2/1", namespace="c2", title="Jon in session 1", body="Jon: Gina, Jonathan called"),
        M(id="c2/2", namespace="c2", title="Gina in session 1", body="Gina: Thanks Jon"),
    ]
    assert renamed(turns, 0) == [(m.title, m.body) for m in turns]
    copies = [renamed(turns, k) for k in range(0, 171)]  # 1M memories: LoCoMo's 5,882 turns × 171
    bodies = [body for copy in copies for _, body in copy]
    assert len(set(bodies)) == len(bodies)
    one = copies[1]
    assert one[0][1] == f"{alias(0)}: Hey Mel! {alias(1)}?"  # whole words: "Mel" is no speaker
    assert one[1] == (f"{alias(1)} in session 1", f"{alias(1)}: Hi {alias(0)}. Carolines")
    assert one[2][1] == f"{alias(2)}: {alias(3)}, Jonathan called"  # the second conversation's own names
    assert copies[2][3][1] == f"{alias(7)}: Thanks {alias(6)}"  # copy 2 names no one as copy 1 did
    assert turn_of(turns, 1, "copy-0@2023", "renamed") == "c1/2"
    assert turn_of(turns, 1, "copy-7@2023", "renamed") != "c1/2"
    assert turn_of(turns, 1, "copy-7@2023", "copied") == "c1/2"
    with pytest.raises(ValueError, match="alias 13824"):
        alias(13824)
    # and on LoCoMo itself: no body of copy 1 or 2 is one of copy 0's or of the other's
    from hack.bench import LOCOMO

    from brain.local.eval import load_dataset

    locomo = load_dataset(json.loads(LOCOMO.read_text())).memories
    held = [{body for _, body in renamed(locomo, k)} for k in range(3)]
    assert not held[0] & held[1] and not held[0] & held[2] and not held[1] & held[2]


def test_the_ha_part_runs_a_test_that_exists() -> None:
    """hack/bench/ha.py runs one e2e case by name; a name that matches nothing (its `-k failover`
    never matched the case) makes the part fail without measuring."""
    from hack.bench.ha import FAILOVER

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", FAILOVER],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == FAILOVER, done.stdout[:500]
