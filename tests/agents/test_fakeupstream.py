"""The echo upstream's Responses API, tool calls and transcript limit, as the agent tests rely on them."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from brain.local.fakeupstream import Behaviour, FakeState, ToolCall, create_app, main


def _client(state: FakeState) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(state)), base_url="http://fake")


def _events(raw: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:])
        for line in raw.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


async def test_responses_echoes_instructions_messages_and_tool_output() -> None:
    body = {
        "model": "echo",
        "instructions": "Be brief.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "port?"}]},
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd":"ls"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "db.env"},
        ],
    }
    async with _client(FakeState()) as c:
        r = await c.post("/v1/responses", json=body)
    doc = r.json()
    assert doc["object"] == "response" and doc["status"] == "completed"
    text = doc["output"][0]["content"][0]["text"]
    assert text.splitlines()[1:] == [
        "[system] Be brief.",
        "[user] port?",
        '[function_call] exec_command {"cmd":"ls"}',
        "[tool] db.env",
    ]


async def test_responses_stream_reassembles_and_completes() -> None:
    state = FakeState()
    state.script.append(Behaviour(content="Port 6543.", reasoning="look it up"))
    async with _client(state) as c:
        r = await c.post("/v1/responses", json={"model": "echo", "input": "port?", "stream": True})
    events = _events(r.text)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(1, len(events) + 1))
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "Port 6543."
    output = events[-1]["response"]["output"]
    assert [o["type"] for o in output] == ["reasoning", "message"]
    assert output[0]["summary"][0]["text"] == "look it up"


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_call_behaviour_on_every_api(stream: bool) -> None:
    call = ToolCall(name="Read", arguments={"file_path": "/r/CLAUDE.md"})
    state = FakeState()
    state.script += [Behaviour(tool_call=call) for _ in range(3)]
    msgs = [{"role": "user", "content": "read it"}]
    async with _client(state) as c:
        chat = await c.post(
            "/v1/chat/completions", json={"model": "echo", "messages": msgs, "stream": stream}
        )
        anth = await c.post(
            "/v1/messages", json={"model": "echo", "messages": msgs, "stream": stream, "max_tokens": 9}
        )
        resp = await c.post("/v1/responses", json={"model": "echo", "input": "read it", "stream": stream})
    if stream:
        deltas = [e["choices"][0]["delta"] for e in _events(chat.text) if e.get("choices")]
        args = "".join(tc["function"].get("arguments", "") for d in deltas for tc in d.get("tool_calls", []))
        assert _events(chat.text)[-1]["choices"][0]["finish_reason"] == "tool_calls"
        events = _events(anth.text)
        assert events[1]["content_block"]["name"] == "Read"
        anth_args = json.loads(events[2]["delta"]["partial_json"])
        resp_item = _events(resp.text)[-1]["response"]["output"][0]
    else:
        message = chat.json()["choices"][0]["message"]
        args = message["tool_calls"][0]["function"]["arguments"]
        block = anth.json()["content"][0]
        assert block["type"] == "tool_use" and anth.json()["stop_reason"] == "tool_use"
        anth_args = block["input"]
        resp_item = resp.json()["output"][0]
    assert (
        json.loads(args) == anth_args == json.loads(resp_item["arguments"]) == {"file_path": "/r/CLAUDE.md"}
    )
    assert resp_item["type"] == "function_call" and resp_item["name"] == "Read"


async def test_transcript_limit_cuts_each_message() -> None:
    long = "x" * 50
    for limit, expect in ((10, "x" * 10), (1000, long)):
        async with _client(FakeState(transcript_limit=limit)) as c:
            r = await c.post(
                "/v1/chat/completions",
                json={"model": "echo", "messages": [{"role": "user", "content": long}]},
            )
        assert r.json()["choices"][0]["message"]["content"].splitlines()[-1] == f"[user] {expect}"


def test_transcript_limit_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--transcript-limit", "0"])
    assert "--transcript-limit must be a positive number of characters, got 0" in capsys.readouterr().err
