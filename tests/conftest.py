"""Shared fixtures: one real Postgres for the run, a fresh database per test, the real offline model."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from brain.core.models import Actor
from brain.embedder import LocalEmbedder
from brain.local.devdb import EmbeddedPostgres
from brain.services.memory import MemoryService
from brain.store import Store

pytest_plugins = ["tests.kube_fixtures", "tests.gateway_fixtures"]


@pytest.fixture(scope="session")
def pg() -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(threads=2)


@pytest_asyncio.fixture(loop_scope="session")
async def dsn(pg: EmbeddedPostgres) -> AsyncIterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    url = await pg.create_database(name)
    yield url
    await pg.drop_database(name)


@pytest_asyncio.fixture(loop_scope="session")
async def store(dsn: str, embedder: LocalEmbedder) -> AsyncIterator[Store]:
    s = await Store.open(dsn, dim=embedder.dim)
    yield s
    await s.close()


@pytest.fixture
def service(store: Store, embedder: LocalEmbedder) -> MemoryService:
    return MemoryService(store, embedder)


@pytest.fixture
def agent() -> Actor:
    return Actor(name="claude-mac", role="agent", origin="agent")


@pytest.fixture
def owner() -> Actor:
    return Actor(name="cole", role="owner", origin="owner")
