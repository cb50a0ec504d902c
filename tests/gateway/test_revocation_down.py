"""A key revoked 10 s before Postgres stops stays refused by both replicas while it is down (#32).

Two real gateway processes on one Postgres of this test's own (it is stopped and started again
here, so not the session's). Both verify a key to be revoked and a key that stays valid. The key
is revoked through one replica's REST API and only that replica is asked until it refuses it; the
other stays idle, as a replica behind a load balancer may. Ten seconds later Postgres stops. While
it is down, both refuse the revoked key (401, "was revoked") and both still serve the valid key
they verified before the revoke (the stale-while-down window, docs/security.md), fresh and again
once its 30 s verdict would have expired; when Postgres is back both still answer the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from brain.core.errors import Unauthorized
from brain.local.devdb import EmbeddedPostgres
from brain.local.up import stop
from brain.services.keys import KeyInfo, KeyStore, KeyVerifier
from brain.store import Store
from tests.kit.database import own_postgres
from tests.kit.gateway import MASTER, start_gateway

REVOKED_BEFORE_STOP_S = 10.0
TTL_S = 30.0  # KeyVerifier's default verdict TTL: past it, only the stale window serves a verdict


@pytest_asyncio.fixture(loop_scope="session")
async def own_pg() -> AsyncIterator[EmbeddedPostgres]:
    async with own_postgres() as pg:
        yield pg


async def _status(url: str, key: str) -> tuple[int, str]:
    async with httpx.AsyncClient(timeout=15) as c:
        # The model list: authenticated like every proxied call, and answered without the database
        # (a REST listing would be 503 while Postgres is down whatever the key).
        r = await c.get(f"{url}/v1/models", headers={"authorization": f"Bearer {key}"})
        return r.status_code, r.text


async def _refused_within(url: str, key: str, bound: float) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if (await _status(url, key))[0] == 401:
            return True
        await asyncio.sleep(0.1)
    return False


async def _answers(replicas: dict[str, str], revoked: str, valid: str) -> dict[str, tuple[int, int]]:
    """Per replica: (status for the revoked key, status for the valid key)."""
    out = {}
    for name, url in replicas.items():
        code, text = await _status(url, revoked)
        assert code != 401 or "revoked" in text, text
        out[name] = (code, (await _status(url, valid))[0])
    return out


async def test_a_key_revoked_10s_before_postgres_stops_stays_refused_by_both_replicas(
    own_pg: EmbeddedPostgres, tmp_path: Path
) -> None:
    dsn = await own_pg.create_database(f"rev_{uuid.uuid4().hex[:8]}")
    store = await Store.open(dsn, dim=384)  # migrates; the gateways find the schema ready
    ks = KeyStore(store)
    doomed, doomed_info = await ks.create(f"doomed-{uuid.uuid4().hex[:6]}", "agent")
    valid, _ = await ks.create(f"valid-{uuid.uuid4().hex[:6]}", "agent")
    await store.close()

    nowhere = "http://127.0.0.1:9"  # nothing here embeds or answers: listing reads rows only
    procs, replicas = [], {}
    try:
        started = await asyncio.gather(
            *(start_gateway(tmp_path, dsn, nowhere, nowhere, name=n) for n in ("a", "b")),
            return_exceptions=True,
        )
        for name, got in zip(("a", "b"), started, strict=True):
            if not isinstance(got, BaseException):  # stopped below, even if the other failed
                procs.append((got[0], got[2]))
                replicas[name] = got[1]
        failed = [got for got in started if isinstance(got, BaseException)]
        if failed:
            raise failed[0]
        # Both replicas hold a verdict for both keys.
        assert await _answers(replicas, doomed, valid) == {"a": (200, 200), "b": (200, 200)}

        async with httpx.AsyncClient(timeout=15) as c:
            r = await c.delete(
                f"{replicas['a']}/brain/v1/keys/{doomed_info.name}",
                headers={"authorization": f"Bearer {MASTER}"},
            )
        assert r.status_code == 200 and r.json()["state"] == "revoked", r.text
        revoked_at = time.monotonic()
        assert await _refused_within(replicas["a"], doomed, 5.0)  # b is not asked: it stays idle
        await asyncio.sleep(max(0.0, revoked_at + REVOKED_BEFORE_STOP_S - time.monotonic()))

        await asyncio.to_thread(own_pg.stop, False)
        down_at = time.monotonic()
        try:
            # While it is down: refused by both, and the valid key still served by both.
            assert await _answers(replicas, doomed, valid) == {"a": (401, 200), "b": (401, 200)}
            await asyncio.sleep(max(0.0, revoked_at + TTL_S + 2 - time.monotonic()))  # past the fresh TTL
            assert time.monotonic() - down_at > 15
            assert await _answers(replicas, doomed, valid) == {"a": (401, 200), "b": (401, 200)}
        finally:
            await asyncio.to_thread(own_pg.start)
        deadline = time.monotonic() + 30
        while True:  # back: the replicas reconnect; the answers stay the same
            answers = await _answers(replicas, doomed, valid)
            if answers == {"a": (401, 200), "b": (401, 200)} or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert answers == {"a": (401, 200), "b": (401, 200)}
    finally:
        for proc, _ in procs:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(stop, proc)


class _Keys:
    """A keys table as one replica's verifier sees it: its lookups can be slow, and it can go down."""

    def __init__(self, info: KeyInfo) -> None:
        self.info, self.fingerprint, self.down, self.slow = info, (1,), False, 0.0

    def _check(self) -> None:
        if self.down:
            raise OSError("connection refused")

    async def version(self) -> tuple[int]:
        self._check()
        return self.fingerprint

    async def lookup(self, key: str) -> KeyInfo:
        self._check()
        info = self.info  # read now, answered after `slow`: a lookup that began before a revoke
        await asyncio.sleep(self.slow)
        return info

    async def lookup_many(self, digests: list[str]) -> dict[str, KeyInfo]:
        self._check()
        return dict.fromkeys(digests, self.info)

    async def touch(self, key_id: str) -> None:
        self._check()


async def test_a_revocation_seen_is_never_replaced_by_an_older_valid_verdict() -> None:
    """A refresh-ahead lookup that read the key before its revoke and answers after the replica saw
    the revoke must not bring the key back, neither now nor once the database is down."""
    valid = KeyInfo("k1", "claude-mac", "agent", None, None, datetime.now(UTC), None, None)
    keys = _Keys(valid)
    # The fingerprint is read once: only the guard in `_remember` keeps the revocation, no watcher.
    verifier = KeyVerifier(keys, ttl=1.0, version_every=60.0)  # type: ignore[arg-type]
    try:
        assert (await verifier.verify("brk_k1")).name == "claude-mac"
        await asyncio.sleep(0.6)  # past half the TTL: the next use refreshes ahead, in the background
        keys.slow = 0.5
        assert (await verifier.verify("brk_k1")).name == "claude-mac"  # served; the refresh read `valid`
        await asyncio.sleep(0.05)
        keys.info, keys.fingerprint, keys.slow = replace(valid, revoked_at=datetime.now(UTC)), (2,), 0.0
        verifier.forget()  # the revoking replica's own re-check
        with pytest.raises(Unauthorized, match="revoked"):
            await verifier.verify("brk_k1")
        await asyncio.sleep(0.6)  # the refresh that read the key before the revoke answers now
        keys.down = True
        for _ in range(3):
            with pytest.raises(Unauthorized, match="revoked"):
                await verifier.verify("brk_k1")
    finally:
        close = getattr(verifier, "close", None)
        if close is not None:
            await close()
