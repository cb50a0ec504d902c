"""Memory that keeps the provider's prompt cache: a conversation through the real proxy, billed by the echo.

The gateway model here is `anthropic/claude-echo`: LiteLLM sends Anthropic's own body, with the
client's `cache_control` breakpoints, to the echo's `/v1/messages`, which bills the prompt cache as
Anthropic does (brain.local.promptcache). The same conversation goes once straight to the echo and
once through the gateway with memory on; the share of input tokens read from the cache must stay.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx

from tests.kit.gateway import ANTHROPIC_MODEL

from .conftest import Gateway, metric

SYSTEM = "You are a careful engineer on the payments team. " * 160  # ~8 KB, like Claude Code's prompt
FACTS = {
    "which port does the payments staging postgres listen on?": "The staging Postgres for payments listens on port 6543 behind pgbouncer.",
    "who approves production schema migrations for payments?": "Production schema migrations for payments need approval from the data platform on-call.",
    "what retention do the payments audit logs have?": "Payments audit logs are retained for 400 days in the cold bucket.",
    "which feature flag gates the new refund flow?": "The new refund flow is gated by the feature flag refunds_v2_enabled.",
}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def claude_like(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What Claude Code sends: a marked system block and a mark on the newest message's last block."""
    marked = json.loads(json.dumps(messages))
    marked[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": ANTHROPIC_MODEL,
        "max_tokens": 256,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": marked,
    }


async def conversation(url: str, key: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """Four turns, each about another fact; returns each turn's usage. The answers are the echo's."""
    history: list[dict[str, Any]] = []
    usages = []
    h = {"x-api-key": key, "anthropic-version": "2023-06-01", **headers}
    async with httpx.AsyncClient(timeout=60) as c:
        for question in FACTS:
            history.append(user(question))
            r = await c.post(f"{url}/v1/messages", json=claude_like(history), headers=h)
            assert r.status_code == 200, r.text
            body = r.json()
            usages.append(body["usage"])
            history.append(
                {"role": "assistant", "content": [{"type": "text", "text": body["content"][0]["text"][:300]}]}
            )
    return usages


def read_share(usages: list[dict[str, Any]]) -> float:
    read = sum(u.get("cache_read_input_tokens") or 0 for u in usages)
    total = sum(
        (u.get("input_tokens") or 0)
        + (u.get("cache_read_input_tokens") or 0)
        + (u.get("cache_creation_input_tokens") or 0)
        for u in usages
    )
    return read / total


async def test_memory_keeps_the_cache_read_share_of_a_four_turn_conversation(gw: Gateway, ns: str) -> None:
    ids = {}
    for question, fact in FACTS.items():
        r = await gw.rest("POST", "/memories", json={"body": fact, "namespace": ns, "kind": "fact"})
        assert r.status_code == 201, r.text
        ids[question] = r.json()["id"]
    gw.fake.cache.clear()
    direct = await conversation(gw.upstream_url, "sk-ant-fake", {})
    gw.fake.cache.clear()
    gw.fake.received.clear()
    before = await gw.metrics()
    put_back = metric(before, "brain_memory_blocks_put_back_total")
    billed_read = metric(before, "brain_upstream_input_tokens_total", cache="read")
    through = await conversation(gw.url, gw.keys["agent"], {"x-brain-namespaces": ns})
    bodies = gw.upstream_bodies("/v1/messages")
    assert len(bodies) == 4

    share_direct, share_brain = read_share(direct), read_share(through)
    print(f"cache-read share: direct {share_direct:.3f}, brain {share_brain:.3f}")
    assert share_direct > 0.5, direct
    assert share_brain >= 0.95 * share_direct, (share_brain, share_direct, through)
    # what the provider billed from its cache is on /metrics, for the dashboard (LiteLLM logs a
    # success after the response is sent: wait for the last one, a bounded number of times)
    read = sum(u["cache_read_input_tokens"] for u in through)
    for _ in range(50):
        after = await gw.metrics()
        if metric(after, "brain_upstream_input_tokens_total", cache="read") - billed_read >= read:
            break
        await asyncio.sleep(0.1)
    assert read > 0 and metric(after, "brain_upstream_input_tokens_total", cache="read") - billed_read == read
    # every earlier turn's block came back (1 + 2 + 3 of them over turns 2-4)
    assert metric(after, "brain_memory_blocks_put_back_total") - put_back == 6
    for turn, (question, body) in enumerate(zip(FACTS, bodies, strict=True)):
        newest = body["messages"][-1]["content"]
        assert newest[-1]["text"] == question and newest[-1].get("cache_control")  # the client's mark kept
        first = re.search(r"\[team memory (\S+)", newest[0]["text"])
        assert first and first.group(1) == ids[question], (turn, newest[0]["text"][:600])  # answer first
        assert json.dumps(body).count('"cache_control"') == 2  # none added
        if turn:  # the previous turn's message holds the same bytes it held when it was newest
            before = bodies[turn - 1]["messages"][-1]["content"]
            again = body["messages"][-3]["content"]
            assert again[0] == before[0] and again[1]["text"] == before[1]["text"]


async def test_memory_off_is_the_same_conversation_as_direct(gw: Gateway, ns: str) -> None:
    gw.fake.cache.clear()
    direct = await conversation(gw.upstream_url, "sk-ant-fake", {})
    gw.fake.cache.clear()
    off = await conversation(gw.url, gw.keys["agent"], {"x-brain-namespaces": ns, "x-brain-memory": "off"})
    assert read_share(off) == read_share(direct)


async def test_another_key_resending_a_conversation_never_gets_its_memory(gw: Gateway, ns: str) -> None:
    """A forged record: the confined key replays the agent key's conversation, word for word. The
    ledger is keyed by key, so it gets fresh retrieval in its own scope, never the other's block."""
    secret = "Project bluefin ships on Thursday; its codename is known to the payments team only."
    r = await gw.rest("POST", "/memories", json={"body": secret, "namespace": ns, "kind": "fact"})
    assert r.status_code == 201, r.text
    question = "when does project bluefin ship?"
    history = [user(question)]
    async with httpx.AsyncClient(timeout=60) as c:
        h = {"anthropic-version": "2023-06-01", "x-brain-namespaces": ns}
        first = await c.post(
            f"{gw.url}/v1/messages", json=claude_like(history), headers={**h, "x-api-key": gw.keys["agent"]}
        )
        assert first.status_code == 200 and first.headers["x-brain-memory"] == "injected"
        assert secret in json.dumps(gw.upstream_bodies("/v1/messages")[-1])
        history += [{"role": "assistant", "content": [{"type": "text", "text": "Noted."}]}, user("and then?")]
        for key in ("confined", "agent"):
            r = await c.post(
                f"{gw.url}/v1/messages", json=claude_like(history), headers={**h, "x-api-key": gw.keys[key]}
            )
            assert r.status_code == 200, r.text
            sent = json.dumps(gw.upstream_bodies("/v1/messages")[-1])
            assert (secret in sent) is (key == "agent"), key  # the owner of the record gets it back
