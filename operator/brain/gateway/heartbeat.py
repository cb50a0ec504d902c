"""SSE heartbeat: comment lines (`: heartbeat`) on streams that stay silent, so tunnels do not cut them.

Cloudflare and similar proxies drop a response that sends no byte for 100 s, and reasoning models
can think longer than that before their first token. SSE parsers ignore comment lines, so sending
one every `interval` seconds of silence is invisible to clients.

LiteLLM sends a stream's headers only with its first chunk, so a silent upstream means no headers
either. For streaming requests (`"stream": true`) this middleware therefore starts the response
itself (200, `text/event-stream`) once `interval` passes with nothing sent; if the upstream then
fails, the error arrives as an SSE `error` event instead of an HTTP status. Everything else passes
through untouched.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brain.gateway import metrics

STREAM_PATHS = ("/v1/chat/completions", "/chat/completions", "/v1/messages", "/v1/responses", "/responses")
_STREAM_TRUE = re.compile(rb'"stream"\s*:\s*true')
HEARTBEAT = b": heartbeat\n\n"


class SSEHeartbeat:
    def __init__(self, app: ASGIApp, interval: float = 20.0, paths: tuple[str, ...] = STREAM_PATHS) -> None:
        self.app = app
        self.interval = interval
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in self.paths:
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            more = bool(msg.get("more_body"))
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if not _STREAM_TRUE.search(body):
            await self.app(scope, replay, send)
            return
        await _Stream(self, scope, replay, send, anthropic=scope["path"].endswith("/messages")).run()


async def _call(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    await app(scope, receive, send)


class _Stream:
    def __init__(
        self, mw: SSEHeartbeat, scope: Scope, receive: Receive, send: Send, *, anthropic: bool
    ) -> None:
        self.mw, self.scope, self.receive, self.send = mw, scope, receive, send
        self.anthropic = anthropic
        self.queue: asyncio.Queue[Message] = asyncio.Queue(maxsize=16)  # bounded: keeps backpressure
        self.started_early = False
        self.started = False
        self.error_status: int | None = None
        self.error_body = b""
        self.completed = False

    async def _inner_send(self, msg: Message) -> None:
        await self.queue.put(msg)

    async def _start(self) -> None:
        self.started_early = self.started = True
        metrics.early_stream_starts.inc()
        await self.send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-cache"),
                    (b"x-brain-heartbeat", b"early"),
                ],
            }
        )

    def _error_event(self) -> bytes:
        try:
            detail: Any = json.loads(self.error_body or b"{}")
        except ValueError:
            detail = {"message": self.error_body.decode(errors="replace")}
        err = detail.get("error", detail) if isinstance(detail, dict) else {"message": str(detail)}
        if not isinstance(err, dict):
            err = {"message": str(err)}
        err.setdefault("code", str(self.error_status))
        if self.anthropic:
            return b"event: error\ndata: " + json.dumps({"type": "error", "error": err}).encode() + b"\n\n"
        return b"data: " + json.dumps({"error": err}).encode() + b"\n\n"

    async def run(self) -> None:
        task: asyncio.Task[None] = asyncio.create_task(
            _call(self.mw.app, self.scope, self.receive, self._inner_send)
        )
        getter: asyncio.Task[Message] | None = None
        try:
            while True:
                if getter is None:
                    getter = asyncio.create_task(self.queue.get())
                waiting = {getter} if task.done() else {getter, task}
                done, _ = await asyncio.wait(
                    waiting, timeout=self.mw.interval, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    msg, getter = getter.result(), None
                    if await self._forward(msg):
                        break
                    continue
                if task.done() and self.queue.empty():
                    break  # the app returned without finishing the body
                if not done:  # silence for a whole interval
                    if not self.started:
                        await self._start()
                    await self.send({"type": "http.response.body", "body": HEARTBEAT, "more_body": True})
                    metrics.heartbeats.inc()
        except BaseException:
            task.cancel()
            raise
        finally:
            if getter is not None:
                getter.cancel()
        try:
            await task
        except Exception:
            if not self.started:
                raise
            if not self.completed:
                self.error_status = self.error_status or 500
                self.error_body = (
                    self.error_body or b'{"error": {"message": "the gateway failed mid-stream"}}'
                )
                await self.send(
                    {"type": "http.response.body", "body": self._error_event(), "more_body": False}
                )
            return
        if self.started and not self.completed:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _forward(self, msg: Message) -> bool:
        """Pass one inner message on; True when the response is complete."""
        if msg["type"] == "http.response.start":
            if not self.started_early:
                self.started = True
                await self.send(msg)
            elif int(msg.get("status", 200)) >= 400:
                self.error_status = int(msg["status"])
            return False
        if msg["type"] != "http.response.body":
            return False
        more = bool(msg.get("more_body"))
        if self.error_status is not None:
            self.error_body += msg.get("body", b"")
            if not more:
                await self.send(
                    {"type": "http.response.body", "body": self._error_event(), "more_body": False}
                )
                self.completed = True
            return not more
        await self.send(msg)
        self.completed = not more
        return not more
