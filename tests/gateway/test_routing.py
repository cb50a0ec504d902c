"""The complexity router (rendered from a RoutingPolicy) and explicit overrides pick the configured models."""

from __future__ import annotations

from .conftest import Gateway, metric

TIER_MODEL = {
    "SIMPLE": "tier-simple",
    "MEDIUM": "tier-medium",
    "COMPLEX": "tier-complex",
    "REASONING": "tier-reasoning",
}
HARD = (
    "Think step by step and prove, rigorously, that the distributed consensus protocol in our architecture "
    "remains linearizable under network partitions; analyze the trade-offs of leader leases versus quorum reads, "
    "derive the failure bounds, and refactor the replication algorithm to be scalable. ```go\nfunc f() {}\n```"
)


async def _route(gw: Gateway, text: str) -> tuple[str, str, str]:
    r = await gw.chat(text, model="smart-router", headers={"x-brain-memory": "off"})
    assert r.status_code == 200, r.text
    sent = gw.upstream_bodies()[-1]["model"]
    return r.headers.get("x-brain-route-tier", ""), r.headers.get("x-brain-route-model", ""), sent


async def test_router_sends_each_tier_to_its_configured_model(gw: Gateway) -> None:
    seen = {}
    for text in ("hi", "what is 2+2?", HARD):
        tier, model, sent = await _route(gw, text)
        assert tier in TIER_MODEL, tier
        assert model == sent == TIER_MODEL[tier]
        seen[text] = tier
    assert seen["hi"] == "SIMPLE"
    assert seen[HARD] in ("COMPLEX", "REASONING")
    text = await gw.metrics()
    assert (
        metric(
            text, "brain_router_decisions_total", router="smart-router", tier="SIMPLE", model="tier-simple"
        )
        >= 1
    )


async def test_explicit_overrides_win_over_the_score(gw: Gateway) -> None:
    tier, model, sent = await _route(gw, "hi, use kimi to draft a landing page")
    assert (tier, model, sent) == ("override", "kimi", "kimi")
    tier, model, sent = await _route(gw, "Use Pro: " + HARD)
    assert (tier, model, sent) == ("override", "pro", "pro")
    # an override phrase only counts as words, and only for the router's model name
    _, _, sent = await _route(gw, "hi, reuse programs")
    assert sent == "tier-simple"
    r = await gw.chat("use kimi please", model="echo", headers={"x-brain-memory": "off"})
    assert r.status_code == 200 and gw.upstream_bodies()[-1]["model"] == "echo"
    text = await gw.metrics()
    assert metric(text, "brain_router_decisions_total", tier="override", model="kimi") >= 1
