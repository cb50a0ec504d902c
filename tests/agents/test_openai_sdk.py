"""A plain `openai` SDK script through the gateway: chat completions and the Responses API, with a tool loop."""

from __future__ import annotations

import json
from typing import Any

from openai import AsyncOpenAI

from brain.local.promptcache import PromptCache
from tests.kit.gateway import metric

from .conftest import ANSWER_FACT, FOUR_TURNS, QUESTION, Gateway, Team, first_memory_id, turn_texts

SYSTEM = "You are the payments team's assistant. Answer briefly."
# tool output that talks about other stored facts: retrieval must not follow it
TOOL_OUTPUT = "crontab: billing cron job at 02:00 UTC, owned by the revenue team; Redis on 6380"
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read_runbook",
            "description": "Read a runbook page",
            "parameters": {"type": "object", "properties": {"page": {"type": "string"}}},
        },
    }
]


def _client(gw: Gateway, team: Team) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=team.key, max_retries=0, timeout=60)


async def test_sdk_chat_gets_the_answering_memory_first(gw: Gateway, team: Team) -> None:
    client = _client(gw, team)
    r = await client.chat.completions.create(
        model="echo", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    )
    body = gw.upstream_bodies()[-1]
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    turn, rest = turn_texts(body, "chat")
    assert "[team memory " not in rest and first_memory_id(turn) == team.answer_id
    assert ANSWER_FACT in (r.choices[0].message.content or "")


async def test_sdk_tool_loop_retrieves_on_the_question_not_the_tool_output(gw: Gateway, team: Team) -> None:
    client = _client(gw, team)
    gw.script({"tool_call": {"name": "read_runbook", "arguments": {"page": "staging"}}})
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    first = await client.chat.completions.create(model="echo", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "read_runbook" and json.loads(call.function.arguments) == {"page": "staging"}
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": TOOL_OUTPUT},
    ]
    stream = await client.chat.completions.create(model="echo", messages=messages, tools=TOOLS, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    bodies = gw.upstream_bodies()
    assert len(bodies) == 2
    assert bodies[1]["messages"][-1]["content"] == TOOL_OUTPUT
    for body in bodies:
        assert first_memory_id(turn_texts(body, "chat")[0]) == team.answer_id
    assert bodies[1]["messages"][1] == bodies[0]["messages"][1]  # the block came back byte for byte
    assert ANSWER_FACT in text


async def test_sdk_responses_api_gets_the_answering_memory_first(gw: Gateway, team: Team) -> None:
    client = _client(gw, team)
    raw = await client.responses.with_raw_response.create(model="echo", instructions=SYSTEM, input=QUESTION)
    assert raw.headers["x-brain-memory"] == "injected"
    assert team.answer_id in raw.headers["x-brain-memory-ids"].split(",")
    r = raw.parse()
    assert metric(await gw.metrics(), "brain_gateway_requests_total", api="responses", memory="injected") >= 1
    body = gw.upstream_bodies("/v1/responses")[-1]
    assert body["instructions"] == SYSTEM
    turn, rest = turn_texts(body, "responses")
    assert "[team memory " not in rest and first_memory_id(turn) == team.answer_id
    assert body["input"][-1]["role"] == "user" and turn.rstrip('"}').endswith(QUESTION)
    assert ANSWER_FACT in r.output_text

    events = [e async for e in await client.responses.create(model="echo", input=QUESTION, stream=True)]
    assert events[-1].type == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert ANSWER_FACT in deltas


async def test_sdk_chat_conversation_keeps_the_prefix_cache(gw: Gateway, team: Team) -> None:
    """Four chat-completions turns, each about another fact, straight to the echo and through the
    gateway: the share OpenAI-style prefix caching serves stays within 5 %, and each turn's answering
    memory is the first its newest user message holds."""
    turns = FOUR_TURNS
    # a client's prompt of ~16 KB, as Codex's developer prompt is: the cached prefix worth keeping
    system = SYSTEM + " " + "Follow the payments team's conventions in every answer. " * 280

    async def four(client: AsyncOpenAI) -> list[dict[str, Any]]:
        gw.fake.received.clear()
        messages: list[Any] = [{"role": "system", "content": system}]
        for question in turns:
            messages.append({"role": "user", "content": question})
            r = await client.chat.completions.create(model="echo", messages=messages)
            messages.append({"role": "assistant", "content": r.choices[0].message.content})
        return gw.upstream_bodies()

    gw.script({"content": "Noted.", "times": -1})
    direct = await four(AsyncOpenAI(base_url=f"{gw.upstream_url}/v1", api_key="sk-fake", max_retries=0))
    through = await four(_client(gw, team))
    gw.fake.script.clear()

    def share(bodies: list[dict[str, Any]]) -> float:
        cache = PromptCache()
        usages = [cache.openai([b.get("tools"), *b["messages"]], now=float(i)) for i, b in enumerate(bodies)]
        return sum(u["cached_tokens"] for u in usages) / sum(u["prompt_tokens"] for u in usages)

    assert share(direct) > 0.5
    assert share(through) >= 0.95 * share(direct), (share(through), share(direct))
    for body, (question, fact) in zip(through, turns.items(), strict=True):
        turn, _ = turn_texts(body, "chat")
        assert question in turn and first_memory_id(turn) == team.ids[fact]
