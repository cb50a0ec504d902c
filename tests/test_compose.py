"""retrieval/compose: the budget arithmetic of what is injected, without a database or a model.

The gateway and `brainctl eval --mode gateway` both inject what `assemble` returns, so its rules are
what an agent sees: a long persona is cut at a line, skills get at most a third of the budget,
memories keep their rank order in what is left, and nothing is injected for nothing found.
"""

from __future__ import annotations

from datetime import UTC, datetime

from brain.core.models import Hit
from brain.retrieval.compose import PERSONA_TOKENS, Injection, InjectionCache, assemble
from brain.retrieval.render import estimate_tokens


def hit(id_: str, body: str, kind: str = "note") -> Hit:
    return Hit(
        id=id_,
        kind=kind,
        namespace="shared",
        tier="curated",
        origin="owner",
        author="owner",
        title=f"title {id_}",
        body=body,
        valid_from=datetime(2026, 1, 1, tzinfo=UTC),
        score=1.0,
    )


def test_nothing_found_injects_nothing() -> None:
    inj = assemble([], None, [], 2000)
    assert (inj.text, inj.ids, inj.tokens) == ("", [], 0)


def test_memories_keep_rank_order_and_the_budget() -> None:
    memories = [hit(f"m{i}", "word " * 200) for i in range(10)]  # ~250 tokens each rendered
    inj = assemble(memories, None, [], 1000)
    assert inj.ids == [m.id for m in memories[: len(inj.ids)]]
    assert 1 <= len(inj.ids) < 10
    assert inj.tokens <= 1000
    assert inj.text.index("title m0") < inj.text.index(f"title m{len(inj.ids) - 1}")


def test_skills_get_at_most_a_third_and_come_after_memories() -> None:
    skills = [hit(f"s{i}", "step " * 200, kind="skill") for i in range(3)]
    memories = [hit("m0", "short fact")]
    inj = assemble(memories, None, skills, 1200)
    chosen = [i for i in inj.ids if i.startswith("s")]
    assert len(chosen) == 1  # one ~250-token skill fits in 400 tokens, two do not
    assert inj.ids[0] == "m0"


def test_a_long_persona_is_cut_at_a_line_and_named_last() -> None:
    persona = hit("p", "\n".join(f"line {i} " + "x" * 60 for i in range(200)), kind="persona")
    inj = assemble([hit("m0", "fact")], persona, [], 4000)
    assert inj.ids == ["m0", "p"]
    assert "…" in inj.text
    assert "line 199" not in inj.text
    assert estimate_tokens(inj.text) < PERSONA_TOKENS + 200


def test_the_cache_forgets_after_its_ttl_and_on_clear() -> None:
    cache = InjectionCache(ttl_s=30, size=2)
    inj = Injection(text="t", ids=["a"], tokens=1, degraded=[])
    key = ("key", ("shared",), "q")
    cache.put(key, 100.0, inj)
    assert cache.get(key, 129.0) is inj
    assert cache.get(key, 130.0) is None
    cache.put(("k2", (), "q"), 100.0, inj)
    cache.put(("k3", (), "q"), 100.0, inj)
    assert len(cache) == 2 and cache.get(key, 101.0) is None  # the oldest went first
    cache.clear()
    assert len(cache) == 0
