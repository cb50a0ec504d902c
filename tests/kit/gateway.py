"""One real gateway process for the gateway tests, with everything around it real too.

- Postgres: its own embedded server (not the session one), so a test can stop and restart it.
- Embedder: the real offline model behind the real embedder app, served from this process on a
  port of its own, so a test can stop and restart it.
- Upstream: the built-in fake (echoes what it received, streams, stalls and fails on request).
- Gateway: `python -m brain.gateway` in a subprocess, config rendered by the operator's renderer.

Tests isolate themselves by namespace (`x-brain-namespaces`, confined keys) rather than by
database, because starting LiteLLM costs tens of seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
import yaml

from brain.embedder import LocalEmbedder
from brain.embedder.server import create_app as embedder_app
from brain.local.devdb import EmbeddedPostgres, free_port
from brain.local.fakeupstream import Behaviour, FakeState
from brain.local.fakeupstream import create_app as fake_app
from brain.local.up import gateway_command, spawn, stop, wait_http
from brain.retrieval.render import PREAMBLE
from brain.services.keys import KeyStore
from brain.store import Store
from brain_operator.api import BrainSpec, RoutingPolicySpec
from brain_operator.render.litellm_config import model_api_key_env, render_litellm_config

MASTER = "sk-test-master-" + uuid.uuid4().hex
ANTHROPIC_MODEL = "claude-echo"
MODELS = ["echo", "pro", "kimi", "tier-simple", "tier-medium", "tier-complex", "tier-reasoning"]
HEARTBEAT_S = 0.4
TRUSTED_HOSTS = ("pypi.org", "pythonhosted.org")  # spec.gateway.capture.trustedHosts of the test Brain
TIMEOUT_MS = 3000


class Served:
    """A uvicorn server in the test event loop, stoppable and restartable on the same port."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.app = app
        self.port = port or free_port()
        self.server: uvicorn.Server | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Served:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # type: ignore[attr-defined,method-assign,unused-ignore]
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.02)
        return self

    async def stop(self) -> None:
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            await self.task
            self.server = self.task = None


@dataclass
class Gateway:
    url: str
    dsn: str
    pg: EmbeddedPostgres
    store: Store
    fake: FakeState
    embedder_server: Served
    keys: dict[str, str] = field(default_factory=dict)
    upstream_url: str = ""  # the fake model provider (distill's api_base in tests)
    log: Path | None = None

    def headers(self, key: str = "agent", **extra: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.keys.get(key, key)}", **extra}

    def script(self, *behaviours: dict[str, Any]) -> None:
        self.fake.script.extend(Behaviour.model_validate(b) for b in behaviours)

    def upstream_bodies(self, path: str = "/v1/chat/completions") -> list[dict[str, Any]]:
        return [r["body"] for r in self.fake.received if r["path"] == path]

    async def chat(
        self,
        text: str,
        *,
        key: str = "agent",
        model: str = "echo",
        stream: bool = False,
        headers: dict[str, str] | None = None,
        messages: list[dict[str, Any]] | None = None,
    ) -> httpx.Response:
        body = {"model": model, "stream": stream, "messages": messages or [{"role": "user", "content": text}]}
        async with httpx.AsyncClient(timeout=60) as c:
            return await c.post(
                f"{self.url}/v1/chat/completions", json=body, headers={**self.headers(key), **(headers or {})}
            )

    async def messages(
        self,
        text: str,
        *,
        key: str = "agent",
        stream: bool = False,
        system: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        body: dict[str, Any] = {
            "model": "echo",
            "max_tokens": 256,
            "stream": stream,
            "messages": [{"role": "user", "content": text}],
        }
        if system is not None:
            body["system"] = system
        h = {"x-api-key": self.keys.get(key, key), "anthropic-version": "2023-06-01", **(headers or {})}
        async with httpx.AsyncClient(timeout=60) as c:
            return await c.post(f"{self.url}/v1/messages", json=body, headers=h)

    async def rest(self, method: str, path: str, key: str = "agent", **kw: Any) -> httpx.Response:
        async with httpx.AsyncClient(timeout=30) as c:
            return await c.request(method, f"{self.url}/brain/v1{path}", headers=self.headers(key), **kw)

    async def metrics(self) -> str:
        async with httpx.AsyncClient(timeout=10) as c:
            return (await c.get(f"{self.url}/metrics")).text

    async def settle(self, ns: str | None = None, events: int = 1, timeout: float = 20.0) -> None:
        """Wait until capture has finished: `events` capture records for `ns`, or an idle queue.

        Capture starts after the response is sent (LiteLLM's success callback), so "the queue is
        empty" alone could be read before the job is even queued; a capture record is the end mark.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if ns is not None:
            while loop.time() < deadline:
                n = await self.store.pool_for_tests.fetchval(
                    "SELECT count(*) FROM events WHERE type = 'capture' AND namespace = $1", ns
                )
                if n >= events:
                    return
                await asyncio.sleep(0.1)
            raise TimeoutError(f"no capture record for {ns}")
        await asyncio.sleep(0.5)
        while loop.time() < deadline:
            if metric(await self.metrics(), "brain_capture_queue_depth") == 0:
                return
            await asyncio.sleep(0.1)


def injected_block(body: dict[str, Any]) -> str:
    """The memory block of a chat-completions body the upstream got; "" when none was injected.

    The gateway puts it first in the person's newest message (brain.gateway.placement): for a
    string content that is `block + "\n\n" + question`, for a content list its first text part.
    """
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    if isinstance(content, list):
        content = next(
            (p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"), ""
        )
    if not isinstance(content, str) or not content.startswith(PREAMBLE):
        return ""
    return content.rsplit("\n\n", 1)[0]


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] != name:
            continue
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def brain_spec(fake_url: str) -> BrainSpec:
    return BrainSpec.model_validate(
        {
            "gateway": {
                "models": [
                    *({"name": m, "model": f"openai/{m}", "apiBase": f"{fake_url}/v1"} for m in MODELS),
                    # Anthropic's own wire format end to end: the echo receives the client's breakpoints
                    # and bills the prompt cache as the provider would (brain.local.promptcache)
                    {
                        "name": ANTHROPIC_MODEL,
                        "model": f"anthropic/{ANTHROPIC_MODEL}",
                        "apiBase": fake_url,
                        "apiKeySecretRef": {"name": "provider", "key": "anthropic"},
                    },
                ],
                "retrieval": {
                    "topK": 5,
                    "tokenBudget": 2000,
                    "timeoutMs": TIMEOUT_MS,
                    "skillSlots": 2,
                    "persona": True,
                },
                "capture": {
                    "enabled": True,
                    "filters": {"venting": True, "noise": True, "minCodeLines": 10},
                    "trustedHosts": list(TRUSTED_HOSTS),
                },
            },
            "embedding": {"model": "sentence-transformers/all-MiniLM-L6-v2", "dim": 384},
        }
    )


def router_policy() -> RoutingPolicySpec:
    return RoutingPolicySpec.model_validate(
        {
            "brainRef": {"name": "team"},
            "modelName": "smart-router",
            "tiers": {
                "simple": "tier-simple",
                "medium": "tier-medium",
                "complex": "tier-complex",
                "reasoning": "tier-reasoning",
            },
            "defaultModel": "tier-medium",
            "overrides": [{"phrase": "use pro", "model": "pro"}, {"phrase": "use kimi", "model": "kimi"}],
        }
    )


async def start_gateway(
    tmp: Path,
    dsn: str,
    upstream_url: str,
    embedder_url: str,
    env: dict[str, str] | None = None,
    name: str = "gateway",
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """`python -m brain.gateway` on a free port with the test Brain's rendered config, once its
    database is connected: (process, URL, log). `name` tells replicas' files apart in one `tmp`."""
    config = render_litellm_config(brain_spec(upstream_url), [router_policy()])
    config_path = tmp / f"{name}.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    full = {
        **os.environ,
        "BRAIN_DATABASE_URL": dsn,
        "BRAIN_EMBEDDER_URL": embedder_url,
        "BRAIN_MASTER_KEY": MASTER,
        model_api_key_env(ANTHROPIC_MODEL): "sk-ant-fake",  # the echo checks no key
        "BRAIN_EMBEDDING_DIM": "384",
        "BRAIN_SSE_HEARTBEAT_S": str(HEARTBEAT_S),
        "BRAIN_BACKLOG_REFRESH_S": "0.5",  # the pending-proposal gauges follow a test within a second
        **(env or {}),
    }
    log = tmp / f"{name}.log"
    proc = spawn(gateway_command(config_path, "127.0.0.1", port), full, log)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_http(
            url + "/brain/v1/health", proc=proc, timeout=300, check=lambda d: d["database"] == "ok"
        )
    except Exception:
        print(log.read_text()[-4000:])
        await asyncio.to_thread(stop, proc)
        raise
    return proc, url, log


