"""The gateway's outer edge: which routes exist, how big a request may be, and what an error looks like.

The gateway mounts LiteLLM's whole proxy app, and LiteLLM serves hundreds of routes a brain key
has no business reaching: key and team management, spend, its admin UI and login pages, its own
MCP server, config and model info. We do not run LiteLLM's database, so none of them is needed.
Rather than deny what we know of (and miss what the next release adds), `LiteLLMGate` lets through
only the model APIs agents call (`MODEL_ROUTES`) and answers everything else 404 before LiteLLM
sees it. It also strips LiteLLM's `Access-Control-*` headers (LiteLLM sets CORS `*`): browsers get
CORS only where an operator asked for it (`limits.cors_origins`, applied outside this module).

`BodyLimit` counts request bytes as they arrive and answers 413 at the first byte past the cap, so
a 20 MB body is refused without being read. `ErrorShield` is the last line: an exception that
escaped everything else becomes a JSON 500 (or, mid-stream, a cleanly closed response), never a
reset connection or a traceback.

Every error from the brain's own surfaces is `{"code", "message", "field"}`; `error_body` builds it.
The model APIs keep LiteLLM's OpenAI/Anthropic error shape, which their clients parse.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("brain.gateway.boundary")

#: LiteLLM routes a brain key may reach (method, path). Chat, Anthropic messages (and its token
#: count, which Claude Code calls), the Responses API, and the model list. Not embeddings, legacy
#: completions, images, audio, files, batches, assistants, realtime or pass-through routes: the
#: brain neither needs nor governs them, and each would be one more way to spend the team's upstream keys.
MODEL_ROUTES: frozenset[tuple[str, str]] = frozenset(
    [("POST", p) for p in ("/v1/chat/completions", "/chat/completions")]
    + [("POST", p) for p in ("/v1/messages", "/v1/messages/count_tokens")]
    + [("POST", p) for p in ("/v1/responses", "/responses")]
    + [(m, p) for p in ("/v1/models", "/models") for m in ("GET", "HEAD")]
)
MODEL_PATHS: frozenset[str] = frozenset(p for _, p in MODEL_ROUTES)
CALL_ID_HEADER = b"x-litellm-call-id"  # a client's own is dropped (LiteLLMGate)


class LimitSettings(BaseModel):
    """Sizes the gateway accepts. Each refusal names the limit, so a caller knows what fits."""

    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="REST and MCP request bodies")
    max_model_body_bytes: int = Field(
        default=32 << 20, ge=1024, description="model API bodies (Anthropic's own cap is 32 MB)"
    )
    max_query_chars: int = Field(default=4000, ge=16, description="a search query")
    max_attrs_bytes: int = Field(default=16 << 10, ge=64, description="an entry's attrs, as JSON")
    max_attrs_depth: int = Field(default=8, ge=1, description="nesting of attrs")
    max_string_chars: int = Field(
        default=4000, ge=16, description="any other string field (reason, keywords, ids)"
    )
    max_list_items: int = Field(default=100, ge=1, description="any list field (namespaces, kinds)")
    cors_origins: list[str] = Field(
        default_factory=list, description="browser origins allowed to call the gateway; none by default"
    )


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The one error shape of the brain's surfaces: `field` is always present (null when none applies)."""
    return {"code": code, "message": message, "field": field}


def is_model_route(method: str, path: str) -> bool:
    return (method.upper(), path) in MODEL_ROUTES


def body_limit_for(path: str, limits: LimitSettings) -> int:
    return limits.max_model_body_bytes if path in MODEL_PATHS else limits.max_body_bytes


async def send_json(
    send: Send, status: int, payload: dict[str, Any], headers: Iterable[tuple[str, str]] = ()
) -> None:
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _strip_cors(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in headers if not k.lower().startswith(b"access-control-")]


