"""Real agent CLIs against the real gateway and the echo upstream.

- The CLIs: `hack/agents.sh` installs the pinned `@anthropic-ai/claude-code` and `@openai/codex` into a
  cache folder outside the repo (once), and the session fixture runs it when they are missing.
- The gateway: the one of tests/gateway (real LiteLLM subprocess, Postgres, offline model), with the
  echo's transcript limit raised so the end of a 20 KB system prompt is visible.
- The team: 25+ facts in a namespace of their own, and an agent key confined to it (what a person
  would hand an agent: no special headers needed).
- Each CLI runs with an isolated HOME, telemetry, auto-update and nonessential traffic off, pointed
  at the loopback gateway, under a bounded timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from brain.gateway.placement import conversation, newest_person_turn
from brain.services.keys import KeyStore
from tests.kit.gateway import Gateway

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 240
QUESTION = "which port does the staging database use?"
ANSWER_FACT = "The staging database (Postgres for payments) listens on port 6543, behind pgbouncer."

# 25 team facts: the answer, plus notes that share the harness's words (handlers, docstrings, unit
# tests, sandboxes, agents, skills, dates) so retrieving on harness text would rank them first.
FACTS = [
    ANSWER_FACT,
    "Every module in the payments service needs a docstring and type hints before it is merged.",
    "Keep HTTP handlers small: parse, call one service function, map errors; no business logic.",
    "A unit test must exercise a module's error paths, not only the happy path, before merging.",
    "Codex runs in a read-only sandbox in CI; commands that write need an approval rule.",
    "Agent types: the Explore agent reads excerpts only; use it for broad searches, not reviews.",
    "Skills live in SKILL.md files under .claude/skills; each has a name, description and trigger.",
    "The current date in logs is UTC; the billing cron job runs at 02:00 UTC every day.",
    "Production Redis for sessions is redis-prod.internal:6380 with TLS required.",
    "The payments API rate limit is 300 requests per minute per merchant key.",
    "Deploys to production happen through Argo CD; never kubectl apply by hand.",
    "The on-call rotation for payments changes every Monday at 09:00 Europe/Berlin.",
    "Feature flags are stored in LaunchDarkly; flag names use kebab-case with a team prefix.",
    "The ledger service owns the double-entry tables; other services read through its API only.",
    "Kafka topic payments.events keeps 7 days of retention and 12 partitions.",
    "Secrets come from Vault at path secret/payments/<env>; never commit .env files.",
    "The mobile app pins TLS certificates; rotate them two weeks before expiry.",
    "Error budget for checkout is 99.95% monthly availability.",
    "Refunds over 10,000 EUR need a second approver in the admin console.",
    "The staging environment is reset every Sunday night from an anonymised production snapshot.",
    "Frontend builds use pnpm; npm install in the monorepo breaks the lockfile.",
    "Database migrations run with alembic in a pre-deploy job; they must be backwards compatible.",
    "The search service uses OpenSearch 2.x with one index per merchant region.",
    "Webhooks to merchants are retried with exponential backoff for 72 hours.",
    "Code review needs one approval from a code owner; security-sensitive paths need two.",
    "The billing cron job is owned by the revenue team (channel #revenue-oncall).",
]

#: A conversation of four turns, each about another stored fact (the prompt-cache tests of each client).
FOUR_TURNS = {
    QUESTION: ANSWER_FACT,
    "what is the payments API rate limit per merchant key?": FACTS[9],
    "how many days does the payments.events Kafka topic keep?": FACTS[14],
    "which team owns the billing cron job?": FACTS[25],
}

CLAUDE_MD_RULES = 40


def claude_md() -> str:
    """A CLAUDE.md of several KB, in the style of a real project guide."""
    head = "# Project guide for the payments service\n\nFollow these conventions when you change this repository.\n\n"
    rules = "\n".join(
        f"- Rule {i}: keep handlers small; every module in src/module_{i} has a docstring, type hints and "
        "a unit test that exercises its error paths before merging."
        for i in range(1, CLAUDE_MD_RULES + 1)
    )
    return head + rules + "\n"


@dataclass
class Team:
    ns: str
    key: str
    ids: dict[str, str]  # fact text -> memory id

    @property
    def answer_id(self) -> str:
        return self.ids[ANSWER_FACT]


@pytest.fixture(scope="session")
def agents_bin() -> Path:
    """The folder holding `claude` and `codex`, installed by the repo's own script when missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("the agent tests need Node.js >= 18 and npm on PATH (the CLIs are npm packages)")
    r = subprocess.run(
        ["bash", str(ROOT / "hack" / "agents.sh")], capture_output=True, text=True, timeout=900, check=False
    )
    if r.returncode != 0:
        pytest.fail(f"hack/agents.sh failed:\n{r.stderr[-3000:]}")
    return Path(r.stdout.strip().splitlines()[-1])


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def team(gateway: Gateway) -> Team:
    gateway.fake.transcript_limit = 200_000
    ns = f"agents:{uuid.uuid4().hex[:8]}"
    ids: dict[str, str] = {}
    for fact in FACTS:
        r = await gateway.rest(
            "POST", "/memories", key="owner", json={"body": fact, "namespace": ns, "kind": "fact"}
        )
        assert r.status_code == 201, r.text
        ids[fact] = str(r.json()["id"])
    key, _ = await KeyStore(gateway.store).create(f"agent-{ns}", "agent", namespaces=[ns])
    return Team(ns=ns, key=key, ids=ids)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project checkout with a several-KB CLAUDE.md and the same text as AGENTS.md (Codex's file)."""
    d = tmp_path / "repo"
    d.mkdir()
    (d / "CLAUDE.md").write_text(claude_md())
    (d / "AGENTS.md").write_text(claude_md())
    (d / "README.md").write_text("# payments\n")
    subprocess.run(["git", "init", "-q", str(d)], check=True, capture_output=True)
    return d


def base_env(home: Path, agents_bin: Path) -> dict[str, str]:
    """A clean environment: the CLIs, node, git; an isolated HOME; nothing from the developer's shell."""
    home.mkdir(parents=True, exist_ok=True)
    node = shutil.which("node")
    path = os.pathsep.join(
        dict.fromkeys(
            [
                str(agents_bin),
                *([str(Path(node).parent)] if node else []),
                "/usr/local/bin",
                "/usr/bin",
                "/bin",
            ]
        )
    )
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1"}


def claude_env(home: Path, agents_bin: Path, gateway_url: str, key: str) -> dict[str, str]:
    return {
        **base_env(home, agents_bin),
        "ANTHROPIC_BASE_URL": gateway_url,
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "echo",
        "ANTHROPIC_SMALL_FAST_MODEL": "echo",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    }


def codex_home(home: Path, gateway_url: str) -> Path:
    """`$CODEX_HOME/config.toml`: the gateway as a custom model provider speaking the Responses API."""
    cfg = home / "codex"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text(
        textwrap.dedent(
            f"""\
            model = "echo"
            model_provider = "brain"
            check_for_update_on_startup = false

            [model_providers.brain]
            name = "brain gateway"
            base_url = "{gateway_url}/v1"
            env_key = "BRAIN_API_KEY"
            wire_api = "responses"
            request_max_retries = 0
            stream_max_retries = 0

            [analytics]
            enabled = false

            [feedback]
            enabled = false

            [features]  # the plugin/app catalogues sync from the internet at start: off
            plugins = false
            remote_plugin = false
            apps = false
            """
        )
    )
    return cfg


def codex_env(home: Path, agents_bin: Path, gateway_url: str, key: str) -> dict[str, str]:
    return {
        **base_env(home, agents_bin),
        "CODEX_HOME": str(codex_home(home, gateway_url)),
        "BRAIN_API_KEY": key,
    }


async def run_cli(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a CLI to its end in a thread: the echo upstream is served by this test's event loop."""
    r = await asyncio.to_thread(
        subprocess.run,
        argv,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, (
        f"{argv[0]} exited {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    )
    return r


CAPTURED_ANSWER = (
    "The staging database listens on 6543. The reason is that pgbouncer fronts Postgres there, "
    "and the trade-off is one more hop for every connection."
)


async def captured_rows(
    gw: Gateway, tmp_path: Path, argv: list[str], cwd: Path, make_env: Any, agents_bin: Path
) -> list[Any]:
    """Run one CLI question under a key confined to a fresh namespace; what capture stored there."""
    ns = f"agents-capture:{tmp_path.name[-8:]}"
    key, _ = await KeyStore(gw.store).create(f"capture-{ns}", "agent", namespaces=[ns])
    gw.script({"match": QUESTION, "content": CAPTURED_ANSWER})
    await run_cli(argv, make_env(tmp_path / "home", agents_bin, gw.url, key), cwd)
    await gw.settle(ns)
    return list(
        await gw.store.pool_for_tests.fetch("SELECT kind, title, body FROM memories WHERE namespace = $1", ns)
    )


def first_memory_id(text: str) -> str | None:
    """The id in the first `[team memory <id> — …]` header of a text (what the model reads first)."""
    marker = "[team memory "
    i = text.find(marker)
    if i < 0:
        return None
    return text[i + len(marker) :].split(" ", 1)[0].rstrip("]")


def turn_texts(body: dict[str, Any], api: str, question: str | None = None) -> tuple[str, str]:
    """(the turn where the person asked, everything else) of a body as the upstream got it, as JSON.

    The gateway puts memory into the turn where the person asked (brain.gateway.placement), so the
    answering memory is the first one that turn holds, and no system or developer prompt holds any.
    That turn is the newest person turn, or the newest one holding `question`: LiteLLM's translation
    of Claude Code's mid-conversation `system` message becomes a user turn after the question.
    """
    items = conversation(body, api)
    if question is None:
        at = newest_person_turn(items)
    else:
        at = max(
            (i for i, it in enumerate(items) if question in json.dumps(it, ensure_ascii=False)), default=None
        )
    assert at is not None, "no person turn in the body"
    rest = [*items[:at], *items[at + 1 :], body.get("system"), body.get("instructions")]
    return json.dumps(items[at], ensure_ascii=False), json.dumps(rest, ensure_ascii=False)


def flat(value: Any) -> str:
    """Every string in a request body, in order (where the injected block landed does not matter here)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(flat(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(flat(v) for v in value)
    return ""