async def make_keys(store: Store) -> dict[str, str]:
    """The test keys by name (owner, agent, reader, confined to repo:alpha, expired), and the master."""
    ks = KeyStore(store)
    keys = {"master": MASTER}
    for name, role, ns, exp in (
        ("owner", "owner", None, None),
        ("agent", "agent", None, None),
        ("reader", "read", None, None),
        ("confined", "agent", ["repo:alpha"], None),
        ("stale", "agent", None, datetime.now(UTC) - timedelta(minutes=1)),
    ):
        keys[name], _ = await ks.create(name, role, namespaces=ns, expires_at=exp)
    return keys


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def gateway(
    tmp_path_factory: pytest.TempPathFactory, embedder: LocalEmbedder
) -> AsyncIterator[Gateway]:
    tmp = tmp_path_factory.mktemp("gateway")
    pg = await asyncio.to_thread(EmbeddedPostgres().start)
    fake = FakeState()
    fake_srv = await Served(fake_app(fake)).start()
    emb_srv = await Served(embedder_app(lambda: embedder)).start()
    proc = None
    store = None
    try:
        dsn = await pg.create_database("gateway")
        proc, url, log = await start_gateway(tmp, dsn, fake_srv.url, emb_srv.url)
        store = await Store.open(dsn, dim=384)
        keys = await make_keys(store)
        yield Gateway(
            url=url,
            dsn=dsn,
            pg=pg,
            store=store,
            fake=fake,
            embedder_server=emb_srv,
            keys=keys,
            log=log,
            upstream_url=fake_srv.url,
        )
    finally:
        if store is not None:
            with contextlib.suppress(Exception):
                await store.close()
        await asyncio.to_thread(stop, proc)
        await fake_srv.stop()
        await emb_srv.stop()
        await asyncio.to_thread(pg.stop)


@pytest_asyncio.fixture(loop_scope="session")
async def gw(gateway: Gateway) -> Gateway:
    """The shared gateway with a clean upstream record and script for this test."""
    gateway.fake.received.clear()
    gateway.fake.script.clear()
    return gateway


@pytest.fixture
def ns() -> str:
    """A namespace of this test's own, so tests sharing the gateway do not see each other's memories."""
    return f"test:{uuid.uuid4().hex[:10]}"
