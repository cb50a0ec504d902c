"""A tiny OpenAI-compatible upstream that echoes what it received: the offline model of `brainctl up` and tests.

It answers `POST /v1/chat/completions` (plain JSON or SSE), `POST /v1/messages` (Anthropic) and
`POST /v1/responses` (OpenAI Responses API, what Codex speaks; JSON or SSE) with a transcript of the
messages it was sent, so a person (or a test) can see exactly what the gateway injected. Each message
is cut at `--transcript-limit` characters (4000 by default; agents' system prompts are longer). Every request is recorded. A script of behaviours (stall, fail, given JSON or text) makes
it misbehave on purpose; each request consumes the first behaviour whose `match` it contains.

    python -m brain.local.fakeupstream --port 4001 [--transcript-limit 100000]

Control endpoints (loopback only, no auth): `GET/DELETE /_fake/requests`, `POST/DELETE /_fake/script`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from brain.local.promptcache import PromptCache


class ToolCall(BaseModel):
    """A function call the fake answers with, so an agent loop runs a tool and sends its result back."""

    name: str = Field(description="the tool's name, as the client declared it")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the call's JSON arguments")


class Behaviour(BaseModel):
    """One scripted answer. Unset fields keep the echo behaviour."""

    match: str | None = Field(default=None, description="only requests whose body contains this text")
    status: int = Field(default=200, description="HTTP status; >= 400 answers an OpenAI-style error")
    content: str | None = Field(default=None, description="answer text instead of the echo")
    reasoning: str | None = Field(default=None, description="reasoning_content to send before the answer")
    json_body: dict[str, Any] | None = Field(default=None, alias="json", description="answer verbatim")
    delay_s: float = Field(default=0.0, description="wait before answering (before response headers)")
    stall_s: float = Field(default=0.0, description="streaming: wait after headers, before the first chunk")
    chunk_delay_s: float = Field(default=0.0, description="streaming: wait between chunks")
    times: int = Field(default=1, description="how many requests this behaviour answers (-1: forever)")
    tool_call: ToolCall | None = Field(default=None, description="answer with this tool call, no text")

    model_config = {"populate_by_name": True}


@dataclass
class FakeState:
    received: list[dict[str, Any]] = field(default_factory=list)
    script: list[Behaviour] = field(default_factory=list)
    max_received: int = 1000
    transcript_limit: int = 4000
    cache: PromptCache = field(default_factory=PromptCache)  # the providers' prompt-cache accounting

    def record(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        self.received.append({"path": path, "body": body, "headers": headers, "at": time.time()})
        del self.received[: -self.max_received]

    def take(self, raw: str) -> Behaviour:
        for i, b in enumerate(self.script):
            if b.match is None or b.match in raw:
                if b.times > 0:
                    b.times -= 1
                    if b.times == 0:
                        del self.script[i]
                return b
        return Behaviour()


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def transcript(messages: list[dict[str, Any]], system: Any = None, limit: int = 4000) -> str:
    """What the upstream received, one `[role] text` block per message, each cut at `limit` characters."""
    parts = [f"echo upstream received {len(messages) + (1 if system else 0)} message(s):"]
    if system:
        parts.append(f"[system] {_text(system)[:limit]}")
    for m in messages:
        parts.append(f"[{m.get('role', '?')}] {_text(m.get('content'))[:limit]}")
    return "\n".join(parts)


def _words(text: str) -> list[str]:
    """Split into chunks that keep every character, so a reassembled stream equals the text."""
    out, cur = [], ""
    for ch in text:
        cur += ch
        if ch in " \n":
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return out or [""]


def _openai_usage(prompt: dict[str, int], completion: str) -> dict[str, Any]:
    p, c = prompt["prompt_tokens"], max(1, len(completion) // 4)
    return {
        "prompt_tokens": p,
        "completion_tokens": c,
        "total_tokens": p + c,
        "prompt_tokens_details": {"cached_tokens": prompt["cached_tokens"]},
    }


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": "fake_upstream_error", "code": str(status)}},
        status_code=status,
    )


def _anthropic_error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"type": "error", "error": {"type": "api_error", "message": message}}, status_code=status
    )


def _tool_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:16]}"


def _chat_tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": _tool_id("call_"),
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }


def response_items(input_: Any) -> list[dict[str, Any]]:
    """A Responses API `input` as transcript messages: messages by role, tool calls and results by type."""
    if isinstance(input_, str):
        return [{"role": "user", "content": input_}]
    out: list[dict[str, Any]] = []
    for item in input_ if isinstance(input_, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" or "role" in item:
            out.append({"role": item.get("role", "user"), "content": item.get("content")})
        elif kind == "function_call":
            out.append({"role": "function_call", "content": f"{item.get('name')} {item.get('arguments')}"})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out.append({"role": "tool", "content": item.get("output")})
        else:
            out.append({"role": str(kind), "content": ""})
    return out


def _response_object(
    body: dict[str, Any], content: str, b: Behaviour, usage: dict[str, Any]
) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if b.reasoning:
        output.append(
            {
                "type": "reasoning",
                "id": _tool_id("rs_"),
                "summary": [{"type": "summary_text", "text": b.reasoning}],
            }
        )
    if b.tool_call is not None:
        output.append(
            {
                "type": "function_call",
                "id": _tool_id("fc_"),
                "call_id": _tool_id("call_"),
                "name": b.tool_call.name,
                "arguments": json.dumps(b.tool_call.arguments),
                "status": "completed",
            }
        )
    else:
        output.append(
            {
                "type": "message",
                "id": _tool_id("msg_"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": content, "annotations": []}],
            }
        )
    return {
        "id": _tool_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": body.get("model", "echo"),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": usage["prompt_tokens_details"]["cached_tokens"]},
            "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
        },
    }


def create_app(state: FakeState | None = None) -> FastAPI:
    st = state or FakeState()
    app = FastAPI(title="brain fake upstream", version="1")
    app.state.fake = st

    async def _read(request: Request) -> tuple[dict[str, Any], str]:
        raw = (await request.body()).decode()
        body = json.loads(raw or "{}")
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("authorization", "x-api-key")
        }
        st.record(request.url.path, body, headers)
        return body, raw

    async def _scripted(
        request: Request, error: Callable[[int, str], JSONResponse] = _error
    ) -> tuple[dict[str, Any], Behaviour, JSONResponse | None]:
        """Record the request and take the next scripted behaviour; its delay is served here, and a
        scripted failure or fixed JSON answer comes back as the response to send instead."""
        body, raw = await _read(request)
        b = st.take(raw)
        if b.delay_s:
            await asyncio.sleep(b.delay_s)
        if b.status >= 400:
            return body, b, error(b.status, f"scripted failure {b.status}")
        if b.json_body is not None:
            return body, b, JSONResponse(b.json_body)
        return body, b, None

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "echo", "object": "model", "owned_by": "brain"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body, b, early = await _scripted(request)
        if early is not None:
            return early
        messages = body.get("messages") or []
        content = b.content if b.content is not None else transcript(messages, limit=st.transcript_limit)
        model = body.get("model", "echo")
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        usage = _openai_usage(st.cache.openai([body.get("tools"), *messages]), content)
        if body.get("stream"):
            return StreamingResponse(
                _chat_stream(cid, model, content, b, usage), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": content}
        finish = "stop"
        if b.tool_call is not None:
            message = {"role": "assistant", "content": None, "tool_calls": [_chat_tool_call(b.tool_call)]}
            finish = "tool_calls"
        if b.reasoning:
            message["reasoning_content"] = b.reasoning
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        body, b, early = await _scripted(request, _anthropic_error)
        if early is not None:
            return early
        content = (
            b.content
            if b.content is not None
            else transcript(body.get("messages") or [], body.get("system"), st.transcript_limit)
        )
        cache = st.cache.anthropic(body)
        usage = {**cache, "output_tokens": max(1, len(content) // 4)}
        mid = f"msg_{uuid.uuid4().hex[:12]}"
        model = body.get("model", "echo")
        if body.get("stream"):
            return StreamingResponse(
                _anthropic_stream(mid, model, content, b, usage), media_type="text/event-stream"
            )
        block: dict[str, Any] = {"type": "text", "text": content}
        if b.tool_call is not None:
            block = {"type": "tool_use", "id": _tool_id("toolu_"), "name": b.tool_call.name}
            block["input"] = b.tool_call.arguments
        return JSONResponse(
            {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": "tool_use" if b.tool_call is not None else "end_turn",
                "stop_sequence": None,
                "usage": usage,
            }
        )

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        body, b, early = await _scripted(request)
        if early is not None:
            return early
        items = response_items(body.get("input"))
        content = (
            b.content
            if b.content is not None
            else transcript(items, body.get("instructions"), st.transcript_limit)
        )
        raw_input = body.get("input")
        prompt = [
            body.get("tools"),
            body.get("instructions"),
            *(raw_input if isinstance(raw_input, list) else [raw_input]),
        ]
        resp = _response_object(body, content, b, _openai_usage(st.cache.openai(prompt), content))
        if body.get("stream"):
            return StreamingResponse(_responses_stream(resp, content, b), media_type="text/event-stream")
        return JSONResponse(resp)

    @app.get("/_fake/requests")
    async def get_requests() -> list[dict[str, Any]]:
        return st.received

    @app.delete("/_fake/requests")
    async def clear_requests() -> dict[str, int]:
        n = len(st.received)
        st.received.clear()
        return {"cleared": n}

    @app.post("/_fake/script")
    async def add_script(items: list[Behaviour]) -> dict[str, int]:
        st.script.extend(items)
        return {"queued": len(st.script)}

    @app.delete("/_fake/script")
    async def clear_script() -> dict[str, int]:
        n = len(st.script)
        st.script.clear()
        return {"cleared": n}

    return app


def _sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return ((f"event: {event}\n" if event else "") + f"data: {payload}\n\n").encode()


async def _chat_stream(
    cid: str, model: str, content: str, b: Behaviour, usage: dict[str, Any]
) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    if b.stall_s:
        await asyncio.sleep(b.stall_s)
    yield chunk({"role": "assistant", "content": ""})
    for piece in _words(b.reasoning or "") if b.reasoning else []:
        yield chunk({"reasoning_content": piece})
    if b.tool_call is not None:
        call = _chat_tool_call(b.tool_call)
        args = call["function"].pop("arguments")
        yield chunk({"tool_calls": [{"index": 0, **call, "function": {**call["function"], "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": args}}]})
    for piece in _words(content) if b.tool_call is None else []:
        if b.chunk_delay_s:
            await asyncio.sleep(b.chunk_delay_s)
        yield chunk({"content": piece})
    final = json.loads(chunk({}, "stop" if b.tool_call is None else "tool_calls")[len("data: ") :])
    final["usage"] = usage
    yield _sse(final)
    yield _sse("[DONE]")


async def _anthropic_stream(
    mid: str, model: str, content: str, b: Behaviour, usage: dict[str, int]
) -> AsyncIterator[bytes]:
    """Anthropic's event stream; `message_start` carries the input and cache numbers, as the API's does."""
    if b.stall_s:
        await asyncio.sleep(b.stall_s)
    start = {
        "type": "message_start",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "usage": {**{k: v for k, v in usage.items() if k != "output_tokens"}, "output_tokens": 0},
        },
    }
    yield _sse(start, "message_start")
    if b.tool_call is not None:
        block = {"type": "tool_use", "id": _tool_id("toolu_"), "name": b.tool_call.name, "input": {}}
        yield _sse({"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start")
        delta = {"type": "input_json_delta", "partial_json": json.dumps(b.tool_call.arguments)}
        yield _sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
    else:
        yield _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        )
    for piece in _words(content) if b.tool_call is None else []:
        if b.chunk_delay_s:
            await asyncio.sleep(b.chunk_delay_s)
        yield _sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            "content_block_delta",
        )
    yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    yield _sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if b.tool_call else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


async def _responses_stream(resp: dict[str, Any], content: str, b: Behaviour) -> AsyncIterator[bytes]:
    """The Responses API event stream: created, each output item added/delta/done, completed."""
    seq = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        seq += 1
        return _sse({"type": kind, "sequence_number": seq, **fields}, kind)

    if b.stall_s:
        await asyncio.sleep(b.stall_s)
    pending = {**resp, "status": "in_progress", "output": []}
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for i, item in enumerate(resp["output"]):
        if item["type"] != "message":
            yield event("response.output_item.added", output_index=i, item=item)
            yield event("response.output_item.done", output_index=i, item=item)
            continue
        empty = {**item, "status": "in_progress", "content": []}
        yield event("response.output_item.added", output_index=i, item=empty)
        part = {"type": "output_text", "text": "", "annotations": []}
        ids = {"item_id": item["id"], "output_index": i, "content_index": 0}
        yield event("response.content_part.added", **ids, part=part)
        for piece in _words(content):
            if b.chunk_delay_s:
                await asyncio.sleep(b.chunk_delay_s)
            yield event("response.output_text.delta", **ids, delta=piece)
        yield event("response.output_text.done", **ids, text=content)
        yield event("response.content_part.done", **ids, part={**part, "text": content})
        yield event("response.output_item.done", output_index=i, item=item)
    yield event("response.completed", response=resp)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser(
        prog="python -m brain.local.fakeupstream", description=__doc__.splitlines()[0]
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=4001)
    p.add_argument(
        "--transcript-limit",
        type=int,
        default=4000,
        help="characters of each message the echo repeats (raise it to see the end of a long system prompt)",
    )
    a = p.parse_args(argv)
    if a.transcript_limit < 1:
        p.error(f"--transcript-limit must be a positive number of characters, got {a.transcript_limit}")
    state = FakeState(transcript_limit=a.transcript_limit)
    uvicorn.run(create_app(state), host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
