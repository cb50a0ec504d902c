"""Job tests: real git repositories made with the git CLI, the fake LLM upstream served in-process."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn

from brain.core.contract import Env
from brain.local.devdb import free_port
from brain.local.fakeupstream import Behaviour, FakeState
from brain.local.fakeupstream import create_app as fake_app


class Repo:
    """A git repository in tmp_path: write, delete, commit — with the real git CLI."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "dev@example.com")
        self.git("config", "user.name", "Dev")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True
        ).stdout.strip()

    def write(self, rel: str, text: str) -> None:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def delete(self, rel: str) -> None:
        (self.path / rel).unlink()

    def commit(self, msg: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", msg)
        return self.git("rev-parse", "HEAD")


@pytest.fixture(autouse=True)
def _insecure_git_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests import from file:// repositories, as an operator started with
    --allow-insecure-git-urls lets its jobs do; a job without it refuses them
    (tests/jobs/test_git_hardening.py unsets this to check that)."""
    monkeypatch.setenv(Env.GIT_ALLOW_INSECURE_URLS, "1")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "origin")


class FakeLLM:
    def __init__(self, state: FakeState, url: str) -> None:
        self.state = state
        self.url = url

    def script(self, *behaviours: dict[str, Any]) -> None:
        self.state.script.extend(Behaviour.model_validate(b) for b in behaviours)

    def requests(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.state.received if r["path"] == "/v1/chat/completions"]


@pytest_asyncio.fixture(loop_scope="session")
async def fake_llm() -> AsyncIterator[FakeLLM]:
    state = FakeState()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(fake_app(state), host="127.0.0.1", port=port, log_level="warning"))
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined,method-assign,unused-ignore]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield FakeLLM(state, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await task
