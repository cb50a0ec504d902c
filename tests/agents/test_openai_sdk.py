"""A plain `openai` SDK script through the gateway: chat completions and the Responses API, with a tool loop."""

from __future__ import annotations

import json
from typing import Any

from openai import AsyncOpenAI

from tests.gateway_fixtures import metric

from .conftest import ANSWER_FACT, QUESTION, Gateway, Team, first_memory_id

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


def _system_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")


async def test_sdk_chat_gets_the_answering_memory_first(gw: Gateway, team: Team) -> None:
    client = _client(gw, team)
    r = await client.chat.completions.create(
        model="echo", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    )
    body = gw.upstream_bodies()[-1]
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert first_memory_id(_system_text(body)) == team.answer_id
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
        assert first_memory_id(_system_text(body)) == team.answer_id
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
    developer = [it for it in body["input"] if it.get("role") == "developer"]
    assert first_memory_id(json.dumps(developer)) == team.answer_id
    assert body["input"][-1]["role"] == "user" and QUESTION in json.dumps(body["input"][-1])
    assert ANSWER_FACT in r.output_text

    events = [e async for e in await client.responses.create(model="echo", input=QUESTION, stream=True)]
    assert events[-1].type == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert ANSWER_FACT in deltas
