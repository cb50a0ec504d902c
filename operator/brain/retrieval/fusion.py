"""Rank fusion and re-ranking: pure functions over (id, score) lists."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from brain.core.models import Hit
from brain.retrieval.catalog import STOP_WORDS

RRF_K = 60


def rrf(
    legs: Mapping[str, Sequence[str]], *, k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float, list[str]]]:
    """Reciprocal rank fusion: Σ w/(k + rank). Returns (id, score, legs that found it), best first."""
    scores: dict[str, float] = {}
    found: dict[str, list[str]] = {}
    for leg, ids in legs.items():
        w = (weights or {}).get(leg, 1.0)
        for rank, doc in enumerate(ids, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
            found.setdefault(doc, []).append(leg)
    return sorted(((d, s, found[d]) for d, s in scores.items()), key=lambda t: (-t[1], t[0]))


# Per leg: each candidate's z-score over that leg's own candidates, and the value a candidate the leg
# did not return counts as (the leg's lowest z).
LegZ = Mapping[str, tuple[Mapping[str, float], float]]


def leg_zscores(legs: Mapping[str, Sequence[tuple[str, float]]]) -> dict[str, tuple[dict[str, float], float]]:
    """Each leg's scores as z-scores over its own candidates; a leg whose scores are all equal
    (trigram match counts) gives 1 to its members and 0 to the rest."""
    per_leg: dict[str, tuple[dict[str, float], float]] = {}
    for leg, scored in legs.items():
        if not scored:
            continue
        values = [v for _, v in scored]
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        if sd == 0:
            per_leg[leg] = ({d: 1.0 for d, _ in scored}, 0.0)
        else:
            z = {d: (v - mean) / sd for d, v in scored}
            per_leg[leg] = (z, min(z.values()))
    return per_leg


def _combined(per_leg: LegZ, weights: Mapping[str, float] | None, group: Sequence[str]) -> float:
    """Σ over legs of weight × the leg's best z within `group` (its floor when it found none of them)."""
    return sum(
        (weights or {}).get(leg, 1.0) * max((z.get(d, floor) for d in group), default=floor)
        for leg, (z, floor) in per_leg.items()
    )


def fusion_shift(per_leg: LegZ, weights: Mapping[str, float] | None) -> float:
    """The lowest fused score before the shift to 0: what `zscore_fusion` subtracts."""
    found = {d for z, _ in per_leg.values() for d in z}
    return min((_combined(per_leg, weights, [d]) for d in found), default=0.0)


def zscore_fusion(
    legs: Mapping[str, Sequence[tuple[str, float]]], *, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float, list[str]]]:
    """Weighted sum of per-leg z-scores over each leg's own candidates (convex score fusion).

    A candidate a leg did not return gets that leg's lowest z-score (`leg_zscores`). Scores are
    shifted so the lowest is 0, which keeps multiplicative boosts monotonic. On LoCoMo this beats
    RRF(k=60) by ~0.08 recall@10 (docs/benchmarks.md), because score gaps carry information ranks
    throw away.
    """
    per_leg = leg_zscores(legs)
    found: dict[str, list[str]] = {}
    for leg, (z, _) in per_leg.items():
        for d in z:
            found.setdefault(d, []).append(leg)
    total = {d: _combined(per_leg, weights, [d]) for d in found}
    low = min(total.values(), default=0.0)
    return sorted(((d, s - low, found[d]) for d, s in total.items()), key=lambda t: (-t[1], t[0]))


def standout(scored: Sequence[tuple[str, float]]) -> float | None:
    """How far a leg's best candidate stands above its own candidates, in their standard deviations.

    A leg that has found the answer puts it well clear of the rest (a rare term matched, a close
    paraphrase); a leg that has only near-misses returns a flat list whose top is barely above its
    mean. None when the list is too short or flat to say (fewer than 3 candidates, all equal).
    """
    if len(scored) < 3:
        return None
    values = [v for _, v in scored]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    # equal scores are flat even when rounding leaves a tiny spread ([0.4] * 3 has mean 0.4000…01,
    # which put the top *below* the mean: a negative weight)
    if sd <= 1e-9 * max(1.0, abs(mean)):
        return None
    return max(values) / sd - mean / sd


