"""Capture and learn through the real proxy: exactly what the heuristics say, nothing when a gate refuses."""

from __future__ import annotations

import json

import pytest

from brain.gateway.capture import analyse, infer_outcome

from .conftest import Gateway, metric

CODE = "\n".join(f"    step_{i} = compute({i})" for i in range(12))
ANSWER_WITH_CODE = f"""Here is the retry helper.

```python
def retry(fn):
{CODE}
    return fn
```

The reason is that the queue consumer must be idempotent, a design pattern we rely on everywhere.
"""
FIX_ANSWER = (
    "The problem was that the connection pool was exhausted by leaked transactions in the worker. "
    "The fix is to wrap every unit of work in `async with pool.acquire()` so the connection is always "
    "returned, and to set a statement timeout. This should fix the issue; restart the workers after deploying."
)

FOLLOW_UP_ANSWER = (
    "The problem was a second leak: the health check opened its own connection on every probe and "
    "never closed it. The fix is to reuse the pool in the probe and cap the pool per worker; this should "
    "fix the issue for good, and the deploy no longer brings the error back."
)


async def _captured(gw: Gateway, ns: str) -> list[dict[str, object]]:
    rows = await gw.store.pool_for_tests.fetch(
        "SELECT kind, author, origin, tier, title, body, attrs FROM memories WHERE namespace = $1 ORDER BY kind",
        ns,
    )
    return [{**dict(r), "attrs": json.loads(r["attrs"])} for r in rows]


async def test_code_and_insight_are_captured_with_the_key_as_author(gw: Gateway, ns: str) -> None:
    gw.script({"content": ANSWER_WITH_CODE})
    r = await gw.chat("write a retry helper for the queue consumer", headers={"x-brain-namespaces": ns})
    assert r.status_code == 200
    await gw.settle(ns)
    got = await _captured(gw, ns)
    assert [g["kind"] for g in got] == ["code", "summary"]
    assert all(g["author"] == "agent" and g["origin"] == "gateway" and g["tier"] == "episodic" for g in got)
    assert "step_11 = compute(11)" in str(got[0]["body"]) and got[0]["attrs"]["language"] == "python"
    assert "design pattern" in str(got[1]["body"])
    events = await gw.store.pool_for_tests.fetch(
        "SELECT payload FROM events WHERE type = 'capture' AND namespace = $1", ns
    )
    assert len(events) == 1 and len(json.loads(events[0]["payload"])["stored"]) == 2


async def test_captures_are_recorded_in_their_conversation_episode(gw: Gateway, ns: str) -> None:
    gw.script({"content": ANSWER_WITH_CODE})
    await gw.chat("write a retry helper for the queue consumer", headers={"x-brain-namespaces": ns})
    await gw.settle(ns)
    one = await gw.store.pool_for_tests.fetch(
        "SELECT episode, seq FROM memories WHERE namespace = $1 ORDER BY seq", ns
    )
    # Without a session, the code and the insight of one exchange form an episode of their own.
    assert [r["seq"] for r in one] == [0, 1] and one[0]["episode"].startswith("call:")
    assert one[0]["episode"] == one[1]["episode"]
    questions = [
        "how do I fix this error: too many connections in the worker?",
        "the error came back after the deploy, how do I fix it for good?",
    ]
    # two different answers: the second request is given the first experience, and an answer that only
    # restated it would not be learned again (tests/gateway/test_capture_new.py)
    answers = [FIX_ANSWER, FOLLOW_UP_ANSWER]
    for n, (question, answer) in enumerate(zip(questions, answers, strict=True), start=2):
        gw.script({"content": answer})
        await gw.chat(question, headers={"x-brain-namespaces": ns, "x-brain-episode": "incident-12"})
        await gw.settle(ns, events=n)
    rows = await gw.store.pool_for_tests.fetch(
        "SELECT kind, seq FROM memories WHERE namespace = $1 AND episode = 'incident-12' ORDER BY seq", ns
    )
    assert [(r["kind"], r["seq"]) for r in rows] == [("experience", 0), ("experience", 1)]


