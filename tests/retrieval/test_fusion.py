"""Pure fusion pieces: the evidence floor, leg weights, episode groups, leg leads (brain.retrieval.fusion)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from brain.core.models import Hit
from brain.retrieval.fusion import (
    above_floor,
    episode_context,
    gate_open,
    keep_leg_leads,
    leg_weights,
    leg_zscores,
    names,
    selective,
    standout,
    zscore_fusion,
)

FLOOR = {"vector": 0.3, "lexical": 0.5, "trigram": 0.5}

evidence_values = st.floats(min_value=0, max_value=1, allow_nan=False)
leg_evidence = st.dictionaries(st.sampled_from(["vector", "lexical", "trigram"]), evidence_values, min_size=1)


def test_two_weak_legs_that_agree_pass_where_either_alone_does_not() -> None:
    # a paraphrase: cosine under the vector floor, a quarter of the query's IDF covered
    ev = {"para": {"vector": 0.27, "lexical": 0.23}, "cos": {"vector": 0.27}, "lex": {"lexical": 0.23}}
    assert above_floor(ev, FLOOR) == {"para"}


def test_weak_legs_that_agree_do_not_open_the_gate_alone() -> None:
    """An unrelated coding question: cosine 0.15 and a fifth of its IDF in common words. The sum
    rule passes it, the gate does not: nothing has an answer's evidence on one leg (issue #28)."""
    ev = {"note": {"vector": 0.15, "lexical": 0.2}, "other": {"vector": 0.12}}
    floor = {**FLOOR, "vector": 0.218}
    assert above_floor(ev, floor) == {"note"}
    assert not gate_open(ev, floor)
    # one memory over a leg's floor, or with every identifier verbatim, opens it for all that pass
    assert gate_open({**ev, "hit": {"vector": 0.22}}, floor)
    assert gate_open({**ev, "words": {"lexical": 0.5}}, floor)
    assert gate_open({**ev, "port": {"vector": 0.05, "trigram": 1.0}}, floor)
    assert not gate_open({**ev, "half": {"vector": 0.05, "trigram": 0.5}}, floor)


def test_without_a_vector_floor_or_leg_the_gate_stays_open() -> None:
    assert gate_open({"a": {"vector": 0.01}}, {**FLOOR, "vector": 0})
    assert gate_open({"a": {"lexical": 0.2}}, FLOOR)  # embedder down, or `--mode lexical`: sum rule
    assert not gate_open({}, FLOOR)


@given(st.dictionaries(st.text(min_size=1, max_size=3), leg_evidence, max_size=8))
def test_the_fused_result_answers_only_when_one_leg_alone_would(ev: dict[str, dict[str, float]]) -> None:
    """So it never answers a question that each leg on its own, with the same floors, turns away."""
    alone = any(
        legs.get("vector", 0) >= FLOOR["vector"]
        or legs.get("lexical", 0) >= FLOOR["lexical"]
        or legs.get("trigram", 0) >= 1
        for legs in ev.values()
    )
    if any("vector" in legs for legs in ev.values()):
        assert gate_open(ev, FLOOR) == alone
    else:  # no vector leg (embedder down): the other legs answer by the sum rule, as before
        assert gate_open(ev, FLOOR) == bool(ev)


def test_a_leg_without_a_floor_counts_nothing_and_floor_zero_lets_its_finds_through() -> None:
    ev = {"a": {"rerank": 1.0}, "b": {"vector": 0.0}}
    assert above_floor(ev, FLOOR) == set()
    assert above_floor(ev, {**FLOOR, "vector": 0}) == {"b"}


@given(st.dictionaries(st.text(min_size=1, max_size=3), leg_evidence, max_size=8))
def test_one_leg_at_its_floor_always_passes(ev: dict[str, dict[str, float]]) -> None:
    passing = above_floor(ev, FLOOR)
    for doc, legs in ev.items():
        if any(v >= FLOOR[leg] for leg, v in legs.items()):
            assert doc in passing
        if all(v < FLOOR[leg] / len(FLOOR) for leg, v in legs.items()):
            assert doc not in passing  # three legs each under a third of the floor never add up


