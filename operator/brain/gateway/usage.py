"""What a provider billed for a request's input, split by prompt-cache outcome (pure).

An SRE needs to see what memory costs in cache: a block that moves the prompt's prefix turns
cheap cache reads (0.1× the input price) into cache writes (1.25×). Providers report it in three
shapes, all handled here:

- Anthropic: `input_tokens` (neither), `cache_read_input_tokens`, `cache_creation_input_tokens`;
- OpenAI chat completions: `prompt_tokens` (all of it), `prompt_tokens_details.cached_tokens`;
- OpenAI Responses: `input_tokens` (all of it), `input_tokens_details.cached_tokens`.

LiteLLM's own `Usage` carries the chat-completions shape plus Anthropic's two cache fields.
"""

from __future__ import annotations

from typing import Any


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def input_tokens(response: Any) -> dict[str, int] | None:
    """{"read", "write", "none"} input tokens of a finished response; None when it reports no usage."""
    usage = _get(response, "usage")
    if usage is None:
        return None
    read = _int(_get(usage, "cache_read_input_tokens"))
    write = _int(_get(usage, "cache_creation_input_tokens"))
    prompt = _get(usage, "prompt_tokens")
    if prompt is not None:  # chat completions shape (LiteLLM's Usage): prompt_tokens counts it all
        details = _get(usage, "prompt_tokens_details")
        read = max(read, _int(_get(details, "cached_tokens")))
        return {"read": read, "write": write, "none": max(0, _int(prompt) - read - write)}
    details = _get(usage, "input_tokens_details")
    if details is not None:  # Responses API: input_tokens counts it all
        read = max(read, _int(_get(details, "cached_tokens")))
        return {
            "read": read,
            "write": write,
            "none": max(0, _int(_get(usage, "input_tokens")) - read - write),
        }
    # Anthropic's own shape: input_tokens is what was neither read nor written
    return {"read": read, "write": write, "none": _int(_get(usage, "input_tokens"))}


def output_tokens(response: Any) -> int:
    usage = _get(response, "usage")
    return _int(_get(usage, "completion_tokens")) or _int(_get(usage, "output_tokens"))


def usage_attrs(billed: dict[str, int] | None, response: Any) -> dict[str, int]:
    """The request span's GenAI usage attributes: input tokens (all of them) and how many the
    provider read from its prompt cache, and output tokens."""
    if billed is None:
        return {}
    return {
        "gen_ai.usage.input_tokens": sum(billed.values()),
        "gen_ai.usage.cache_read.input_tokens": billed.get("read", 0),
        "gen_ai.usage.cache_creation.input_tokens": billed.get("write", 0),
        "gen_ai.usage.output_tokens": output_tokens(response),
    }