def leg_weights(
    legs: Mapping[str, Sequence[tuple[str, float]]],
    base: Mapping[str, float],
    *,
    adaptive: Sequence[str] = ("vector", "lexical"),
) -> dict[str, float]:
    """Per-query weights: each graded leg's base weight × its standout relative to the others'.

    Fixed weights let a leg with nothing to say outvote one that has found the answer: on a
    paraphrase (same meaning, few shared words) the lexical leg's best is a stray common-word match
    while the vector leg's best stands far out. Scaling by standout, normalised so the mean factor
    over the legs that can be judged is 1, leaves the total weight as configured and moves it to the
    legs with evidence. Legs outside `adaptive` (trigram: counts of exact matches, no spread) and
    legs whose standout cannot be judged keep their base weight; with fewer than two judged legs
    nothing changes.
    """
    weights = {leg: base.get(leg, 1.0) for leg in legs}
    judged = {leg: s for leg in adaptive if leg in legs and (s := standout(legs[leg])) is not None}
    if len(judged) < 2:
        return weights
    mean = sum(judged.values()) / len(judged)
    for leg, s in judged.items():
        weights[leg] *= s / mean
    return weights


def evidence(
    legs: Mapping[str, Sequence[tuple[str, float]]], *, query_idf: float, identifiers: int
) -> dict[str, dict[str, float]]:
    """Each candidate's absolute evidence per leg, in [0, 1], comparable across queries and corpora.

    Fused scores are relative (a z-score always has a top), so they cannot say "nothing here bears on
    the question". These can: the vector leg's cosine, the share of the query's IDF a memory's BM25
    covers (`query_idf` is what a memory matching every term would score), and the share of the
    query's identifiers (ports, flags, env vars) found verbatim.
    """
    out: dict[str, dict[str, float]] = {}
    for leg, scored in legs.items():
        for doc, score in scored:
            if leg == "vector":
                value = score
            elif leg == "lexical":
                value = score / query_idf if query_idf > 0 else 0.0
            elif leg == "trigram":
                value = score / identifiers if identifiers else 0.0
            else:
                continue
            out.setdefault(doc, {})[leg] = max(0.0, min(1.0, value))
    return out


def above_floor(evidence: Mapping[str, Mapping[str, float]], floor: Mapping[str, float]) -> set[str]:
    """Candidates whose evidence, each leg's as a share of that leg's floor, adds up to at least 1.

    One leg at its floor is enough on its own, as is any mix of weaker legs that agree: a paraphrase
    at cosine 0.27 that also covers a quarter of the query's IDF has more evidence than either says
    alone. A leg with floor 0 lets everything it found through. Legs without a floor count nothing.
    """
    passing = set()
    for doc, legs in evidence.items():
        total = 0.0
        for leg, value in legs.items():
            if leg not in floor:
                continue
            if floor[leg] <= 0:
                total = math.inf
                break
            total += value / floor[leg]
        if total >= 1:
            passing.add(doc)
    return passing


def gate_open(evidence: Mapping[str, Mapping[str, float]], floor: Mapping[str, float]) -> bool:
    """Whether the question gets any memory at all: some candidate has an answer's evidence on one
    leg alone, a cosine at the (calibrated) vector floor, BM25 covering the lexical floor's share of
    the question's IDF, or every identifier the question names, verbatim.

    `above_floor` lets weaker legs that agree add up, which ranks paraphrases well but made the fused
    ranking answer questions every leg alone turns away: a coding question at cosine 0.15 that
    shares "how" and "list" with a note (a fifth of its IDF) passed, so the fused result abstained
    less often than the vector leg did (generated set, dev: 0.667 against 0.778; the held-out team
    set: 0.75 against 0.90). Partial evidence on two legs is what every unrelated question has. Once
    the gate is open the sum rule decides which memories pass, so no answer it admitted is lost for
    that reason. Chosen on dev over a vector-only gate (vector floor or exact identifiers): the same
    abstain on both dev sets, and LoCoMo dev recall@10 0.7427 against 0.7415. Without a vector
    floor (0) or a vector leg (embedder down, `--mode lexical`) the gate stays open: the other legs
    answer as before, by the sum rule.
    """
    if floor.get("vector", 0.0) <= 0 or not any("vector" in legs for legs in evidence.values()):
        return bool(evidence)
    return any(answers_alone(legs, floor) for legs in evidence.values())


def answers_alone(legs: Mapping[str, float], floor: Mapping[str, float]) -> bool:
    """Whether one candidate has an answer's evidence on one leg alone: a cosine at the vector floor,
    BM25 covering the lexical floor's share of the question's IDF, or every identifier verbatim. A
    leg whose floor is 0 (off) counts nothing here; `gate_open` handles a vector floor of 0 itself."""
    vector, lexical = floor.get("vector", 0.0), floor.get("lexical", 0.0)
    if vector > 0 and legs.get("vector", 0.0) >= vector:
        return True
    if legs.get("trigram", 0.0) >= 1.0:
        return True
    return lexical > 0 and legs.get("lexical", 0.0) >= lexical


_PUNCT = "()[]{}<>\"'`,;:!?.*"


