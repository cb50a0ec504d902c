"""What each bench request's retrieval did, counted, and checked against what the row claims (#33).

A latency row is only what it says when retrieval ran as the row says: a "memory on" row whose
requests were all degraded (the embedder down, the database hung) or timed out measures the
fallback, not retrieval. So every retrieval bench classifies each request:

- `injected`: retrieval ran whole and put memory into the request;
- `none`: retrieval ran whole and found nothing to inject (or the caller is the bare proxy);
- `degraded`: retrieval ran without a part (the embedder, the database, a leg) — told by the gateway's
  `x-brain-memory-degraded` header or `RetrievalResult.degraded`;
- `timed_out`: the retrieval budget ran out;
- `error`: the request failed (no answer, an HTTP error, an exception).

`expect(counts, claim)` raises `OutcomeMismatch` (a bench exits non-zero with its message) when the
counts hold an outcome the row does not allow, or fewer requests than it says it measured.

A library of the benches, not a part: `make bench` runs only what hack/bench/__main__.py's PARTS names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

OUTCOMES = ("injected", "none", "degraded", "timed_out", "error")
MEMORY_HEADER = "x-brain-memory"
DEGRADED_HEADER = "x-brain-memory-degraded"
#: x-brain-memory values meaning "retrieval did not inject" (brain.gateway.hooks)
_NOTHING = {"none", "skipped", "off", ""}


class OutcomeMismatch(Exception):
    """The counts are not what the row claims: the figure measured something else."""


def of_response(status: int | None, headers: Mapping[str, str] | None) -> tuple[str, list[str]]:
    """(outcome, causes) of one gateway reply; `status` None when no reply came (an exception)."""
    if status is None or status >= 400:
        return "error", [f"http {status}" if status is not None else "no reply"]
    h = {k.lower(): v for k, v in (headers or {}).items()}
    memory = h.get(MEMORY_HEADER, "").strip().lower()
    causes = [c.strip() for c in h.get(DEGRADED_HEADER, "").split(",") if c.strip()]
    if memory == "degraded" or causes:
        if "timeout" in causes:
            return "timed_out", causes
        return "degraded", causes or ["unspecified"]
    if memory == "injected":
        return "injected", []
    if memory in _NOTHING:
        return "none", []
    return "error", [f"unknown {MEMORY_HEADER}: {memory}"]


def of_result(result: Any = None, error: BaseException | None = None) -> tuple[str, list[str]]:
    """(outcome, causes) of one in-process retrieval: a `RetrievalResult`, or the exception it raised."""
    if error is not None:
        if isinstance(error, TimeoutError):
            return "timed_out", ["timeout"]
        return "error", [type(error).__name__]
    if result is None:
        return "error", ["no result"]
    causes = list(dict.fromkeys(result.degraded))
    if causes:
        return ("timed_out" if "timeout" in causes else "degraded"), causes
    return ("injected" if result.all_hits else "none"), []


#: questions kept per outcome other than `injected`: enough to rerun the ones that went otherwise
EXAMPLES = 5


@dataclass
class Counts:
    outcomes: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)
    # the first few requests of each outcome other than `injected`, when the caller names them: a
    # run's two `none` at 1M could not be traced to a question after its temporary database was gone
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, outcome: str, causes: Iterable[str] = (), *, example: str | None = None) -> str:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        self.outcomes[outcome] += 1
        self.causes.update(causes)
        if example is not None and outcome != "injected":
            kept = self.examples.setdefault(outcome, [])
            if len(kept) < EXAMPLES and example not in kept:
                kept.append(example)
        return outcome

    def add_response(self, status: int | None, headers: Mapping[str, str] | None) -> str:
        return self.add(*of_response(status, headers))

    def add_result(
        self, result: Any = None, error: BaseException | None = None, *, example: str | None = None
    ) -> str:
        return self.add(*of_result(result, error), example=example)

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    def __getitem__(self, outcome: str) -> int:
        return self.outcomes[outcome]

    def summary(self) -> str:
        """ "198 injected, 2 degraded (embedder_down ×2)": the outcomes in OUTCOMES order, then causes."""
        parts = [f"{self.outcomes[o]} {o}" for o in OUTCOMES if self.outcomes[o]] or ["no requests"]
        if self.causes:
            parts[-1] += " (" + ", ".join(f"{c} ×{n}" for c, n in sorted(self.causes.items())) + ")"
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            **{o: self.outcomes[o] for o in OUTCOMES},
            "causes": dict(sorted(self.causes.items())),
            **({"examples": self.examples} if self.examples else {}),
        }


@dataclass(frozen=True)
class Claim:
    row: str
    allowed: frozenset[str]
    says: str
    total: int | None = None  # requests the row says it measured


def memory_on(row: str, total: int | None = None) -> Claim:
    """A brain latency row: every request retrieved whole and injected."""
    return Claim(row, frozenset({"injected"}), "every request injected", total)


def bare(row: str, total: int | None = None) -> Claim:
    """The bare proxy's row: nothing injected, nothing failed."""
    return Claim(row, frozenset({"none"}), "no request injected", total)


def retrieval(row: str, total: int | None = None) -> Claim:
    """An in-process retrieval row over questions some of which may rightly find nothing: retrieval
    ran whole for each (nothing degraded, timed out or failed)."""
    return Claim(row, frozenset({"injected", "none"}), "retrieval ran whole for every request", total)


def answered(row: str, total: int | None = None) -> Claim:
    """A fault row: every request answered (memory may be missing), none failed."""
    return Claim(
        row, frozenset({"injected", "none", "degraded", "timed_out"}), "every request answered", total
    )


def mismatch(counts: Counts, claim: Claim) -> str | None:
    """Why `counts` are not what `claim` says, or None when they are."""
    problems = []
    if counts.total == 0:
        problems.append("no request was counted")
    elif claim.total is not None and counts.total != claim.total:
        problems.append(f"{counts.total} requests counted, the row reports {claim.total}")
    bad = [o for o in OUTCOMES if counts.outcomes[o] and o not in claim.allowed]
    if bad:
        problems.append(f"{', '.join(bad)} not allowed")
    if not problems:
        return None
    return f"{claim.row}: claims {claim.says}, but {counts.summary()} ({'; '.join(problems)})"


def expect(counts: Counts, claim: Claim) -> None:
    """Raise OutcomeMismatch when `counts` are not what `claim` says."""
    why = mismatch(counts, claim)
    if why is not None:
        raise OutcomeMismatch(why)


def expect_all(checks: Iterable[tuple[Counts, Claim]]) -> None:
    """Every row checked, every mismatch named in one exception (a bench prints its table first)."""
    whys = [why for counts, claim in checks if (why := mismatch(counts, claim)) is not None]
    if whys:
        raise OutcomeMismatch("outcome check failed:\n  " + "\n  ".join(whys))
