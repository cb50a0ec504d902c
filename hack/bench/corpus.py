"""Where a bench's copied corpus lives and what scope reads it (#33): the whole corpus, in two layouts.

Until #33 the in-process benches copied LoCoMo into namespaces `bench-0`, `bench-1`, … and queried
`bench-1` + `shared`: one ~5.9k namespace at every size. Now the queried scope holds every memory:

- `shared`: all of them in the team's `shared` namespace (what a key with no namespaces reads);
- `split`: memory i in `SPLIT[i % 4]`, `shared` and three repos, the scope asking for all four.

A library of the benches, not a part: `make bench` runs only what hack/bench/__main__.py's PARTS names.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

SPLIT = ("shared", "repo:payments", "repo:web", "repo:infra")

LAYOUTS = {
    "shared": "whole corpus in `shared`",
    "split": "split over 4 namespaces, all four read",
}

#: what the triggers keep in `lexeme_stats` (migrations 0001, 0006), in one statement for a corpus
#: COPY-loaded with them off (every memory active, no history): each lexeme's document frequency
#: and highest term frequency
LEXEME_STATS_SQL = """INSERT INTO lexeme_stats (lexeme, df, max_tf)
    SELECT u.lexeme, count(*), max(coalesce(array_length(u.positions, 1), 1))
      FROM memories, unnest(tsv) u WHERE status = 'active' GROUP BY u.lexeme"""


def namespace(layout: str, i: int) -> str:
    """The namespace of the corpus's i-th memory (counted over all copies)."""
    if layout == "shared":
        return "shared"
    if layout == "split":
        return SPLIT[i % len(SPLIT)]
    raise ValueError(f"unknown layout {layout!r}: one of {', '.join(LAYOUTS)}")


def scope(layout: str, **kw: Any) -> Any:
    """The scope that reads the whole corpus of `layout`."""
    from brain.store import Scope

    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: one of {', '.join(LAYOUTS)}")
    return Scope.of([] if layout == "shared" else list(SPLIT[1:]), **kw)


def gold_recall(tops: Mapping[str, Sequence[str]], relevant: Mapping[str, set[str]]) -> float:
    """Mean share of a question's evidence turns among its top 10 (`tops`: each question's ranking
    as the LoCoMo turns its hits copy, so any copy of a turn counts as it), over the questions that
    have evidence: what a ranking that differs from reference BM25 must show it does no worse on."""
    asked = [q for q in tops if relevant.get(q)]
    return statistics.mean(len(relevant[q] & set(tops[q][:10])) / len(relevant[q]) for q in asked)
