"""brainctl's side of #32: `keys revoke` matches one column (name, or `--id`), and `purge` tombstones."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from brain.core.models import Actor, MemoryIn
from brain.services.keys import KeyStore
from brain.services.memory import TOMBSTONE, MemoryService
from brain.store import Store

BRAINCTL = str(Path(sys.executable).parent / "brainctl")


async def brainctl(dsn: str, *argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [BRAINCTL, "--dsn", dsn, *argv]
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=300)


async def test_keys_revoke_by_name_or_by_id_never_both(dsn: str, store: Store) -> None:
    ks = KeyStore(store)
    _, first = await ks.create("first", "agent")
    _, twin = await ks.create(first.id, "agent")
    done = await brainctl(dsn, "keys", "revoke", first.id)  # a name: the twin's
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["id"] == twin.id
    state = {k.id: k.revoked_at for k in await ks.list(include_revoked=True)}
    assert state[first.id] is None
    done = await brainctl(dsn, "keys", "revoke", "--id", first.id)
    assert done.returncode == 0 and json.loads(done.stdout)["id"] == first.id, done.stderr
    listed = await brainctl(dsn, "keys", "list", "--all")
    assert f"id {first.id}" in listed.stdout and f"id {twin.id}" in listed.stdout  # where --id comes from
    both = await brainctl(dsn, "keys", "revoke", "first", "--id", first.id)
    assert both.returncode == 2 and "not allowed with" in both.stderr


async def test_brainctl_purge_tombstones_a_forgotten_entry(
    dsn: str, service: MemoryService, agent: Actor, owner: Actor
) -> None:
    m = (await service.note(MemoryIn(body="pasted by mistake: a customer's phone number"), agent)).memory
    refused = await brainctl(dsn, "purge", m.id, "--reason", "personal data")
    assert refused.returncode == 2 and "forget it first" in refused.stderr
    await service.forget(m.id, "personal data", agent)
    done = await brainctl(dsn, "purge", m.id, "--reason", "personal data")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"id": m.id, "status": "forgotten", "purged": 1}
    kept = (await service.get(m.id, owner)).memory
    assert (kept.body, kept.content_hash) == (TOMBSTONE, m.content_hash)