@given(leg_evidence, st.sampled_from(["vector", "lexical", "trigram"]), evidence_values)
def test_more_evidence_never_drops_a_memory(legs: dict[str, float], leg: str, extra: float) -> None:
    before = above_floor({"m": legs}, FLOOR)
    after = above_floor({"m": {**legs, leg: max(legs.get(leg, 0.0), extra)}}, FLOOR)
    assert before <= after


def test_a_leg_whose_best_stands_out_gets_more_weight_than_a_flat_one() -> None:
    flat = [(f"l{i}", 1.0 + 0.01 * i) for i in range(10)]
    peaked = [("answer", 0.9)] + [(f"v{i}", 0.1) for i in range(9)]
    w = leg_weights({"vector": peaked, "lexical": flat, "trigram": [("x", 1.0)]}, {"vector": 1, "lexical": 1})
    assert w["vector"] > 1 > w["lexical"]
    assert w["trigram"] == 1.0  # not graded: counts of exact matches have no spread to judge
    assert abs(w["vector"] + w["lexical"] - 2) < 1e-9  # weight moves between legs, the total stays
    # with the weights, the peaked leg's answer wins the fusion over the flat leg's top
    assert zscore_fusion({"vector": peaked, "lexical": flat}, weights=w)[0][0] == "answer"


def test_legs_that_cannot_be_judged_keep_their_base_weight() -> None:
    short = [("a", 2.0), ("b", 1.0)]
    equal = [("c", 1.0), ("d", 1.0), ("e", 1.0)]
    assert leg_weights({"vector": short, "lexical": equal}, {"vector": 0.7, "lexical": 1.3}) == {
        "vector": 0.7,
        "lexical": 1.3,
    }


scores = st.lists(st.floats(min_value=-50, max_value=50, allow_nan=False), min_size=0, max_size=30)


@given(scores, scores, st.floats(min_value=0.1, max_value=3), st.floats(min_value=0.1, max_value=3))
def test_weights_stay_positive_and_keep_the_configured_total(
    vec: list[float], lex: list[float], wv: float, wl: float
) -> None:
    legs = {
        "vector": [(f"v{i}", v) for i, v in enumerate(vec)],
        "lexical": [(f"l{i}", v) for i, v in enumerate(lex)],
    }
    w = leg_weights(legs, {"vector": wv, "lexical": wl})
    assert all(x > 0 for x in w.values())
    # normalised over the judged legs: the mean factor is 1, so equal base weights keep their sum
    if wv == wl:
        assert abs(sum(w.values()) - 2 * wv) < 1e-6 * wv


def _hit(doc: str, score: float) -> Hit:
    return Hit(
        id=doc,
        kind="note",
        namespace="shared",
        tier="episodic",
        origin="agent",
        author="a",
        title="",
        body=f"body of {doc}",
        valid_from=datetime(2026, 1, 1, tzinfo=UTC),
        score=score,
    )


def test_a_legs_best_pushed_out_by_borrowed_relevance_gets_the_last_place_back() -> None:
    # four episode neighbours lifted above the vector leg's own best match ("v1")
    ranked = [_hit("n1", 9), _hit("n2", 8), _hit("n3", 7), _hit("n4", 6), _hit("v1", 5), _hit("x", 4)]
    legs = {"vector": [("v1", 0.6), ("n1", 0.4)], "lexical": [("n1", 3.0)]}
    out = keep_leg_leads(ranked, legs, limit=3)
    assert [h.id for h in out[:3]] == ["n1", "n2", "v1"]  # n3, the weakest non-lead, made room
    assert [h.id for h in out[3:]] == ["n3", "n4", "x"]  # nothing lost, score order kept


