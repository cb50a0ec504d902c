"""The provider's input billing, split by prompt-cache outcome, from each wire shape."""

from __future__ import annotations

from litellm.types.utils import PromptTokensDetailsWrapper, Usage

from brain.gateway.usage import input_tokens


def test_anthropic_reports_the_three_parts_apart() -> None:
    usage = {"input_tokens": 12, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 80}
    assert input_tokens({"usage": usage}) == {"read": 900, "write": 80, "none": 12}


def test_chat_completions_count_cached_tokens_inside_prompt_tokens() -> None:
    usage = {"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1536}}
    assert input_tokens({"usage": usage}) == {"read": 1536, "write": 0, "none": 464}


def test_responses_api_counts_cached_tokens_inside_input_tokens() -> None:
    usage = {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 2048}, "output_tokens": 5}
    assert input_tokens({"usage": usage}) == {"read": 2048, "write": 0, "none": 952}


def test_litellms_usage_object_with_anthropic_cache_fields() -> None:
    usage = Usage(
        prompt_tokens=1000,
        completion_tokens=5,
        prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=700),
        cache_read_input_tokens=700,
        cache_creation_input_tokens=200,
    )
    assert input_tokens(type("R", (), {"usage": usage})()) == {"read": 700, "write": 200, "none": 100}


def test_no_usage_is_none_and_garbage_counts_nothing() -> None:
    assert input_tokens({"choices": []}) is None
    assert input_tokens({"usage": {"input_tokens": "lots", "cache_read_input_tokens": -3}}) == {
        "read": 0,
        "write": 0,
        "none": 0,
    }
