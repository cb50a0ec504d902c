"""The echo upstream's cache accounting follows the providers' published rules."""

from __future__ import annotations

from typing import Any

from brain.local.promptcache import PromptCache

LONG = "x" * 8000  # 2,000 tokens: over the 1,024-token minimum


def turn(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A body like Claude Code's: a marked system prompt, a mark on the newest message's last block."""
    marked = [dict(m) for m in messages]
    last = marked[-1]
    last["content"] = [*last["content"][:-1], {**last["content"][-1], "cache_control": {"type": "ephemeral"}}]
    return {
        "system": [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
        "messages": marked,
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_anthropic_writes_at_breakpoints_and_the_next_turn_reads_the_moved_one() -> None:
    cache = PromptCache()
    m1 = [user("first question " + "y" * 400)]
    u1 = cache.anthropic(turn(m1), now=0)
    assert u1["cache_read_input_tokens"] == 0 and u1["cache_creation_input_tokens"] > 2000
    m2 = [*m1, {"role": "assistant", "content": [{"type": "text", "text": "answer"}]}, user("second")]
    u2 = cache.anthropic(turn(m2), now=10)
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"]  # all of turn 1, by lookback
    assert u2["input_tokens"] == 0 and u2["cache_creation_input_tokens"] > 0


def test_anthropic_a_change_in_an_earlier_turn_reads_only_up_to_the_system_prompt() -> None:
    cache = PromptCache()
    m1 = [user("first question " + "y" * 400)]
    u1 = cache.anthropic(turn(m1), now=0)
    changed = [user("[memory] something else\n" + "first question " + "y" * 400)]
    m2 = [*changed, {"role": "assistant", "content": [{"type": "text", "text": "answer"}]}, user("second")]
    u2 = cache.anthropic(turn(m2), now=10)
    assert 0 < u2["cache_read_input_tokens"] < u1["cache_creation_input_tokens"]
    assert abs(u2["cache_read_input_tokens"] - 2000) < 10  # the system prompt's block alone (its JSON)


def test_anthropic_entries_expire_after_five_minutes_unused() -> None:
    cache = PromptCache()
    body = turn([user("q " + "y" * 400)])
    cache.anthropic(body, now=0)
    assert cache.anthropic(body, now=299)["cache_read_input_tokens"] > 0
    assert cache.anthropic(body, now=299 + 301)["cache_read_input_tokens"] == 0


def test_openai_caches_shared_prefixes_from_1024_tokens_in_128_token_steps() -> None:
    cache = PromptCache()
    short = [{"role": "user", "content": "hi"}]
    assert cache.openai(short, now=0)["cached_tokens"] == 0
    assert cache.openai(short, now=1)["cached_tokens"] == 0  # under 1,024 tokens: never cached
    convo = [{"role": "system", "content": LONG}, {"role": "user", "content": "q1"}]
    first = cache.openai(convo, now=2)
    assert first["cached_tokens"] == 0
    later = cache.openai(
        [*convo, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}], now=3
    )
    assert later["cached_tokens"] >= 1024 and (later["cached_tokens"] - 1024) % 128 == 0
    assert later["cached_tokens"] <= first["prompt_tokens"]
    changed = cache.openai(
        [{"role": "system", "content": "z" + LONG}, {"role": "user", "content": "q1"}], now=4
    )
    assert changed["cached_tokens"] == 0
