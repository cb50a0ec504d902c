"""Where memory goes in a conversation so that the provider's prompt cache survives it (pure).

A provider caches a request by its prefix: Anthropic at the client's `cache_control` breakpoints,
OpenAI automatically for shared prefixes of 1,024 tokens and more. Whatever the gateway changes
early in the request decides whether the whole conversation after it is read from the cache (a
tenth of the price) or written again (1.25×). So:

- memory for the current question goes into the person's newest message, at its start: after
  everything the client sent before, which stays a prefix byte for byte;
- on the next turn the client resends that message without our block (it never saw it), so the
  gateway puts each earlier turn's block back, byte for byte, into the message it went into then.
  The :class:`Ledger` remembers them, keyed by the caller's key and a hash chain over the
  conversation up to and including that message, as the client sent it.

The chain is the conversation's identity: a record is found only where the same key resends the
same messages, so a missing, expired or forged record (another key's prefix) finds nothing, and
the request falls back to a fresh block for its newest question. The client's own `cache_control`
marks are left where they are and none is added (Anthropic allows four), and they are not part of
the chain, since Claude Code moves its breakpoint to the newest message every turn.

A message with tool results is not where the person speaks (and Anthropic wants tool results first
in it); memory goes to the newest message the person wrote, which in a tool loop is the question
the loop serves, usually already holding its block.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: How long a conversation's blocks are put back. Anthropic's cache lives 5 minutes (1 hour on
#: request) after its last read; past an hour the cached prefix is gone anyway, and a conversation
#: idle that long gets fresh memory for its next question.
LEDGER_TTL_S = 3600.0
#: Turns remembered per gateway replica; each holds one block (at most the retrieval token budget).
LEDGER_SIZE = 20_000

TOOL_PARTS = ("tool_result", "function_call_output")


def _strip_cache_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_marks(v) for v in value]
    return value


def _canonical(item: Any) -> bytes:
    return json.dumps(_strip_cache_marks(item), sort_keys=True, ensure_ascii=False, default=str).encode()


def conversation(data: dict[str, Any], api: str) -> list[Any]:
    """The request's turns in order: `messages`, or the Responses API's `input` items."""
    if api == "responses":
        items = data.get("input")
        if isinstance(items, str):
            return [{"type": "message", "role": "user", "content": items}]
        return list(items) if isinstance(items, list) else []
    messages = data.get("messages")
    return list(messages) if isinstance(messages, list) else []


def chain(items: list[Any], seed: str = "") -> list[str]:
    """The hash of the conversation up to and including each item, as the client sent it."""
    h = hashlib.sha256(seed.encode()).digest()
    out = []
    for item in items:
        h = hashlib.sha256(h + _canonical(item)).digest()
        out.append(h.hex())
    return out


def is_person_turn(item: Any) -> bool:
    """A user message with text of its own (not a turn of tool results, not a tool message)."""
    if not isinstance(item, dict) or item.get("role") != "user":
        return False
    if item.get("type") not in (None, "message"):
        return False
    content = item.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        kinds = [p.get("type") for p in content if isinstance(p, dict)]
        return not any(k in TOOL_PARTS for k in kinds) and any(k in ("text", "input_text") for k in kinds)
    return False


def newest_person_turn(items: list[Any]) -> int | None:
    for i in range(len(items) - 1, -1, -1):
        if is_person_turn(items[i]):
            return i
    return None


def answered(items: list[Any], i: int) -> bool:
    """Whether the model already acted on turn `i` in this request (an answer, a tool call or result).

    Then the request is a resend of a conversation the provider has seen, and turn `i` gets back
    the block it had. A question nothing has answered yet is asked anew, even in the same words as
    an hour ago, and gets fresh memory: what the team wrote since must reach it.
    """
    for item in items[i + 1 :]:
        if not isinstance(item, dict):
            continue
        if item.get("role") in ("assistant", "tool") or item.get("type") in (
            "function_call",
            "function_call_output",
            "reasoning",
        ):
            return True
        content = item.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") in TOOL_PARTS for p in content
        ):
            return True
    return False


def with_block(item: dict[str, Any], api: str, block: str) -> dict[str, Any]:
    """`item` with `block` first in its content; the client's own parts follow untouched."""
    content = item.get("content")
    part_type = "input_text" if api == "responses" else "text"
    if isinstance(content, list):
        new_content: Any = [{"type": part_type, "text": block}, *content]
    elif api == "messages":
        new_content = [{"type": "text", "text": block}, {"type": "text", "text": str(content or "")}]
    else:
        new_content = f"{block}\n\n{content or ''}"
    return {**item, "content": new_content}


def put_back(data: dict[str, Any], api: str, blocks: dict[int, str]) -> None:
    """Write `blocks` (by turn index) into the request in place."""
    if not blocks:
        return
    items = conversation(data, api)
    for i, block in blocks.items():
        if 0 <= i < len(items) and isinstance(items[i], dict):
            items[i] = with_block(items[i], api, block)
    data["input" if api == "responses" else "messages"] = items


@dataclass(frozen=True)
class Placed:
    """One turn's block, as it was sent, with the memories it holds."""

    block: str
    ids: tuple[str, ...]


class Ledger:
    """Blocks sent in earlier turns, by (key, API, conversation hash); bounded, expiring when unused.

    A record's clock restarts whenever it is put back, like the provider's cache entry on a read: a
    long conversation keeps its first turn's block for as long as it keeps talking.

    One per gateway replica: a turn answered by another replica finds nothing here and gets a fresh
    block (the cache from that message on is written again once). docs/gateway.md says so.
    """

    def __init__(self, ttl_s: float = LEDGER_TTL_S, size: int = LEDGER_SIZE) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._items: OrderedDict[tuple[str, str, str], tuple[float, Placed]] = OrderedDict()

    def found(self, key: str, api: str, hashes: list[str], now: float | None = None) -> dict[int, Placed]:
        """The earlier blocks of this conversation, by the index of the turn each goes into."""
        now = time.monotonic() if now is None else now
        out = {}
        for i, h in enumerate(hashes):
            k = (key, api, h)
            entry = self._items.get(k)
            if entry is None:
                continue
            if now - entry[0] >= self.ttl_s:
                del self._items[k]
                continue
            self._items[k] = (now, entry[1])
            self._items.move_to_end(k)
            out[i] = entry[1]
        return out

    def record(self, key: str, api: str, turn_hash: str, placed: Placed, now: float | None = None) -> None:
        k = (key, api, turn_hash)
        self._items[k] = (time.monotonic() if now is None else now, placed)
        self._items.move_to_end(k)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
