"""A reply's x-brain-* headers do not depend on which of LiteLLM's post-call hooks runs first.

LiteLLM hands the success log to its logging worker when the provider answers, while the proxy is
still finishing the response; under load the log ran before the headers hook, took the call's
context with it; so did the failure log of an attempt LiteLLM's router then retried. Replies on
the real node went out without x-brain-memory (e2e/pods/test_pods_story.py, the 50-client test).
These drive the hooks in each order.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from brain.core.models import Actor
from brain.gateway.hooks import BrainHooks
from brain.gateway.runtime import CallContext, Runtime, get_runtime, set_runtime
from brain.gateway.settings import CaptureSettings, GatewaySettings

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
