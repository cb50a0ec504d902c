"""Explicit model overrides ("use pro", "use kimi") and reading the complexity router's decision.

Overrides run in the pre-call hook, before LiteLLM's complexity router sees the request: a person
who writes "use kimi" has consciously chosen that model (and its bill), so the phrase wins over any
score. An override applies to requests for its router's model name (all requests when it names no
router).

The phrase counts only in the person's own words, at the start or the end of what they wrote (its
first or last line, outside markup, code and quotes: `harness.own_words`): a "use kimi" inside a pasted
ticket, a log, a CLAUDE.md or a tool's output is someone else's text and never picks the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from brain.gateway.harness import own_words
from brain.gateway.settings import Override


@lru_cache(maxsize=256)
def _phrase_re(phrase: str) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(w) for w in phrase.split())
    return re.compile(rf"(?<![\w-]){words}(?![\w-])", re.I)


def override_lines(text: str) -> str:
    """Where an override phrase may stand: the first and the last line of the person's own words."""
    lines = own_words(text).splitlines()
    return "\n".join(dict.fromkeys([lines[0], lines[-1]])) if lines else ""


def pick_override(model: str | None, text: str, overrides: Sequence[Override]) -> Override | None:
    text = override_lines(text)
    if not text:
        return None
    for ov in overrides:
        if ov.router is not None and model != ov.router:
            continue
        if _phrase_re(ov.phrase).search(text):
            return ov
    return None


def routing_decision(data: dict[str, Any]) -> dict[str, str] | None:
    """The complexity router's choice for this request, from LiteLLM's request metadata."""
    for key in ("metadata", "litellm_metadata"):
        meta = data.get(key)
        if isinstance(meta, dict) and isinstance(meta.get("routing_decision"), dict):
            d = meta["routing_decision"]
            return {
                "router": str(d.get("router_model_name") or ""),
                "tier": str(d.get("tier") or d.get("tier_label") or ""),
                "model": str(d.get("routed_model") or ""),
            }
    return None
