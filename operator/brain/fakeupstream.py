"""A tiny OpenAI-compatible upstream that echoes what it received: the offline model of `brainctl up` and tests.

It answers `POST /v1/chat/completions` (plain JSON or SSE) and `POST /v1/messages` (Anthropic) with a
transcript of the messages it was sent, so a person (or a test) can see exactly what the gateway
injected. Every request is recorded. A script of behaviours (stall, fail, given JSON or text) makes
it misbehave on purpose; each request consumes the first behaviour whose `match` it contains.

    python -m brain.fakeupstream --port 4001

Control endpoints (loopback only, no auth): `GET/DELETE /_fake/requests`, `POST/DELETE /_fake/script`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field


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

    model_config = {"populate_by_name": True}


@dataclass
class FakeState:
    received: list[dict[str, Any]] = field(default_factory=list)
    script: list[Behaviour] = field(default_factory=list)
    max_received: int = 1000

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


def _usage(prompt: str, completion: str) -> dict[str, int]:
    p, c = max(1, len(prompt) // 4), max(1, len(completion) // 4)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": "fake_upstream_error", "code": str(status)}},
        status_code=status,
    )


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

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "echo", "object": "model", "owned_by": "brain"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body, raw = await _read(request)
        b = st.take(raw)
        if b.delay_s:
            await asyncio.sleep(b.delay_s)
        if b.status >= 400:
            return _error(b.status, f"scripted failure {b.status}")
        if b.json_body is not None:
            return JSONResponse(b.json_body)
        messages = body.get("messages") or []
        content = b.content if b.content is not None else transcript(messages)
        model = body.get("model", "echo")
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        usage = _usage(json.dumps(messages), content)
        if body.get("stream"):
            return StreamingResponse(
                _chat_stream(cid, model, content, b, usage), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if b.reasoning:
            message["reasoning_content"] = b.reasoning
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            }
        )

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        body, raw = await _read(request)
        b = st.take(raw)
        if b.delay_s:
            await asyncio.sleep(b.delay_s)
        if b.status >= 400:
            return JSONResponse(
                {"type": "error", "error": {"type": "api_error", "message": f"scripted failure {b.status}"}},
                status_code=b.status,
            )
        if b.json_body is not None:
            return JSONResponse(b.json_body)
        content = (
            b.content if b.content is not None else transcript(body.get("messages") or [], body.get("system"))
        )
        usage = _usage(json.dumps(body.get("messages")), content)
        mid = f"msg_{uuid.uuid4().hex[:12]}"
        model = body.get("model", "echo")
        if body.get("stream"):
            return StreamingResponse(
                _anthropic_stream(mid, model, content, b, usage), media_type="text/event-stream"
            )
        return JSONResponse(
            {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": content}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage["prompt_tokens"],
                    "output_tokens": usage["completion_tokens"],
                },
            }
        )

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
    cid: str, model: str, content: str, b: Behaviour, usage: dict[str, int]
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
    for piece in _words(content):
        if b.chunk_delay_s:
            await asyncio.sleep(b.chunk_delay_s)
        yield chunk({"content": piece})
    final = json.loads(chunk({}, "stop")[len("data: ") :])
    final["usage"] = usage
    yield _sse(final)
    yield _sse("[DONE]")


async def _anthropic_stream(
    mid: str, model: str, content: str, b: Behaviour, usage: dict[str, int]
) -> AsyncIterator[bytes]:
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
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": 0},
        },
    }
    yield _sse(start, "message_start")
    yield _sse(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        "content_block_start",
    )
    for piece in _words(content):
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
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": usage["completion_tokens"]},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m brain.fakeupstream", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=4001)
    a = p.parse_args(argv)
    uvicorn.run(create_app(), host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