def test_leads_already_in_the_head_change_nothing() -> None:
    ranked = [_hit("a", 3), _hit("b", 2), _hit("c", 1)]
    legs = {"vector": [("b", 0.5)], "lexical": [("a", 2.0)], "trigram": [("c", 1.0)]}
    assert keep_leg_leads(ranked, legs, limit=2) == ranked


def test_a_lead_that_did_not_pass_the_floor_is_not_brought_back_nor_is_trigrams() -> None:
    ranked = [_hit("a", 3), _hit("b", 2), _hit("t", 1)]
    legs = {"vector": [("cut", 0.2)], "trigram": [("t", 1.0)]}  # "cut" is not among the ranked hits
    assert [h.id for h in keep_leg_leads(ranked, legs, limit=2)] == ["a", "b", "t"]


def test_equal_scores_are_flat_whatever_the_rounding() -> None:
    """[0.4] * 3 averages to 0.4000000000000001: the leg is flat, not a negative standout."""
    assert standout([("a", 0.4), ("b", 0.4), ("c", 0.4)]) is None
    w = leg_weights(
        {"vector": [("a", 0.0), ("b", 0.0), ("c", 1.0)], "lexical": [("a", 0.4), ("b", 0.4), ("c", 0.4)]},
        {"vector": 1.0, "lexical": 1.0},
    )
    assert all(x > 0 for x in w.values())


@given(
    st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), min_size=1, max_size=12),
    st.integers(min_value=0, max_value=12),
    st.data(),
)
def test_leads_always_reach_the_head_and_no_hit_is_lost(
    scores: list[float], limit: int, data: st.DataObject
) -> None:
    ranked = sorted((_hit(str(i), s) for i, s in enumerate(scores)), key=lambda h: -h.score)
    ids = [h.id for h in ranked]
    legs = {leg: [(data.draw(st.sampled_from(ids)), 1.0)] for leg in ("vector", "lexical")}
    out = keep_leg_leads(ranked, legs, limit=limit)
    assert sorted(h.id for h in out) == sorted(ids)
    head = [h.id for h in out[:limit]]
    for leg in ("vector", "lexical"):
        assert legs[leg][0][0] in head or (limit < 2 and len(head) == limit)


def test_an_episode_two_legs_agree_on_through_different_turns_outranks_a_one_leg_episode() -> None:
    # Session "s": the vector leg's best match is turn v, the lexical leg's best is turn l.
    # Session "o": one turn (o1) that both legs rank second. Per entry, o1 fuses highest; per
    # session, "s" holds both legs' best finds, and its other turn (s3, which no leg found) rises with it.
    legs = {
        "vector": [("v", 0.9), ("o1", 0.7), ("l", 0.2), ("x", 0.1)],
        "lexical": [("l", 9.0), ("o1", 6.0), ("v", 1.0), ("x", 0.5)],
    }
    fused = zscore_fusion(legs)
    assert fused[0][0] == "o1"
    context = {"v": ("s", 0), "l": ("s", 5), "s3": ("s", 9), "o1": ("o", 0), "x": ("x", 0)}
    by_entry = episode_context(fused, context, episode_weight=0.5, adjacent_weight=0.3, window=2)
    per_leg = episode_context(
        fused, context, episode_weight=0.5, adjacent_weight=0.3, window=2, legs=leg_zscores(legs)
    )
    assert by_entry[0][0] == "o1"  # scored by its best entry, session "s" counts only l's lexical find
    assert per_leg[0][0] == "l"  # scored per leg, it counts v's vector find too
    assert dict((d, s) for d, s, _ in per_leg)["s3"] > dict((d, s) for d, s, _ in by_entry)["s3"]
    # without the legs' z-scores (RRF) a group scores as its best entry, as before
    assert episode_context(fused, context, episode_weight=0.5, adjacent_weight=0.3, window=2) == by_entry


