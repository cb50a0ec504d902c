"""Where a bench's copied corpus lives and what scope reads it (#33): the whole corpus, in two layouts.

Until #33 the in-process benches copied LoCoMo into namespaces `bench-0`, `bench-1`, … and queried
`bench-1` + `shared`: one ~5.9k namespace at every size. Now the queried scope holds every memory:

- `shared`: all of them in the team's `shared` namespace (what a key with no namespaces reads);
- `split`: memory i in `SPLIT[i % 4]`, `shared` and three repos, the scope asking for all four.

A library of the benches, not a part: `make bench` runs only what hack/bench/__main__.py's PARTS names.
"""

from __future__ import annotations

import functools
import re
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


TEXTS = {
    "copied": "every copy the turn's own text",
    "renamed": "copy k ≥ 1 of a conversation with its two speakers renamed, so no copy repeats another's bodies",
}

# Syllables of the made-up names that `renamed` gives copies' speakers: 24³ = 13,824 names, enough
# for every copy of every speaker at 1M (170 copies × 20 speakers).
_SYLLABLES = (
    "ba", "ko", "ri", "mu", "sel", "tan", "vo", "qui", "dra", "fen", "lo", "zar",
    "pi", "gon", "hal", "ne", "wu", "tes", "yor", "cam", "bri", "oth", "sku", "ve",
)  # fmt: skip


def alias(n: int) -> str:
    """The n-th made-up name: three syllables, capitalised, one lexeme no English text holds."""
    k = len(_SYLLABLES)
    if not 0 <= n < k**3:
        raise ValueError(f"alias {n} is outside 0..{k**3 - 1}")
    return (_SYLLABLES[n // k**2] + _SYLLABLES[n // k % k] + _SYLLABLES[n % k]).capitalize()


def speakers(memories: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Each conversation's speakers (a LoCoMo body starts "Name: "), in order of first turn."""
    out: dict[str, dict[str, None]] = {}
    for m in memories:
        out.setdefault(m.namespace, {})[m.body.split(":", 1)[0]] = None
    return {ns: tuple(names) for ns, names in out.items()}


def renamed(memories: Sequence[Any], copy: int) -> list[tuple[str, str]]:
    """(title, body) of each memory in copy `copy` of the `renamed` corpus: copy 0 is LoCoMo itself;
    in copy k ≥ 1 every whole-word mention of a conversation's speakers is another made-up name.

    Why (#33): the write path keeps one active memory per body in a namespace (`Writer.note`), so a
    team's `shared` never holds a turn 170 times, as the `copied` corpus does at 1M. Renamed copies
    are distinct memories about other people with the same words around them (LoCoMo itself repeats
    two short bodies within a conversation, "John: Take care, bye!" and "Jolene: See you!", and so
    does every copy: 340 rows at 1M, left as they are, none of them evidence): a question that names
    its subject has postings that stay those of its subject, while its other words grow with N."""
    if copy == 0:
        return [(m.title, m.body) for m in memories]
    convs = speakers(memories)
    slots = {ns: i for i, ns in enumerate(convs)}
    width = 2 * len(convs)  # speakers a copy renames: ≤ 2 a conversation
    subs: dict[str, Any] = {}
    for ns, names in convs.items():
        new = {n: alias((copy - 1) * width + 2 * slots[ns] + j) for j, n in enumerate(names)}
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
        subs[ns] = functools.partial(pattern.sub, lambda x, new=new: new[x.group(1)])
    return [(subs[m.namespace](m.title), subs[m.namespace](m.body)) for m in memories]


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


def turn_of(memories: Sequence[Any], seq: int, episode: str, texts: str) -> str:
    """The LoCoMo turn a bench memory stands for (`seq` its index, `episode` "copy-K@…"): any copy
    of it in the `copied` corpus; in the `renamed` one only copy 0, the others being about other people."""
    copy = int(episode.split("@", 1)[0].removeprefix("copy-"))
    return memories[seq].id if texts == "copied" or copy == 0 else f"{memories[seq].id}#copy-{copy}"


async def gold_recalls(
    store: Any, tops: Mapping[str, Mapping[str, Sequence[str]]], ds: Any, texts: str
) -> dict[str, float]:
    """`gold_recall` of each named ranking (question → its top 10 ids), its hits read back to the
    LoCoMo turns they stand for (`turn_of`)."""
    ids = list({m for ranking in tops.values() for top in ranking.values() for m in top})
    rows = await store.pool_for_tests.fetch("SELECT id, seq, episode FROM memories WHERE id = ANY($1)", ids)
    turn = {r["id"]: turn_of(ds.memories, r["seq"], r["episode"], texts) for r in rows}
    relevant = {q.query: set(q.relevant) for q in ds.queries}
    return {
        name: gold_recall({q: [turn[m] for m in top] for q, top in ranking.items()}, relevant)
        for name, ranking in tops.items()
    }


def gold_recall(tops: Mapping[str, Sequence[str]], relevant: Mapping[str, set[str]]) -> float:
    """Mean share of a question's evidence turns among its top 10 (`tops`: each question's ranking
    as the LoCoMo turns its hits copy, so any copy of a turn counts as it), over the questions that
    have evidence: what a ranking that differs from reference BM25 must show it does no worse on."""
    asked = [q for q in tops if relevant.get(q)]
    return statistics.mean(len(relevant[q] & set(tops[q][:10])) / len(relevant[q]) for q in asked)
