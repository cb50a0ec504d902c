"""retrieval/compose: the budget arithmetic of what is injected, without a database or a model.

The gateway and `brainctl eval --mode gateway` both inject what `assemble` returns, so its rules are
what an agent sees: a long persona is cut at a line, skills get at most a third of the budget,
memories keep their rank order in what is left, and nothing is injected for nothing found.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

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


class Retrievals:
    """A retrieval that waits until released, counting how often it was started."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0
        self.release = asyncio.Event()
        self.fail: Exception | None = None
        self.degraded: list[str] = []

    async def __call__(self) -> Injection:
        self.started += 1
        n = self.started
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail is not None:
            raise self.fail
        return Injection(text=f"t{n}", ids=["a"], tokens=1, degraded=list(self.degraded))


KEY = ("key", ("shared",), "q")


async def test_ten_concurrent_askers_of_one_question_share_one_retrieval() -> None:
    cache, compute = InjectionCache(ttl_s=30), Retrievals()
    askers = [asyncio.create_task(cache.fetch(KEY, 100.0, compute)) for _ in range(10)]
    await asyncio.sleep(0)
    compute.release.set()
    got = await asyncio.gather(*askers)
    assert compute.started == 1 and {g.text for g in got} == {"t1"}
    assert (await cache.fetch(KEY, 101.0, compute)).text == "t1" and compute.started == 1  # cached


async def test_one_askers_timeout_leaves_the_others_their_answer() -> None:
    cache, compute = InjectionCache(ttl_s=30), Retrievals()
    impatient = asyncio.create_task(asyncio.wait_for(cache.fetch(KEY, 100.0, compute), 0.01))
    patient = asyncio.create_task(cache.fetch(KEY, 100.0, compute))
    with pytest.raises(TimeoutError):
        await impatient
    compute.release.set()
    assert (await patient).text == "t1" and compute.started == 1 and compute.cancelled == 0


async def test_a_retrieval_every_asker_gave_up_on_is_cancelled_and_the_next_starts_afresh() -> None:
    cache, compute = InjectionCache(ttl_s=30), Retrievals()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(cache.fetch(KEY, 100.0, compute), 0.01)
    await asyncio.sleep(0)
    assert compute.cancelled == 1, "an abandoned retrieval keeps no connection busy"
    compute.release.set()
    assert (await cache.fetch(KEY, 100.0, compute)).text == "t2" and compute.started == 2


async def test_a_failed_retrieval_reaches_every_asker_and_is_not_cached() -> None:
    cache, compute = InjectionCache(ttl_s=30), Retrievals()
    compute.fail = ConnectionError("database down")
    askers = [asyncio.create_task(cache.fetch(KEY, 100.0, compute)) for _ in range(3)]
    await asyncio.sleep(0)
    compute.release.set()
    results = await asyncio.gather(*askers, return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results) and compute.started == 1
    compute.fail = None
    assert (await cache.fetch(KEY, 100.0, compute)).text == "t2"


async def test_a_retrieval_without_a_leg_is_answered_but_not_cached() -> None:
    cache, compute = InjectionCache(ttl_s=30), Retrievals()
    compute.degraded = ["timeout"]  # the embedding was late: the keyword legs alone answered
    compute.release.set()
    assert (await cache.fetch(KEY, 100.0, compute)).degraded == ["timeout"]
    compute.degraded = []
    whole = await cache.fetch(KEY, 101.0, compute)
    assert (whole.text, whole.degraded, compute.started) == ("t2", [], 2)  # asked again: the whole retrieval
    kept = await cache.fetch(KEY, 102.0, compute)
    assert kept.text == "t2" and compute.started == 2  # and that one is kept


async def test_a_write_during_a_retrieval_keeps_its_answer_out_of_the_cache() -> None:
    cache, compute = InjectionCache(ttl_s=30), Retrievals()
    before = asyncio.create_task(cache.fetch(KEY, 100.0, compute))
    await asyncio.sleep(0)
    cache.clear()  # a write landed while the retrieval ran
    after = asyncio.create_task(cache.fetch(KEY, 100.0, compute))
    await asyncio.sleep(0)
    compute.release.set()
    assert (await before).text == "t1" and (await after).text == "t2", "the asker after the write never joins"
    assert cache.get(KEY, 101.0) is not None and cache.get(KEY, 101.0).text == "t2"  # type: ignore[union-attr]