def names(text: str) -> set[str]:
    """What a text names, lowercased: identifier-like words (`breul-indexer`, `payments.events`,
    `#revenue-oncall`, `RIXLUM_MODE`) and capitalised words that do not open a sentence (Pexbre,
    Harbor, Vault), stop words excepted. Ordinary words ("owned", "team") are not names."""
    out: set[str] = set()
    opens = True
    for raw in text.split():
        word = raw.strip(_PUNCT)
        if word and any(c.isalpha() for c in word):
            symbol = word[0] in "#@" or any(c in word[1:] for c in "-_./")
            proper = word[0].isupper() and not opens and word.lower() not in STOP_WORDS
            if symbol or proper:
                out.add(word.lower().lstrip("#@"))
        opens = raw.endswith((".", "!", "?", ":")) or not word
    return out


def selective(
    hits: Sequence[Hit],
    evidence: Mapping[str, Mapping[str, float]],
    floor: Mapping[str, float],
    *,
    query: str,
    ratio: float,
    rare: int = 2,
    context: Mapping[str, tuple[str, int]] | None = None,
    window: int = 0,
) -> list[Hit]:
    """Just the best hit when it clearly answers and the others merely pass the floor; else all of them.

    The best hit stands out when it has an answer's evidence on one leg alone (`answers_alone`) and
    no other hit scores above `ratio` × its (fused, boosted) score. In a small team's brain the floor
    lets through every note that shares the question's domain: "which team owns the billing cron
    job?" passed five notes where one answered it. Kept with it, though:

    - the hits that name something it names and the question does not (`names`, found in at most
      `rare` of the hits, the best one included): the second hop of a chained question ("who leads
      the team that owns breul-indexer?": the answer names the Pexbre team, and only the note about
      the Pexbre team names it too). That note scores like any near-miss, since the question never
      says the name; without this a top-one cut halved the generated set's multi-hop recall on dev;
    - the entries recorded next to it (`context`: id → (episode, seq), within `window` places): the
      question turn of an exchange often ranks first and the answer is the turn after it.

    `ratio` 0 turns it off. With `fusion: rrf` scores are 1/(k + rank) sums whose ratios stay near 1,
    so it never cuts. Chosen on dev (docs/performance.md, "Selectivity: one answer, one memory").
    """
    out = list(hits)
    if ratio <= 0 or len(out) < 2:
        return out
    top, rest = out[0], out[1:]
    if top.score <= 0 or not answers_alone(evidence.get(top.id, {}), floor):
        return out
    if max(h.score for h in rest) > ratio * top.score:
        return out
    asked = {w.strip(_PUNCT).lower().lstrip("#@") for w in query.split()}
    named = {h.id: names(f"{h.title}. {h.body}") for h in out}
    own = named[top.id] - asked
    df = {w: sum(w in ns for ns in named.values()) for w in own}
    context = context or {}
    where = context.get(top.id)

    def beside(h: Hit) -> bool:
        at = context.get(h.id)
        return where is not None and at is not None and at[0] == where[0] and abs(at[1] - where[1]) <= window

    return [top, *(h for h in rest if beside(h) or any(df[w] <= rare for w in own & named[h.id]))]


