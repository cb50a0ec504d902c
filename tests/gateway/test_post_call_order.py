"""A reply's x-brain-* headers do not depend on which of LiteLLM's post-call hooks runs first.

LiteLLM hands the success log to its logging worker when the provider answers, while the proxy is
still finishing the response; under load the log ran before the headers hook, took the call's
context with it; so did the failure log of an attempt LiteLLM's router then retried. Replies on
the real node went out without x-brain-memory (e2e/pods/test_pods_story.py, the 50-client test).
These drive the hooks in each order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from brain.core.models import Actor
from brain.gateway.hooks import BrainHooks
from brain.gateway.runtime import CallContext, Runtime, get_runtime, set_runtime
from brain.gateway.settings import CaptureSettings, GatewaySettings

from .conftest import Gateway, metric

CALL = "call-1"
ANSWER = {"choices": [{"message": {"role": "assistant", "content": "port 6543"}}]}


@pytest.fixture
def rt() -> Iterator[Runtime]:
    before = get_runtime()
    runtime = Runtime(GatewaySettings(capture=CaptureSettings(enabled=False)))
    runtime.remember(
        CALL,
        CallContext(
            actor=Actor(name="agent", role="agent", origin="agent"),
            api="chat",
            query="which port does the staging database use?",
            namespaces=("shared",),
            write_namespace="shared",
            capture=False,
            injected=["m1"],
            memory="injected",
            degraded=["embedder_down"],
        ),
    )
    set_runtime(runtime)
    yield runtime
    set_runtime(before)


async def _headers(hooks: BrainHooks) -> dict[str, str]:
    return await hooks.async_post_call_response_headers_hook({"litellm_call_id": CALL}, None, ANSWER) or {}


async def _logged(hooks: BrainHooks) -> None:
    await hooks.async_log_success_event({"litellm_call_id": CALL, "model": "echo"}, ANSWER, None, None)


WANT = {"x-brain-memory": "injected", "x-brain-memory-degraded": "embedder_down", "x-brain-memory-ids": "m1"}


async def test_success_log_first_the_reply_still_says_what_it_was_given(rt: Runtime) -> None:
    hooks = BrainHooks()
    await _logged(hooks)
    assert await _headers(hooks) == WANT
    assert CALL not in rt.calls  # both have had it: nothing stays behind


async def test_headers_first_then_the_log(rt: Runtime) -> None:
    hooks = BrainHooks()
    assert await _headers(hooks) == WANT
    assert CALL in rt.calls  # the log has yet to end the request's span and hand over the capture
    await _logged(hooks)
    assert CALL not in rt.calls


async def test_a_failed_attempt_the_router_retries_keeps_the_call(rt: Runtime) -> None:
    hooks = BrainHooks()
    await hooks.async_log_failure_event({"litellm_call_id": CALL}, None, None, None)  # one attempt
    await _logged(hooks)  # the retry answered
    assert await _headers(hooks) == WANT


async def test_a_failed_request_is_forgotten_at_once(rt: Runtime) -> None:
    hooks = BrainHooks()
    await hooks.async_post_call_failure_hook({"litellm_call_id": CALL}, RuntimeError("upstream 503"), None)
    assert CALL not in rt.calls
    assert await _headers(hooks) == {}


async def test_no_request_leaves_its_context_behind(gw: Gateway, ns: str) -> None:
    """Through the real proxy, every API and way a request ends: the contexts open
    (brain_gateway_calls_open) come back to what they were, so a replica holds none per request
    served, while each reply still said what memory it was given."""
    r = await gw.rest(
        "POST", "/memories", json={"body": "The ledger service listens on port 7443.", "namespace": ns}
    )
    assert r.status_code == 201, r.text
    before = metric(await gw.metrics(), "brain_gateway_calls_open")
    h = {"x-brain-namespaces": ns}
    ask = "which port does the ledger service listen on?"
    replies = [
        await gw.chat(ask, headers=h),
        await gw.chat(ask + " (streamed)", stream=True, headers=h),
        await gw.messages(ask + " (Anthropic)", headers=h),
        await gw.messages(ask + " (Anthropic, streamed)", stream=True, headers=h),
    ]
    async with httpx.AsyncClient(timeout=60) as c:
        replies.append(
            await c.post(
                f"{gw.url}/v1/responses",
                json={"model": "echo", "input": ask + " (Responses)"},
                headers={**gw.headers("agent"), **h},
            )
        )
    gw.script({"match": "retried", "status": 503})  # one failed attempt, then the retry answers
    replies.append(await gw.chat(ask + " (retried)", headers=h))
    for r in replies:
        assert r.status_code == 200, r.text
        if r.headers.get("x-brain-heartbeat") != "early":  # a stream's headers left before the hooks ran
            assert r.headers.get("x-brain-memory") == "injected", dict(r.headers)
    gw.script({"match": "refused", "status": 500, "times": -1})  # every attempt fails: the request does
    failed = await gw.chat(ask + " (refused)", headers=h)
    assert failed.status_code >= 500, failed.text
    gw.fake.script.clear()

    async def settled() -> bool:
        return metric(await gw.metrics(), "brain_gateway_calls_open") == before

    for _ in range(40):  # the success log runs after the reply, in LiteLLM's logging worker
        if await settled():
            break
        await asyncio.sleep(0.25)
    assert await settled(), metric(await gw.metrics(), "brain_gateway_calls_open")


async def test_a_call_id_the_client_sends_cannot_make_two_requests_share_a_context(gw: Gateway) -> None:
    # Two keys' requests sent with one x-litellm-call-id: LiteLLM would take it as both calls' id, and
    # the second pre-call hook's context would replace the first's, so each reply (and capture) got
    # the other's. The edge drops a client's call id; each reply names the memory its own scope holds.
    facts = {}
    for ns, body in (
        ("team:calls-a", "The blue cluster's ingress certificate renews on the first of each month."),
        ("team:calls-b", "The green cluster's ingress certificate renews every ninety days."),
    ):
        r = await gw.rest("POST", "/memories", key="owner", json={"body": body, "namespace": ns})
        assert r.status_code == 201, r.text
        facts[ns] = r.json()["id"]
    question = "when does the cluster's ingress certificate renew?"
    shared_id = "0f0e0d0c-0b0a-4909-8807-060504030201"
    for _ in range(5):
        replies = await asyncio.gather(
            *(
                gw.chat(
                    question, key="owner", headers={"x-brain-namespaces": ns, "x-litellm-call-id": shared_id}
                )
                for ns in facts
            )
        )
        for ns, r in zip(facts, replies, strict=True):
            assert r.status_code == 200, r.text
            other = next(f for n, f in facts.items() if n != ns)
            ids = r.headers.get("x-brain-memory-ids", "")
            assert facts[ns] in ids and other not in ids, (ns, dict(r.headers))
            assert r.headers["x-litellm-call-id"] != shared_id  # LiteLLM's own id, not the client's