class LiteLLMGate:
    """Only `MODEL_ROUTES` reach LiteLLM; everything else of it answers 404 (websockets: closed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        method, path = scope.get("method", "GET"), scope.get("path", "")
        if not is_model_route(method, path):
            if path in MODEL_PATHS:
                await send_json(
                    send,
                    405,
                    error_body("method_not_allowed", f"{method} is not served on {path}"),
                    [("allow", ", ".join(sorted(m for m, p in MODEL_ROUTES if p == path)))],
                )
            else:
                await send_json(send, 404, error_body("not_found", f"no such route: {path}"))
            return

        # LiteLLM takes a request's call id from this header when the client sends one, and the call
        # id keys the context the post-call hooks read (brain.gateway.runtime.Runtime.recall): two
        # requests sent with one id would each get the other's x-brain-* headers and capture. So
        # LiteLLM always makes its own; the reply still carries it in x-litellm-call-id.
        headers = scope.get("headers", [])
        if any(k.lower() == CALL_ID_HEADER for k, _ in headers):
            scope = {**scope, "headers": [(k, v) for k, v in headers if k.lower() != CALL_ID_HEADER]}
        held: list[Message] = []
        chunks: list[bytes] = []

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": _strip_cors(list(message.get("headers", [])))}
                if message.get("status", 200) >= 400 and _is_json(message["headers"]):
                    held.append(message)  # a JSON error: small, and scrubbed before it goes out
                    return
            elif held and message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                body = scrub_error_body(b"".join(chunks))
                headers = [(k, v) for k, v in held[0]["headers"] if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(body)).encode()))
                await send({**held[0], "headers": headers})
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
            await send(message)

        await self.app(scope, receive, guarded)


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(k.lower() == b"content-type" and b"json" in v.lower() for k, v in headers)


_TRAILER = re.compile(r"\n\nLiteLLM:.*", re.S)
_PROVIDER = re.compile(r"(?:Exception|Error) - (.*)$", re.S)
_INTERNALS = re.compile(
    r"Traceback|File \"|object has no attribute|NoneType|(?:Key|Type|Attribute|Value|Index|Name)Error\b|line \d+"
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")


def scrub_error_message(message: str, kind: str = "error") -> str:
    """A LiteLLM error message without its internals: the provider's own words, no URLs, no Python.

    LiteLLM wraps an upstream's message in its exception chain (`litellm.RateLimitError:
    RateLimitError: OpenAIException - <provider text>`) plus a retry trailer; the provider text is
    what a client needs (Claude Code reads "prompt is too long" from it). A message that is a Python
    exception (`'str' object has no attribute 'get'`) says nothing to a client and something to an
    attacker, so it becomes a plain sentence.
    """
    text = _TRAILER.sub("", message).strip()
    m = _PROVIDER.search(text)
    if m:
        text = m.group(1).strip()
    if _INTERNALS.search(text):
        return f"the request could not be processed ({kind})"
    return _ADDRESS.sub("<address>", _URL.sub("<url>", text))


def scrub_error_body(body: bytes) -> bytes:
    """An OpenAI/Anthropic-shaped JSON error with every message scrubbed; other bodies unchanged."""
    try:
        payload = json.loads(body)
    except ValueError:
        return body
    err = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(err, dict):
        return body
    kind = str(err.get("type") or "error")
    if isinstance(err.get("message"), str):
        err["message"] = scrub_error_message(err["message"], kind)
    if "provider_specific_fields" in err:
        err.pop("provider_specific_fields")  # repeats the message, unscrubbed
    return json.dumps(payload).encode()


class NoStandaloneStream:
    """`GET /mcp` answers 405, which the MCP spec allows for a server with no server-initiated stream.

    The endpoint is stateless: nothing would ever be sent on a standalone SSE stream, and each one
    would hold a connection open for as long as the client likes.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET":
            message = "GET is not served on /mcp: this MCP endpoint is stateless and has no stream to open"
            await send_json(send, 405, error_body("method_not_allowed", message), [("allow", "POST, DELETE")])
            return
        await self.app(scope, receive, send)


class _TooLarge(Exception):
    pass


class BodyLimit:
    """413 naming the cap as soon as a request's body (declared or counted) passes it."""

    def __init__(self, app: ASGIApp, limits: LimitSettings) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = body_limit_for(scope.get("path", ""), self.limits)
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            await _drain(receive, 0)
            await _refuse(send, cap)
            return
        seen = 0
        started = refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > cap:
                    refused = True
                    if msg.get("more_body"):
                        await _drain(receive, seen)
                    if not started:
                        await _refuse(send, cap)
                    raise _TooLarge
            return msg

        async def tracked(message: Message) -> None:
            nonlocal started
            if refused:
                return  # our 413 went out; the app's answer to a cut-off body is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            return
        except Exception:
            if refused:  # the app wrapped our signal in its own error; the 413 is already sent
                return
            raise


#: Past a cap, the rest of a body is read and discarded (never kept) up to this many bytes before the
#: 413 goes out: a client still uploading when the answer comes would see a reset, not the 413.
DRAIN_MAX = 128 << 20


async def _drain(receive: Receive, seen: int) -> None:
    while seen <= DRAIN_MAX:
        msg = await receive()
        if msg["type"] != "http.request":
            return
        seen += len(msg.get("body", b""))
        if not msg.get("more_body"):
            return


async def _refuse(send: Send, cap: int) -> None:
    await send_json(
        send,
        413,
        error_body("too_large", f"request body is over the limit of {cap} bytes", "body"),
        [("connection", "close")],
    )


class ErrorShield:
    """The outermost layer: an escaped exception is logged and answered as JSON 500, never a reset."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "done": False}

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                state["done"] = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            if state["done"]:
                return  # an exception handler already answered (and the error was logged there)
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            try:
                if not state["started"]:
                    await send_json(send, 500, INTERNAL)
                else:  # mid-stream: end the body cleanly rather than resetting the connection
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            except Exception:  # the client is gone
                return


INTERNAL = error_body("internal", "the gateway failed on this request; the error is in its log")

# ---------------------------------------------------------------------------------------------- input


class InputTooLarge(ValueError):
    """A field over its limit: 422 naming the field and the limit (raised as InvalidInput by callers)."""


_NUL = "\x00"
_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON's \ud800 escapes decode to text UTF-8 cannot encode


def _text_problem(value: str, where: str) -> str | None:
    if _NUL in value:
        return f"{where}: contains a NUL character, which text storage cannot hold"
    if _SURROGATE.search(value):
        return f"{where}: contains a lone UTF-16 surrogate, which is not valid Unicode text"
    return None


def input_problem(
    value: Any, field: str, limits: LimitSettings, *, max_chars: int | None = None
) -> str | None:
    """What is wrong with one caller-controlled value, or None. Pure: callers raise their own error.

    Checks what every text store and every retrieval leg must be spared: NUL characters (Postgres
    text cannot hold them), strings and lists past their caps, and nested values (attrs) that are too
    big or too deep once encoded.
    """
    cap = max_chars or limits.max_string_chars
    if isinstance(value, str):
        problem = _text_problem(value, field)
        if problem:
            return problem
        if len(value) > cap:
            return f"{field}: {len(value)} characters is over the limit of {cap}"
        return None
    if isinstance(value, (list, tuple)):
        if len(value) > limits.max_list_items:
            return f"{field}: {len(value)} items is over the limit of {limits.max_list_items}"
        for i, item in enumerate(value):
            problem = input_problem(item, f"{field}[{i}]", limits)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        return _nested_problem(value, field, limits)
    return None


def _nested_problem(value: dict[str, Any], field: str, limits: LimitSettings) -> str | None:
    try:
        size = len(json.dumps(value, ensure_ascii=False, default=str).encode())
    except (TypeError, ValueError, RecursionError):
        return f"{field}: must be plain JSON (objects, lists, strings, numbers, booleans, null)"
    if size > limits.max_attrs_bytes:
        return f"{field}: {size} bytes of JSON is over the limit of {limits.max_attrs_bytes}"

    def walk(v: Any, path: str, depth: int) -> str | None:
        if depth > limits.max_attrs_depth:
            return f"{field}: nested deeper than the limit of {limits.max_attrs_depth} levels"
        if isinstance(v, str):
            return _text_problem(v, path)
        items: Iterable[tuple[str, Any]] = ()
        if isinstance(v, dict):
            for k in v:
                problem = _text_problem(str(k), f"{path} (a key)")
                if problem:
                    return problem
            items = ((f"{path}.{k}", x) for k, x in v.items())
        elif isinstance(v, list):
            items = ((f"{path}[{i}]", x) for i, x in enumerate(v))
        for p, x in items:
            problem = walk(x, p, depth + 1)
            if problem:
                return problem
        return None

    return walk(value, field, 1)


_FIELD = re.compile(r"^([A-Za-z_]+)")


def problem_field(problem: str) -> str:
    """The top-level field a problem message starts with (`attrs.a.b: ...` → `attrs`)."""
    m = _FIELD.match(problem)
    return m.group(1) if m else "body"
