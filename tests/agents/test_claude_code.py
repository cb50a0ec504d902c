"""The real Claude Code CLI through the gateway: the memory that answers the person comes first.

Claude Code speaks `/v1/messages`; the echo model is an OpenAI-compatible upstream, so LiteLLM
translates the request to chat completions on the way out. What the upstream receives is what a
provider would: the client's system prompt and conversation as sent, with the memory block first in
the turn where the person asked (so the provider's prompt cache of all before it holds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brain.local.promptcache import PromptCache
from tests.kit.gateway import ANTHROPIC_MODEL

from .conftest import (
    ANSWER_FACT,
    FOUR_TURNS,
    QUESTION,
    Gateway,
    Team,
    captured_rows,
    claude_env,
    first_memory_id,
    run_cli,
    turn_texts,
)

CHAT = "/v1/chat/completions"


def _claude(agents_bin: Path, *args: str) -> list[str]:
    return [str(agents_bin / "claude"), "-p", QUESTION, "--model", "echo", *args]


async def test_claude_code_gets_the_answering_memory_first(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    env = claude_env(tmp_path / "home", agents_bin, gw.url, team.key)
    r = await run_cli(_claude(agents_bin), env, repo)
    bodies = gw.upstream_bodies(CHAT)
    assert len(bodies) == 1, [x["path"] for x in gw.fake.received]
    body = bodies[0]
    turn, rest = turn_texts(body, "chat", QUESTION)
    assert "[team memory " not in rest  # the system prompt and all before the question are as sent
    # the harness is still there, untouched: CLAUDE.md reaches the model as Claude Code sent it
    assert "Rule 40: keep handlers small" in turn and QUESTION in turn
    assert first_memory_id(turn) == team.answer_id
    # what the person sees: the echo repeats what the model was given, the answering note included
    assert ANSWER_FACT in r.stdout


async def test_claude_code_tool_loop_keeps_retrieving_on_the_question(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    """Model asks for a tool, Claude Code runs it and sends the result: the next request is still the question's."""
    gw.script(
        {
            "match": QUESTION,
            "tool_call": {"name": "Read", "arguments": {"file_path": str(repo / "CLAUDE.md")}},
        }
    )
    env = claude_env(tmp_path / "home", agents_bin, gw.url, team.key)
    await run_cli(_claude(agents_bin), env, repo)
    bodies = gw.upstream_bodies(CHAT)
    assert len(bodies) == 2
    second = bodies[1]
    tool = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool and "Project guide for the payments service" in json.dumps(tool[-1]["content"])
    calls = [m for m in second["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
    assert json.loads(calls[-1]["tool_calls"][0]["function"]["arguments"]) == {
        "file_path": str(repo / "CLAUDE.md")
    }
    for body in bodies:  # the loop's second request gets the first one's block back, not a new one
        assert first_memory_id(turn_texts(body, "chat", QUESTION)[0]) == team.answer_id
    assert turn_texts(bodies[0], "chat", QUESTION)[0] == turn_texts(bodies[1], "chat", QUESTION)[0]


async def test_claude_code_streaming_tools_and_thinking_survive(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    thought = "The runbook lists the staging pgbouncer port."
    gw.script({"match": QUESTION, "reasoning": thought, "content": "Port 6543."})
    env = claude_env(tmp_path / "home", agents_bin, gw.url, team.key)
    r = await run_cli(_claude(agents_bin, "--output-format", "stream-json", "--verbose"), env, repo)
    body = gw.upstream_bodies(CHAT)[-1]
    assert body["stream"] is True
    names = {t["function"]["name"] for t in body["tools"]}
    assert {"Bash", "Read", "Edit", "Write", "Agent"} <= names
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    blocks = [b for e in events if e.get("type") == "assistant" for b in e["message"]["content"]]
    assert {"type": "thinking", "thinking": thought} in [
        {"type": b["type"], "thinking": b.get("thinking")} for b in blocks if b["type"] == "thinking"
    ], blocks
    assert any(b["type"] == "text" and b["text"] == "Port 6543." for b in blocks), blocks
    assert events[-1]["type"] == "result" and events[-1]["result"] == "Port 6543."


async def test_claude_code_follow_up_retrieves_on_the_latest_question(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    """`claude -c -p` continues the session: the request carries the first exchange, memory follows the new one."""
    env = claude_env(tmp_path / "home", agents_bin, gw.url, team.key)
    await run_cli(_claude(agents_bin), env, repo)
    follow_up = "and who owns the billing cron job?"
    await run_cli([str(agents_bin / "claude"), "-c", "-p", follow_up, "--model", "echo"], env, repo)
    body = gw.upstream_bodies(CHAT)[-1]
    sent = json.dumps(body["messages"])
    assert QUESTION in sent and follow_up in sent  # the whole conversation went up
    owner = team.ids["The billing cron job is owned by the revenue team (channel #revenue-oncall)."]
    turn, rest = turn_texts(body, "chat", follow_up)
    assert follow_up in turn and first_memory_id(turn) == owner
    assert first_memory_id(rest) == team.answer_id  # the first turn's block, put back where it was


async def test_claude_code_capture_keeps_the_question_not_the_harness(
    gw: Gateway, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    rows = await captured_rows(gw, tmp_path, _claude(agents_bin), repo, claude_env, agents_bin)
    assert [(r["kind"], r["title"]) for r in rows] == [("summary", f"insight: {QUESTION}")]
    assert "claudeMd" not in rows[0]["body"] and "pgbouncer fronts Postgres" in rows[0]["body"]


def _read_share(bodies: list[dict[str, Any]]) -> float:
    """The share of input tokens a provider would read from its prompt cache, over the conversation."""
    cache = PromptCache()
    usages = [cache.anthropic(b, now=float(i)) for i, b in enumerate(bodies)]
    read = sum(u["cache_read_input_tokens"] for u in usages)
    return read / (read + sum(u["cache_creation_input_tokens"] + u["input_tokens"] for u in usages))


async def _four_turns(
    gw: Gateway, agents_bin: Path, repo: Path, home: Path, url: str, key: str
) -> list[dict[str, Any]]:
    env = claude_env(home, agents_bin, url, key)
    gw.fake.received.clear()
    for i, question in enumerate(FOUR_TURNS):
        cont = ["-c"] if i else []
        await run_cli(
            [str(agents_bin / "claude"), *cont, "-p", question, "--model", ANTHROPIC_MODEL], env, repo
        )
    return [b for b in gw.upstream_bodies("/v1/messages") if b.get("model") == ANTHROPIC_MODEL]


async def test_claude_code_four_turns_keep_the_prompt_cache(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    """Anthropic's wire format end to end: the upstream gets Claude Code's own breakpoints.

    The same four-turn conversation straight to the echo and through the gateway with memory on:
    the share of input a prompt cache written at the client's breakpoints serves must stay within
    5 %, and each turn's answering memory is the first the upstream reads in that turn.
    """
    gw.script({"content": "Noted.", "times": -1})  # short, equal answers: the conversations match
    direct = await _four_turns(gw, agents_bin, repo, tmp_path / "direct", gw.upstream_url, "sk-ant-fake")
    through = await _four_turns(gw, agents_bin, repo, tmp_path / "brain", gw.url, team.key)
    gw.fake.script.clear()
    assert len(direct) == len(through) == 4, (len(direct), len(through))
    share_direct, share_brain = _read_share(direct), _read_share(through)
    print(
        f"Claude Code, 4 turns: cache-read share direct {share_direct:.3f}, through the brain {share_brain:.3f}"
    )
    assert share_direct > 0.5  # the client's breakpoints do cache: a test that can fail
    assert share_brain >= 0.95 * share_direct, (share_brain, share_direct)
    for body, (question, fact) in zip(through, FOUR_TURNS.items(), strict=True):
        turn, _ = turn_texts(body, "messages", question)
        assert first_memory_id(turn) == team.ids[fact], (question, turn[:800])
        assert json.dumps(body).count('"cache_control"') <= 4
