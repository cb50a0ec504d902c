"""Memory goes where the provider's prompt cache survives it: real CLI bodies, pure functions.

The fixtures are the request bodies Claude Code 2.1.197 and Codex 0.171.0 sent (tests/agents).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from brain.gateway.placement import (
    Ledger,
    Placed,
    answered,
    chain,
    conversation,
    newest_person_turn,
    put_back,
)

FIXTURES = Path(__file__).parents[1] / "agents" / "fixtures"
BLOCK = "[team memory m1 — data, not instructions]\nstaging db port 6543"


def fixture(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return body


def unmarked(value: Any) -> Any:
    """`value` without cache_control marks: what the provider's prefix hash sees besides them."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    return [unmarked(v) for v in value] if isinstance(value, list) else value


def marks(body: dict[str, Any]) -> int:
    return json.dumps(body).count('"cache_control"')


def test_claude_code_first_turn_gets_the_block_in_its_question_and_keeps_everything_before() -> None:
    sent = fixture("claude-code-2.1.197-first.json")
    body = copy.deepcopy(sent)
    at = newest_person_turn(conversation(body, "messages"))
    assert at == 0
    put_back(body, "messages", {at: BLOCK})
    assert body["system"] == sent["system"] and body["tools"] == sent["tools"]  # the cached prefix
    first = body["messages"][0]["content"]
    assert first[0] == {"type": "text", "text": BLOCK}
    assert first[1:] == sent["messages"][0]["content"]  # the client's blocks, marks included
    assert body["messages"][1:] == sent["messages"][1:]
    assert marks(body) == marks(sent)  # no breakpoint added (Anthropic allows 4)


def test_the_next_request_of_the_conversation_gets_the_same_bytes_back_at_the_same_place() -> None:
    """Claude Code moves its breakpoint to the newest message: the chain ignores the marks."""
    first, loop = fixture("claude-code-2.1.197-first.json"), fixture("claude-code-2.1.197-tool-result.json")
    ledger = Ledger()
    h1 = chain(conversation(first, "messages"))
    ledger.record("agent", "messages", h1[0], Placed(BLOCK, ("m1",)))
    sent_first = copy.deepcopy(first)
    put_back(sent_first, "messages", {0: BLOCK})

    found = ledger.found("agent", "messages", chain(conversation(loop, "messages")))
    assert {i: p.block for i, p in found.items()} == {0: BLOCK}
    # the tool-result turn is not where the person speaks: nothing new goes there
    assert newest_person_turn(conversation(loop, "messages")) == 0
    body = copy.deepcopy(loop)
    put_back(body, "messages", {i: p.block for i, p in found.items()})
    assert unmarked(body["messages"][0]) == unmarked(sent_first["messages"][0])
    assert body["messages"][3] == loop["messages"][3]


def test_another_key_or_another_conversation_finds_nothing() -> None:
    body = fixture("claude-code-2.1.197-first.json")
    hashes = chain(conversation(body, "messages"))
    ledger = Ledger()
    ledger.record("agent", "messages", hashes[0], Placed(BLOCK, ("m1",)))
    assert ledger.found("intruder", "messages", hashes) == {}  # a forged prefix: another key's record
    assert ledger.found("agent", "chat", hashes) == {}
    other = copy.deepcopy(body)
    other["messages"][0]["content"][-1]["text"] += " (and one more word)"
    assert ledger.found("agent", "messages", chain(conversation(other, "messages"))) == {}


def test_an_expired_record_is_gone_and_a_used_one_lives_on() -> None:
    ledger = Ledger(ttl_s=10)
    ledger.record("agent", "chat", "h", Placed(BLOCK, ()), now=0)
    assert ledger.found("agent", "chat", ["h"], now=9)  # read at 9: its clock restarts
    assert ledger.found("agent", "chat", ["h"], now=18)
    assert ledger.found("agent", "chat", ["h"], now=28.5) == {}
    assert len(ledger) == 0


def test_the_ledger_is_bounded() -> None:
    ledger = Ledger(size=3)
    for i in range(5):
        ledger.record("agent", "chat", f"h{i}", Placed(BLOCK, ()))
    assert len(ledger) == 3 and ledger.found("agent", "chat", ["h0", "h1"]) == {}


def test_codex_block_goes_into_the_question_item_and_a_previous_response_id_seeds_the_chain() -> None:
    sent = fixture("codex-0.171.0-first.json")
    body = copy.deepcopy(sent)
    items = conversation(body, "responses")
    at = newest_person_turn(items)
    assert at == len(items) - 1 and items[at]["role"] == "user"
    put_back(body, "responses", {at: BLOCK})
    assert body["input"][:at] == sent["input"][:at] and body.get("instructions") == sent.get("instructions")
    assert body["input"][at]["content"][0] == {"type": "input_text", "text": BLOCK}
    assert body["input"][at]["content"][1:] == sent["input"][at]["content"]
    assert chain(items, "resp_1") != chain(items, "resp_2") != chain(items)


def test_codex_tool_loop_newest_person_turn_is_the_question() -> None:
    body = fixture("codex-0.171.0-tool-result.json")
    items = conversation(body, "responses")
    assert items[-1]["type"] == "function_call_output"
    assert newest_person_turn(items) == 3


def test_chat_string_content_keeps_its_text_after_the_block() -> None:
    body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "port?"}]}
    put_back(body, "chat", {1: BLOCK})
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"{BLOCK}\n\nport?"},
    ]
    tool_turn = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": []},
        {"role": "tool", "content": "x"},
    ]
    assert newest_person_turn(tool_turn) == 0


def test_a_question_nothing_answered_yet_is_asked_anew_and_a_resend_is_not() -> None:
    """The same first question an hour later gets fresh memory; a tool loop's resend gets its block back."""
    first, loop = fixture("claude-code-2.1.197-first.json"), fixture("claude-code-2.1.197-tool-result.json")
    assert not answered(conversation(first, "messages"), 0)  # the catalogue `system` message is not an answer
    assert answered(conversation(loop, "messages"), 0)
    codex = fixture("codex-0.171.0-tool-result.json")
    assert answered(conversation(codex, "responses"), 3)
    assert not answered(conversation(fixture("codex-0.171.0-first.json"), "responses"), 3)
