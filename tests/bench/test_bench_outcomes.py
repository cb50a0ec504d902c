"""The benches' outcome counting (hack/bench/check.py): a row's figure fails when retrieval did not run as it says."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hack.bench import check

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:  # the two fields of brain.retrieval.RetrievalResult the check reads
    all_hits: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    ("status", "headers", "outcome", "causes"),
    [
        (200, {"x-brain-memory": "injected"}, "injected", []),
        (200, {"X-Brain-Memory": "none"}, "none", []),
        (200, {"x-brain-memory": "skipped"}, "none", []),
        (200, {}, "none", []),  # the bare proxy says nothing
        # the embedder down: the keyword legs answered, and the gateway says so
        (
            200,
            {"x-brain-memory": "injected", "x-brain-memory-degraded": "embedder_down"},
            "degraded",
            ["embedder_down"],
        ),
        (
            200,
            {"x-brain-memory": "none", "x-brain-memory-degraded": "embedder_down"},
            "degraded",
            ["embedder_down"],
        ),
        (200, {"x-brain-memory": "degraded", "x-brain-memory-degraded": "db_down"}, "degraded", ["db_down"]),
        (200, {"x-brain-memory": "degraded"}, "degraded", ["unspecified"]),
        (200, {"x-brain-memory": "degraded", "x-brain-memory-degraded": "timeout"}, "timed_out", ["timeout"]),
        (502, {"x-brain-memory": "injected"}, "error", ["http 502"]),
        (None, None, "error", ["no reply"]),
        (200, {"x-brain-memory": "maybe"}, "error", ["unknown x-brain-memory: maybe"]),
    ],
)
def test_of_response(
    status: int | None, headers: dict[str, str] | None, outcome: str, causes: list[str]
) -> None:
    assert check.of_response(status, headers) == (outcome, causes)


def test_of_result() -> None:
    assert check.of_result(Result(all_hits=["m1"])) == ("injected", [])
    assert check.of_result(Result()) == ("none", [])
    assert check.of_result(Result(all_hits=["m1"], degraded=["embedder_down"])) == (
        "degraded",
        ["embedder_down"],
    )
    assert check.of_result(Result(degraded=["timeout", "timeout"])) == ("timed_out", ["timeout"])
    assert check.of_result(error=TimeoutError()) == ("timed_out", ["timeout"])
    assert check.of_result(error=ConnectionError("gone")) == ("error", ["ConnectionError"])
    assert check.of_result(None) == ("error", ["no result"])


def _counts(**n: int) -> check.Counts:
    c = check.Counts()
    for outcome, k in n.items():
        for _ in range(k):
            c.add(outcome, ["embedder_down"] if outcome == "degraded" else ())
    return c


def test_memory_on_row_needs_every_request_injected() -> None:
    check.expect(_counts(injected=200), check.memory_on("brain", 200))
    with pytest.raises(check.OutcomeMismatch) as e:
        check.expect(_counts(injected=198, degraded=2), check.memory_on("brain p50", 200))
    assert str(e.value) == (
        "brain p50: claims every request injected, but 198 injected, 2 degraded (embedder_down ×2) "
        "(degraded not allowed)"
    )
    with pytest.raises(check.OutcomeMismatch, match="none not allowed"):
        check.expect(_counts(injected=10, none=1), check.memory_on("brain"))


def test_bare_row_injects_nothing() -> None:
    check.expect(_counts(none=5), check.bare("bare"))
    with pytest.raises(check.OutcomeMismatch, match="injected not allowed"):
        check.expect(_counts(none=4, injected=1), check.bare("bare"))


def test_row_must_count_what_it_reports() -> None:
    with pytest.raises(check.OutcomeMismatch, match="no request was counted"):
        check.expect(check.Counts(), check.answered("frozen"))
    with pytest.raises(check.OutcomeMismatch, match="199 requests counted, the row reports 200"):
        check.expect(_counts(injected=199), check.memory_on("brain", 200))


def test_retrieval_and_answered_rows() -> None:
    check.expect(_counts(injected=150, none=50), check.retrieval("10k"))
    with pytest.raises(check.OutcomeMismatch, match="timed_out not allowed"):
        check.expect(_counts(injected=150, timed_out=1), check.retrieval("10k"))
    check.expect(_counts(degraded=30, timed_out=2, injected=1), check.answered("frozen"))
    with pytest.raises(check.OutcomeMismatch, match="error not allowed"):
        check.expect(_counts(degraded=30, error=1), check.answered("frozen"))


def test_expect_all_names_every_failing_row() -> None:
    with pytest.raises(check.OutcomeMismatch) as e:
        check.expect_all(
            [
                (_counts(injected=3), check.memory_on("a")),
                (_counts(degraded=3), check.memory_on("b")),
                (_counts(injected=1), check.bare("c")),
            ]
        )
    lines = str(e.value).splitlines()
    assert lines[0] == "outcome check failed:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["b", "c"]


def test_counts_refuse_unknown_outcomes_and_serialise() -> None:
    with pytest.raises(ValueError):
        check.Counts().add("fine")
    c = _counts(injected=2, degraded=1)
    assert c.as_dict() == {
        "total": 3,
        "injected": 2,
        "none": 0,
        "degraded": 1,
        "timed_out": 0,
        "error": 0,
        "causes": {"embedder_down": 1},
    }
    assert c["injected"] == 2 and c.total == 3


def test_counts_keep_the_first_questions_that_were_not_injected() -> None:
    """A row's `none` or `degraded` names its questions in the record, so a rerun can trace them."""
    c = check.Counts()
    c.add("injected", example="q0")
    for i in range(check.EXAMPLES + 2):
        c.add("none", example=f"q{i % (check.EXAMPLES + 1)}")
    c.add("degraded", ["embedder_down"], example="q9")
    c.add("none")
    assert c.examples == {"none": [f"q{i}" for i in range(check.EXAMPLES)], "degraded": ["q9"]}
    assert c.as_dict()["examples"] == c.examples and c["none"] == check.EXAMPLES + 3


def test_a_mismatch_exits_non_zero() -> None:
    """Uncaught in a bench script, the mismatch is a non-zero exit with the row named."""
    code = (
        "from hack.bench import check; c = check.Counts(); "
        "c.add('degraded', ['embedder_down']); check.expect(c, check.memory_on('brain p50'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0
    assert "OutcomeMismatch: brain p50: claims every request injected" in done.stderr
