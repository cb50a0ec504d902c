"""The providers' prompt-cache accounting, for the echo upstream: what a real provider would bill.

Tests and benches read it to see what the gateway costs in cache; no provider exists here, so
the rules are the published ones, modelled closely enough that a changed prefix shows:

- **Anthropic** (`/v1/messages`): the prompt is tools, then system, then messages, in blocks. A
  block with `cache_control` is a breakpoint: the prefix up to and including it is written to the
  cache (`cache_creation_input_tokens`) unless it is there already. A request reads the longest
  cached prefix that ends at a breakpoint or at one of the 20 blocks before one
  (`cache_read_input_tokens`); the rest is `input_tokens`. A prefix under 1,024 tokens is never
  cached. An entry lives 5 minutes after its last write or read.
- **OpenAI** (chat completions, responses): automatic. The prompt's prefixes at 1,024 tokens and
  every 128 after are cached for 5 minutes; `cached_tokens` is the longest one found.

Tokens are counted as 4 characters of the canonical JSON of each block (what `_usage` in the echo
does for the totals): the proportions are what matter, not the tokenizer.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

MIN_CACHEABLE = 1024
LOOKBACK_BLOCKS = 20
OPENAI_STEP = 128
LIFETIME_S = 300.0


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _canon(value: Any) -> str:
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "cache_control"}
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def anthropic_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """(canonical text, is a breakpoint) of every block of the prompt, in the cache's order."""
    out: list[tuple[str, bool]] = []
    for tool in body.get("tools") or []:
        out.append((_canon(tool), isinstance(tool, dict) and "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append((_canon({"system": system}), False))
    elif isinstance(system, list):
        for b in system:
            out.append((_canon(b), isinstance(b, dict) and "cache_control" in b))
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role"))
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                out.append((role + _canon(b), isinstance(b, dict) and "cache_control" in b))
        else:
            out.append((role + _canon(content), False))
    return out


@dataclass
class PromptCache:
    """Cached prefixes by hash, with the time each was last used."""

    lifetime_s: float = LIFETIME_S
    _entries: dict[str, float] = field(default_factory=dict)

    def _live(self, h: str, now: float) -> bool:
        at = self._entries.get(h)
        return at is not None and now - at < self.lifetime_s

    def anthropic(self, body: dict[str, Any], now: float | None = None) -> dict[str, int]:
        """Anthropic's usage numbers for this request, updating the cache as the provider would."""
        now = time.monotonic() if now is None else now
        blocks = anthropic_blocks(body)
        hashes, cum = [], []
        h, total = hashlib.sha256(), 0
        for text, _ in blocks:
            h.update(text.encode())
            hashes.append(h.copy().hexdigest())
            total += tokens(text)
            cum.append(total)
        breakpoints = [i for i, (_, bp) in enumerate(blocks) if bp]
        read_at = -1
        for b in breakpoints:
            for i in range(b, max(-1, b - LOOKBACK_BLOCKS), -1):
                if i > read_at and self._live(hashes[i], now):
                    read_at = i
                    break
        if read_at >= 0:
            self._entries[hashes[read_at]] = now
        read = cum[read_at] if read_at >= 0 else 0
        write = 0
        last = max((b for b in breakpoints if cum[b] >= MIN_CACHEABLE), default=-1)
        if last > read_at:
            for b in breakpoints:
                if b > read_at and cum[b] >= MIN_CACHEABLE:
                    self._entries[hashes[b]] = now
            write = cum[last] - read
        return {
            "input_tokens": total - read - write,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }

    def openai(self, prompt: Any, now: float | None = None) -> dict[str, int]:
        """(total prompt tokens, cached tokens) as OpenAI's automatic prefix cache would count them."""
        now = time.monotonic() if now is None else now
        items = prompt if isinstance(prompt, list) else [prompt]
        text = "".join(_canon(i) for i in items)
        total = tokens(text)
        h = hashlib.sha256()
        cached, done = 0, 0
        marks = range(MIN_CACHEABLE, total + 1, OPENAI_STEP)
        for t in marks:
            h.update(text[done * 4 : t * 4].encode())
            done = t
            key = h.copy().hexdigest()
            if self._live(key, now) and t == cached + (OPENAI_STEP if cached else MIN_CACHEABLE):
                cached = t
            self._entries[key] = now
        return {"prompt_tokens": total, "cached_tokens": cached}

    def clear(self) -> None:
        self._entries.clear()
