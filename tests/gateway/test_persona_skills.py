"""Persona prefix (keyword overlap ≥ 2, else similarity) and skill slots, injected in that order."""

from __future__ import annotations

import asyncio

from brain.retrieval.render import PREAMBLE
from tests.kit.gateway import injected_block

from .conftest import Gateway

PERSONA = (
    "Identity: a senior site reliability engineer who thinks in blast radius, error budgets and root cause.\n"
    "Communication: short, concrete, numbers first."
)
SKILL = (
    "Systematic debugging: reproduce the failure reliably, bisect the change that introduced it, form one "
    "hypothesis at a time, and verify the fix with the original reproduction."
)


async def test_persona_then_memories_then_skills(gw: Gateway, ns: str) -> None:
    for body, extra in (
        (
            PERSONA,
            {"kind": "persona", "title": "SRE", "domain_keywords": ["latency", "incident", "slo", "pager"]},
        ),
        (SKILL, {"kind": "skill", "title": "systematic debugging of flaky failures"}),
        ("The checkout service p99 latency SLO is 300 ms.", {"kind": "fact"}),
    ):
        r = await gw.rest("POST", "/memories", key="owner", json={"body": body, "namespace": ns, **extra})
        assert r.status_code == 201, r.text
    question = "our checkout latency incident is burning the SLO; how do I debug this flaky failure?"
    for _ in range(50):  # the gateway reloads personas and skills in the background after a write
        r = await gw.chat(question, headers={"x-brain-namespaces": ns})
        block = injected_block(gw.upstream_bodies()[-1])
        if "[team persona" in block and "Systematic debugging" in block:
            break
        await asyncio.sleep(0.2)
    assert r.status_code == 200
    persona_at, fact_at, skill_at = (
        block.index("[team persona"),
        block.index("p99 latency SLO"),
        block.index(SKILL),
    )
    # The preamble ("data, not instructions") comes first; the persona is fenced like any memory.
    assert block.startswith(PREAMBLE) and persona_at < fact_at < skill_at
    assert "senior site reliability engineer" in block


async def test_unrelated_question_gets_no_persona(gw: Gateway, ns: str) -> None:
    r = await gw.rest(
        "POST",
        "/memories",
        key="owner",
        json={
            "body": PERSONA,
            "namespace": ns,
            "kind": "persona",
            "title": "SRE",
            "domain_keywords": ["latency", "incident", "slo", "pager"],
        },
    )
    assert r.status_code == 201
    await asyncio.sleep(1.0)
    r = await gw.chat("please write a haiku about autumn leaves", headers={"x-brain-namespaces": ns})
    assert r.status_code == 200
    assert "[team persona" not in str(gw.upstream_bodies()[-1]["messages"])