def test_a_group_of_one_scores_as_that_entry_and_zscore_fusion_is_unchanged() -> None:
    legs = {
        "vector": [("a", 0.9), ("b", 0.5), ("c", 0.49)],
        "lexical": [("b", 10.0), ("c", 9.9), ("d", 1.0)],
        "trigram": [("d", 1.0)],
    }
    w = {"vector": 1.0, "lexical": 1.0, "trigram": 0.6}
    fused = zscore_fusion(legs, weights=w)
    context = {d: (f"ep-{d}", 0) for d, _, _ in fused}  # every entry alone in its episode
    out = episode_context(
        fused, context, episode_weight=0.5, adjacent_weight=0.3, window=2, legs=leg_zscores(legs), weights=w
    )
    for (d, s, _), (d2, s2, _) in zip(fused, out, strict=True):
        assert d == d2 and abs(s2 - 1.5 * s) < 1e-9  # own score + 0.5 × the same score, no neighbours


# Selectivity (issue #27): one memory clearly answers, the others merely pass the floor.
FLOOR_Q = {**FLOOR, "vector": 0.245}  # a quiet team's calibrated vector floor


def _fact(doc: str, score: float, body: str) -> Hit:
    return _hit(doc, score).model_copy(update={"body": body})


BILLING = [  # "which team owns the billing cron job?" over the agents' team facts (tests/agents)
    _fact("owner", 7.85, "The billing cron job is owned by the revenue team (channel #revenue-oncall)."),
    _fact("utc", 4.2, "The current date in logs is UTC; the billing cron job runs at 02:00 UTC every day."),
    _fact("rotation", 2.08, "The on-call rotation for payments changes every Monday at 09:00 Europe/Berlin."),
    _fact("ledger", 1.47, "The ledger service owns the double-entry tables; other services read its API."),
]
BILLING_EV = {
    "owner": {"vector": 0.80, "lexical": 1.0},
    "utc": {"vector": 0.51, "lexical": 0.56},
    "rotation": {"vector": 0.34},
    "ledger": {"vector": 0.23, "lexical": 0.21},
}
BILLING_Q = "which team owns the billing cron job?"


def test_the_memory_that_stands_out_is_injected_alone() -> None:
    out = selective(BILLING, BILLING_EV, FLOOR_Q, query=BILLING_Q, ratio=0.55)
    assert [h.id for h in out] == ["owner"]


def test_a_close_second_keeps_everything() -> None:
    close = [BILLING[0], BILLING[1].model_copy(update={"score": 4.6}), *BILLING[2:]]  # 0.59 of the best
    assert selective(close, BILLING_EV, FLOOR_Q, query=BILLING_Q, ratio=0.55) == close
    assert [h.id for h in selective(close, BILLING_EV, FLOOR_Q, query=BILLING_Q, ratio=0.6)] == ["owner"]


def test_a_best_hit_without_an_answers_evidence_of_its_own_does_not_stand_out() -> None:
    """Ranked first by borrowed relevance (its episode, the time lift) or weak legs adding up: that
    is not one memory clearly answering, so the ranking stands."""
    weak = {**BILLING_EV, "owner": {"vector": 0.2, "lexical": 0.3}}  # passes the sum rule only
    assert selective(BILLING, weak, FLOOR_Q, query=BILLING_Q, ratio=0.55) == BILLING
    assert selective(BILLING, {}, FLOOR_Q, query=BILLING_Q, ratio=0.55) == BILLING  # no evidence at all


