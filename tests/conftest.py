"""Shared fixtures: one real Postgres for the run, a fresh database per test, the real offline model."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from brain.core.models import Actor
from brain.embedder import LocalEmbedder
from brain.local.devdb import EmbeddedPostgres
from brain.services.memory import MemoryService
from brain.store import Store
from tests.kit.database import fresh_database, offline_embedder, open_store, postgres

pytest_plugins = [
    "tests.kit.workers",
    "tests.kit.cluster",
    "tests.kit.gateway",
    "tests.kit.traces",
    "tests.kit.skip_budget",
]

# Offline, importing LiteLLM starts a remote cost-map fetch retried three times over ~10 s (in a
# thread) before it keeps its bundled copy. The gateway turns that off for itself
# (prepare_litellm_env); the test process and the jobs it spawns import LiteLLM too.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="session")
def pg() -> Iterator[EmbeddedPostgres]:
    with postgres() as server:
        yield server


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    return offline_embedder(threads=2)


@pytest_asyncio.fixture(loop_scope="session")
async def dsn(pg: EmbeddedPostgres) -> AsyncIterator[str]:
    async with fresh_database(pg) as url:
        yield url


@pytest_asyncio.fixture(loop_scope="session")
async def store(dsn: str, embedder: LocalEmbedder) -> AsyncIterator[Store]:
    async with open_store(dsn, dim=embedder.dim) as s:
        yield s


@pytest.fixture
def service(store: Store, embedder: LocalEmbedder) -> MemoryService:
    return MemoryService(store, embedder)


@pytest.fixture
def agent() -> Actor:
    return Actor(name="claude-mac", role="agent", origin="agent")


@pytest.fixture
def owner() -> Actor:
    return Actor(name="cole", role="owner", origin="owner")
