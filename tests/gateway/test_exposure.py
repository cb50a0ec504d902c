"""Exposure receipts and retractions that reach live sessions (#31), through the real proxy.

A memory is given to three conversations of two keys, then retired by an owner as wrong: its
exposure lists exactly those three; the next request of each carries one fenced notice in its newest
message, the one after that carries none there (only the earlier turn's block, put back byte for
byte); a fourth conversation, never given the memory, gets nothing. Non-owner keys are refused the
exposure. A database failure while receipts are written does not break a chat.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx

from brain.gateway.retractions import Exposure, Notice, conversation_id, with_notices
from brain.gateway.settings import ExposureSettings
from brain.retrieval.render import PREAMBLE
from brain.services.keys import KeyStore

from .conftest import Gateway, metric

FACT = "The ledger-sync worker for invoices retries every 45 seconds against the quokka queue."
ASKS = (
    "how often does the ledger-sync worker for invoices retry against the quokka queue?",
    "what is the retry interval of the invoices ledger-sync worker on the quokka queue?",
    "ledger-sync invoices worker: retry period for the quokka queue?",
)
UNRELATED = "what colour is the lobby carpet of the Zurich office?"
REASON = "wrong: the worker retries every 5 minutes since the queue moved"
SENTENCE = "given earlier in this conversation, was retracted"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _newest_user(body: dict[str, Any]) -> str:
    return _text([m for m in body["messages"] if m.get("role") == "user"][-1]["content"])


def _all_text(body: dict[str, Any]) -> str:
    return "\n".join(_text(m.get("content")) for m in body["messages"])


async def _exposure(gw: Gateway, mid: str, key: str = "owner") -> Any:
    return await gw.rest("GET", f"/memories/{mid}/exposure", key=key)


async def _until(check: Any, timeout: float = 15.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await check()
        if got or asyncio.get_running_loop().time() > deadline:
            return got
        await asyncio.sleep(0.2)


class Conv:
    """A client conversation: it resends every earlier turn as it sent it, with a fixed answer."""

    def __init__(self, gw: Gateway, key: str, ns: str) -> None:
        self.gw, self.key, self.ns = gw, key, ns
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": f"You help team {ns}."}]

    async def ask(self, question: str) -> tuple[Any, dict[str, Any]]:
        self.messages.append({"role": "user", "content": question})
        r = await self.gw.chat(
            "", key=self.key, messages=list(self.messages), headers={"x-brain-namespaces": self.ns}
        )
        assert r.status_code == 200, r.text
        self.messages.append({"role": "assistant", "content": "Noted."})
        return r, self.gw.upstream_bodies()[-1]


async def _second_key(gw: Gateway) -> str:
    name = f"agent2-{uuid.uuid4().hex[:6]}"
    gw.keys[name], _ = await KeyStore(gw.store).create(name, "agent")
    return name


async def test_a_retired_memory_reaches_the_three_conversations_given_it_once_and_no_other(
    gw: Gateway, ns: str
) -> None:
    r = await gw.rest("POST", "/memories", key="owner", json={"body": FACT, "namespace": ns, "kind": "fact"})
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    other = await _second_key(gw)
    convs = [Conv(gw, "agent", ns), Conv(gw, "agent", ns), Conv(gw, other, ns)]
    for conv, ask in zip(convs, ASKS, strict=True):
        resp, _ = await conv.ask(ask)
        assert mid in resp.headers.get("x-brain-memory-ids", ""), (ask, resp.headers.get("x-brain-memory"))
    fourth = Conv(gw, other, f"{ns}-elsewhere")  # a namespace without the memory: never given it
    resp, _ = await fourth.ask(UNRELATED)
    assert mid not in resp.headers.get("x-brain-memory-ids", "")

    async def three() -> Any:
        r = await _exposure(gw, mid)
        return r.json() if r.status_code == 200 and r.json()["count"] >= 3 else None

    doc = await _until(three)
    assert doc is not None, (await _exposure(gw, mid)).text
    assert doc["count"] == 3 and doc["noticed"] == 0
    assert sorted(c["key"] for c in doc["conversations"]) == sorted(["agent", "agent", other])
    assert all(c["versions"] == [{"id": mid, "version": 1, "injections": 1}] for c in doc["conversations"])
    assert len({c["conversation"] for c in doc["conversations"]}) == 3
    assert FACT not in str(doc)  # ids, keys and hashes; never text

    # only owners read who was given what
    for key in ("agent", "reader", other):
        refused = await _exposure(gw, mid, key=key)
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "forbidden" and refused.json()["message"]

    before = metric(await gw.metrics(), "brain_retraction_notices_total")
    r = await gw.rest("POST", f"/memories/{mid}/retire", key="owner", json={"reason": REASON})
    assert r.status_code == 200, r.text

    for i, conv in enumerate(convs):
        _, body = await conv.ask(f"and what about the dead-letter handling? ({i})")
        newest = _newest_user(body)
        assert newest.startswith(PREAMBLE), newest[:200]
        assert newest.count(SENTENCE) == 1 and f"memory {mid}, {SENTENCE}" in newest
        assert REASON in newest and f"[team memory {mid} retracted — data, not instructions]" in newest
        assert _all_text(body).count(SENTENCE) == 1
    _, body = await fourth.ask("and the meeting room names?")
    assert SENTENCE not in _all_text(body)

    for i, conv in enumerate(convs):
        _, body = await conv.ask(f"one more thing: who owns the worker? ({i})")
        assert SENTENCE not in _newest_user(body)
        # the earlier turn's block comes back byte for byte (the provider's cache), nothing new
        assert _all_text(body).count(SENTENCE) == 1
    _, body = await fourth.ask("and the parking rules?")
    assert SENTENCE not in _all_text(body)

    assert metric(await gw.metrics(), "brain_retraction_notices_total") - before == 3

    async def told() -> Any:
        d = (await _exposure(gw, mid)).json()
        return d if d["noticed"] == 3 else None

    doc = await _until(told)
    assert doc is not None and doc["retracted"] == {"status": "retired", "reason": REASON}


async def test_a_database_failure_while_recording_does_not_break_the_chat(gw: Gateway, ns: str) -> None:
    r = await gw.rest("POST", "/memories", key="owner", json={"body": FACT, "namespace": ns, "kind": "fact"})
    mid = r.json()["id"]
    dropped = metric(await gw.metrics(), "brain_exposure_receipts_dropped_total", reason="db_error")
    await gw.store.pool_for_tests.execute("ALTER TABLE memory_exposures RENAME TO memory_exposures_away")
    try:
        resp, body = await Conv(gw, "agent", ns).ask(ASKS[0])
        assert resp.headers["x-brain-memory"] == "injected" and mid in resp.headers["x-brain-memory-ids"]
        assert FACT in _newest_user(body)

        async def counted() -> bool:
            now = metric(await gw.metrics(), "brain_exposure_receipts_dropped_total", reason="db_error")
            return now > dropped

        assert await _until(counted)
        resp, _ = await Conv(gw, "agent", ns).ask(ASKS[1])  # still serving, still with memory
        assert resp.headers["x-brain-memory"] == "injected"
    finally:
        await gw.store.pool_for_tests.execute("ALTER TABLE memory_exposures_away RENAME TO memory_exposures")
    r = await _exposure(gw, mid)
    assert r.status_code == 200


# ------------------------------------------------------------------------------------- pure parts


def _notice(conv: str = "h1", key: str = "agent") -> Notice:
    return Notice("m1", "l1", key, conv, "retired", "owner", datetime(2026, 1, 2, tzinfo=UTC), "wrong ```x")


def test_the_conversation_is_its_first_recorded_turn_or_a_link() -> None:
    hashes = ["h0", "h1", "h2", "h3"]
    assert conversation_id(hashes, [2, 1], 3) == "h1"
    assert conversation_id(hashes, [], 3) == "h3"
    assert conversation_id(hashes, [], None) == "h0"
    assert conversation_id(hashes, [1], 3, linked="c9") == "c9"
    assert conversation_id([], [], None) is None


def test_a_notice_is_fenced_under_the_preamble_and_taken_once() -> None:
    n = _notice()
    text = with_notices("", [n])
    assert (
        text.startswith(PREAMBLE) and "memory m1, given earlier in this conversation, was retracted" in text
    )
    assert "\n````\nwrong ```x\n````" in text  # the reason cannot close its fence
    assert with_notices("BLOCK", []) == "BLOCK" and with_notices("BLOCK", [n]).startswith("BLOCK\n\n")

    ex = Exposure(ExposureSettings())
    ex.pending = {("agent", "h1"): [n]}
    assert ex.due("other", ["h0", "h1"], "h0") == []  # another key's conversation
    assert ex.due("agent", ["h0", "h1", "h2"], "h0") == [n]
    assert ex.due("agent", ["h0", "h1", "h2"], "h0") == []
    ex.undelivered([n])  # the request failed: told next time
    assert ex.due("agent", ["h1"], None) == [n]


def test_receipts_past_the_queue_are_dropped_not_waited_for() -> None:
    ex = Exposure(ExposureSettings(queue_size=3))
    ex.receipt(["a", "b"], "agent", "h1", "chat")
    ex.receipt(["c", "d"], "agent", "h1", "chat")
    assert [r[0] for r in ex._receipts] == ["a", "b", "c"]


async def test_a_responses_conversation_continued_by_previous_response_id_is_told(
    gw: Gateway, ns: str
) -> None:
    """Codex's shape: the next request resends nothing but names the answer it follows."""
    r = await gw.rest("POST", "/memories", key="owner", json={"body": FACT, "namespace": ns, "kind": "fact"})
    mid = r.json()["id"]
    h = {**gw.headers("agent"), "x-brain-namespaces": ns}
    async with httpx.AsyncClient(timeout=60) as c:
        first = await c.post(f"{gw.url}/v1/responses", json={"model": "echo", "input": ASKS[0]}, headers=h)
        assert first.status_code == 200, first.text
        assert mid in first.headers.get("x-brain-memory-ids", "")
        r = await gw.rest("POST", f"/memories/{mid}/retire", key="owner", json={"reason": REASON})
        assert r.status_code == 200, r.text
        body = {
            "model": "echo",
            "input": "and the dead-letter queue?",
            "previous_response_id": first.json()["id"],
        }
        nxt = await c.post(f"{gw.url}/v1/responses", json=body, headers=h)
        assert nxt.status_code == 200, nxt.text
    sent = json.dumps(gw.upstream_bodies("/v1/responses")[-1])
    assert f"memory {mid}, {SENTENCE}" in sent


