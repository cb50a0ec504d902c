"""The in-memory persona and skill catalog on the real store and model."""

from __future__ import annotations

from brain.core.models import Actor, MemoryIn
from brain.retrieval.catalog import Catalog, keywords
from brain.services.memory import MemoryService
from brain.store import Scope


async def test_catalog_matches_personas_by_keywords_then_similarity(
    service: MemoryService, owner: Actor
) -> None:
    await service.note(
        MemoryIn(
            body="Identity: SRE who thinks in error budgets.",
            title="SRE",
            kind="persona",
            domain_keywords=["latency", "incident", "slo"],
        ),
        owner,
    )
    await service.note(
        MemoryIn(
            body="Identity: a frontend designer who cares about typography and layout.",
            title="Frontend designer",
            kind="persona",
            domain_keywords=["css", "typography"],
        ),
        owner,
    )
    await service.note(
        MemoryIn(
            body="Bisect the change, one hypothesis at a time.", title="debugging flaky tests", kind="skill"
        ),
        owner,
    )
    await service.note(
        MemoryIn(
            body="Some imported persona",
            title="Untrusted",
            kind="persona",
            domain_keywords=["latency", "incident"],
        ),
        Actor(name="x", role="agent", origin="untrusted"),
    )
    cat = Catalog()
    await cat.refresh(service.store)
    assert [p.hit.title for p in cat.personas] == ["SRE", "Frontend designer"] or sorted(
        p.hit.title for p in cat.personas
    ) == ["Frontend designer", "SRE"]
    scope = Scope.of([])
    q = "the latency incident broke our slo"
    vec = (await service.embedder.embed([q]))[0]  # type: ignore[union-attr]
    p = cat.persona(keywords(q), vec, scope)
    assert p is not None and p.title == "SRE" and p.legs == ["keywords"]
    q2 = "improve the typography and layout of our frontend design"
    vec2 = (await service.embedder.embed([q2]))[0]  # type: ignore[union-attr]
    p2 = cat.persona(keywords(q2), vec2, scope)
    assert p2 is not None and p2.title == "Frontend designer"
    q3 = "how do I debug a flaky test?"
    vec3 = (await service.embedder.embed([q3]))[0]  # type: ignore[union-attr]
    assert [s.title for s in cat.skills_for(vec3, keywords(q3), scope, 2)] == ["debugging flaky tests"]
    assert cat.persona(keywords("bake bread"), None, scope) is None