def episode_context(
    fused: Sequence[tuple[str, float, list[str]]],
    context: Mapping[str, tuple[str, int]],
    *,
    episode_weight: float,
    adjacent_weight: float,
    window: int,
    legs: LegZ | None = None,
    weights: Mapping[str, float] | None = None,
    looked: Collection[str] | None = None,
) -> list[tuple[str, float, list[str]]]:
    """Let entries recorded together lend each other relevance.

    An answer is often spread over neighbouring turns: the question names the topic, the next turn
    holds the fact. So each candidate gains `episode_weight` × its episode's score and
    `adjacent_weight` × the score of the entries within `window` places of it; episode neighbours that
    no leg found join at score 0 and can rise only through their neighbours. `context` maps id →
    (episode, seq) for candidates and their neighbours.

    A candidate whose episode was looked up (`looked`, the pipeline's first `CONTEXT_DEPTH`; None:
    every candidate) and that has none (a curated fact, an approved convention, an ingested note)
    is an episode of one: it gains `episode_weight` × its own score, as a session record alone in
    its session does. It kept its bare score before, so in a brain of both kinds a session record
    outranked the approved convention distilled from it by that lift alone (×1.5), whatever the two
    said; which one stood out then depended on the rest of the brain. Candidates past the lookup
    keep their bare score, as before. LoCoMo (every turn has an episode) and the team and generated
    sets (none has one) rank as before.

    A group's score (the episode, the window) is fused like a candidate's when the legs' z-scores are
    given: each leg's best z among the group's entries, weighted and summed, on the fused scale. So
    an episode where the vector leg's best match is one turn and the lexical leg's another counts
    what both legs found, as the session it is; the best single entry would count one leg's find and
    the other's floor. Without `legs` (RRF) a group scores as its best entry.
    On LoCoMo episode context lifts recall@10 by ~0.07, and fusing the groups per leg by +0.008
    more (docs/performance.md).
    """
    scores = {d: s for d, s, _ in fused}
    found = {d: legs_ for d, _, legs_ in fused}
    for d in context:
        if d not in scores:
            scores[d], found[d] = 0.0, ["episode"]
    members: dict[str, list[str]] = {}
    at: dict[tuple[str, int], str] = {}
    for d, (episode, seq) in context.items():
        members.setdefault(episode, []).append(d)
        at[(episode, seq)] = d
    shift = fusion_shift(legs, weights) if legs else 0.0
    # each context entry's weighted z per leg (the leg's floor where it did not find the entry)
    # (entries no leg found, the joined neighbours, have none: a group of only those scores 0)
    row = {
        d: [(weights or {}).get(leg, 1.0) * z.get(d, floor) for leg, (z, floor) in (legs or {}).items()]
        for d in context
        if "episode" not in found[d]
    }

    def group_score(group: Sequence[str]) -> float:
        if not group:
            return 0.0
        if not legs:
            return max(scores[d] for d in group)
        rows = [row[d] for d in group if d in row]
        return max(0.0, sum(map(max, zip(*rows, strict=True))) - shift) if rows else 0.0

    episode_score = {episode: group_score(ids) for episode, ids in members.items()}
    out = []
    for d, s in scores.items():
        if d in context:
            episode, seq = context[d]
            near = [
                at[(episode, seq + o)] for o in range(-window, window + 1) if o and (episode, seq + o) in at
            ]
            s += episode_weight * episode_score[episode] + adjacent_weight * group_score(near)
        elif looked is None or d in looked:  # an episode of one: its group's score is its own
            s += episode_weight * s
        out.append((d, s, found[d]))
    return sorted(out, key=lambda t: (-t[1], t[0]))


def keep_leg_leads(
    ranked: Sequence[Hit],
    legs: Mapping[str, Sequence[tuple[str, float]]],
    *,
    limit: int,
    leads: Sequence[str] = ("vector", "lexical"),
) -> list[Hit]:
    """Give each graded leg's own best candidate a place among the first `limit`.

    Episode context and the time lift add borrowed relevance: a turn next to a strong hit, or inside
    the question's window, can outrank what a leg found on its own evidence. When they fill the head,
    a leg's best match falls out of what is injected, and hybrid answers worse than that leg alone
    would. So a leg's best candidate that is still in `ranked` (it passed the floor) but not in its
    head replaces the lowest-scoring entry there that is no leg's best; the head keeps score order.
    Trigram is left out: its scores are match counts, often tied, so its "best" is arbitrary.
    On LoCoMo: +0.0024 recall@10, no change on the team and mini sets (docs/performance.md).
    """
    out = list(ranked)
    by_id = {h.id: h for h in out}
    leaders = list(dict.fromkeys(s[0][0] for leg in leads if (s := legs.get(leg)) and s[0][0] in by_id))
    head = out[: max(limit, 0)]
    for lead in leaders:
        if any(h.id == lead for h in head):
            continue
        drop = next((i for i in range(len(head) - 1, -1, -1) if head[i].id not in leaders), None)
        if drop is None:
            break
        head.pop(drop)
        head.append(by_id[lead])
    head.sort(key=lambda h: -h.score)  # stable: ties keep the order they came in
    chosen = {h.id for h in head}
    return head + [h for h in out if h.id not in chosen]


def boost(
    hit: Hit, *, now: datetime, importance_weight: float, recency_weight: float, half_life_days: float
) -> float:
    """Importance and recency nudge the fused score; they never outrank relevance by much."""
    age_days = max((now - hit.valid_from).total_seconds() / 86400.0, 0.0)
    recency = math.exp(-age_days * math.log(2) / half_life_days) if half_life_days > 0 else 0.0
    return hit.score * (1 + importance_weight * (hit.importance - 0.5)) * (1 + recency_weight * recency)


_WORD = re.compile(r"\w+")


def _shingles(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def diversify(hits: Sequence[Hit], *, limit: int, max_similarity: float = 0.85) -> list[Hit]:
    """Drop near-duplicates (same body, or word-overlap Jaccard above `max_similarity`) keeping the best."""
    chosen: list[Hit] = []
    seen_hashes: set[str] = set()
    shingles: list[set[str]] = []
    for hit in hits:
        if hit.content_hash and hit.content_hash in seen_hashes:
            continue
        words = _shingles(hit.body)
        if any(words and len(words & s) / len(words | s) > max_similarity for s in shingles):
            continue
        chosen.append(hit)
        seen_hashes.add(hit.content_hash)
        shingles.append(words)
        if len(chosen) >= limit:
            break
    return chosen