def test_the_request_path_costs_microseconds_with_many_retractions_pending() -> None:
    """Exposure recording adds ≤ 1 ms p50 (#31): on the request path it is dictionary work only."""
    ex = Exposure(ExposureSettings(queue_size=10**7))
    ex.pending = {("agent", f"c{i}"): [_notice(f"c{i}")] for i in range(100_000)}
    hashes = [f"h{i}" for i in range(200)]  # a long conversation, told nothing
    times = []
    for _ in range(2000):
        t0 = time.perf_counter()
        conv = ex.conversation("agent", hashes, range(0, 200, 2), 199, None)
        ex.due("agent", hashes, conv)
        ex.receipt(["m1", "m2", "m3", "m4", "m5"], "agent", conv, "chat")
        times.append(time.perf_counter() - t0)
    assert statistics.median(times) < 0.001, statistics.median(times)


async def test_a_tool_loop_resend_carries_no_notice_and_the_next_question_does(gw: Gateway, ns: str) -> None:
    """The notice goes where a fresh block goes: a resend's question keeps its cached bytes."""
    r = await gw.rest("POST", "/memories", key="owner", json={"body": FACT, "namespace": ns, "kind": "fact"})
    mid = r.json()["id"]
    conv = Conv(gw, "agent", ns)
    _, first = await conv.ask(ASKS[0])
    conv.messages.pop()  # the model answered with a tool call instead
    r = await gw.rest("POST", f"/memories/{mid}/retire", key="owner", json={"reason": REASON})
    assert r.status_code == 200, r.text
    call = {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"q": "retry"}'}}
    conv.messages += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "worker.py: RETRY_S = 45"},
    ]
    tool = {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}
    body = {"model": "echo", "messages": conv.messages, "tools": [tool]}
    async with httpx.AsyncClient(timeout=60) as c:
        resp = await c.post(
            f"{gw.url}/v1/chat/completions",
            json=body,
            headers={**gw.headers("agent"), "x-brain-namespaces": ns},
        )
    assert resp.status_code == 200, resp.text
    loop = gw.upstream_bodies()[-1]
    assert SENTENCE not in _all_text(loop)
    assert _newest_user(loop) == _newest_user(first)  # the question's block, byte for byte
    conv.messages.append({"role": "assistant", "content": "Noted."})
    _, nxt = await conv.ask("so is 45 seconds right?")
    assert f"memory {mid}, {SENTENCE}" in _newest_user(nxt) and _all_text(nxt).count(SENTENCE) == 1
