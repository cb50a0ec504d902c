"""The real Codex CLI through the gateway's `/v1/responses`: injection, tool loops, reasoning, capture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brain.local.promptcache import PromptCache

from .conftest import (
    ANSWER_FACT,
    FOUR_TURNS,
    QUESTION,
    Gateway,
    Team,
    captured_rows,
    codex_env,
    first_memory_id,
    run_cli,
    turn_texts,
)

RESPONSES = "/v1/responses"


def _codex(agents_bin: Path, *args: str) -> list[str]:
    return [str(agents_bin / "codex"), "exec", "--skip-git-repo-check", *args, QUESTION]


async def test_codex_gets_the_answering_memory_first(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    env = codex_env(tmp_path / "home", agents_bin, gw.url, team.key)
    r = await run_cli(_codex(agents_bin), env, repo)
    bodies = gw.upstream_bodies(RESPONSES)
    assert len(bodies) == 1, [x["path"] for x in gw.fake.received]
    items = bodies[0]["input"]
    turn, rest = turn_texts(bodies[0], "responses")
    assert "[team memory " not in rest  # developer prompts, AGENTS.md and the environment as sent
    assert QUESTION in turn and first_memory_id(turn) == team.answer_id
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
    for body in bodies:  # the loop's second request gets the first one's block back, not a new one
        assert first_memory_id(turn_texts(body, "responses")[0]) == team.answer_id
    assert turn_texts(bodies[0], "responses")[0] == turn_texts(bodies[1], "responses")[0]


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
    turn, rest = turn_texts(body, "responses")
    assert follow_up in turn and first_memory_id(turn) == owner
    assert first_memory_id(rest) == team.answer_id  # the first turn's block, put back where it was


def _cached_share(bodies: list[dict[str, Any]]) -> float:
    """The share of input tokens OpenAI's automatic prefix cache would serve, over the conversation."""
    cache = PromptCache()
    usages = [
        cache.openai([b.get("tools"), b.get("instructions"), *b["input"]], now=float(i))
        for i, b in enumerate(bodies)
    ]
    return sum(u["cached_tokens"] for u in usages) / sum(u["prompt_tokens"] for u in usages)


async def _four_turns(
    gw: Gateway, agents_bin: Path, repo: Path, home: Path, url: str, key: str
) -> list[dict[str, Any]]:
    env = codex_env(home, agents_bin, url, key)
    gw.fake.received.clear()
    for i, question in enumerate(FOUR_TURNS):
        resume = ["resume", "--last"] if i else []
        await run_cli(
            [str(agents_bin / "codex"), "exec", "--skip-git-repo-check", *resume, question], env, repo
        )
    return gw.upstream_bodies(RESPONSES)


async def test_codex_four_turns_keep_the_prefix_cache(
    gw: Gateway, team: Team, agents_bin: Path, repo: Path, tmp_path: Path
) -> None:
    """The same four-turn thread straight to the echo and through the gateway with memory on: the
    share OpenAI-style prefix caching serves stays within 5 %, and each turn's answering memory is
    the first that turn holds."""
    gw.script({"content": "Noted.", "times": -1})
    direct = await _four_turns(gw, agents_bin, repo, tmp_path / "direct", gw.upstream_url, "sk-fake")
    through = await _four_turns(gw, agents_bin, repo, tmp_path / "brain", gw.url, team.key)
    gw.fake.script.clear()
    assert len(direct) == len(through) == 4, (len(direct), len(through))
    share_direct, share_brain = _cached_share(direct), _cached_share(through)
    print(f"Codex, 4 turns: cached share direct {share_direct:.3f}, through the brain {share_brain:.3f}")
    assert share_direct > 0.5
    assert share_brain >= 0.95 * share_direct, (share_brain, share_direct)
    for body, (question, fact) in zip(through, FOUR_TURNS.items(), strict=True):
        turn, _ = turn_texts(body, "responses")
        assert question in turn and first_memory_id(turn) == team.ids[fact], (question, turn[:800])
