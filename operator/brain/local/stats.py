"""The one percentile of the project: `brainctl eval`'s latency and every bench's p50/p95/p99.

Six copies with two formulas once computed the docs' p95 figures two ways. This one is the sample
at sorted index ⌊q·n⌋ (the last one past the end), with no interpolation, so every figure is a
latency that some request really had. With few samples the p99 is one of the slowest few:
⌊0.99·n⌋ of n is the largest below n = 100, the 2nd largest from 100, the 3rd from 200
(`rank_from_top` says which, for the benches' notes).
"""

from __future__ import annotations

from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0 ≤ q ≤ 1) of `values`; NaN for no values, which no table mistakes for a time."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def rank_from_top(n: int, q: float) -> int:
    """Which largest of `n` samples `percentile(…, q)` returns: 1 for the largest."""
    return n - min(n - 1, int(q * n)) if n else 0
