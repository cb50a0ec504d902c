"""The real Codex CLI through the gateway's `/v1/responses`: injection, tool loops, reasoning, capture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import ANSWER_FACT, QUESTION, Gateway, Team, captured_rows, codex_env, first_memory_id, run_cli

RESPONSES = "/v1/responses"


def _codex(agents_bin: Path, *args: str) -> list[str]:
    return [str(agents_bin / "codex"), "exec", "--skip-git-repo-check", *args, QUESTION]


def _developer_text(body: dict[str, Any]) -> str:
    return "\n".join(json.dumps(it.get("content")) for it in body["input"] if it.get("role") == "developer")


async def test_codex_gets_the_answering_memory_first(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    env = codex_env(tmp_path / "home", agents_bin, gw.url, team.key)
    r = await run_cli(_codex(agents_bin), env, repo)
    bodies = gw.upstream_bodies(RESPONSES)
    assert len(bodies) == 1, [x["path"] for x in gw.fake.received]
    items = bodies[0]["input"]
    roles = [it.get("role") for it in items]
    memory_at = next(i for i, it in enumerate(items) if "[team memory " in json.dumps(it))
    assert roles[memory_at] == "developer" and memory_at < roles.index("user")
    assert first_memory_id(_developer_text(bodies[0])) == team.answer_id
    # AGENTS.md still reaches the model as Codex sent it
    assert "Rule 40: keep handlers small" in json.dumps(items)
    assert ANSWER_FACT in r.stdout


async def test_codex_tool_loop_keeps_retrieving_on_the_question(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    gw.script(
        {"match": QUESTION, "tool_call": {"name": "exec_command", "arguments": {"cmd": "head -3 AGENTS.md"}}}
    )
    env = codex_env(tmp_path / "home", agents_bin, gw.url, team.key)
    await run_cli(_codex(agents_bin), env, repo)
    bodies = gw.upstream_bodies(RESPONSES)
    assert len(bodies) == 2
    items = bodies[1]["input"]
    calls = [it for it in items if it.get("type") == "function_call"]
    assert calls and json.loads(calls[-1]["arguments"]) == {"cmd": "head -3 AGENTS.md"}
    outputs = [it for it in items if it.get("type") == "function_call_output"]
    assert outputs and "Project guide for the payments service" in json.dumps(outputs[-1])
    for body in bodies:
        assert first_memory_id(_developer_text(body)) == team.answer_id


async def test_codex_streaming_tools_and_reasoning_survive(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    thought = "The runbook lists the staging pgbouncer port."
    gw.script({"match": QUESTION, "reasoning": thought, "content": "Port 6543."})
    env = codex_env(tmp_path / "home", agents_bin, gw.url, team.key)
    r = await run_cli(_codex(agents_bin, "--json"), env, repo)
    body = gw.upstream_bodies(RESPONSES)[-1]
    assert body["stream"] is True
    assert body["reasoning"] == {"summary": "auto"}
    assert {"exec_command", "write_stdin"} <= {t.get("name") for t in body["tools"]}
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    assert {"type": "reasoning", "text": thought} in [
        {"type": it.get("type"), "text": it.get("text")} for it in items
    ], items
    assert [it.get("text") for it in items if it.get("type") == "agent_message"] == ["Port 6543."]


async def test_codex_capture_keeps_the_question_not_the_harness(
    gw: Gateway, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    """The captured insight is titled by what the person asked, not by AGENTS.md or the environment."""
    rows = await captured_rows(gw, tmp_path, _codex(agents_bin), repo, codex_env, agents_bin)
    assert [(r["kind"], r["title"]) for r in rows] == [("summary", f"insight: {QUESTION}")]
    assert "AGENTS.md" not in rows[0]["body"] and "pgbouncer fronts Postgres" in rows[0]["body"]


async def test_codex_follow_up_retrieves_on_the_latest_question(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    """`codex exec resume --last` continues the thread: memory follows the new question."""
    env = codex_env(tmp_path / "home", agents_bin, gw.url, team.key)
    await run_cli(_codex(agents_bin), env, repo)
    follow_up = "and who owns the billing cron job?"
    argv = [str(agents_bin / "codex"), "exec", "--skip-git-repo-check", "resume", "--last", follow_up]
    await run_cli(argv, env, repo)
    body = gw.upstream_bodies(RESPONSES)[-1]
    sent = json.dumps(body["input"])
    assert QUESTION in sent and follow_up in sent
    owner = team.ids["The billing cron job is owned by the revenue team (channel #revenue-oncall)."]
    assert first_memory_id(_developer_text(body)) == owner
