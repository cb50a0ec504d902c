"""The real Claude Code CLI through the gateway: the memory that answers the person comes first.

Claude Code speaks `/v1/messages`; the echo model is an OpenAI-compatible upstream, so LiteLLM
translates the request to chat completions on the way out. What the upstream receives is what a
provider would: the client's system prompt, then the memory block, then the conversation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import (
    ANSWER_FACT,
    QUESTION,
    Gateway,
    Team,
    captured_rows,
    claude_env,
    first_memory_id,
    run_cli,
)

CHAT = "/v1/chat/completions"


def _system_text(body: dict[str, Any]) -> str:
    return "\n".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body["messages"]
        if m["role"] == "system"
    )


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
    roles = [m["role"] for m in body["messages"]]
    first_user = roles.index("user")
    memory_at = next(i for i, m in enumerate(body["messages"]) if "[team memory " in json.dumps(m))
    assert memory_at < first_user and roles[memory_at] == "system"
    # the harness is still there, untouched: CLAUDE.md reaches the model as Claude Code sent it
    assert "Rule 40: keep handlers small" in json.dumps(body["messages"][first_user])
    assert first_memory_id(_system_text(body)) == team.answer_id
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
    for body in bodies:
        assert first_memory_id(_system_text(body)) == team.answer_id


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
    assert first_memory_id(_system_text(body)) == owner


async def test_claude_code_capture_keeps_the_question_not_the_harness(
    gw: Gateway, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    rows = await captured_rows(gw, tmp_path, _claude(agents_bin), repo, claude_env, agents_bin)
    assert [(r["kind"], r["title"]) for r in rows] == [("summary", f"insight: {QUESTION}")]
    assert "claudeMd" not in rows[0]["body"] and "pgbouncer fronts Postgres" in rows[0]["body"]