def test_the_second_hop_of_a_chained_question_stays_with_the_answer() -> None:
    """ "Who leads the team that owns breul-indexer?": the answer names the Pexbre team, the note
    about the Pexbre team never says breul-indexer, and scores like the other teams' notes."""
    hits = [
        _fact("own", 7.34, "breul-indexer is owned by the Pexbre team."),
        _fact("lead", 2.88, "The Pexbre team takes pages in #ithsep and is led by Brenid Faypex."),
        _fact("other", 2.65, "The Sortor team takes pages in #vandel and is led by Ilsa Marrow."),
        _fact("api", 2.31, "breul-api is owned by the Sortor team and deploys on Tuesdays."),
        _fact("cron", 2.1, "The billing cron job is owned by the revenue team."),
    ]
    ev = {"own": {"vector": 0.8, "lexical": 1.0}, "lead": {"vector": 0.5}, "other": {"vector": 0.45}}
    out = selective(hits, ev, FLOOR_Q, query="who leads the team that owns breul-indexer?", ratio=0.55)
    # the answer names breul-indexer (asked) and Pexbre; only the Pexbre team's note names Pexbre too.
    # "owned" and "team" are words, not names: the other team's note and the cron note stay out
    assert [h.id for h in out] == ["own", "lead"]


def test_off_and_trivial_inputs_change_nothing() -> None:
    assert selective(BILLING, BILLING_EV, FLOOR_Q, query=BILLING_Q, ratio=0) == BILLING
    assert selective(BILLING[:1], BILLING_EV, FLOOR_Q, query=BILLING_Q, ratio=0.55) == BILLING[:1]
    assert selective([], {}, FLOOR_Q, query=BILLING_Q, ratio=0.55) == []
    zero = [h.model_copy(update={"score": 0.0}) for h in BILLING]
    assert selective(zero, BILLING_EV, FLOOR_Q, query=BILLING_Q, ratio=0.55) == zero


WORDS = ["Pexbre", "Harbor", "breul-indexer", "owned", "team", "cron", "ledger", "Vault"]


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=20, allow_nan=False),
            st.lists(st.sampled_from(WORDS), max_size=4),
            st.floats(min_value=0, max_value=1, allow_nan=False),
        ),
        max_size=8,
    ),
    st.floats(min_value=0, max_value=1, allow_nan=False),
    st.floats(min_value=0, max_value=1, allow_nan=False),
    st.lists(st.sampled_from(WORDS), max_size=3),
)
def test_selectivity_keeps_the_best_keeps_order_and_a_larger_ratio_never_keeps_more(
    rows: list[tuple[float, list[str], float]], r1: float, r2: float, asked: list[str]
) -> None:
    hits = sorted(
        (_fact(f"m{i}", s, " ".join(["note on", *words])) for i, (s, words, _) in enumerate(rows)),
        key=lambda h: -h.score,
    )
    ev = {f"m{i}": {"vector": cos} for i, (_, _, cos) in enumerate(rows)}
    query = " ".join(asked) or "what?"
    low, high = sorted((r1, r2))
    wide = selective(hits, ev, FLOOR_Q, query=query, ratio=low)
    narrow = selective(hits, ev, FLOOR_Q, query=query, ratio=high)
    for out in (wide, narrow):
        assert out[:1] == hits[:1]  # the best is never dropped; an answer is never emptied
        assert [h for h in hits if h in out] == out  # a subsequence, in rank order
    assert {h.id for h in narrow} <= {h.id for h in wide}
    assert selective(hits, ev, FLOOR_Q, query=query, ratio=0) == hits


def test_names_are_identifiers_and_capitalised_words_inside_a_sentence() -> None:
    text = "The Pexbre team owns breul-indexer. Pages go to #ithsep; RIXLUM_MODE is set by Vault."
    assert names(text) == {"pexbre", "breul-indexer", "ithsep", "rixlum_mode", "vault"}
    assert names("Deploys happen through Argo CD: Never by hand.") == {"argo", "cd"}


def test_the_turn_beside_the_best_stays_with_it() -> None:
    """The question turn of an exchange ranks first; the answer is the next turn (episode context)."""
    context = {"owner": ("standup", 3), "utc": ("standup", 4), "rotation": ("standup", 9)}
    out = selective(BILLING, BILLING_EV, FLOOR_Q, query=BILLING_Q, ratio=0.55, context=context, window=2)
    assert [h.id for h in out] == ["owner", "utc"]  # seq 9 is not beside seq 3