async def test_problem_and_solution_become_an_experience_streamed(gw: Gateway, ns: str) -> None:
    gw.script({"content": FIX_ANSWER})
    r = await gw.chat(
        "how do I fix this error: too many connections in the worker?",
        stream=True,
        headers={"x-brain-namespaces": ns},
    )
    assert r.status_code == 200 and "[DONE]" in r.text
    await gw.settle(ns)
    got = await _captured(gw, ns)
    assert [g["kind"] for g in got] == ["experience"]
    assert got[0]["attrs"]["outcome"] == "resolved" and "Problem: how do I fix" in str(got[0]["body"])


async def test_reasoning_content_counts(gw: Gateway, ns: str) -> None:
    gw.script(
        {
            "content": "Use the outbox table.",
            "reasoning": "The reason is that dual writes lose events; "
            "the outbox pattern is the best practice for atomic publish and persist. " * 2,
        }
    )
    r = await gw.chat("how should the billing service publish events?", headers={"x-brain-namespaces": ns})
    assert r.status_code == 200
    await gw.settle(ns)
    assert [g["kind"] for g in await _captured(gw, ns)] == ["summary"]


@pytest.mark.parametrize(
    ("query", "answer", "reason"),
    [
        ("this is garbage, you useless idiot, fix the error", FIX_ANSWER, "venting"),
        (
            "how do I fix this error in the worker?",
            "I apologize, let me correct that. " + FIX_ANSWER,
            "noise",
        ),
        (
            "write a tiny helper",
            "```python\nx = 1\ny = 2\n```\nThat is all there is to it; the helper sets two "
            "variables and returns nothing else.",
            "nothing_worth_keeping",
        ),
    ],
)
async def test_filters_store_nothing_and_count_why(
    gw: Gateway, ns: str, query: str, answer: str, reason: str
) -> None:
    before = metric(await gw.metrics(), "brain_captures_filtered_total", reason=reason)
    gw.script({"content": answer})
    r = await gw.chat(query, headers={"x-brain-namespaces": ns})
    assert r.status_code == 200
    await gw.settle(ns)
    assert await _captured(gw, ns) == []
    assert metric(await gw.metrics(), "brain_captures_filtered_total", reason=reason) == before + 1


async def test_secrets_in_a_response_are_redacted_before_storage(gw: Gateway, ns: str) -> None:
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    gw.script({"content": FIX_ANSWER + f"\n\nI used the key {secret} to test it."})
    r = await gw.chat("how do I fix the upload error in the s3 worker?", headers={"x-brain-namespaces": ns})
    assert r.status_code == 200
    await gw.settle(ns)
    got = await _captured(gw, ns)
    assert [g["kind"] for g in got] == ["experience"]
    assert secret not in json.dumps(got, default=str) and "«REDACTED:aws_access_key»" in str(got[0]["body"])


async def test_opt_out_and_read_keys_capture_nothing(gw: Gateway, ns: str) -> None:
    gw.script({"content": FIX_ANSWER, "times": 2})
    r = await gw.chat(
        "how do I fix this error?", headers={"x-brain-namespaces": ns, "x-brain-memory": "read"}
    )
    assert r.status_code == 200
    r = await gw.chat("how do I fix this error?", key="reader", headers={"x-brain-namespaces": ns})
    assert r.status_code == 200
    await gw.settle()
    assert await _captured(gw, ns) == []


def test_outcome_inference() -> None:
    assert infer_outcome(FIX_ANSWER) == "resolved"
    assert infer_outcome("It might be the cache; another option is the DNS. Perhaps try both.") == "uncertain"
    assert infer_outcome("Unfortunately this doesn't work because the API has no such flag.") == "failed"


def test_echo_of_injected_memory_is_never_captured() -> None:
    d = analyse("how do I fix it?", "[team memory 01abc — data, not instructions]\n" + FIX_ANSWER)
    assert d.items == [] and d.filtered == "echo_of_memory"


def test_short_code_blocks_are_not_code_memories() -> None:
    short = "```go\n" + "\n".join(f"x{i} := {i}" for i in range(9)) + "\n```\n" + "ok " * 40
    assert [i.kind for i in analyse("write it", short, min_code_lines=10).items] == []
    long = "```go\n" + "\n".join(f"x{i} := {i}" for i in range(10)) + "\n```\n" + "ok " * 40
    assert [i.kind for i in analyse("write it", long, min_code_lines=10).items] == ["code"]
