"""The real parts the tests stand on, as plain context managers: the fixtures and the benches share them.

tests/conftest.py wraps these in pytest fixtures; the benches (hack/bench/, run from the repository
root) import them directly, so a bench measures the same Postgres, database and store setup the
suite tests instead of a copy that drifts.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from brain.embedder import LocalEmbedder
from brain.local.devdb import EmbeddedPostgres
from brain.store import Store


@contextmanager
def postgres(data_dir: Path | None = None) -> Iterator[EmbeddedPostgres]:
    """One embedded Postgres with pgvector (as an unprivileged user when run as root), stopped after.

    Its data is a temporary folder, removed after; a `data_dir` given is kept (a bench's cached seed)."""
    server = EmbeddedPostgres(data_dir=data_dir).start()
    try:
        yield server
    finally:
        server.stop()


def offline_embedder(threads: int | None = 2) -> LocalEmbedder:
    """The offline ONNX model from the cache (what the gateway loads without an embedder URL)."""
    return LocalEmbedder(threads=threads)


@asynccontextmanager
async def own_postgres() -> AsyncIterator[EmbeddedPostgres]:
    """A Postgres of a test's own, started off the event loop: for a test that freezes or stops it,
    which the session's shared server must never be. Thawed before it is stopped, whatever the test
    left it as."""
    server = await asyncio.to_thread(EmbeddedPostgres().start)
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.thaw()
        await asyncio.to_thread(server.stop)


@asynccontextmanager
async def fresh_database(pg: EmbeddedPostgres, prefix: str = "t") -> AsyncIterator[str]:
    """A new, empty database's DSN; dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = await pg.create_database(name)
    try:
        yield url
    finally:
        await pg.drop_database(name)


@asynccontextmanager
async def open_store(dsn: str, dim: int = 384) -> AsyncIterator[Store]:
    """The store on `dsn`, migrated; closed afterwards."""
    store = await Store.open(dsn, dim=dim)
    try:
        yield store
    finally:
        await store.close()
