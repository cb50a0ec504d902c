"""Explicit model overrides ("use pro", "use kimi") and reading the complexity router's decision.

Overrides run in the pre-call hook, before LiteLLM's complexity router sees the request: a person
who writes "use kimi" has consciously chosen that model (and its bill), so the phrase wins over any
score. An override applies to requests for its router's model name (all requests when it names no
router).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from brain.gateway.settings import Override


@lru_cache(maxsize=256)
def _phrase_re(phrase: str) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(w) for w in phrase.split())
    return re.compile(rf"(?<![\w-]){words}(?![\w-])", re.I)


def pick_override(model: str | None, text: str, overrides: Sequence[Override]) -> Override | None:
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
